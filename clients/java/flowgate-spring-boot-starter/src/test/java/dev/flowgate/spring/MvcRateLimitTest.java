package dev.flowgate.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
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
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code @RateLimited} in a Spring MVC application on a real port, against the real server: the
 * limit's third call is answered 429 with {@code Retry-After} and a problem body, and counted.
 */
@SpringBootTest(
    classes = MvcRateLimitTest.App.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = "spring.main.web-application-type=servlet")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MvcRateLimitTest {
  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(Controller.class)
  static class App {
    @Bean
    Payments payments() {
      return new Payments();
    }

    @Bean
    MeterRegistry meterRegistry() {
      return new SimpleMeterRegistry();
    }
  }

  @RestController
  static class Controller {
    private final Payments payments;

    Controller(Payments payments) {
      this.payments = payments;
    }

    @GetMapping("/pay")
    Payments.Receipt pay(@RequestParam String channel) {
      return payments.pay(new Payments.Payment(channel, 10));
    }
  }

  @DynamicPropertySource
  static void flowgate(DynamicPropertyRegistry registry) {
    registry.add("flowgate.base-url", () -> SharedServer.get().baseUrl());
  }

  @LocalServerPort int port;
  @Autowired MeterRegistry meters;
  @Autowired Payments payments;

  @Test
  void theThirdCallIs429WithRetryAfterAndAProblem() {
    double allowed = count("allowed");
    double over = count("over_limit");
    int calls = payments.calls();

    for (int i = 0; i < 2; i++) {
      HttpResponse<String> ok = Http.get(port, "/pay?channel=mvc-WPG");
      assertEquals(200, ok.statusCode(), ok.body());
      assertEquals("mvc-WPG", Http.json(ok).path("channel").asText());
    }
    HttpResponse<String> refused = Http.get(port, "/pay?channel=mvc-WPG");
    assertEquals(429, refused.statusCode(), refused.body());
    long retry = Long.parseLong(refused.headers().firstValue("retry-after").orElseThrow());
    assertTrue(retry >= 1 && retry <= 60, "Retry-After " + retry);
    assertTrue(
        refused.headers().firstValue("content-type").orElseThrow().startsWith("application/problem+json"),
        refused.headers().toString());
    JsonNode problem = Http.json(refused);
    assertEquals(429, problem.path("status").asInt());
    assertEquals("over_limit", problem.path("code").asText());
    assertEquals("payments", problem.path("domain").asText());
    long retryMs = problem.path("retry_after_ms").asLong();
    assertTrue(retryMs > 0 && retryMs <= 60_000, problem.toString());
    assertEquals((retryMs + 999) / 1000, retry, "Retry-After is the seconds rounded up");
    assertTrue(problem.path("detail").asText().contains("per-channel"), problem.toString());
    assertEquals(calls + 2, payments.calls(), "the refused call never ran");

    // Another channel has a counter of its own: the descriptor came from the argument.
    assertEquals(200, Http.get(port, "/pay?channel=mvc-ALI").statusCode());

    assertEquals(allowed + 3, count("allowed"));
    assertEquals(over + 1, count("over_limit"));
    assertEquals(
        1.0,
        meters.get("flowgate.client.rejections").tag("domain", "payments")
            .tag("reason", "over_limit").counter().count());
  }

  private double count(String outcome) {
    var c =
        meters.find("flowgate.client.calls").tag("domain", "payments").tag("outcome", outcome)
            .counter();
    return c == null ? 0 : c.count();
  }
}
