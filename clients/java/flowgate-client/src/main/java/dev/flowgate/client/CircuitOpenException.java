package dev.flowgate.client;

import java.time.Duration;
import java.util.Optional;

/** A circuit breaker refused the request (`circuit_open`): `retryAfter()` is the time until it lets probes through, `breaker()` names it. */
public class CircuitOpenException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   */
  public CircuitOpenException(ErrorCode code, String detail, Duration retryAfter) {
    this(code, detail, retryAfter, null);
  }

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   * @param verdict the refusal, with the breaker that refused, or null
   */
  public CircuitOpenException(ErrorCode code, String detail, Duration retryAfter, Verdict verdict) {
    super(429, code, detail, retryAfter, null);
    this.verdict = verdict;
  }

  private final transient Verdict verdict;

  /** The breaker that refused the request, when the server named it. */
  public Optional<BreakerRef> breaker() {
    return Optional.ofNullable(verdict).map(Verdict::breaker);
  }

  /** The refusal; empty when none came. */
  public Optional<Verdict> verdict() {
    return Optional.ofNullable(verdict);
  }
}
