package dev.flowgate.spring;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.ssl.SslBundles;
import org.springframework.context.annotation.Bean;

/**
 * The {@code flowgate} health indicator ({@link FlowgateHealthIndicator}), with Spring Boot's
 * health support on the class path (the actuator); off with {@code
 * management.health.flowgate.enabled=false}.
 */
@AutoConfiguration(after = FlowgateAutoConfiguration.class)
@ConditionalOnClass(HealthIndicator.class)
@ConditionalOnEnabledHealthIndicator("flowgate")
public class FlowgateHealthAutoConfiguration {
  /**
   * The indicator: the server's {@code /readyz}.
   *
   * @param properties the server's address and TLS
   * @param bundles SSL bundles, for {@code flowgate.tls.bundle}
   * @return the indicator
   */
  @Bean
  @ConditionalOnMissingBean(name = "flowgateHealthIndicator")
  public FlowgateHealthIndicator flowgateHealthIndicator(
      FlowgateProperties properties, ObjectProvider<SslBundles> bundles) {
    return new FlowgateHealthIndicator(
        properties.getBaseUrl(),
        FlowgateClients.sslContext(properties.getTls(), bundles.getIfAvailable()),
        properties.getConnectTimeout(),
        properties.getRequestTimeout());
  }
}
