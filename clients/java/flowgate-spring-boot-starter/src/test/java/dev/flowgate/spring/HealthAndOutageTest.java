package dev.flowgate.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.flowgate.client.ConnectionException;
import dev.flowgate.client.testing.FlowgateServer;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * The actuator's {@code flowgate} health over HTTP, UP with the server's readiness, then DOWN
 * once the server is stopped; and the failure modes while it is down: a call that fails open
 * runs (counted), one that fails closed is answered 503.
 */
@SpringBootTest(
    classes = HealthAndOutageTest.App.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = {
      "spring.main.web-application-type=servlet",
      "management.endpoint.health.show-details=always",
      "flowgate.connect-timeout=2s",
      "flowgate.request-timeout=2s"
    })
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HealthAndOutageTest {
  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(Controller.class)
  static class App {
    @Bean
    Bank bank() {
      return new Bank();
    }

    @Bean
    MeterRegistry meterRegistry() {
      return new SimpleMeterRegistry();
    }
  }

  @RestController
  static class Controller {
    private final Bank bank;

    Controller(Bank bank) {
      this.bank = bank;
    }

    @GetMapping("/closed")
    String closed() {
      return bank.failClosed("outage");
    }
  }

  /** This class's own server: the test stops it. */
  private static FlowgateServer server;

  @DynamicPropertySource
  static void flowgate(DynamicPropertyRegistry registry) {
    server = FlowgateServer.start(SharedServer.RULES);
    registry.add("flowgate.base-url", server::baseUrl);
  }

  @AfterAll
  static void stop() {
    if (server != null) {
      server.close();
    }
  }

  @LocalServerPort int port;
  @Autowired Bank bank;
  @Autowired MeterRegistry meters;

  @Test
  void upThenDownWhenTheServerStopsAndTheFailureModesApply() {
    HttpResponse<String> up = Http.get(port, "/actuator/health/flowgate");
    assertEquals(200, up.statusCode(), up.body());
    JsonNode health = Http.json(up);
    assertEquals("UP", health.path("status").asText(), up.body());
    assertEquals(200, health.path("details").path("status").asInt(), up.body());
    assertTrue(health.path("details").has("store"), up.body());
    assertEquals("ran", bank.failClosed("outage"));

    server.close();

    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    HttpResponse<String> down = Http.get(port, "/actuator/health/flowgate");
    while (down.statusCode() != 503 && System.nanoTime() < deadline) {
      down = Http.get(port, "/actuator/health/flowgate");
    }
    assertEquals(503, down.statusCode(), down.body());
    JsonNode downHealth = Http.json(down);
    assertEquals("DOWN", downHealth.path("status").asText(), down.body());
    assertTrue(downHealth.path("details").has("error"), down.body());
    assertTrue(downHealth.path("details").path("url").asText().endsWith("/readyz"), down.body());

    // Fail open (the default): the call runs, counted.
    assertEquals("ran", bank.failOpen("outage"));
    assertEquals(
        1.0,
        meters.get("flowgate.client.calls").tag("domain", "payments").tag("outcome", "failed_open")
            .counter().count());
    // Fail closed: refused with the unavailability, 503 over HTTP.
    FlowgateUnavailableException closed =
        assertThrows(FlowgateUnavailableException.class, () -> bank.failClosed("outage"));
    assertTrue(closed.getCause() instanceof ConnectionException, closed.toString());
    HttpResponse<String> refused = Http.get(port, "/closed");
    assertEquals(503, refused.statusCode(), refused.body());
    assertEquals("flowgate_unavailable", Http.json(refused).path("code").asText());
    assertEquals(
        2.0,
        meters.get("flowgate.client.rejections").tag("domain", "payments")
            .tag("reason", "unavailable").counter().count());
  }
}
