package dev.flowgate.spring;

/**
 * A call refused because Flowgate could not answer and its failure mode is {@link
 * Unavailable#REJECT} (fail closed): answered 503 in Spring MVC and WebFlux, with the server's
 * {@code Retry-After} when it sent one.
 */
public class FlowgateUnavailableException extends FlowgateRefusedException {
  private static final long serialVersionUID = 1L;

  /** @param refusal what was asked and the client's failure */
  public FlowgateUnavailableException(Refusal refusal) {
    super(
        "flowgate could not decide a call of domain "
            + refusal.domain()
            + " (failing closed): "
            + refusal.cause().getMessage(),
        refusal);
  }

  @Override
  public int httpStatus() {
    return 503;
  }

  @Override
  public String code() {
    return "flowgate_unavailable";
  }
}
