package dev.flowgate.client.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.BadRequestException;
import dev.flowgate.client.Code;
import dev.flowgate.client.ConnectionException;
import dev.flowgate.client.Descriptor;
import dev.flowgate.client.DescriptorStatus;
import dev.flowgate.client.ErrorCode;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.OverLimitException;
import dev.flowgate.client.Report;
import dev.flowgate.client.ReportAnswer;
import dev.flowgate.client.Request;
import dev.flowgate.client.RuleCharge;
import dev.flowgate.client.UnauthorizedException;
import dev.flowgate.client.Verdict;
import dev.flowgate.client.testing.FlowgateServer;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The gRPC client against a real server: its answers, the HTTP client's, its errors. */
class FlowgateGrpcClientTest {
  static final String DECIDE = "decide-token-0123456789abcdefghijklmnop";
  static final String REPORTER = "reporter-token-0123456789abcdefghijklmno";
  static final String RULES =
      """
      domain = "api"

      [[rule]]
      name = "per-user"
      match = "user"
      limit = "2/1m"
      algorithm = "fixed_window"

      [[rule]]
      name = "tokens"
      match = "api_key"
      limit = "100/1m"
      algorithm = "token_bucket"
      max_debt = 50
      charge = "report"
      """;

  static FlowgateServer server;
  static FlowgateGrpcClient grpc;

  @BeforeAll
  static void start() {
    server =
        FlowgateServer.builder()
            .config(RULES)
            .file("credentials", "app:decide:" + DECIDE + "\nops:reporter:" + REPORTER + "\n")
            .flags("--credentials-file", "{dir}/credentials")
            .start();
    grpc = FlowgateGrpcClient.builder(server.grpcAddr()).token(DECIDE).build();
  }

  @AfterAll
  static void stop() {
    if (grpc != null) {
      grpc.close();
    }
    if (server != null) {
      server.close();
    }
  }

  @Test
  void admittedThenRefusedWithRetryAfter() {
    Request req = Request.of("api", Descriptor.of("user", "7"));
    Verdict first = grpc.check(req);
    assertTrue(first.allowed());
    assertEquals(Code.OK, first.code());
    assertNull(first.reason());
    DescriptorStatus s = first.statuses().get(0);
    assertEquals("per-user", s.rule());
    assertEquals(2L, s.limit());
    assertEquals(1L, s.remaining());
    assertEquals("2/m", s.quota());
    assertTrue(grpc.checkAsync(req).join().allowed());

    Verdict refused = grpc.check(req);
    assertFalse(refused.allowed());
    assertEquals(Code.OVER_LIMIT, refused.code());
    assertEquals(ErrorCode.OVER_LIMIT, refused.reason());
    Duration retry = refused.retryAfter().orElseThrow();
    assertTrue(
        retry.compareTo(Duration.ZERO) > 0 && retry.compareTo(Duration.ofMinutes(1)) <= 0,
        "retry after " + retry);
    OverLimitException e = assertThrows(OverLimitException.class, refused::orThrow);
    assertEquals(retry, e.retryAfter().orElseThrow());
    assertTrue(e.getMessage().contains("per-user"), e.getMessage());
    assertFalse(grpc.checkAsync(req).join().allowed());
  }

  /** Two users of the same rule, one asked over HTTP and one over gRPC: the same answers. */
  @Test
  void theSameAnswerAsTheHttpClient() {
    FlowgateClient http = FlowgateClient.builder(server.baseUrl()).token(DECIDE).build();
    for (int i = 0; i < 3; i++) {
      Verdict overHttp =
          http.check(
              Request.of("api", Descriptor.of("user", "http"), Descriptor.of("other", "x")));
      Verdict overGrpc =
          grpc.check(
              Request.of("api", Descriptor.of("user", "grpc"), Descriptor.of("other", "x")));
      assertEquals(overHttp.allowed(), overGrpc.allowed(), "call " + i);
      assertEquals(overHttp.code(), overGrpc.code());
      assertEquals(overHttp.reason(), overGrpc.reason());
      assertEquals(overHttp.statuses().size(), overGrpc.statuses().size());
      for (int d = 0; d < overHttp.statuses().size(); d++) {
        DescriptorStatus h = overHttp.statuses().get(d);
        DescriptorStatus g = overGrpc.statuses().get(d);
        String at = "call " + i + ", descriptor " + d;
        assertEquals(h.code(), g.code(), at);
        assertEquals(h.rule(), g.rule(), at);
        assertEquals(h.limit(), g.limit(), at);
        assertEquals(h.remaining(), g.remaining(), at);
        assertEquals(h.quota(), g.quota(), at);
        assertEquals(h.overLimit(), g.overLimit(), at);
        assertEquals(h.retryAfterMs() == null, g.retryAfterMs() == null, at);
      }
      // The windows are the same minute's unless a minute began between the two calls.
      assertEquals(overHttp.retryAfter().isPresent(), overGrpc.retryAfter().isPresent());
      overHttp
          .retryAfter()
          .ifPresent(
              h -> {
                long apart = Math.abs(h.toMillis() - overGrpc.retryAfter().get().toMillis());
                assertTrue(apart < 5_000 || apart > 55_000, h + " against " + overGrpc.retryAfter());
              });
    }
  }

