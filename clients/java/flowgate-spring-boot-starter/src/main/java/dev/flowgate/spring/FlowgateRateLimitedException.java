package dev.flowgate.spring;

import dev.flowgate.client.ErrorCode;

/**
 * A {@link RateLimited} call over a limit, or refused by a rule's {@code closed} failure policy
 * while Flowgate's store failed: answered 429 with {@code Retry-After} in Spring MVC and WebFlux,
 * {@link #code()} {@code over_limit} or {@code store_unavailable}. {@link #retryAfter()} is the
 * earliest the same call could pass.
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

  /**
   * {@code store_unavailable} for a refusal by a {@code closed} failure policy, else {@code
   * over_limit}.
   */
  @Override
  public String code() {
    return refusal().cause().code() == ErrorCode.STORE_UNAVAILABLE
        ? ErrorCode.STORE_UNAVAILABLE.wire()
        : ErrorCode.OVER_LIMIT.wire();
  }
}
