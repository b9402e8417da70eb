package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.FlowgateServer;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code check} against a real server: admitted, then refused with its retry time. */
class CheckTest {
  static final String RULES =
      """
      domain = "api"

      [[rule]]
      name = "per-user"
      match = "user"
      limit = "2/1m"
      algorithm = "fixed_window"
      """;

  @Test
  void admittedThenRefusedWithRetryAfter() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Request req = Request.of("api", Descriptor.of("user", "7"));

      Verdict first = client.check(req);
      assertTrue(first.allowed());
      assertEquals(Code.OK, first.code());
      assertNull(first.reason());
      assertEquals("per-user", first.statuses().get(0).rule());
      assertEquals(2L, first.statuses().get(0).limit());
      assertEquals(1L, first.statuses().get(0).remaining());
      assertTrue(client.checkAsync(req).join().allowed());

      Verdict refused = client.check(req);
      assertFalse(refused.allowed());
      assertEquals(Code.OVER_LIMIT, refused.code());
      assertEquals(ErrorCode.OVER_LIMIT, refused.reason());
      Duration retry = refused.retryAfter().orElseThrow();
      assertTrue(retry.compareTo(Duration.ZERO) > 0 && retry.compareTo(Duration.ofMinutes(1)) <= 0,
          "retry after " + retry);
      OverLimitException e = assertThrows(OverLimitException.class, refused::orThrow);
      assertEquals(retry, e.retryAfter().orElseThrow());
      assertEquals(429, e.status());
      assertTrue(e.getMessage().contains("per-user"), e.getMessage());

      // Another user has a counter of its own.
      assertTrue(client.check(Request.of("api", Descriptor.of("user", "8"))).allowed());
    }
  }

  @Test
  void oneClientIsSharedByManyThreads() throws Exception {
    String rules =
        """
        domain = "api"

        [[rule]]
        name = "per-user"
        match = "user"
        limit = "100/1h"
        algorithm = "fixed_window"
        """;
    try (FlowgateServer server = FlowgateServer.start(rules)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Request req = Request.of("api", Descriptor.of("user", "7"));
      java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(8);
      try {
        List<java.util.concurrent.Future<Boolean>> calls = new java.util.ArrayList<>();
        for (int i = 0; i < 160; i++) {
          calls.add(pool.submit(() -> client.check(req).allowed()));
        }
        int allowed = 0;
        for (java.util.concurrent.Future<Boolean> call : calls) {
          allowed += call.get(60, java.util.concurrent.TimeUnit.SECONDS) ? 1 : 0;
        }
        assertEquals(100, allowed, "exactly the limit admitted, from 8 threads at once");
      } finally {
        pool.shutdownNow();
      }
    }
  }

  @Test
  void badRequestNamesTheField() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      // A cost whose descriptors match no rule.
      BadRequestException e =
          assertThrows(
              BadRequestException.class,
              () -> client.charge(Request.of("api", Descriptor.of("team", "7")), 5));
      assertEquals(ErrorCode.BAD_REQUEST, e.code());
      assertEquals(400, e.status());
      assertEquals("descriptors", e.field().orElseThrow(), e.detail());
      assertTrue(e.getMessage().contains("match no rule"), e.getMessage());
      // A detail that names no field the usual way.
      BadRequestException domain =
          assertThrows(
              BadRequestException.class,
              () -> client.check(Request.of("x".repeat(2000), Descriptor.of("user", "7"))));
      assertTrue(domain.field().isEmpty(), domain.detail());
    }
  }

  @Test
  void anUnreachableServerIsAConnectionException() {
    String url;
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      url = server.baseUrl();
    }
    FlowgateClient client = FlowgateClient.builder(url).build();
    ConnectionException e =
        assertThrows(
            ConnectionException.class,
            () -> client.check(Request.of("api", Descriptor.of("user", "7"))));
    assertFalse(e.isTimeout());
    assertEquals(0, e.status());
  }
}
