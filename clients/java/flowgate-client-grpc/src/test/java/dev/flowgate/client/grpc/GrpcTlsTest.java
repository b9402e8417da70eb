package dev.flowgate.client.grpc;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.ConnectionException;
import dev.flowgate.client.Descriptor;
import dev.flowgate.client.Request;
import dev.flowgate.client.Tls;
import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.TestPki;
import io.grpc.TlsChannelCredentials;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** gRPC over TLS, against a server started with --tls-cert: trusted by its CA, or refused. */
class GrpcTlsTest {
  @Test
  void tlsWithThePrivateCa() throws Exception {
    TestPki pki = TestPki.shared();
    try (FlowgateServer server =
        FlowgateServer.builder()
            .config(FlowgateGrpcClientTest.RULES)
            .flags("--tls-cert", pki.serverCert().toString(), "--tls-key", pki.serverKey().toString())
            .tls(Tls.trusting(pki.caPem()))
            .start()) {
      Request req = Request.of("api", Descriptor.of("user", "tls"));
      try (FlowgateGrpcClient client =
          FlowgateGrpcClient.builder(server.grpcAddr())
              .credentials(
                  TlsChannelCredentials.newBuilder().trustManager(pki.caPem().toFile()).build())
              .build()) {
        assertTrue(client.check(req).allowed());
      }
      // Clear text to a TLS port: no answer.
      try (FlowgateGrpcClient clear =
          FlowgateGrpcClient.builder(server.grpcAddr()).timeout(Duration.ofSeconds(5)).build()) {
        assertThrows(ConnectionException.class, () -> clear.check(req));
      }
    }
  }
}
