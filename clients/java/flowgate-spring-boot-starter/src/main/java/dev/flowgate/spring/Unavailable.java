package dev.flowgate.spring;

/**
 * What an annotated call does when Flowgate cannot answer its question: the server unreachable,
 * no answer within {@code flowgate.request-timeout}, or a 5xx answer (its store unavailable, the
 * node starting or draining). A refusal, and an error of the request itself (400, 401, 403), are
 * never covered: they are answers.
 */
public enum Unavailable {
  /** As the property {@code flowgate.fail-open} says (true by default). */
  DEFAULT,
  /** The call goes ahead unchecked (fail open), counted and logged. */
  ALLOW,
  /**
   * The call is refused with {@link FlowgateRejections#unavailable} ({@link
   * FlowgateUnavailableException} by default: 503).
   */
  REJECT
}
