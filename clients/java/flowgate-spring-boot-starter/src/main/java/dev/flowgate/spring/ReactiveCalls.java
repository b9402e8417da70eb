package dev.flowgate.spring;

import java.lang.reflect.Method;
import java.util.List;
import org.aopalliance.intercept.MethodInvocation;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Guards methods returning {@code Mono} or {@code Flux} without blocking: the acquire is made
 * when the result is subscribed to, the method is called once it admits, and the outcome is
 * reported (or the permit released, on cancellation) before the result completes. Loaded only
 * when Reactor is on the class path.
 */
final class ReactiveCalls {
  private ReactiveCalls() {}

  static boolean handles(Class<?> returns) {
    return Mono.class.isAssignableFrom(returns) || Flux.class.isAssignableFrom(returns);
  }

  static Object guard(
      FlowgateGuard guard,
      MethodInvocation invocation,
      Method method,
      List<MethodSpec.Step> steps,
      Class<?> returns) {
    MethodInvocation call = FlowgateGuard.replayable(invocation);
    Mono<Admission> admit = Mono.defer(() -> Mono.fromFuture(guard.acquire(method, steps)));
    if (Mono.class.isAssignableFrom(returns)) {
      return Mono.usingWhen(
          admit,
          admission -> Mono.from(proceed(call, admission)),
          admission -> Mono.fromFuture(admission.finish(null)),
          (admission, failure) -> Mono.fromFuture(admission.finish(failure)),
          admission -> Mono.fromFuture(admission.release()));
    }
    return Flux.usingWhen(
        admit,
        admission -> proceed(call, admission),
        admission -> Mono.fromFuture(admission.finish(null)),
        (admission, failure) -> Mono.fromFuture(admission.finish(failure)),
        admission -> Mono.fromFuture(admission.release()));
  }

  private static Publisher<?> proceed(MethodInvocation call, Admission admission) {
    admission.start();
    try {
      Object result = FlowgateGuard.replayable(call).proceed();
      return result == null ? Mono.empty() : (Publisher<?>) result;
    } catch (Throwable t) {
      return Mono.error(t);
    }
  }
}
