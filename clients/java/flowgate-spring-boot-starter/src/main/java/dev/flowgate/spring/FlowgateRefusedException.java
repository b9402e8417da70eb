package dev.flowgate.spring;

import java.time.Duration;
import java.util.Optional;

/**
 * An annotated call that Flowgate did not let through: the common type of {@link
 * FlowgateRateLimitedException}, {@link FlowgateCircuitOpenException} and {@link
 * FlowgateUnavailableException}, each with the HTTP status the starter answers it with.
 */
public abstract class FlowgateRefusedException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final transient Refusal refusal;

  /**
   * @param message what happened, for people
   * @param refusal what was asked and the client's answer
   */
  protected FlowgateRefusedException(String message, Refusal refusal) {
    super(message, refusal.cause());
    this.refusal = refusal;
  }

  /** What was asked, by which method, and the client's exception. */
  public Refusal refusal() {
    return refusal;
  }

  /** The domain asked. */
  public String domain() {
    return refusal.domain();
  }

  /** When the same call could pass, when known. */
  public Optional<Duration> retryAfter() {
    return refusal.retryAfter();
  }

  /**
   * The {@code Retry-After} header's value: whole seconds, rounded up, at least 1 (as the server
   * writes it); empty when the time is unknown.
   */
  public Optional<Long> retryAfterSeconds() {
    return retryAfter().map(FlowgateRefusedException::seconds);
  }

  static long seconds(Duration d) {
    long s = d.getSeconds() + (d.getNano() > 0 ? 1 : 0);
    return Math.max(1, s);
  }

  /** The HTTP status a web request refused with it is answered with. */
  public abstract int httpStatus();

  /** The short code of the problem answer ({@code over_limit}, {@code circuit_open}, ...). */
  public abstract String code();
}
