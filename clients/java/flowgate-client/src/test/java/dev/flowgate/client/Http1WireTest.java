package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.Signals;
import java.net.http.HttpClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The client's HTTP/1.1 wire against the real server: reuse, idle closes, timeouts. */
class Http1WireTest {
  static final String RULES =
      """
      domain = "api"

      [[rule]]
      name = "per-user"
      match = "user"
      limit = "100000/1h"
      algorithm = "fixed_window"
      """;
  static final Request REQ = Request.of("api", Descriptor.of("user", "7"));

  static Http1Wire wireOf(FlowgateClient client) {
    return assertInstanceOf(Http1Wire.class, client.transport().wire());
  }

  @Test
  void httpOneIsTheDefaultAndHttpTwoTheJdks() {
    assertInstanceOf(
        Http1Wire.class, FlowgateClient.builder("http://127.0.0.1:1").build().transport().wire());
    assertInstanceOf(
        JdkWire.class,
        FlowgateClient.builder("http://127.0.0.1:1")
            .httpVersion(HttpClient.Version.HTTP_2)
            .build()
            .transport()
            .wire());
  }

  @Test
  void oneConnectionCarriesSequentialCallsAndThePoolGrowsToTheCallsAtOnce() throws Exception {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      // The pool's connections (blocking checks pipelined by default: Http1PipelineTest).
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).pipelining(1).build();
      Http1Wire wire = wireOf(client);
      for (int i = 0; i < 50; i++) {
        assertTrue(client.check(REQ).allowed());
        assertTrue(client.checkAsync(REQ).get(30, TimeUnit.SECONDS).allowed());
      }
      client.stats(); // a GET
      assertEquals(1, wire.opened(), "101 sequential calls on one kept-alive connection");
      // 8 threads at once: at most 8 connections, each reused.
      List<CompletableFuture<Verdict>> calls = new ArrayList<>();
      for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 8; i++) {
          calls.add(client.checkAsync(REQ));
        }
        for (CompletableFuture<Verdict> c : calls) {
          assertTrue(c.get(30, TimeUnit.SECONDS).allowed());
        }
        calls.clear();
      }
      assertTrue(wire.opened() <= 9, "opened " + wire.opened() + " for 8 calls at once");
      assertEquals(wire.opened(), wire.idleCount(), "every connection back in the pool");
    }
  }

  @Test
  void aConnectionTheServerClosedWhileIdleIsReplaced() {
    try (FlowgateServer server =
        FlowgateServer.builder().config(RULES).flags("--http-header-timeout", "1s").start()) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).pipelining(1).build();
      Http1Wire wire = wireOf(client);
      assertTrue(client.check(REQ).allowed());
      assertEquals(1, wire.idleCount());
      // The server closes a connection idle for its header timeout (1 s).
      Await.until(Duration.ofSeconds(20), "the server closed the idle connection",
          wire::idleClosedByServer);
      // A POST (not resent if it might have reached the server) still gets its answer.
      assertTrue(client.check(REQ).allowed());
      assertEquals(2, wire.opened());
      client.stats();
      assertEquals(2, wire.opened(), "the new connection is reused");
    }
  }

  @Test
  @Timeout(60) // a read that no deadline ends would otherwise hang the build
  void noAnswerWithinTheRequestTimeoutIsATimeout() throws Exception {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client =
          FlowgateClient.builder(server.baseUrl())
              .requestTimeout(Duration.ofMillis(300))
              .build();
      assertTrue(client.check(REQ).allowed());
      long pid = server.handle().pid();
      // The server stopped (SIGSTOP): the connection stays open, no answer comes.
      signal("STOP", pid);
      try {
        long start = System.nanoTime();
        ConnectionException e = assertThrows(ConnectionException.class, () -> client.check(REQ));
        assertTrue(e.isTimeout(), e.toString());
        assertEquals(0, e.status());
        ExecutionException async =
            assertThrows(
                ExecutionException.class, () -> client.checkAsync(REQ).get(30, TimeUnit.SECONDS));
        ConnectionException cause = assertInstanceOf(ConnectionException.class, async.getCause());
        assertTrue(cause.isTimeout(), cause.toString());
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms >= 600 && ms < 20_000, "two timeouts of 300 ms took " + ms + " ms");
        assertEquals(0, wireOf(client).idleCount(), "a connection that timed out is closed");
      } finally {
        signal("CONT", pid);
      }
      assertTrue(client.check(REQ).allowed(), "a new connection once the server runs again");
    }
  }

  static void signal(String name, long pid) {
    if (name.equals("STOP")) {
      Signals.stop(pid);
    } else {
      Signals.cont(pid);
    }
  }
}
