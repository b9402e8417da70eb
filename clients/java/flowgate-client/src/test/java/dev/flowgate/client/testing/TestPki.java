package dev.flowgate.client.testing;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.Key;
import java.security.KeyStore;
import java.security.interfaces.ECPrivateKey;
import java.security.interfaces.ECPublicKey;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A private CA and two certificates it issued, made with the JDK's keytool in a
 * directory: the server's (for 127.0.0.1 and localhost) and a client's (named {@link
 * #CLIENT_NAME}), each with its key as PKCS#8 PEM, as the server's TLS flags and {@code Tls} take
 * them (EC P-256 keys, which take milliseconds to make). The server's key is written as SEC1
 * ({@code BEGIN EC PRIVATE KEY}) with its public key: the JDK's PKCS#8 of an EC key leaves it out,
 * and the server's TLS library (ring) requires it.
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
    keytool(dir, "-genkeypair", "-alias", name, "-keyalg", "EC", "-groupname", "secp256r1",
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
        name.equals("server")
            ? pem("EC PRIVATE KEY", sec1((ECPrivateKey) key, (ECPublicKey) ks.getCertificate(name).getPublicKey()))
            : pem("PRIVATE KEY", key.getEncoded());
    Path keyPath = dir.resolve(name + "-key.pem");
    Files.writeString(keyPath, pem);
    return new Path[] {dir.resolve(name + ".pem"), keyPath};
  }

  private static String pem(String label, byte[] der) {
    return "-----BEGIN " + label + "-----\n"
        + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der)
        + "\n-----END " + label + "-----\n";
  }

  /**
   * A P-256 key as SEC1's ECPrivateKey with its curve and public key: {@code SEQUENCE {1, d,
   * [0] prime256v1, [1] 04 || x || y}}.
   */
  private static byte[] sec1(ECPrivateKey key, ECPublicKey pub) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.writeBytes(new byte[] {0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20});
    out.writeBytes(unsigned32(key.getS()));
    out.writeBytes(new byte[] {(byte) 0xa0, 0x0a, 0x06, 0x08, 0x2a, (byte) 0x86, 0x48,
        (byte) 0xce, 0x3d, 0x03, 0x01, 0x07, (byte) 0xa1, 0x44, 0x03, 0x42, 0x00, 0x04});
    out.writeBytes(unsigned32(pub.getW().getAffineX()));
    out.writeBytes(unsigned32(pub.getW().getAffineY()));
    return out.toByteArray();
  }

  /** A number as exactly 32 big-endian bytes. */
  private static byte[] unsigned32(BigInteger n) {
    byte[] raw = n.toByteArray();
    byte[] out = new byte[32];
    int len = Math.min(raw.length, 32);
    System.arraycopy(raw, raw.length - len, out, 32 - len, len);
    return out;
  }

  /**
   * Runs the JDK's keytool in this JVM (its class, exported to the tests by Surefire's {@code
   * --add-exports}): a keytool process per step would cost a JVM start each, seconds on a busy
   * machine. Paths are made absolute in {@code dir}; a failure of keytool ends the JVM with its
   * message, as the tool does.
   */
  private static void keytool(Path dir, String... args) throws IOException {
    List<String> command = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      boolean file =
          i > 0 && List.of("-keystore", "-file", "-infile", "-outfile").contains(args[i - 1]);
      command.add(file ? dir.resolve(args[i]).toString() : args[i]);
    }
    command.addAll(List.of("-storepass", PASS, "-keypass", PASS, "-storetype", "PKCS12", "-noprompt"));
    try {
      Class.forName("sun.security.tools.keytool.Main")
          .getMethod("main", String[].class)
          .invoke(null, (Object) command.toArray(new String[0]));
    } catch (ReflectiveOperationException e) {
      throw new IOException("keytool " + String.join(" ", args) + " failed: " + e.getCause(), e);
    }
  }
}
