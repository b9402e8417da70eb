package dev.flowgate.spring;

/**
 * The exceptions refused calls throw. Declare a bean of this type to throw your own (your API's
 * error type, mapped by your own {@code @ControllerAdvice}); the default throws {@link
 * FlowgateRateLimitedException}, {@link FlowgateCircuitOpenException} and {@link
 * FlowgateUnavailableException}, which the starter answers as 429 and 503 problems.
 */
public interface FlowgateRejections {
  /**
   * The exception of a call over a limit.
   *
   * @param refusal what was asked and the refusal (its retry time)
   * @return the exception to throw
   */
  default RuntimeException overLimit(Refusal refusal) {
    return new FlowgateRateLimitedException(refusal);
  }

  /**
   * The exception of a call refused by a circuit breaker.
   *
   * @param refusal what was asked and the refusal (its retry time, the breaker)
   * @return the exception to throw
   */
  default RuntimeException circuitOpen(Refusal refusal) {
    return new FlowgateCircuitOpenException(refusal);
  }

  /**
   * The exception of a call refused because Flowgate could not answer ({@link
   * Unavailable#REJECT}).
   *
   * @param refusal what was asked and the failure
   * @return the exception to throw
   */
  default RuntimeException unavailable(Refusal refusal) {
    return new FlowgateUnavailableException(refusal);
  }
}
