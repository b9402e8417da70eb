package dev.flowgate.client.queue;

import java.time.Duration;
import java.util.Objects;

/**
 * What a {@link JobHandler} decided about a job: done (ack), or to be retried (nack) after a
 * delay of its own or after the queue's {@code retry_backoff}. Immutable.
 *
 * <p>A retry counts as an attempt: after the queue's {@code max_attempts} deliveries the job
 * goes to the dead letters instead.
 */
public final class JobResult {
  /** The longest retry delay the server takes ({@code retry_after_ms} of a nack). */
  public static final Duration MAX_RETRY_DELAY = Duration.ofDays(30);

  private static final JobResult ACK = new JobResult(true, null);
  private static final JobResult BACKOFF = new JobResult(false, null);

  private final boolean ack;
  private final Duration retryAfter;

  private JobResult(boolean ack, Duration retryAfter) {
    this.ack = ack;
    this.retryAfter = retryAfter;
  }

  /** The job is done: ack it. */
  public static JobResult ack() {
    return ACK;
  }

  /**
   * The job failed: retry it after {@code delay} (a channel's own {@code Retry-After}).
   *
   * @param delay the wait before its next attempt, 0 to 30 days
   * @return the result
   */
  public static JobResult retry(Duration delay) {
    Objects.requireNonNull(delay, "delay");
    if (delay.isNegative() || delay.compareTo(MAX_RETRY_DELAY) > 0) {
      throw new IllegalArgumentException("a retry delay is 0 to 30 days, not " + delay);
    }
    return new JobResult(false, delay);
  }

  /** The job failed: retry it after the queue's {@code retry_backoff}, doubling per attempt. */
  public static JobResult retryWithQueueBackoff() {
    return BACKOFF;
  }

  /** Whether the job is done. */
  public boolean isAck() {
    return ack;
  }

  /** The retry delay; null for an ack, or for the queue's backoff. */
  public Duration retryAfter() {
    return retryAfter;
  }

  @Override
  public String toString() {
    return ack ? "ack" : retryAfter == null ? "retry (queue's backoff)" : "retry after " + retryAfter;
  }
}
