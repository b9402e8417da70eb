package dev.flowgate.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.FlowgateClient;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.MapPropertySource;
import org.springframework.expression.spel.support.StandardEvaluationContext;

/** The auto-configuration's beans and errors, the descriptors' templates, the metadata. */
class AutoConfigurationTest {
  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(FlowgateAutoConfiguration.class));

  @Test
  void theClientComesFromTheProperties() {
    runner
        .withPropertyValues(
            "flowgate.base-url=http://127.0.0.1:9", "flowgate.token=" + "t".repeat(32),
            "flowgate.request-timeout=3s", "flowgate.pipelining=1")
        .run(
            context -> {
              assertThat(context).hasSingleBean(FlowgateClient.class);
              assertThat(context).hasSingleBean(FlowgateGuard.class);
              assertThat(context).hasSingleBean(FlowgateRejections.class);
              assertEquals(
                  3, context.getBean(FlowgateProperties.class).getRequestTimeout().getSeconds());
              assertEquals(1, context.getBean(FlowgateProperties.class).getPipelining());
            });
  }

  @Test
  void aPipeliningBelowOneFailsTheStartNamingIt() {
    runner
        .withPropertyValues("flowgate.base-url=http://127.0.0.1:9", "flowgate.pipelining=0")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure()).rootCause().hasMessageContaining("pipelining");
            });
  }

  /** An environment variable no test machine sets. */
  private static final String UNSET = "FLOWGATE_TEST_TOKEN_NEVER_SET";

  @Test
  void aTokenLeftAsAnUnresolvedPlaceholderFailsTheStartNamingIt() {
    runner
        .withPropertyValues("flowgate.token=${" + UNSET + "}")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(messages(context.getStartupFailure()))
                  .contains("flowgate.token holds an unresolved placeholder ${" + UNSET + "}")
                  .contains("${" + UNSET + ":} for no token");
            });
    // The placeholder is named; the rest of the token is not.
    runner
        .withPropertyValues("flowgate.token=secret-part-0123456789abcdefghijkl${" + UNSET + "}")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(messages(context.getStartupFailure()))
                  .contains("${" + UNSET + "}")
                  .doesNotContain("secret-part");
            });
  }

  @Test
  void aPlaceholderWithAnEmptyDefaultIsNoToken() {
    runner
        .withPropertyValues("flowgate.token=${" + UNSET + ":}")
        .run(context -> assertThat(context).hasSingleBean(FlowgateClient.class));
  }

  @Test
  void aTokenAHeaderCannotCarryFailsTheStartWithoutShowingIt() {
    String secret = "secret-part-0123456789abcdefghijklmnop";
    for (String token :
        new String[] {secret + "\n", secret + " x", "x\t" + secret, secret + "\u00e9"}) {
      // As an environment variable gives it: withPropertyValues would trim the value.
      runner
          .withInitializer(
              context ->
                  context
                      .getEnvironment()
                      .getPropertySources()
                      .addFirst(new MapPropertySource("token", Map.of("flowgate.token", token))))
          .run(
              context -> {
                assertThat(context).hasFailed();
                assertThat(messages(context.getStartupFailure()))
                    .contains("flowgate.token holds")
                    .doesNotContain("secret-part");
              });
    }
  }

  /** The messages of an exception and its causes, a line each. */
  private static String messages(Throwable t) {
    StringBuilder messages = new StringBuilder();
    for (; t != null; t = t.getCause()) {
      messages.append(t.getMessage()).append('\n');
    }
    return messages.toString();
  }

  @Configuration(proxyBeanMethods = false)
  static class OwnClient {
    static final FlowgateClient CLIENT = FlowgateClient.builder("http://127.0.0.1:9").build();

    @Bean
    FlowgateClient myClient() {
      return CLIENT;
    }
  }

  @Test
  void anApplicationsOwnClientWins() {
    runner
        .withUserConfiguration(OwnClient.class)
        .run(context -> assertThat(context.getBean(FlowgateClient.class)).isSameAs(OwnClient.CLIENT));
  }

  @Test
  void aTrustStoreThatCannotBeReadNamesItsProperty() {
    runner
        .withPropertyValues("flowgate.tls.trust-store=file:/nonexistent/ca.p12")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining("/nonexistent/ca.p12");
              Throwable t = context.getStartupFailure();
              boolean named = false;
              for (; t != null; t = t.getCause()) {
                named |= String.valueOf(t.getMessage()).contains("flowgate.tls.trust-store");
              }
              assertTrue(named, "the property is named");
            });
  }

  /** A bean whose annotation is wrong. */
  public static class BadAnnotation {
    @RateLimited(domain = "payments", descriptors = "=#{#x}")
    public String call(String x) {
      return x;
    }
  }

  @Test
  void aBadDescriptorFailsTheStartNamingTheMethod() {
    runner
        .withBean(BadAnnotation.class)
        .run(
            context -> {
              assertThat(context).hasFailed();
              Throwable t = context.getStartupFailure();
              StringBuilder messages = new StringBuilder();
              for (; t != null; t = t.getCause()) {
                messages.append(t.getMessage()).append('\n');
              }
              assertThat(messages.toString())
                  .contains("BadAnnotation.call")
                  .contains("literal key");
            });
  }

  /** The exceptions of an application's own API. */
  static class Rejections implements FlowgateRejections {
    @Override
    public RuntimeException unavailable(Refusal refusal) {
      return new UnsupportedOperationException("ours: " + refusal.domain());
    }
  }

  /** A guarded bean that fails closed. */
  public static class Closed {
    @RateLimited(
        domain = "payments",
        descriptors = "channel=#{#c}",
        onUnavailable = Unavailable.REJECT)
    public String call(String c) {
      return c;
    }
  }

  @Test
  void anApplicationsOwnRejectionsAreThrown() {
    runner
        .withPropertyValues("flowgate.base-url=http://127.0.0.1:9", "flowgate.connect-timeout=2s")
        .withBean(Rejections.class)
        .withBean(Closed.class)
        .run(
            context -> {
              UnsupportedOperationException e =
                  assertThrows(
                      UnsupportedOperationException.class,
                      () -> context.getBean(Closed.class).call("x"));
              assertEquals("ours: payments", e.getMessage());
            });
  }

  @Test
  void valuesWithCommasAndEqualsSignsKeepTheDescriptorsShape() {
    StandardEvaluationContext context = new StandardEvaluationContext();
    context.setVariable("p", "a,b=c");
    Descriptor d = DescriptorTemplate.parse("biz=PAY, channel=#{#p}, kind=#{#p.length()}").evaluate(context);
    assertEquals(
        Descriptor.of("biz", "PAY", "channel", "a,b=c", "kind", "5"), d);
    assertEquals(Descriptor.of("route", ""), DescriptorTemplate.parse("route").evaluate(context));
    assertThrows(
        IllegalArgumentException.class,
        () -> DescriptorTemplate.parse("channel=#{#missing}").evaluate(context));
  }

  @Test
  void theRetryAfterIsRoundedUpToWholeSeconds() {
    assertEquals(1, FlowgateRefusedException.seconds(java.time.Duration.ofMillis(1)));
    assertEquals(1, FlowgateRefusedException.seconds(java.time.Duration.ofSeconds(1)));
    assertEquals(2, FlowgateRefusedException.seconds(java.time.Duration.ofMillis(1001)));
    assertEquals(1, FlowgateRefusedException.seconds(java.time.Duration.ZERO));
  }

  @Test
  void thePropertiesHaveMetadata() throws Exception {
    try (InputStream in =
        getClass().getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
      String json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
      assertThat(json)
          .contains("\"flowgate.base-url\"")
          .contains("\"flowgate.fail-open\"")
          .contains("\"flowgate.tls.trust-store\"")
          .contains("\"flowgate.web.problem-details\"")
          .contains("\"management.health.flowgate.enabled\"")
          .contains("Whether a guarded call goes ahead when Flowgate cannot answer");
    }
  }
}
