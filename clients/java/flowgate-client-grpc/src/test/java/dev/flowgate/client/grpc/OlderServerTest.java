package dev.flowgate.client.grpc;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.Request;
import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A server without {@code flowgate.v1.Decisions} (an older one) answers the stream {@code
 * UNIMPLEMENTED}: the client asks Envoy's {@code ShouldRateLimit} instead. The server here is the
 * real binary's {@code flowgate floor}, which serves Envoy's rate-limit service alone (answering
 * OK to everything).
 */
class OlderServerTest {
  @Test
  void checksGoThroughEnvoysServiceWhenTheServerHasNoStream() throws Exception {
    int port;
    try (ServerSocket probe = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = probe.getLocalPort();
    }
    String addr = "127.0.0.1:" + port;
    Process floor =
        new ProcessBuilder(
                List.of(FlowgateServer.binary().toString(), "floor", "--grpc-addr", addr))
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .start();
    try {
      Await.until(Duration.ofSeconds(30), "flowgate floor listens on " + addr, () -> listens(port));
      try (FlowgateGrpcClient client = FlowgateGrpcClient.builder(addr).build()) {
        Request request = Request.of("any", Descriptor.of("user", "1"));
        assertTrue(client.check(request).allowed(), "the first check, after the stream's refusal");
        assertTrue(client.check(request).allowed(), "the next, straight to ShouldRateLimit");
        assertTrue(client.checkAsync(request).get(30, TimeUnit.SECONDS).allowed());
      }
    } finally {
      floor.destroy();
      floor.waitFor(10, TimeUnit.SECONDS);
    }
  }

  private static boolean listens(int port) {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), 200);
      return true;
    } catch (IOException notYet) {
      return false;
    }
  }
}
