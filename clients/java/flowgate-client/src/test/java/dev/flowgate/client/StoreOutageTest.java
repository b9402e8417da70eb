package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.RedisServer;
import org.junit.jupiter.api.Test;

/**
 * A server on Redis whose Redis is gone: charges and commits are a typed 503; a check refused by
 * the rule's closed failure policy says so.
 */
class StoreOutageTest {
  static final String RULES =
      """
      domain = "llm"

      [[rule]]
      name = "tokens"
      match = "api_key"
      limit = "1000/1h"
      failure = "closed"
      """;

  @Test
  void aChargeWhileTheStoreIsDownIsStoreUnavailable() {
    try (RedisServer redis = RedisServer.start();
        // A deadline wide enough for a busy machine while Redis runs.
        FlowgateServer server =
            FlowgateServer.start(RULES, "--redis-url", redis.url(), "--redis-deadline", "2s")) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Request req = Request.of("llm", Descriptor.of("api_key", "k1"));
      assertEquals(10, client.charge(req, 10).get(0).applied());
      Reservation open = client.reserve(req, 100, null);
      assertTrue(open.allowed());

      redis.stop();
      StoreUnavailableException charge =
          assertThrows(StoreUnavailableException.class, () -> client.charge(req, 10));
      assertEquals(503, charge.status());
      assertEquals(ErrorCode.STORE_UNAVAILABLE, charge.code());
      assertTrue(charge.retryAfter().orElseThrow().getSeconds() >= 1);
      assertThrows(StoreUnavailableException.class, () -> client.commit(open, 50));
      // Decisions go to the rule's failure policy: closed refuses, and says so.
      Verdict refused = client.check(req);
      assertFalse(refused.allowed());
      assertEquals(ErrorCode.STORE_UNAVAILABLE, refused.reason());
      OverLimitException thrown = assertThrows(OverLimitException.class, refused::orThrow);
      assertEquals(ErrorCode.STORE_UNAVAILABLE, thrown.code());
      assertTrue(thrown.getMessage().contains("closed failure policy of rule tokens"), thrown.getMessage());
    }
  }
}
