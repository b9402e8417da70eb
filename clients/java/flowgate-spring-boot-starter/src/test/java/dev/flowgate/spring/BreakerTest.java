package dev.flowgate.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.flowgate.client.CircuitOpenException;
import dev.flowgate.client.Descriptor;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.Request;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.concurrent.CompletionException;
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
 * {@code @FlowgateBreaker} against the real server's breaker ({@code error_count} 3): the
 * method's outcomes reported from its result open it, ignored exceptions do not count, and an
 * open breaker refuses the next call (503 with {@code Retry-After}) and a real acquire alike.
 * Also {@code @RateLimited}'s wait for a {@code delay} rule's slot.
 */
@SpringBootTest(
    classes = BreakerTest.App.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = "spring.main.web-application-type=servlet")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BreakerTest {
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

    @GetMapping("/charge")
    String charge(@RequestParam String bank, @RequestParam String outcome) {
      return this.bank.charge(bank, outcome);
    }
  }

  @DynamicPropertySource
  static void flowgate(DynamicPropertyRegistry registry) {
    registry.add("flowgate.base-url", () -> SharedServer.get().baseUrl());
  }

  @LocalServerPort int port;
  @Autowired Bank bank;
  @Autowired FlowgateClient client;
  @Autowired MeterRegistry meters;

  @Test
  void failuresReportedFromTheMethodOpenTheBreaker() {
    Request b1 = Request.of("downstream", Descriptor.of("bank", "B1")).withCost(0);
    double ok = reports("ok");
    double errors = reports("error");
    double refusals = circuitOpen();
    assertEquals(200, Http.get(port, "/charge?bank=B1&outcome=ok").statusCode());
    assertEquals(200, Http.get(port, "/charge?bank=B1&outcome=ok").statusCode());
    // The caller's mistakes are no evidence against the bank: not reported.
    for (int i = 0; i < 4; i++) {
      assertThrows(IllegalArgumentException.class, () -> bank.charge("B1", "bad-input"));
    }
    assertTrue(client.check(b1).allowed(), "ignored exceptions opened the breaker");
    // Two failures: still closed (the threshold is 3).
    for (int i = 0; i < 2; i++) {
      assertEquals(500, Http.get(port, "/charge?bank=B1&outcome=fail").statusCode());
    }
    assertTrue(client.check(b1).allowed(), "opened before its threshold");
    assertEquals(500, Http.get(port, "/charge?bank=B1&outcome=fail").statusCode());

    // Open: a real acquire is refused with circuit_open, and so is the guarded call.
    CircuitOpenException open = assertThrows(CircuitOpenException.class, () -> client.acquire(b1));
    assertTrue(open.breaker().orElseThrow().key().contains("bank=B1"), open.getMessage());
    HttpResponse<String> refused = Http.get(port, "/charge?bank=B1&outcome=ok");
    assertEquals(503, refused.statusCode(), refused.body());
    long retry = Long.parseLong(refused.headers().firstValue("retry-after").orElseThrow());
    assertTrue(retry >= 1 && retry <= 60, "Retry-After " + retry);
    JsonNode problem = Http.json(refused);
    assertEquals("circuit_open", problem.path("code").asText());
    assertEquals("downstream", problem.path("domain").asText());

    // Another bank has a breaker instance of its own.
    assertEquals(200, Http.get(port, "/charge?bank=B2&outcome=ok").statusCode());

    assertEquals(ok + 3, reports("ok"), "two successes of B1 and one of B2");
    assertEquals(errors + 3, reports("error"), "three failures, the ignored ones left out");
    assertEquals(refusals + 1, circuitOpen());
  }

  @Test
  void aCompletionStagesFailureIsReportedWhenItCompletes() {
    Request b3 = Request.of("downstream", Descriptor.of("bank", "B3")).withCost(0);
    assertEquals("charged at B3", bank.chargeAsync("B3", false).join());
    for (int i = 0; i < 3; i++) {
      CompletionException e =
          assertThrows(CompletionException.class, () -> bank.chargeAsync("B3", true).join());
      assertTrue(e.getCause() instanceof IllegalStateException, e.toString());
    }
    assertThrows(CircuitOpenException.class, () -> client.acquire(b3));
    CompletionException refused =
        assertThrows(CompletionException.class, () -> bank.chargeAsync("B3", false).join());
    assertTrue(refused.getCause() instanceof FlowgateCircuitOpenException, refused.toString());
  }

  @Test
  void bothAnnotationsOnOneRequestShareOneAcquireThatReports() {
    Request b4 = Request.of("downstream", Descriptor.of("bank", "B4")).withCost(0);
    double ok = reports("ok");
    assertEquals("charged at B4", bank.chargeBoth("B4", false));
    assertEquals(ok + 1, reports("ok"));
    for (int i = 0; i < 3; i++) {
      assertThrows(IllegalStateException.class, () -> bank.chargeBoth("B4", true));
    }
    assertThrows(CircuitOpenException.class, () -> client.acquire(b4));
    assertThrows(FlowgateCircuitOpenException.class, () -> bank.chargeBoth("B4", false));
  }

  @Test
  void aMonosErrorIsReportedAndAFluxIsLimited() {
    Request b5 = Request.of("downstream", Descriptor.of("bank", "B5")).withCost(0);
    assertEquals("charged at B5", bank.chargeReactive("B5", false).block());
    for (int i = 0; i < 3; i++) {
      assertThrows(IllegalStateException.class, () -> bank.chargeReactive("B5", true).block());
    }
    assertThrows(CircuitOpenException.class, () -> client.acquire(b5));
    assertThrows(FlowgateCircuitOpenException.class, () -> bank.chargeReactive("B5", false).block());

    // A Flux: each subscription asks once (the channel's limit is 2).
    assertEquals(List.of("a", "b", "c"), bank.statements("flux-statements").collectList().block());
    assertEquals(List.of("a", "b", "c"), bank.statements("flux-statements").collectList().block());
    assertThrows(
        FlowgateRateLimitedException.class,
        () -> bank.statements("flux-statements").collectList().block());
  }

  @Test
  void aDelayRulesSlotIsWaitedFor() {
    // 1/s in delay mode: the second call, asked at once, is given the next slot, a second after
    // the first (less the time the first call took), and waits for it.
    long first = bank.spaced("q1");
    long second = bank.spaced("q1");
    long spacedMs = (second - first) / 1_000_000;
    assertTrue(spacedMs >= 700, "the second call ran " + spacedMs + " ms after the first");
    var waits = meters.get("flowgate.client.waits").tag("domain", "spaced").timer();
    assertEquals(1, waits.count(), "the wait was counted");
    assertTrue(waits.totalTime(TimeUnit.MILLISECONDS) >= 500, waits.totalTime(TimeUnit.MILLISECONDS) + " ms");
  }

  private double reports(String outcome) {
    var c =
        meters.find("flowgate.client.reports").tag("domain", "downstream").tag("outcome", outcome)
            .counter();
    return c == null ? 0 : c.count();
  }

  private double circuitOpen() {
    var c =
        meters.find("flowgate.client.rejections").tag("domain", "downstream")
            .tag("reason", "circuit_open").counter();
    return c == null ? 0 : c.count();
  }
}
