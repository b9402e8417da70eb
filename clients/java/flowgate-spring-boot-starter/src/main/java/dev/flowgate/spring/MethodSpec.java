package dev.flowgate.spring;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.Request;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.Expression;

/**
 * An annotated method's questions to Flowgate, parsed once: its {@link RateLimited} and {@link
 * FlowgateBreaker}, their descriptors' templates and the cost's. {@link #steps} evaluates them
 * for one call.
 */
final class MethodSpec {
  /**
   * One acquire of a call, and what follows it.
   *
   * @param request the request
   * @param breaker the breaker annotation whose outcome the permit reports, or null to release it
   * @param unavailable what to do when Flowgate cannot answer
   */
  record Step(Request request, FlowgateBreaker breaker, Unavailable unavailable) {}

  private final Method method;
  private final RateLimited rate;
  private final List<DescriptorTemplate> rateDescriptors;
  private final Expression cost;
  private final FlowgateBreaker breaker;
  private final List<DescriptorTemplate> breakerDescriptors;

  private MethodSpec(Method method, RateLimited rate, FlowgateBreaker breaker) {
    this.method = method;
    this.rate = rate;
    this.breaker = breaker;
    String where = method.getDeclaringClass().getName() + "." + method.getName();
    this.rateDescriptors = rate == null ? null : templates(rate.domain(), rate.descriptors(), where);
    this.cost =
        rate == null || rate.cost().isBlank()
            ? null
            : DescriptorTemplate.template(rate.cost(), where + ": @RateLimited cost");
    this.breakerDescriptors =
        breaker == null ? null : templates(breaker.domain(), breaker.descriptors(), where);
  }

  /**
   * The spec of a method, from its annotations (or its interface's).
   *
   * @param method the method, as the target class declares it
   * @return the spec
   * @throws IllegalStateException naming the method and what is wrong with its annotations
   */
  static MethodSpec of(Method method) {
    RateLimited rate = AnnotatedElementUtils.findMergedAnnotation(method, RateLimited.class);
    FlowgateBreaker breaker =
        AnnotatedElementUtils.findMergedAnnotation(method, FlowgateBreaker.class);
    try {
      return new MethodSpec(method, rate, breaker);
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException(
          "flowgate: bad annotation on " + method.toGenericString() + ": " + e.getMessage(), e);
    }
  }

  Method method() {
    return method;
  }

  private static List<DescriptorTemplate> templates(String domain, String[] sources, String where) {
    if (domain.isBlank()) {
      throw new IllegalArgumentException(where + ": the domain is empty");
    }
    if (sources.length == 0) {
      throw new IllegalArgumentException(where + ": no descriptor");
    }
    List<DescriptorTemplate> out = new ArrayList<>();
    for (String s : sources) {
      out.add(DescriptorTemplate.parse(s));
    }
    return List.copyOf(out);
  }

  /**
   * The acquires of one call: one when both annotations ask the same domain and descriptors
   * (its permit reports the outcome), otherwise the rate limit's, then the breaker's.
   *
   * @param context the call's arguments
   * @return the steps, in order
   */
  List<Step> steps(EvaluationContext context) {
    List<Step> steps = new ArrayList<>(2);
    Request rateRequest = null;
    if (rate != null) {
      rateRequest = Request.of(rate.domain(), evaluate(rateDescriptors, context));
      if (cost != null) {
        rateRequest = rateRequest.withCost(cost(context));
      }
    }
    if (breaker == null) {
      steps.add(new Step(rateRequest, null, rate.onUnavailable()));
      return steps;
    }
    Request breakerRequest =
        Request.of(breaker.domain(), evaluate(breakerDescriptors, context)).withCost(0);
    if (rateRequest != null
        && rateRequest.domain().equals(breakerRequest.domain())
        && rateRequest.descriptors().equals(breakerRequest.descriptors())) {
      Unavailable mode =
          rate.onUnavailable() == Unavailable.DEFAULT ? breaker.onUnavailable() : rate.onUnavailable();
      steps.add(new Step(rateRequest, breaker, mode));
      return steps;
    }
    if (rateRequest != null) {
      steps.add(new Step(rateRequest, null, rate.onUnavailable()));
    }
    steps.add(new Step(breakerRequest, breaker, breaker.onUnavailable()));
    return steps;
  }

  private static List<Descriptor> evaluate(List<DescriptorTemplate> templates, EvaluationContext c) {
    List<Descriptor> out = new ArrayList<>(templates.size());
    for (DescriptorTemplate t : templates) {
      out.add(t.evaluate(c));
    }
    return out;
  }

  private long cost(EvaluationContext context) {
    Object value = cost.getValue(context);
    if (value instanceof Number n) {
      return n.longValue();
    }
    if (value == null) {
      throw new IllegalArgumentException("@RateLimited cost evaluated to null");
    }
    try {
      return Long.parseLong(value.toString().strip());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("@RateLimited cost is not a whole number: " + value, e);
    }
  }
}
