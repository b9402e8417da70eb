package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.Signals;
import java.net.http.HttpClient;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link FlowgateClient#close}: idle connections closed at once, a call in flight finishes (its
 * connection closed after it), and a call made afterwards is refused.
 */
class CloseTest {
  @Test
  void closingEndsTheConnectionsAndRefusesNewCallsButLetsTheOnesInFlightFinish()
      throws Exception {
    try (FlowgateServer server = FlowgateServer.start(Http1WireTest.RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Http1Wire wire = Http1WireTest.wireOf(client);
      assertTrue(client.check(Http1WireTest.REQ).allowed()); // a pipelined connection
      assertTrue(client.checkAsync(Http1WireTest.REQ).get(30, TimeUnit.SECONDS).allowed());
      assertEquals(1, wire.idleCount(), "the async call's connection, pooled");

      long pid = server.handle().pid();
      CompletableFuture<Verdict> inFlight;
      Signals.stop(pid);
      try {
        inFlight = client.checkAsync(Http1WireTest.REQ);
        Await.until(Duration.ofSeconds(20), "the call is sent", () -> wire.idleCount() == 0);
        client.close();
        client.close(); // idempotent
        assertEquals(0, wire.pipelineCount(), "the pipelined connection closed");
      } finally {
        Signals.cont(pid);
      }
      assertTrue(inFlight.get(30, TimeUnit.SECONDS).allowed(), "the call in flight finished");
      assertEquals(0, wire.idleCount(), "its connection closed, not pooled");

      IllegalStateException refused =
          assertThrows(IllegalStateException.class, () -> client.check(Http1WireTest.REQ));
      assertTrue(refused.getMessage().contains("closed"), refused.getMessage());
      assertThrows(IllegalStateException.class, client::stats);
    }
  }

  @Test
  void anHttp2ClientClosesToo() {
    try (FlowgateServer server = FlowgateServer.start(Http1WireTest.RULES)) {
      FlowgateClient client =
          FlowgateClient.builder(server.baseUrl()).httpVersion(HttpClient.Version.HTTP_2).build();
      assertTrue(client.check(Http1WireTest.REQ).allowed());
      client.close();
      assertThrows(IllegalStateException.class, () -> client.check(Http1WireTest.REQ));
    }
  }
}
