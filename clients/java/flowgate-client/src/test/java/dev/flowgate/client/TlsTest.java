package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.TestPki;
import java.net.http.HttpClient;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.Test;

/** TLS and mutual TLS against a real server, with certificates the test makes (keytool). */
class TlsTest {
  static final Request REQ = Request.of("api", Descriptor.of("user", "7"));

  @Test
  void httpsWithThePrivateCa() throws Exception {
    TestPki pki = TestPki.shared();
    SSLContext trusting = Tls.trusting(pki.caPem());
    try (FlowgateServer server =
        FlowgateServer.builder()
            .config(CheckTest.RULES)
            .flags("--tls-cert", pki.serverCert().toString(), "--tls-key", pki.serverKey().toString())
            .tls(trusting)
            .start()) {
      assertTrue(server.baseUrl().startsWith("https://"));
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).sslContext(trusting).build();
      assertTrue(client.check(REQ).allowed());
      FlowgateClient h2 =
          FlowgateClient.builder(server.baseUrl())
              .sslContext(trusting)
              .httpVersion(HttpClient.Version.HTTP_2)
              .build();
      assertTrue(h2.checkAsync(REQ).join().allowed());
      // The JVM's default trust store does not know the private CA: the handshake fails.
      ConnectionException untrusted =
          assertThrows(
              ConnectionException.class,
              () -> FlowgateClient.builder(server.baseUrl()).build().check(REQ));
      assertEquals(0, untrusted.status());
      assertTrue(untrusted.getMessage().contains("Tls.trusting"), untrusted.getMessage());
      // Clear text to the TLS port: the server closes it, and the message says why it may.
      ConnectionException clear =
          assertThrows(
              ConnectionException.class,
              () ->
                  FlowgateClient.builder(server.baseUrl().replace("https://", "http://"))
                      .build()
                      .check(REQ));
      assertTrue(clear.getMessage().contains("use an https:// address"), clear.getMessage());
    }
  }

  @Test
  void mutualTlsStandsForAToken() throws Exception {
    TestPki pki = TestPki.shared();
    SSLContext mutual = Tls.mutual(pki.caPem(), pki.clientCert(), pki.clientKey());
    try (FlowgateServer server =
        FlowgateServer.builder()
            .config(CheckTest.RULES)
            .file("credentials", "java:decide:subject:" + TestPki.CLIENT_NAME + "\n")
            .flags(
                "--tls-cert", pki.serverCert().toString(),
                "--tls-key", pki.serverKey().toString(),
                "--tls-client-ca", pki.caPem().toString(),
                "--credentials-file", "{dir}/credentials")
            .tls(mutual)
            .start()) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).sslContext(mutual).build();
      assertTrue(client.check(REQ).allowed());
      // Without a client certificate the handshake is refused.
      FlowgateClient anonymous =
          FlowgateClient.builder(server.baseUrl()).sslContext(Tls.trusting(pki.caPem())).build();
      ConnectionException refused =
          assertThrows(ConnectionException.class, () -> anonymous.check(REQ));
      assertTrue(refused.getMessage().contains("Tls.mutual"), refused.getMessage());
    }
  }
}
