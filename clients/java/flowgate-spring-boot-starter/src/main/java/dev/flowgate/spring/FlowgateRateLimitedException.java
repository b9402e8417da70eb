package dev.flowgate.spring;

/**
 * A {@link RateLimited} call over a limit: answered 429 with {@code Retry-After} in Spring MVC
 * and WebFlux. {@link #retryAfter()} is the earliest the same call could pass.
 */
public class FlowgateRateLimitedException extends FlowgateRefusedException {
  private static final long serialVersionUID = 1L;

  /** @param refusal what was asked and the client's refusal */
  public FlowgateRateLimitedException(Refusal refusal) {
    super("rate limited in domain " + refusal.domain() + ": " + refusal.cause().detail(), refusal);
  }

  @Override
  public int httpStatus() {
    return 429;
  }

  @Override
  public String code() {
    return "over_limit";
  }
}
