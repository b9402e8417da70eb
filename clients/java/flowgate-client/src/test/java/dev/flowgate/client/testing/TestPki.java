package dev.flowgate.client.testing;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.Key;
import java.security.KeyStore;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A private CA and two certificates it issued, made with the JDK's {@code keytool} in a
 * directory: the server's (for 127.0.0.1 and localhost) and a client's (named {@link
 * #CLIENT_NAME}), each with its key as PKCS#8 PEM, as the server's TLS flags and {@code Tls} take
 * them. The leaves' keys are RSA: the JDK writes an EC key's PKCS#8 without its public key, which
 * the server's TLS library (ring) requires.
 *
 * @param caPem the CA's certificate, PEM
 * @param serverCert the server's certificate, PEM
 * @param serverKey its key, PEM
 * @param clientCert the client's certificate, PEM
 * @param clientKey its key, PEM
 */
public record TestPki(Path caPem, Path serverCert, Path serverKey, Path clientCert, Path clientKey) {
  /** The client certificate's Common Name. */
  public static final String CLIENT_NAME = "java-client";

  private static final String PASS = "changeit";

  private static TestPki shared;

  /**
   * The PKI of this test JVM, made once (keytool takes seconds on a busy machine) in a temporary
   * directory deleted when the JVM exits.
   */
  public static synchronized TestPki shared() throws IOException, GeneralSecurityException {
    if (shared == null) {
      Path dir = Files.createTempDirectory("flowgate-pki-");
      shared = make(dir);
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    try (var paths = Files.list(dir)) {
                      paths.forEach(p -> p.toFile().delete());
                    } catch (IOException e) {
                      // Left for the system's temporary directory cleaner.
                    }
                    dir.toFile().delete();
                  }));
    }
    return shared;
  }

  /** Makes the CA and the certificates in {@code dir}; the two leaves at once. */
  public static TestPki make(Path dir) throws IOException, GeneralSecurityException {
    Files.createDirectories(dir);
    keytool(dir, "-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1",
        "-dname", "CN=flowgate test CA", "-ext", "bc:c", "-validity", "2", "-keystore", "ca.p12");
    keytool(dir, "-exportcert", "-alias", "ca", "-rfc", "-keystore", "ca.p12", "-file", "ca.pem");
    CompletableFuture<Path[]> server =
        CompletableFuture.supplyAsync(
            () -> leafUnchecked(dir, "server", "localhost", "san=ip:127.0.0.1,dns:localhost",
                "serverAuth"));
    Path[] client = leaf(dir, "client", CLIENT_NAME, "san=dns:" + CLIENT_NAME, "clientAuth");
    Path[] srv = server.join();
    return new TestPki(dir.resolve("ca.pem"), srv[0], srv[1], client[0], client[1]);
  }

  private static Path[] leafUnchecked(Path dir, String name, String cn, String san, String usage) {
    try {
      return leaf(dir, name, cn, san, usage);
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A certificate issued by the CA and its key: {@code name.pem} and {@code name-key.pem}. */
  private static Path[] leaf(Path dir, String name, String cn, String san, String usage)
      throws IOException, GeneralSecurityException {
    String store = name + ".p12";
    keytool(dir, "-genkeypair", "-alias", name, "-keyalg", "RSA", "-keysize", "2048",
        "-dname", "CN=" + cn, "-validity", "2", "-keystore", store);
    keytool(dir, "-certreq", "-alias", name, "-keystore", store, "-file", name + ".csr");
    keytool(dir, "-gencert", "-alias", "ca", "-keystore", "ca.p12", "-infile", name + ".csr",
        "-outfile", name + ".pem", "-rfc", "-validity", "2", "-ext", san, "-ext", "eku=" + usage,
        "-ext", "ku=digitalSignature");
    KeyStore ks = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(dir.resolve(store))) {
      ks.load(in, PASS.toCharArray());
    }
    Key key = ks.getKey(name, PASS.toCharArray());
    String pem =
        "-----BEGIN PRIVATE KEY-----\n"
            + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII))
                .encodeToString(key.getEncoded())
            + "\n-----END PRIVATE KEY-----\n";
    Path keyPath = dir.resolve(name + "-key.pem");
    Files.writeString(keyPath, pem);
    return new Path[] {dir.resolve(name + ".pem"), keyPath};
  }

  private static void keytool(Path dir, String... args) throws IOException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
    // A short-lived JVM: start it the quickest way.
    command.addAll(List.of("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"));
    command.addAll(List.of(args));
    command.addAll(List.of("-storepass", PASS, "-keypass", PASS, "-storetype", "PKCS12", "-noprompt"));
    Process p =
        new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
    try {
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
        p.destroyForcibly();
        throw new IOException("keytool " + String.join(" ", args) + " failed: " + out);
      }
    } catch (InterruptedException e) {
      p.destroyForcibly();
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    }
  }
}
