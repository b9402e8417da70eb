package dev.flowgate.client.queue;

import java.time.Duration;
import java.util.Objects;

/**
 * Thrown by a {@link JobHandler}: the job failed and is to be retried after {@link
 * #retryAfter()} (a channel answered 429 with its own {@code Retry-After}, say).
 */
public class RetryJobException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final Duration retryAfter;

  /**
   * @param message what failed
   * @param retryAfter the wait before the job's next attempt, 0 to 30 days
   */
  public RetryJobException(String message, Duration retryAfter) {
    this(message, retryAfter, null);
  }

  /**
   * @param message what failed
   * @param retryAfter the wait before the job's next attempt, 0 to 30 days
   * @param cause the failure
   */
  public RetryJobException(String message, Duration retryAfter, Throwable cause) {
    super(message, cause);
    this.retryAfter = Objects.requireNonNull(retryAfter, "retryAfter");
    if (retryAfter.isNegative() || retryAfter.compareTo(JobResult.MAX_RETRY_DELAY) > 0) {
      throw new IllegalArgumentException("a retry delay is 0 to 30 days, not " + retryAfter);
    }
  }

  /** The wait before the job's next attempt. */
  public Duration retryAfter() {
    return retryAfter;
  }
}