  @Test
  void aCostOfZeroOnlyLooks() {
    Request req = Request.of("api", Descriptor.of("user", "look"));
    for (int i = 0; i < 3; i++) {
      Verdict v = grpc.check(req.withCost(0));
      assertTrue(v.allowed());
      assertEquals(2L, v.statuses().get(0).remaining());
    }
    assertEquals(1L, grpc.check(req).statuses().get(0).remaining());
  }

  @Test
  void aWrongTokenIsRefused() {
    Request req = Request.of("api", Descriptor.of("user", "9"));
    try (FlowgateGrpcClient wrong =
            FlowgateGrpcClient.builder(server.grpcAddr())
                .token("wrong-token-0123456789abcdefghijklmnopq")
                .build();
        FlowgateGrpcClient none = FlowgateGrpcClient.builder(server.grpcAddr()).build()) {
      UnauthorizedException e = assertThrows(UnauthorizedException.class, () -> wrong.check(req));
      assertEquals(401, e.status());
      assertEquals(ErrorCode.UNAUTHORIZED, e.code());
      CompletionException async =
          assertThrows(CompletionException.class, () -> none.checkAsync(req).join());
      assertTrue(async.getCause() instanceof UnauthorizedException, async.toString());
    }
  }

  @Test
  void chargesAndABadReport() {
    try (FlowgateGrpcClient reporter =
        FlowgateGrpcClient.builder(server.grpcAddr()).token(REPORTER).build()) {
      Request req = Request.of("api", Descriptor.of("api_key", "k1"));
      ReportAnswer answer = reporter.report(Report.charge(req, 120));
      List<RuleCharge> rules = answer.charges().get(0).rules();
      assertEquals(1, rules.size());
      RuleCharge c = rules.get(0);
      assertEquals("tokens", c.rule());
      assertEquals(120L, c.applied());
      assertEquals(20L, c.debt());
      assertTrue(c.over());
      assertTrue(c.retryAfter().isPresent());
      // The same charge over HTTP, to another key of the rule: the same answer.
      FlowgateClient http = FlowgateClient.builder(server.baseUrl()).token(REPORTER).build();
      RuleCharge h = http.charge(Request.of("api", Descriptor.of("api_key", "k2")), 120).get(0);
      assertEquals(h.domain(), c.domain());
      assertEquals(h.rule(), c.rule());
      assertEquals(h.key() == null ? null : h.key().replace("k2", "k1"), c.key());
      assertEquals(h.descriptor(), c.descriptor());
      assertEquals(h.kind(), c.kind());
      assertEquals(h.released(), c.released());
      assertEquals(h.applied(), c.applied());
      assertEquals(h.dropped(), c.dropped());
      assertEquals(h.debt(), c.debt());
      assertEquals(h.over(), c.over());
      assertEquals(h.remaining(), c.remaining());
      assertEquals(h.retryAfterMs() == null, c.retryAfterMs() == null);
      // The key in debt: a check of it is refused.
      assertFalse(grpc.check(req.withCost(0)).allowed());

      RuleCharge back = reporter.reportAsync(List.of(Report.refund(req, 50))).join()
          .charges().get(0).rules().get(0);
      assertEquals(dev.flowgate.client.ChargeKind.REFUND, back.kind());

      BadRequestException bad =
          assertThrows(
              BadRequestException.class,
              () -> reporter.report(Report.outcome(req, true, Duration.ofDays(2))));
      assertEquals("reports[0].latency_ms", bad.field().orElseThrow(), bad.getMessage());
      // The decide credential cannot report.
      assertThrows(
          dev.flowgate.client.ForbiddenException.class,
          () -> grpc.report(Report.charge(req, 1)));
    }
  }

  @Test
  void noServerIsAConnectionException() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    try (FlowgateGrpcClient nowhere =
        FlowgateGrpcClient.builder("127.0.0.1:" + port).timeout(Duration.ofSeconds(5)).build()) {
      ConnectionException e =
          assertThrows(
              ConnectionException.class,
              () -> nowhere.check(Request.of("api", Descriptor.of("user", "1"))));
      assertEquals(0, e.status());
    }
  }
}
