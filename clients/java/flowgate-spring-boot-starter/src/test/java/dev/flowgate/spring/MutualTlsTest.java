package dev.flowgate.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.Request;
import dev.flowgate.client.Tls;
import dev.flowgate.client.testing.FlowgateServer;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * {@code flowgate.tls.*} against the real server serving mutual TLS (certificates made by
 * openssl for the test): with the trust store and the key store the client decides and the
 * health is UP; without the key store the server refuses the handshake and the health is DOWN.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MutualTlsTest {
  private static final String PASSWORD = "changeit";
  private static Path certs;
  private static FlowgateServer server;

  @BeforeAll
  static void start() throws Exception {
    certs = Files.createTempDirectory("flowgate-tls-");
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=test-ca", "-days", "1");
    Files.writeString(certs.resolve("server.ext"), "subjectAltName=IP:127.0.0.1\n");
    Files.writeString(certs.resolve("client.ext"), "extendedKeyUsage=clientAuth\n");
    for (String who : List.of("server", "client")) {
      openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", who + ".key", "-out", who + ".csr", "-subj", "/CN=" + who);
      openssl("x509", "-req", "-in", who + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
          "-CAcreateserial", "-out", who + ".crt", "-days", "1", "-extfile", who + ".ext");
    }
    openssl("pkcs12", "-export", "-in", "client.crt", "-inkey", "client.key", "-out",
        "client.p12", "-passout", "pass:" + PASSWORD);
    KeyStore trust = KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    try (var in = Files.newInputStream(certs.resolve("ca.crt"))) {
      trust.setCertificateEntry("ca", CertificateFactory.getInstance("X.509").generateCertificate(in));
    }
    try (OutputStream out = Files.newOutputStream(certs.resolve("trust.p12"))) {
      trust.store(out, PASSWORD.toCharArray());
    }
    server =
        FlowgateServer.builder()
            .config(SharedServer.RULES)
            .flags(
                "--tls-cert", certs.resolve("server.crt").toString(),
                "--tls-key", certs.resolve("server.key").toString(),
                "--tls-client-ca", certs.resolve("ca.crt").toString())
            .tls(Tls.mutual(certs.resolve("ca.crt"), certs.resolve("client.crt"),
                certs.resolve("client.key")))
            .start();
  }

  @AfterAll
  static void stop() throws IOException {
    if (server != null) {
      server.close();
    }
    if (certs != null) {
      try (Stream<Path> paths = Files.walk(certs)) {
        paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  FlowgateAutoConfiguration.class, FlowgateHealthAutoConfiguration.class));

  @Test
  void theStoresFromThePropertiesReachAMutualTlsServer() {
    assertTrue(server.baseUrl().startsWith("https://"), server.baseUrl());
    runner
        .withPropertyValues(
            "flowgate.base-url=" + server.baseUrl(),
            "flowgate.tls.trust-store=file:" + certs.resolve("trust.p12"),
            "flowgate.tls.trust-store-password=" + PASSWORD,
            "flowgate.tls.key-store=file:" + certs.resolve("client.p12"),
            "flowgate.tls.key-store-password=" + PASSWORD)
        .run(
            context -> {
              FlowgateClient client = context.getBean(FlowgateClient.class);
              assertTrue(
                  client.check(Request.of("payments", Descriptor.of("channel", "tls"))).allowed());
              Health health = context.getBean(FlowgateHealthIndicator.class).health();
              assertEquals(Status.UP, health.getStatus(), health.toString());
            });
  }

  @Test
  void withoutTheClientsKeyTheHealthIsDown() {
    runner
        .withPropertyValues(
            "flowgate.base-url=" + server.baseUrl(),
            "flowgate.tls.trust-store=file:" + certs.resolve("trust.p12"),
            "flowgate.tls.trust-store-password=" + PASSWORD,
            "flowgate.connect-timeout=5s",
            "flowgate.request-timeout=5s")
        .run(
            context -> {
              Health health = context.getBean(FlowgateHealthIndicator.class).health();
              assertEquals(Status.DOWN, health.getStatus(), health.toString());
              assertTrue(health.getDetails().containsKey("error"), health.toString());
            });
  }

  private static void openssl(String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>();
    command.add("openssl");
    command.addAll(List.of(args));
    Process p =
        new ProcessBuilder(command).directory(certs.toFile()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
      p.destroyForcibly();
      throw new IllegalStateException("openssl " + String.join(" ", args) + " failed:\n" + out);
    }
  }
}
