package dev.flowgate.client.queue;

import dev.flowgate.client.Queues;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ThreadFactory;

/** Builds a {@link Worker} ({@link Worker#builder}); only the handler is required. */
public final class WorkerBuilder {
  final Queues queues;
  final QueueInstance queue;
  JobHandler handler;
  int concurrency = 1;
  Duration leaseWait = Duration.ofSeconds(20);
  Duration grace = Duration.ofSeconds(30);
  Duration backoffInitial = Duration.ofMillis(100);
  Duration backoffMax = Duration.ofSeconds(10);
  ThreadFactory threads;

  WorkerBuilder(Queues queues, QueueInstance queue) {
    this.queues = Objects.requireNonNull(queues, "queues");
    this.queue = Objects.requireNonNull(queue, "queue");
  }

  /**
   * The work done with each job.
   *
   * @param handler the handler
   * @return this builder
   */
  public WorkerBuilder handler(JobHandler handler) {
    this.handler = Objects.requireNonNull(handler, "handler");
    return this;
  }

  /**
   * How many jobs run at once (1 by default): the pool's threads, each leasing one job at a
   * time. A queue releases jobs at its rate whatever the count: more only helps when a job
   * takes longer than the queue's spacing.
   *
   * @param n 1 to 1,024
   * @return this builder
   */
  public WorkerBuilder concurrency(int n) {
    if (n < 1 || n > 1024) {
      throw new IllegalArgumentException("concurrency is 1 to 1,024, not " + n);
    }
    this.concurrency = n;
    return this;
  }

  /**
   * How long each lease waits for a job (a long-poll; 20 s by default, at most 60 s). Keep it
   * under the idle timeout of any proxy between the worker and the server.
   *
   * @param wait 1 ms to 60 s
   * @return this builder
   */
  public WorkerBuilder leaseWait(Duration wait) {
    if (wait.isNegative() || wait.isZero() || wait.compareTo(Queues.MAX_LEASE_WAIT) > 0) {
      throw new IllegalArgumentException("leaseWait is 1 ms to 60 s, not " + wait);
    }
    this.leaseWait = wait;
    return this;
  }

  /**
   * The backoff after a failed lease: {@code initial} (100 ms by default) doubling up to {@code
   * max} (10 s by default), with jitter; the server's {@code Retry-After} when longer.
   *
   * @param initial the first delay
   * @param max the longest
   * @return this builder
   */
  public WorkerBuilder backoff(Duration initial, Duration max) {
    if (initial.toMillis() < 1 || max.compareTo(initial) < 0) {
      throw new IllegalArgumentException(
          "backoff needs 1 ms ≤ initial ≤ max, not " + initial + " and " + max);
    }
    this.backoffInitial = initial;
    this.backoffMax = max;
    return this;
  }

  /**
   * The grace {@link Worker#close()} gives jobs in flight (30 s by default).
   *
   * @param grace the grace
   * @return this builder
   */
  public WorkerBuilder stopGrace(Duration grace) {
    if (grace.isNegative()) {
      throw new IllegalArgumentException("stopGrace is not negative: " + grace);
    }
    this.grace = grace;
    return this;
  }

  /**
   * The factory of the pool's threads (virtual threads on Java 21: {@code
   * Thread.ofVirtual().factory()}); daemon threads named {@code flowgate-worker-...} by default.
   *
   * @param threads the factory
   * @return this builder
   */
  public WorkerBuilder threadFactory(ThreadFactory threads) {
    this.threads = Objects.requireNonNull(threads, "threads");
    return this;
  }

  /**
   * The worker, not started.
   *
   * @return the worker
   */
  public Worker build() {
    if (handler == null) {
      throw new IllegalStateException("a worker needs a handler");
    }
    return new Worker(this);
  }

  /**
   * The worker, started.
   *
   * @return the worker, leasing
   */
  public Worker start() {
    return build().start();
  }
}
