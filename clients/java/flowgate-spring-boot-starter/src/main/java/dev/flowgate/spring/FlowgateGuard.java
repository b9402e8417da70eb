package dev.flowgate.spring;

import dev.flowgate.client.AcquireOptions;
import dev.flowgate.client.CircuitOpenException;
import dev.flowgate.client.ConnectionException;
import dev.flowgate.client.ErrorCode;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.FlowgateException;
import dev.flowgate.client.OverLimitException;
import dev.flowgate.client.Permit;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import org.aopalliance.intercept.MethodInvocation;
import org.springframework.aop.ProxyMethodInvocation;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.context.expression.BeanFactoryResolver;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.util.ClassUtils;

/**
 * Runs the calls of {@link RateLimited} and {@link FlowgateBreaker} methods: evaluates their
 * descriptors, acquires, turns refusals into the {@link FlowgateRejections}' exceptions, applies
 * the failure mode, and reports or releases when the call ends. Blocking methods block for the
 * answer; {@code CompletionStage}, {@code Mono} and {@code Flux} methods are guarded without
 * blocking. Thread-safe.
 */
public final class FlowgateGuard {
  private static final System.Logger LOG = System.getLogger(FlowgateGuard.class.getName());
  private static final boolean REACTOR =
      ClassUtils.isPresent("reactor.core.publisher.Mono", FlowgateGuard.class.getClassLoader());

  private final FlowgateClient client;
  private final FlowgateRejections rejections;
  private final FlowgateMetrics metrics;
  private final boolean failOpen;
  private final BeanFactory beanFactory;
  private final ParameterNameDiscoverer names = new DefaultParameterNameDiscoverer();
  private final Map<Method, MethodSpec> specs = new ConcurrentHashMap<>();

  /**
   * @param client the client
   * @param rejections the exceptions of refused calls
   * @param metrics where calls are counted
   * @param failOpen whether a call goes ahead when Flowgate cannot answer, by default
   * @param beanFactory the beans SpEL names as {@code @name}, or null
   */
  public FlowgateGuard(
      FlowgateClient client,
      FlowgateRejections rejections,
      FlowgateMetrics metrics,
      boolean failOpen,
      BeanFactory beanFactory) {
    this.client = client;
    this.rejections = rejections;
    this.metrics = metrics;
    this.failOpen = failOpen;
    this.beanFactory = beanFactory;
  }

  /**
   * The guarded call.
   *
   * @param invocation the annotated method's invocation
   * @return its result (a {@code CompletionStage}, {@code Mono} or {@code Flux} guarded as it
   *     completes)
   * @throws Throwable what the method threw, or the refusal
   */
  Object invoke(MethodInvocation invocation) throws Throwable {
    Class<?> targetClass =
        invocation.getThis() == null ? null : AopUtils.getTargetClass(invocation.getThis());
    Method method = AopUtils.getMostSpecificMethod(invocation.getMethod(), targetClass);
    MethodSpec spec = specs.computeIfAbsent(method, MethodSpec::of);
    MethodBasedEvaluationContext context =
        new MethodBasedEvaluationContext(
            invocation.getThis(), method, invocation.getArguments(), names);
    if (beanFactory != null) {
      context.setBeanResolver(new BeanFactoryResolver(beanFactory));
    }
    List<MethodSpec.Step> steps = spec.steps(context);
    Class<?> returns = method.getReturnType();
    if (REACTOR && ReactiveCalls.handles(returns)) {
      return ReactiveCalls.guard(this, invocation, method, steps, returns);
    }
    if (CompletionStage.class.isAssignableFrom(returns)) {
      return guardStage(invocation, method, steps);
    }
    Admission admission = join(acquire(method, steps));
    admission.start();
    Object result;
    try {
      result = invocation.proceed();
    } catch (Throwable t) {
      join(admission.finish(t));
      throw t;
    }
    join(admission.finish(null));
    return result;
  }

  private CompletableFuture<Object> guardStage(
      MethodInvocation invocation, Method method, List<MethodSpec.Step> steps) {
    MethodInvocation call = replayable(invocation);
    return acquire(method, steps)
        .thenCompose(
            admission -> {
              admission.start();
              CompletionStage<?> stage;
              try {
                stage = (CompletionStage<?>) call.proceed();
              } catch (Throwable t) {
                return admission.finish(t).thenCompose(v -> CompletableFuture.failedFuture(t));
              }
              return stage
                  .handle(
                      (value, failure) -> {
                        Throwable cause = failure == null ? null : unwrap(failure);
                        return admission
                            .finish(cause)
                            .thenCompose(
                                v ->
                                    cause == null
                                        ? CompletableFuture.<Object>completedFuture(value)
                                        : CompletableFuture.<Object>failedFuture(cause));
                      })
                  .thenCompose(f -> f);
            });
  }

