package dev.flowgate.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Guards the annotated bean method with the Flowgate circuit breakers its descriptors match
 * (declared on the server, {@code [[breaker]]} in the rules): before each call it asks them
 * ({@code POST /v1/acquire} of cost 0, so no rate limit is charged), and after the call it
 * reports the outcome and latency ({@code POST /v1/report}, with the probe lease of a half-open
 * breaker): {@code ok} when the method returns, {@code error} when it throws one of {@link
 * #recordExceptions()} and none of {@link #ignoreExceptions()}. An open breaker refuses the call
 * with {@link FlowgateRejections#circuitOpen} ({@link FlowgateCircuitOpenException} by default:
 * 503 with {@code Retry-After} in Spring MVC and WebFlux).
 *
 * <pre>{@code
 * @FlowgateBreaker(domain = "payments", descriptors = "channel=#{#p.channel}")
 * public Receipt callChannel(Payment p) { ... }
 * }</pre>
 *
 * <p>With {@link RateLimited} of the same domain and descriptors on the same method, one acquire
 * answers both (of {@link RateLimited#cost()}), and its permit carries the report.
 * A reactive or {@code CompletionStage} method's outcome is its result's: its error or
 * completion.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface FlowgateBreaker {
  /**
   * The domain of the breakers.
   *
   * @return the domain
   */
  String domain();

  /**
   * The call's descriptors, written as {@link RateLimited#descriptors()}.
   *
   * @return the descriptors (at least one)
   */
  String[] descriptors();

  /**
   * The exceptions reported as failures (and their subclasses): every one by default, as
   * Resilience4j's {@code recordExceptions}.
   *
   * @return the types
   */
  Class<? extends Throwable>[] recordExceptions() default {Throwable.class};

  /**
   * The exceptions that are no evidence either way (a caller's bad input): the call is not
   * reported at all, and its permit is released. They win over {@link #recordExceptions()}.
   *
   * @return the types
   */
  Class<? extends Throwable>[] ignoreExceptions() default {};

  /**
   * What happens when Flowgate cannot answer.
   *
   * @return the failure mode; {@link Unavailable#DEFAULT} follows {@code flowgate.fail-open}
   */
  Unavailable onUnavailable() default Unavailable.DEFAULT;
}
