package dev.flowgate.spring;

import org.aopalliance.intercept.MethodInterceptor;
import org.springframework.aop.Pointcut;
import org.springframework.aop.support.ComposablePointcut;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.aop.framework.autoproxy.AbstractBeanFactoryAwareAdvisingPostProcessor;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Proxies the beans that have {@link RateLimited} or {@link FlowgateBreaker} methods (on the
 * class or an interface it implements), as Spring's own {@code @Async} and {@code @Validated}
 * support does: no AspectJ needed. The proxy subclasses the bean's class (as Spring Boot's AOP
 * does by default), and its advice comes before advisors the bean had already (a refused call
 * opens no transaction). The {@link FlowgateGuard} bean is looked up at the first call, so that
 * proxying creates no bean early; the annotations themselves are parsed when the bean is
 * proxied, so that a bad descriptor fails the application's start, naming its method.
 */
public class FlowgateAnnotationPostProcessor extends AbstractBeanFactoryAwareAdvisingPostProcessor {
  private static final long serialVersionUID = 1L;

  /** A post-processor whose proxies subclass the bean's class, before existing advisors. */
  public FlowgateAnnotationPostProcessor() {
    setProxyTargetClass(true);
    setBeforeExistingAdvisors(true);
  }

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    super.setBeanFactory(beanFactory);
    Pointcut pointcut =
        new ComposablePointcut(new AnnotationMatchingPointcut(null, RateLimited.class, true))
            .union(new AnnotationMatchingPointcut(null, FlowgateBreaker.class, true));
    this.advisor = new DefaultPointcutAdvisor(pointcut, interceptor(beanFactory));
  }

  @Override
  public Object postProcessAfterInitialization(Object bean, String beanName) {
    Object processed = super.postProcessAfterInitialization(bean, beanName);
    if (processed != bean) {
      ReflectionUtils.doWithMethods(
          AopUtils.getTargetClass(bean),
          MethodSpec::of,
          m ->
              AnnotatedElementUtils.hasAnnotation(m, RateLimited.class)
                  || AnnotatedElementUtils.hasAnnotation(m, FlowgateBreaker.class));
    }
    return processed;
  }

  private static MethodInterceptor interceptor(BeanFactory beanFactory) {
    return new MethodInterceptor() {
      private volatile FlowgateGuard guard;

      @Override
      public Object invoke(org.aopalliance.intercept.MethodInvocation invocation)
          throws Throwable {
        FlowgateGuard g = guard;
        if (g == null) {
          g = beanFactory.getBean(FlowgateGuard.class);
          guard = g;
        }
        return g.invoke(invocation);
      }
    };
  }
}
