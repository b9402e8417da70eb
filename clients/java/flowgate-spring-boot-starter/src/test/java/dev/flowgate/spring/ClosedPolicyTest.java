package dev.flowgate.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.RedisServer;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A {@code @RateLimited} call on a rule whose failure policy is {@code closed}, against a real
 * server on a real Redis that is then stopped: the refusal is answered 429 with the code {@code
 * store_unavailable}, not {@code over_limit}, and counted as failed closed. (The application is
 * {@link MvcRateLimitTest}'s.)
 */
@SpringBootTest(
    classes = MvcRateLimitTest.App.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = "spring.main.web-application-type=servlet")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ClosedPolicyTest {
  static final String RULES =
      """
      [[rule]]
      domain = "payments"
      name = "per-channel"
      match = "channel"
      limit = "100/s"
      failure = "closed"
      """;

  static final RedisServer REDIS = RedisServer.start();
  // A deadline a busy machine meets while Redis runs (once stopped, it refuses at once).
  static final FlowgateServer SERVER =
      FlowgateServer.start(RULES, "--redis-url", REDIS.url(), "--redis-deadline", "2s");

  @DynamicPropertySource
  static void flowgate(DynamicPropertyRegistry registry) {
    registry.add("flowgate.base-url", SERVER::baseUrl);
  }

  @AfterAll
  static void stop() {
    SERVER.close();
    REDIS.close();
  }

  @LocalServerPort int port;
  @Autowired MeterRegistry meters;

  @Test
  void aClosedPolicysRefusalIsStoreUnavailableAndFailedClosed() {
    assertEquals(200, Http.get(port, "/pay?channel=closed-WPG").statusCode());
    REDIS.stop();
    HttpResponse<String> refused = Http.get(port, "/pay?channel=closed-WPG");
    assertEquals(429, refused.statusCode(), refused.body());
    JsonNode problem = Http.json(refused);
    assertEquals("store_unavailable", problem.path("code").asText(), problem.toString());
    assertEquals(1.0, count("flowgate.client.calls", "outcome", "failed_closed"));
    assertEquals(0.0, count("flowgate.client.calls", "outcome", "over_limit"));
    assertEquals(1.0, count("flowgate.client.rejections", "reason", "unavailable"));
  }

  private double count(String name, String tag, String value) {
    Counter c = meters.find(name).tag("domain", "payments").tag(tag, value).counter();
    return c == null ? 0 : c.count();
  }
}
