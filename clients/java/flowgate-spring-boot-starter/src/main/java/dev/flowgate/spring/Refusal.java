package dev.flowgate.spring;

import dev.flowgate.client.FlowgateException;
import dev.flowgate.client.Request;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Optional;

/**
 * Why an annotated call was refused: what was asked, by which method, and the client's exception
 * that said no ({@link dev.flowgate.client.OverLimitException}, {@link
 * dev.flowgate.client.CircuitOpenException}, or the failure when Flowgate could not answer).
 *
 * @param method the annotated method
 * @param request the request asked (its domain and evaluated descriptors)
 * @param cause the client's exception
 */
public record Refusal(Method method, Request request, FlowgateException cause) {

  /** The domain asked. */
  public String domain() {
    return request.domain();
  }

  /** When the same call could pass, when known. */
  public Optional<Duration> retryAfter() {
    return cause.retryAfter();
  }
}
