package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.FlowgateServer;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Charges, refunds, reservations and commits against a real server. */
class ChargesTest {
  static final String RULES =
      """
      domain = "llm"

      [[rule]]
      name = "tokens"
      match = "api_key"
      limit = "1000/1h"
      algorithm = "token_bucket"
      max_debt = 500
      """;

  static Request key(String k) {
    return Request.of("llm", Descriptor.of("api_key", k));
  }

  @Test
  void aChargePastTheLimitIsDebtUntilRefunded() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      List<RuleCharge> charged = client.charge(key("k1"), 1200);
      assertEquals(1, charged.size());
      RuleCharge c = charged.get(0);
      assertEquals("tokens", c.rule());
      assertEquals(ChargeKind.CHARGE, c.kind());
      assertEquals(1200, c.applied());
      assertEquals(0, c.dropped());
      assertEquals(200, c.debt());
      assertTrue(c.over());
      assertEquals(0, c.remaining());
      assertTrue(c.retryAfter().orElseThrow().compareTo(Duration.ZERO) > 0);

      // In debt: a check of cost 0 is refused too.
      Verdict refused = client.check(key("k1").withCost(0));
      assertFalse(refused.allowed());
      assertEquals(ErrorCode.OVER_LIMIT, refused.reason());

      // Past max_debt the rest is dropped, not refused.
      RuleCharge more = client.charge(key("k1"), 400).get(0);
      assertEquals(300, more.applied());
      assertEquals(100, more.dropped());
      assertEquals(500, more.debt());

      RuleCharge back = client.refundAsync(key("k1"), 700).join().get(0);
      assertEquals(ChargeKind.REFUND, back.kind());
      assertEquals(700, back.applied());
      assertFalse(back.over());
      assertNull(back.retryAfterMs());
      assertTrue(client.check(key("k1")).allowed());
    }
  }

  @Test
  void theFiguresShowTheDebtAndTheReservations() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      client.charge(key("k6"), 1300);
      client.reserve(key("k7"), 100, null);
      assertTrue(client.check(key("k7")).allowed());
      // The server reads its figures once a second.
      long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      Stats stats = client.stats();
      while (System.nanoTime() < deadline
          && (stats.reservations().isEmpty() || stats.rule("llm", "tokens").debt() == 0)) {
        try {
          Thread.sleep(50);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException(e);
        }
        stats = client.statsAsync().join();
      }
      Stats.RuleFigures tokens = stats.rule("llm", "tokens");
      // 300 past the limit, paid back at 1000 an hour since.
      assertTrue(tokens.debt() > 280 && tokens.debt() <= 300, tokens.toString());
      assertTrue(tokens.totals().admitted() >= 1, tokens.toString());
      assertEquals(1, stats.reservations().get(0).count());
      assertEquals(100, stats.reservations().get(0).units());
    }
  }

  @Test
  void aBatchOfReportsIsAnsweredPerReport() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      ReportAnswer answer =
          client.report(
              Report.outcome(key("k2"), true, Duration.ofMillis(812)).withCost(950),
              Report.charge(key("k3"), 40));
      assertEquals(1, answer.noBreaker());
      assertEquals(2, answer.charges().size());
      assertEquals(1, answer.charges().get(1).report());
      assertEquals(960, answer.charges().get(1).rules().get(0).remaining());
      assertEquals(50, answer.charges().get(0).rules().get(0).remaining());
      // One bad report refuses the batch, naming its field.
      BadRequestException bad =
          assertThrows(
              BadRequestException.class,
              () ->
                  client.report(
                      Report.charge(key("k2"), 10),
                      Report.charge(Request.of("llm", Descriptor.of("org", "acme")), 10)));
      assertTrue(bad.field().orElseThrow().contains("descriptors"), bad.detail());
      assertEquals(50, client.charge(key("k2"), 0).get(0).remaining());
    }
  }

  @Test
  void aReservationIsCommittedOnce() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Reservation r = client.reserve(key("k4"), 400, Duration.ofSeconds(30));
      assertTrue(r.allowed());
      assertNotNull(r.id());
      assertEquals(400, r.estimate());
      assertTrue(r.expiresAt().isPresent());
      assertEquals(600L, r.verdict().statuses().get(0).remaining());

      // Two more of 400 do not fit beside it.
      assertTrue(client.reserve(key("k4"), 400, null).allowed());
      Reservation refused = client.reserveAsync(key("k4"), 400, null).join();
      assertFalse(refused.allowed());
      assertNull(refused.id());
      assertTrue(refused.verdict().retryAfter().isPresent());

      CommitAnswer done = client.commit(r, 120);
      assertEquals(r.id(), done.id());
      assertFalse(done.expired());
      RuleCharge rule = done.rules().get(0);
      assertEquals("tokens", rule.rule());
      assertEquals(400, rule.released());
      assertEquals(120, rule.applied());
      assertFalse(rule.over());

      ConflictException again = assertThrows(ConflictException.class, () -> client.commit(r, 120));
      assertEquals(ErrorCode.ALREADY_COMMITTED, again.code());
      NotFoundException unknown =
          assertThrows(
              NotFoundException.class,
              () -> client.commit("00000000000000000000000000000000", 1));
      assertEquals(ErrorCode.UNKNOWN_RESERVATION, unknown.code());
      BadRequestException tooBig =
          assertThrows(BadRequestException.class, () -> client.reserve(key("k5"), 900, null));
      assertTrue(tooBig.detail().contains("estimate"), tooBig.detail());
    }
  }
}