  /** An invocation that may proceed later, from another thread, or again (a resubscription). */
  static MethodInvocation replayable(MethodInvocation invocation) {
    return invocation instanceof ProxyMethodInvocation p ? p.invocableClone() : invocation;
  }

  /**
   * Acquires the steps in order; a refusal or failure releases what the earlier steps took.
   *
   * @return the admission, or completes exceptionally with the refusal's exception
   */
  CompletableFuture<Admission> acquire(Method method, List<MethodSpec.Step> steps) {
    CompletableFuture<Admission> chain = CompletableFuture.completedFuture(new Admission(metrics));
    for (MethodSpec.Step step : steps) {
      chain =
          chain.thenCompose(
              admission ->
                  acquireStep(method, step)
                      .handle(
                          (held, failure) -> {
                            if (failure != null) {
                              admission.release();
                              throw new CompletionException(unwrap(failure));
                            }
                            admission.add(held);
                            return admission;
                          }));
    }
    return chain;
  }

  private CompletableFuture<Admission.Held> acquireStep(Method method, MethodSpec.Step step) {
    String domain = step.request().domain();
    return client
        .acquireAsync(step.request(), AcquireOptions.waitOnClient())
        .handle(
            (permit, failure) -> {
              if (failure == null) {
                admitted(domain, permit);
                return new Admission.Held(step, permit);
              }
              Throwable cause = unwrap(failure);
              if (!(cause instanceof FlowgateException e)) {
                throw new CompletionException(cause);
              }
              Refusal refusal = new Refusal(method, step.request(), e);
              if (e instanceof CircuitOpenException) {
                metrics.call(domain, "circuit_open");
                throw new CompletionException(rejections.circuitOpen(refusal));
              }
              if (e instanceof OverLimitException) {
                // A rule's closed failure policy refused it: Flowgate's store failed, closed.
                boolean closedPolicy = e.code() == ErrorCode.STORE_UNAVAILABLE;
                metrics.call(domain, closedPolicy ? "failed_closed" : "over_limit");
                throw new CompletionException(rejections.overLimit(refusal));
              }
              if (!unavailable(e)) {
                metrics.error(domain, "request");
                throw new CompletionException(e);
              }
              metrics.error(domain, "unavailable");
              if (opens(step.unavailable())) {
                metrics.call(domain, "failed_open");
                LOG.log(
                    System.Logger.Level.WARNING,
                    "flowgate: cannot decide a call of " + method.getName() + " (domain " + domain
                        + "); it goes ahead unchecked (fail open): " + e.getMessage());
                return new Admission.Held(step, null);
              }
              metrics.call(domain, "failed_closed");
              throw new CompletionException(rejections.unavailable(refusal));
            });
  }

  private void admitted(String domain, Permit permit) {
    metrics.call(domain, "allowed");
    Duration wait = permit.verdict().waitTime();
    if (!wait.isZero()) {
      metrics.waited(domain, wait);
    }
  }

  private boolean opens(Unavailable mode) {
    return switch (mode) {
      case ALLOW -> true;
      case REJECT -> false;
      case DEFAULT -> failOpen;
    };
  }

  /** No answer, or a 5xx: the server cannot decide now (not a refusal, nor a bad request). */
  static boolean unavailable(FlowgateException e) {
    return e instanceof ConnectionException || e.status() >= 500;
  }

  /** The failure inside {@link CompletionException} and {@link ExecutionException} wrappers. */
  static Throwable unwrap(Throwable t) {
    while ((t instanceof CompletionException || t instanceof ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  /** Waits for {@code f}; throws its failure as it is. */
  static <T> T join(CompletableFuture<T> f) {
    try {
      return f.get();
    } catch (ExecutionException e) {
      Throwable cause = unwrap(e);
      if (cause instanceof RuntimeException r) {
        throw r;
      }
      if (cause instanceof Error err) {
        throw err;
      }
      throw new IllegalStateException(cause);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      f.cancel(true);
      throw new ConnectionException("interrupted while waiting for flowgate", false, e);
    }
  }
}
