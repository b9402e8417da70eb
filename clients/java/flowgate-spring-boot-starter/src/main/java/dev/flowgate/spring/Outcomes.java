package dev.flowgate.spring;

/** Which outcome a call's result is for a breaker, as {@link FlowgateBreaker} says. */
final class Outcomes {
  private Outcomes() {}

  /**
   * @param breaker the annotation
   * @param failure what the call threw, or null
   * @return true (ok), false (a failure), or null (no evidence: not reported)
   */
  static Boolean ok(FlowgateBreaker breaker, Throwable failure) {
    if (failure == null) {
      return true;
    }
    for (Class<? extends Throwable> t : breaker.ignoreExceptions()) {
      if (t.isInstance(failure)) {
        return null;
      }
    }
    for (Class<? extends Throwable> t : breaker.recordExceptions()) {
      if (t.isInstance(failure)) {
        return false;
      }
    }
    return true;
  }
}
