package dev.flowgate.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * {@link SSLContext}s from PEM files, as the server's own TLS flags take them (a Kubernetes
 * secret's {@code ca.crt}, {@code tls.crt}, {@code tls.key}): trust a private CA, and for mutual
 * TLS present a client certificate. The key must be PKCS#8 ({@code BEGIN PRIVATE KEY}), RSA or
 * EC; convert another with {@code openssl pkcs8 -topk8 -nocrypt}. For a key store (PKCS#12, JKS)
 * build the context with the JDK's {@link KeyManagerFactory} and pass it to the builder.
 */
public final class Tls {
  private static final Pattern KEY =
      Pattern.compile("-----BEGIN PRIVATE KEY-----([A-Za-z0-9+/=\\s]+)-----END PRIVATE KEY-----");

  private Tls() {}

  /**
   * A context that trusts the CA certificates of a PEM file.
   *
   * @param caPem the CA certificate(s), PEM
   * @return the context
   * @throws IOException when a file cannot be read
   * @throws GeneralSecurityException when a certificate cannot be used
   */
  public static SSLContext trusting(Path caPem) throws IOException, GeneralSecurityException {
    return context(caPem, null, null);
  }

  /**
   * A context that trusts the CA certificates of {@code caPem} and presents the client
   * certificate chain of {@code certPem} with its key, {@code keyPem} (mutual TLS).
   *
   * @param caPem the CA certificate(s) the server's certificate chains to, PEM
   * @param certPem the client's certificate chain, PEM
   * @param keyPem its private key, PKCS#8 PEM
   * @return the context
   * @throws IOException when a file cannot be read
   * @throws GeneralSecurityException when a certificate or the key cannot be used
   */
  public static SSLContext mutual(Path caPem, Path certPem, Path keyPem)
      throws IOException, GeneralSecurityException {
    return context(caPem, certPem, keyPem);
  }

  private static SSLContext context(Path caPem, Path certPem, Path keyPem)
      throws IOException, GeneralSecurityException {
    KeyStore trust = KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    int i = 0;
    for (Certificate ca : certificates(caPem)) {
      trust.setCertificateEntry("ca-" + i++, ca);
    }
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    KeyManagerFactory kmf = null;
    if (certPem != null) {
      char[] none = new char[0];
      KeyStore keys = KeyStore.getInstance("PKCS12");
      keys.load(null, null);
      List<Certificate> chain = certificates(certPem);
      keys.setKeyEntry("client", privateKey(keyPem), none, chain.toArray(new Certificate[0]));
      kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      kmf.init(keys, none);
    }
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), null);
    return context;
  }

  private static List<Certificate> certificates(Path pem)
      throws IOException, GeneralSecurityException {
    try (InputStream in = Files.newInputStream(pem)) {
      Collection<? extends Certificate> certs =
          CertificateFactory.getInstance("X.509").generateCertificates(in);
      if (certs.isEmpty()) {
        throw new GeneralSecurityException("no certificate in " + pem);
      }
      return new ArrayList<>(certs);
    }
  }

  private static PrivateKey privateKey(Path pem) throws IOException, GeneralSecurityException {
    String text = Files.readString(pem, StandardCharsets.US_ASCII);
    Matcher m = KEY.matcher(text);
    if (!m.find()) {
      throw new GeneralSecurityException(
          pem + " holds no PKCS#8 key (BEGIN PRIVATE KEY): convert it with "
              + "`openssl pkcs8 -topk8 -nocrypt -in key.pem`");
    }
    byte[] der = Base64.getMimeDecoder().decode(m.group(1).getBytes(StandardCharsets.US_ASCII));
    PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(der);
    GeneralSecurityException last = null;
    for (String algorithm : List.of("RSA", "EC", "Ed25519")) {
      try {
        return KeyFactory.getInstance(algorithm).generatePrivate(spec);
      } catch (GeneralSecurityException e) {
        last = e;
      }
    }
    throw new GeneralSecurityException("the key of " + pem + " is not RSA, EC nor Ed25519", last);
  }
}
