package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.RedisServer;
import dev.flowgate.client.testing.Signals;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * How many checks share a connection follows how long the server says its decisions take
 * ({@link AnswerPace}, {@code Server-Timing}), against the real server: the whole depth while
 * decisions fit the budget; on a real Redis that stops answering (each decision waits out the deadline), one
 * check per connection, so that none waits behind another's timeout; and the decisions' time
 * falls again once Redis answers.
 */
class PipelineDepthTest {
  static final String RULES =
      """
      domain = "api"

      [[rule]]
      name = "per-user"
      match = "user"
      limit = "1000000/1h"
      """;

  private static Request user(String id) {
    return Request.of("api", Descriptor.of("user", id));
  }

  /** A check whose answer may be the failure policy's or a store error: either is an answer. */
  private static void check(FlowgateClient client, String id) {
    try {
      client.check(user(id));
    } catch (StoreUnavailableException storeDown) {
      // answered: the store did not
    }
  }

  @Test
  void theDepthFollowsTheDecisionsTimeTheServerSends() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      // A budget wide enough for any build's decisions on the embedded store.
      FlowgateClient client =
          FlowgateClient.builder(server.baseUrl()).pipelineBudget(Duration.ofSeconds(1)).build();
      Http1Wire wire = Http1WireTest.wireOf(client);
      assertEquals(1, wire.pipelineDepth(), "one until a decision's time is known");
      check(client, "local");
      assertTrue(wire.decideNanos() > 0, "Server-Timing read");
      assertEquals(16, wire.pipelineDepth(), "decisions of " + wire.decideNanos() + " ns");
    }
  }

  @Test
  void aStoreThatStopsAnsweringLeavesEachCheckAConnectionOfItsOwn() throws Exception {
    int threads = 6;
    // Every decision waits for Redis up to the deadline (no fast failure while it is down).
    try (RedisServer redis = RedisServer.start();
        FlowgateServer server =
            FlowgateServer.start(
                RULES, "--redis-url", redis.url(), "--redis-deadline", "300ms",
                "--redis-down-after", "0")) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Http1Wire wire = Http1WireTest.wireOf(client);
      check(client, "warm");
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      try {
        Signals.stop(redis.pid());
        try {
          check(client, "slow"); // decided at the 300 ms deadline
          assertEquals(1, wire.pipelineDepth(), "decisions of " + wire.decideNanos() + " ns");
          List<Future<?>> held = new ArrayList<>();
          for (int t = 0; t < threads; t++) {
            String id = "held" + t;
            held.add(pool.submit(() -> check(client, id)));
          }
          Await.until(
              Duration.ofSeconds(20),
              () -> "every check in flight: " + wire.pipelinedInFlight(),
              () -> wire.pipelinedInFlight() == threads);
          assertTrue(
              wire.pipelineCount() >= threads,
              threads + " checks in flight on " + wire.pipelineCount() + " connections");
        } finally {
          Signals.cont(redis.pid());
        }
      } finally {
        pool.shutdown();
        assertTrue(pool.awaitTermination(60, TimeUnit.SECONDS));
      }
      Await.until(
          Duration.ofSeconds(30),
          () -> "decisions fast again: " + wire.decideNanos() + " ns",
          () -> {
            check(client, "again");
            return wire.decideNanos() < 20_000_000;
          });
    }
  }
}
