package dev.flowgate.client.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.google.protobuf.UInt64Value;
import dev.flowgate.client.testing.FlowgateServer;
import io.envoyproxy.envoy.extensions.common.ratelimit.v3.RateLimitDescriptor;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Envoy's own messages, as the vendored protos generate them, against a real server: a charge
 * (a descriptor's {@code hits_addend}) and a refund ({@code is_negative_hits}), as Envoy AI
 * Gateway sends them.
 */
class EnvoyRefundTest {
  static final String RULES =
      """
      [[rule]]
      domain = "llm"
      name = "tokens"
      match = "api_key"
      limit = "100/1h"
      algorithm = "fixed_window"
      charge = "report"
      """;

  private static RateLimitRequest ask(long hits, boolean refund) {
    RateLimitDescriptor d =
        RateLimitDescriptor.newBuilder()
            .addEntries(
                RateLimitDescriptor.Entry.newBuilder().setKey("api_key").setValue("k1").build())
            .setHitsAddend(UInt64Value.of(hits))
            .setIsNegativeHits(refund)
            .build();
    return RateLimitRequest.newBuilder().setDomain("llm").addDescriptors(d).build();
  }

  @Test
  void aRefundGivesUnitsBack() throws Exception {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      ManagedChannel channel =
          ManagedChannelBuilder.forTarget(server.grpcAddr()).usePlaintext().build();
      try {
        var stub = RateLimitServiceGrpc.newBlockingStub(channel);
        RateLimitResponse charged = stub.shouldRateLimit(ask(120, false));
        assertEquals(RateLimitResponse.Code.OVER_LIMIT, charged.getOverallCode());
        stub.shouldRateLimit(ask(50, true));
        RateLimitResponse check = stub.shouldRateLimit(ask(0, false));
        assertEquals(RateLimitResponse.Code.OK, check.getOverallCode(), check.toString());
        assertEquals(30, check.getStatuses(0).getLimitRemaining(), check.toString());
      } finally {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
      }
    }
  }
}
