package dev.flowgate.client;

import java.time.Duration;
import java.util.Optional;

/** A limit refused the request (`over_limit`): `retryAfter()` is the earliest the same request could pass. Thrown by calls that cannot return a refusal (acquire, a verdict's `orThrow()`); `check` returns it as a {@link Verdict}. */
public class OverLimitException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   */
  public OverLimitException(ErrorCode code, String detail, Duration retryAfter) {
    this(code, detail, retryAfter, null);
  }

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   * @param verdict the refusal, with each descriptor's status, or null
   */
  public OverLimitException(ErrorCode code, String detail, Duration retryAfter, Verdict verdict) {
    super(429, code, detail, retryAfter, null);
    this.verdict = verdict;
  }

  private final transient Verdict verdict;

  /** The refusal, with each descriptor's status (which rule, its limit); empty when none came. */
  public Optional<Verdict> verdict() {
    return Optional.ofNullable(verdict);
  }
}
