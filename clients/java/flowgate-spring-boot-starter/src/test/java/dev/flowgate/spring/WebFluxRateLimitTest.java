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
import reactor.core.publisher.Mono;

/**
 * {@code @RateLimited} on a method returning {@code Mono}, in a WebFlux application on a real
 * port (Netty): asked without blocking when the answer is subscribed to; the third call is 429
 * with {@code Retry-After} and a problem body.
 */
@SpringBootTest(
    classes = WebFluxRateLimitTest.App.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = "spring.main.web-application-type=reactive")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WebFluxRateLimitTest {
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
    Mono<Payments.Receipt> pay(@RequestParam String channel) {
      return payments.payReactive(new Payments.Payment(channel, 10));
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
    int calls = payments.calls();
    double allowed = count("allowed");
    double over = count("over_limit");
    for (int i = 0; i < 2; i++) {
      HttpResponse<String> ok = Http.get(port, "/pay?channel=flux-WPG");
      assertEquals(200, ok.statusCode(), ok.body());
      assertEquals("flux-WPG", Http.json(ok).path("channel").asText());
    }
    HttpResponse<String> refused = Http.get(port, "/pay?channel=flux-WPG");
    assertEquals(429, refused.statusCode(), refused.body());
    long retry = Long.parseLong(refused.headers().firstValue("retry-after").orElseThrow());
    assertTrue(retry >= 1 && retry <= 60, "Retry-After " + retry);
    JsonNode problem = Http.json(refused);
    assertEquals("over_limit", problem.path("code").asText());
    assertEquals(429, problem.path("status").asInt());
    assertEquals((problem.path("retry_after_ms").asLong() + 999) / 1000, retry);
    assertEquals(calls + 2, payments.calls(), "the refused call never ran");
    assertEquals(200, Http.get(port, "/pay?channel=flux-ALI").statusCode());

    assertEquals(allowed + 3, count("allowed"));
    assertEquals(over + 1, count("over_limit"));
  }

  @Test
  void aMonoNeverSubscribedAsksNothing() {
    int calls = payments.calls();
    Mono<Payments.Receipt> unused = payments.payReactive(new Payments.Payment("flux-lazy", 1));
    assertEquals(calls, payments.calls());
    // The channel's limit (2) is untouched by the Mono never subscribed: both calls pass.
    for (int i = 0; i < 2; i++) {
      assertEquals(
          "flux-lazy", payments.payReactive(new Payments.Payment("flux-lazy", 1)).block().channel());
    }
    assertEquals(calls + 2, payments.calls());
    assertTrue(unused != null);
  }

  private double count(String outcome) {
    var c =
        meters.find("flowgate.client.calls").tag("domain", "payments").tag("outcome", outcome)
            .counter();
    return c == null ? 0 : c.count();
  }
}
