package dev.flowgate.spring;

/**
 * A call refused by an open (or half-open and busy) Flowgate circuit breaker: answered 503 with
 * {@code Retry-After} (the time until it lets a probe through) in Spring MVC and WebFlux: the
 * dependency behind it is unavailable, not the caller over a quota.
 */
public class FlowgateCircuitOpenException extends FlowgateRefusedException {
  private static final long serialVersionUID = 1L;

  /** @param refusal what was asked and the client's refusal */
  public FlowgateCircuitOpenException(Refusal refusal) {
    super("circuit open in domain " + refusal.domain() + ": " + refusal.cause().detail(), refusal);
  }

  @Override
  public int httpStatus() {
    return 503;
  }

  @Override
  public String code() {
    return "circuit_open";
  }
}
