package dev.flowgate.spring;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.http.ProblemDetail;

/**
 * Refused calls answered as problems in Spring MVC and WebFlux (annotated controllers): {@link
 * FlowgateProblemAdvice}. Off with {@code flowgate.web.problem-details=false}, for an application
 * that maps the exceptions itself.
 */
@AutoConfiguration(after = FlowgateAutoConfiguration.class)
@ConditionalOnWebApplication
@ConditionalOnClass(ProblemDetail.class)
@ConditionalOnProperty(
    name = "flowgate.web.problem-details",
    havingValue = "true",
    matchIfMissing = true)
public class FlowgateWebAutoConfiguration {
  /**
   * The advice.
   *
   * @return the advice
   */
  @Bean
  public FlowgateProblemAdvice flowgateProblemAdvice() {
    return new FlowgateProblemAdvice();
  }
}
