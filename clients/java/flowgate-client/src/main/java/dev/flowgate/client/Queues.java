package dev.flowgate.client;

import dev.flowgate.client.queue.DeadLetter;
import dev.flowgate.client.queue.Job;
import dev.flowgate.client.queue.NackAnswer;
import dev.flowgate.client.queue.NewJob;
import dev.flowgate.client.queue.QueueInstance;
import dev.flowgate.client.queue.QueuesOverview;
import dev.flowgate.client.queue.SubmitAnswer;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A server's shaped queues ({@code /v1/queues/*}, see {@code docs/queues.md}): submit jobs,
 * lease them as the queue's rate releases them, ack or nack them, and look after the dead
 * letters. {@link dev.flowgate.client.queue.Worker} runs the lease, handle, ack loop for you.
 * Get one from {@link FlowgateClient#queues()}.
 *
 * <p><b>Thread-safe</b>, as the client whose connections it uses: it holds no state of its own.
 * Every call has a blocking form, throwing a {@link FlowgateException}, and an {@code Async}
 * form whose future completes exceptionally with the same exception. Among them: {@link
 * NotFoundException} ({@code unknown_queue}), {@link ConflictException} ({@code key_conflict},
 * {@code not_held}, {@code not_dead}), {@link FlowgateException} of status 429 ({@code
 * queue_full}, with its retry time), {@link StoreUnavailableException}, {@link
 * ConnectionException}.
 *
 * <pre>{@code
 * Queues queues = flowgate.queues();
 * QueueInstance wpg = QueueInstance.of("payments", Descriptor.of("biz", "REFUND", "channel", "WPG"));
 * queues.submit(wpg, List.of(NewJob.json(refund).withKey(refund.id())));
 * }</pre>
 */
public final class Queues {
  /** The longest long-poll the server takes ({@code wait_ms}). */
  public static final Duration MAX_LEASE_WAIT = Duration.ofSeconds(60);
  /** The most jobs in one submit. */
  public static final int MAX_BATCH = 10_000;

  private final JsonTransport transport;

  Queues(JsonTransport transport) {
    this.transport = transport;
  }

  // ---- submit

  /**
   * Submits a batch ({@code POST /v1/queues/submit}), all or nothing: a full queue, a key
   * conflict or a bad job stores none of it. Jobs with a known {@code key} are answered as the
   * job already there ({@code duplicate}), so a batch resubmitted after a timeout stores nothing
   * twice.
   *
   * @param queue the instance
   * @param jobs the jobs, at most 10,000 (at most 1,000 of them with a key)
   * @return each job's id and state, in the order submitted
   * @throws ConflictException {@code key_conflict}: a key known with another payload
   * @throws FlowgateException status 429 {@code queue_full} (nothing stored; {@code
   *     retryAfter}), 413 a payload over the queue's {@code max_payload}
   */
  public SubmitAnswer submit(QueueInstance queue, List<NewJob> jobs) {
    return JsonTransport.blocking(() -> submitAsync(queue, jobs));
  }

  /**
   * {@link #submit(QueueInstance, List)} of one job.
   *
   * @param queue the instance
   * @param job the job
   * @return the job's answer
   */
  public SubmitAnswer submit(QueueInstance queue, NewJob job) {
    return submit(queue, List.of(job));
  }

  /**
   * {@link #submit(QueueInstance, List)} without blocking.
   *
   * @param queue the instance
   * @param jobs the jobs
   * @return each job's answer
   */
  public CompletableFuture<SubmitAnswer> submitAsync(QueueInstance queue, List<NewJob> jobs) {
    Objects.requireNonNull(queue, "queue");
    if (jobs.isEmpty() || jobs.size() > MAX_BATCH) {
      return CompletableFuture.failedFuture(
          new IllegalArgumentException("a submit carries 1 to 10,000 jobs, not " + jobs.size()));
    }
    return transport
        .call(Route.QUEUE_SUBMIT, QueueBodies.submit(queue, jobs), transport.timeout(), 200)
        .thenApply(reply -> reply.as(SubmitAnswer.class));
  }

  // ---- lease, ack, nack

  /**
   * Leases the instance's next job ({@code POST /v1/queues/lease}), waiting up to {@code wait}
   * for one to be released (a long-poll: the answer comes at the job's release slot). Ack it, or
   * nack it, before its {@link Job#leaseDeadline()}; there is no lease extension.
   *
   * @param queue the instance
   * @param wait how long to wait, 0 to 60 s
   * @return the job, or empty when none was released within {@code wait}
   * @throws StoreUnavailableException the store could not answer within {@code wait} (retry
   *     after its {@code retryAfter})
   */
  public Optional<Job> lease(QueueInstance queue, Duration wait) {
    return JsonTransport.blocking(() -> leaseAsync(queue, wait));
  }

  /**
   * {@link #lease} without blocking. Cancelling the future ({@code cancel(true)}) cancels the
   * exchange and closes its connection, so the server keeps the job it was about to answer,
   * first in line, no attempt counted. Over HTTP/1.1 the long-poll holds one of the client's
   * executor threads for its wait.
   *
   * @param queue the instance
   * @param wait how long to wait, 0 to 60 s
   * @return the job, or empty
   */
  public CompletableFuture<Optional<Job>> leaseAsync(QueueInstance queue, Duration wait) {
    Objects.requireNonNull(queue, "queue");
    if (wait.isNegative() || wait.compareTo(MAX_LEASE_WAIT) > 0) {
      return CompletableFuture.failedFuture(
          new IllegalArgumentException("a lease waits 0 to 60 s, not " + wait));
    }
    Duration timeout = transport.timeout().plus(wait);
    return transport
        .call(Route.QUEUE_LEASE, QueueBodies.lease(queue, wait), timeout, 200, 204)
        .thenApply(
            reply -> reply.status() == 204 ? Optional.empty() : Optional.of(reply.as(Job.class)));
  }

  /**
   * The job is done ({@code POST /v1/queues/ack}): it is never delivered again, and its key is
   * kept for the queue's {@code key_retention}.
   *
   * @param job the leased job
   * @throws ConflictException {@code not_held}: acked already, or delivered again since its
   *     lease ended
   */
  public void ack(Job job) {
    JsonTransport.blocking(() -> ackAsync(job.token()));
  }

  /**
   * {@link #ack(Job)} of a delivery's token, without blocking.
   *
   * @param token the lease's token
   * @return completes once acked
   */
  public CompletableFuture<Void> ackAsync(String token) {
    return transport
        .call(Route.QUEUE_ACK, QueueBodies.ack(token), transport.timeout(), 200)
        .thenApply(reply -> null);
  }

  /**
   * The job failed ({@code POST /v1/queues/nack}): retried after {@code retryAfter}, or, after
   * its queue's {@code max_attempts} deliveries, a dead letter.
   *
   * @param job the leased job
   * @param retryAfter the wait before its next attempt (at most 30 days), or null for the
   *     queue's {@code retry_backoff} (doubling per attempt)
   * @return retried (when), or dead
   * @throws ConflictException {@code not_held}
   */
  public NackAnswer nack(Job job, Duration retryAfter) {
    return JsonTransport.blocking(() -> nackAsync(job.token(), retryAfter));
  }

  /**
   * {@link #nack(Job, Duration)} of a delivery's token, without blocking.
   *
   * @param token the lease's token
   * @param retryAfter the wait before the next attempt, or null for the queue's backoff
   * @return retried (when), or dead
   */
  public CompletableFuture<NackAnswer> nackAsync(String token, Duration retryAfter) {
    if (retryAfter != null && retryAfter.isNegative()) {
      return CompletableFuture.failedFuture(
          new IllegalArgumentException("retryAfter is negative: " + retryAfter));
    }
    return transport
        .call(Route.QUEUE_NACK, QueueBodies.nack(token, retryAfter), transport.timeout(), 200)
        .thenApply(reply -> reply.as(NackAnswer.class));
  }

  // ---- dead letters, purge, figures

  /**
   * A page of the instance's dead letters, oldest first ({@code POST /v1/queues/dead}).
   *
   * @param queue the instance
   * @param offset dead letters to skip
   * @param limit how many to list, 1 to 1,000
   * @return the dead letters
   */
  public List<DeadLetter> deadLetters(QueueInstance queue, int offset, int limit) {
    return JsonTransport.blocking(() -> deadLettersAsync(queue, offset, limit));
  }

  /**
   * {@link #deadLetters} without blocking.
   *
   * @param queue the instance
   * @param offset dead letters to skip
   * @param limit how many
   * @return the dead letters
   */
  public CompletableFuture<List<DeadLetter>> deadLettersAsync(
      QueueInstance queue, int offset, int limit) {
    if (offset < 0 || limit < 1 || limit > 1000) {
      return CompletableFuture.failedFuture(
          new IllegalArgumentException(
              "offset ≥ 0 and limit 1 to 1,000, not " + offset + " and " + limit));
    }
    return transport
        .call(Route.QUEUE_DEAD, QueueBodies.dead(queue, offset, limit), transport.timeout(), 200)
        .thenApply(reply -> reply.as(QueueCounts.DeadLetters.class).jobs());
  }

  /**
   * Puts dead letters back in line ({@code POST /v1/queues/dead/requeue}, admin), their
   * attempts counted again from zero.
   *
   * @param queue the instance
   * @param ids the dead letters, or empty for all of them
   * @return how many were requeued
   * @throws ConflictException {@code not_dead}: an id is not a dead letter (nothing changed)
   * @throws ForbiddenException the credential is not an admin's
   */
  public long requeueDead(QueueInstance queue, List<Long> ids) {
    return JsonTransport.blocking(() -> requeueDeadAsync(queue, ids));
  }

  /**
   * {@link #requeueDead} without blocking.
   *
   * @param queue the instance
   * @param ids the dead letters, or empty for all
   * @return how many were requeued
   */
  public CompletableFuture<Long> requeueDeadAsync(QueueInstance queue, List<Long> ids) {
    return transport
        .call(
            Route.QUEUE_DEAD_REQUEUE, QueueBodies.deadIds(queue, ids), transport.timeout(), 200)
        .thenApply(reply -> reply.as(QueueCounts.Requeued.class).requeued());
  }

  /**
   * Deletes dead letters ({@code POST /v1/queues/dead/purge}, admin); their keys are forgotten.
   *
   * @param queue the instance
   * @param ids the dead letters, or empty for all of them
   * @return how many were deleted
   * @throws ConflictException {@code not_dead}: an id is not a dead letter (nothing changed)
   */
  public long purgeDead(QueueInstance queue, List<Long> ids) {
    return JsonTransport.blocking(() -> purgeDeadAsync(queue, ids));
  }

  /**
   * {@link #purgeDead} without blocking.
   *
   * @param queue the instance
   * @param ids the dead letters, or empty for all
   * @return how many were deleted
   */
  public CompletableFuture<Long> purgeDeadAsync(QueueInstance queue, List<Long> ids) {
    return transport
        .call(Route.QUEUE_DEAD_PURGE, QueueBodies.deadIds(queue, ids), transport.timeout(), 200)
        .thenApply(reply -> reply.as(QueueCounts.Purged.class).purged());
  }

  /**
   * Deletes every job of the instance ({@code POST /v1/queues/purge}, admin).
   *
   * @param queue the instance
   * @return how many were deleted
   */
  public long purge(QueueInstance queue) {
    return JsonTransport.blocking(() -> purgeAsync(queue));
  }

  /**
   * {@link #purge} without blocking.
   *
   * @param queue the instance
   * @return how many were deleted
   */
  public CompletableFuture<Long> purgeAsync(QueueInstance queue) {
    return transport
        .call(Route.QUEUE_PURGE, QueueBodies.instance(queue), transport.timeout(), 200)
        .thenApply(reply -> reply.as(QueueCounts.Purged.class).purged());
  }

  /**
   * The declared queues and every instance's figures: depth, in flight, dead letters, release
   * rate, time to drain ({@code GET /v1/queues}).
   *
   * @return the queues
   */
  public QueuesOverview overview() {
    return JsonTransport.blocking(() -> overviewAsync());
  }

  /**
   * {@link #overview()} without blocking.
   *
   * @return the queues
   */
  public CompletableFuture<QueuesOverview> overviewAsync() {
    return transport
        .call(Route.QUEUES, null, transport.timeout(), 200)
        .thenApply(reply -> reply.as(QueuesOverview.class));
  }
}
