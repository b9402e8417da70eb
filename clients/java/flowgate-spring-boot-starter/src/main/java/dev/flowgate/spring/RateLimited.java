package dev.flowgate.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Asks Flowgate before each call of the annotated bean method ({@code POST /v1/acquire}): the
 * call goes ahead when the rules of {@link #domain()} admit it, waits first when a {@code delay}
 * rule reserved it a slot (within the rule's {@code max_wait}), and is refused otherwise with
 * the exception of {@link FlowgateRejections#overLimit} ({@link FlowgateRateLimitedException} by
 * default: 429 with {@code Retry-After} in Spring MVC and WebFlux). Concurrency leases the
 * acquire took are given back when the method returns or throws.
 *
 * <pre>{@code
 * @RateLimited(domain = "payments", descriptors = "channel=#{#p.channel}")
 * public Receipt pay(Payment p) { ... }
 * }</pre>
 *
 * <p>A method returning {@code Mono}, {@code Flux} or {@code CompletionStage} is asked without
 * blocking, when the result is subscribed to (or at once, for a {@code CompletionStage}); any
 * other method blocks its thread for the answer (and the {@code delay} wait).
 *
 * <p>A request refused by a circuit breaker that its descriptors match throws {@link
 * FlowgateRejections#circuitOpen} ({@link FlowgateCircuitOpenException}: 503). Put {@link
 * FlowgateBreaker} on the method too to report its outcomes to that breaker.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface RateLimited {
  /**
   * The domain of the rules.
   *
   * @return the domain
   */
  String domain();

  /**
   * The request's descriptors, one string each: entries {@code key=value} separated by commas,
   * each value a template whose {@code #{...}} parts are SpEL evaluated against the method's
   * arguments by name ({@code #p} is the parameter named {@code p}: compile with {@code
   * -parameters}, as Spring Boot's build plugins do; {@code #p0} and {@code #a0} name them by
   * position), and beans as {@code @name}. A value with a comma or an equals sign is safe: the
   * entries are split before evaluation.
   *
   * <p>{@code "channel=#{#p.channel}"}, {@code "biz=PAY, channel=#{#p.channel}"}, {@code
   * "api_key=#{#key}"}.
   *
   * @return the descriptors (at least one)
   */
  String[] descriptors();

  /**
   * The units the call takes: a number, or a SpEL template ({@code "#{#req.tokens}"}) evaluated
   * as the descriptors are; empty for 1.
   *
   * @return the cost
   */
  String cost() default "";

  /**
   * What happens when Flowgate cannot answer (no answer in time, a 5xx).
   *
   * @return the failure mode; {@link Unavailable#DEFAULT} follows {@code flowgate.fail-open}
   */
  Unavailable onUnavailable() default Unavailable.DEFAULT;
}
