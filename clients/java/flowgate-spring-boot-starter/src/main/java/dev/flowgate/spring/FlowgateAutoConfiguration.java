package dev.flowgate.spring;

import dev.flowgate.client.FlowgateClient;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.ssl.SslBundles;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Role;
import org.springframework.core.env.Environment;

/**
 * Flowgate in a Spring Boot application: a {@link FlowgateClient} from the {@code flowgate.*}
 * properties (unless the application declares its own), the {@link RateLimited} and {@link
 * FlowgateBreaker} support, and its metrics. The web answers and the health indicator are in
 * their own auto-configurations ({@link FlowgateWebAutoConfiguration}, {@link
 * FlowgateHealthAutoConfiguration}). The {@link FlowgateWorker} methods' workers are run by the
 * {@link QueueWorkers} bean (unless {@code flowgate.worker.enabled=false}).
 */
@AutoConfiguration
@EnableConfigurationProperties(FlowgateProperties.class)
public class FlowgateAutoConfiguration {

  /**
   * The client: thread-safe, one for the application.
   *
   * @param properties the {@code flowgate.*} properties
   * @param bundles Spring Boot's SSL bundles, for {@code flowgate.tls.bundle}
   * @return the client
   */
  @Bean
  @ConditionalOnMissingBean
  public FlowgateClient flowgateClient(
      FlowgateProperties properties, ObjectProvider<SslBundles> bundles) {
    return FlowgateClients.build(properties, bundles.getIfAvailable());
  }

  /**
   * The exceptions of refused calls: the starter's own unless the application declares its own.
   *
   * @return the rejections
   */
  @Bean
  @ConditionalOnMissingBean
  public FlowgateRejections flowgateRejections() {
    return new FlowgateRejections() {};
  }

  /**
   * Runs the annotated calls.
   *
   * @param client the client
   * @param rejections the exceptions of refused calls
   * @param metrics where calls are counted (none without Micrometer)
   * @param properties the failure mode
   * @param beanFactory for {@code @bean} references in SpEL
   * @return the guard
   */
  @Bean
  @ConditionalOnMissingBean
  public FlowgateGuard flowgateGuard(
      FlowgateClient client,
      FlowgateRejections rejections,
      ObjectProvider<FlowgateMetrics> metrics,
      FlowgateProperties properties,
      BeanFactory beanFactory) {
    return new FlowgateGuard(
        client,
        rejections,
        metrics.getIfAvailable(() -> FlowgateMetrics.NONE),
        properties.isFailOpen(),
        beanFactory);
  }

  /**
   * Proxies the beans with annotated methods.
   *
   * @return the post-processor
   */
  @Bean
  @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
  @ConditionalOnMissingBean
  public static FlowgateAnnotationPostProcessor flowgateAnnotationPostProcessor() {
    return new FlowgateAnnotationPostProcessor();
  }

  /**
   * The workers of the {@link FlowgateWorker} methods, started and stopped with the context.
   *
   * @param beanFactory where the annotated beans are found
   * @param client the client
   * @param environment resolves placeholders in the annotations
   * @param meters where the workers' counts are published
   * @param properties the shutdown grace
   * @return the workers' lifecycle
   */
  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnBooleanProperty(name = "flowgate.worker.enabled", matchIfMissing = true)
  public QueueWorkers flowgateQueueWorkers(
      BeanFactory beanFactory,
      FlowgateClient client,
      Environment environment,
      ObjectProvider<WorkerMeters> meters,
      FlowgateProperties properties) {
    return new QueueWorkers(
        (ConfigurableListableBeanFactory) beanFactory,
        client,
        environment,
        meters.getIfAvailable(() -> WorkerMeters.NONE),
        properties.getWorker().getShutdownGrace());
  }

  /** The meters, when Micrometer is on the class path. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(MeterRegistry.class)
  static class Metrics {
    /**
     * The starter's meters, registered in the application's registry (none: nothing counted).
     *
     * @param registry the registry
     * @return the metrics
     */
    @Bean
    @ConditionalOnMissingBean
    FlowgateMetrics flowgateMetrics(ObjectProvider<MeterRegistry> registry) {
      MeterRegistry r = registry.getIfAvailable();
      return r == null ? FlowgateMetrics.NONE : new MicrometerFlowgateMetrics(r);
    }

    /**
     * The workers' meters, registered in the application's registry (none: not published).
     *
     * @param registry the registry
     * @return the meters
     */
    @Bean
    @ConditionalOnMissingBean
    WorkerMeters flowgateWorkerMeters(ObjectProvider<MeterRegistry> registry) {
      MeterRegistry r = registry.getIfAvailable();
      return r == null ? WorkerMeters.NONE : new MicrometerWorkerMeters(r);
    }
  }
}
