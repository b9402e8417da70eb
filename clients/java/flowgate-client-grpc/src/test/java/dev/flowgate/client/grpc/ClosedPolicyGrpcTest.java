package dev.flowgate.client.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.ErrorCode;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.Request;
import dev.flowgate.client.Verdict;
import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.RedisServer;
import org.junit.jupiter.api.Test;

/**
 * A rule whose failure policy is {@code closed}, on a real server whose Redis is stopped: the
 * gRPC client's verdict says the failure policy refused it, as the HTTP client's does.
 */
class ClosedPolicyGrpcTest {
  static final String RULES =
      """
      [[rule]]
      domain = "api"
      name = "per-user"
      match = "user"
      limit = "100/s"
      failure = "closed"
      """;

  @Test
  void aClosedPolicysRefusalIsStoreUnavailable() {
    try (RedisServer redis = RedisServer.start();
        FlowgateServer server = FlowgateServer.start(RULES, "--redis-url", redis.url());
        FlowgateGrpcClient grpc = FlowgateGrpcClient.builder(server.grpcAddr()).build()) {
      Request req = Request.of("api", Descriptor.of("user", "u1"));
      redis.stop();
      Verdict g = grpc.check(req);
      Verdict h = FlowgateClient.builder(server.baseUrl()).build().check(req);
      assertFalse(g.allowed());
      assertEquals(ErrorCode.STORE_UNAVAILABLE, h.reason());
      assertEquals(ErrorCode.STORE_UNAVAILABLE, g.reason());
    }
  }
}
