package dev.flowgate.spring;

import dev.flowgate.client.FlowgateClient;
import java.io.IOException;
import java.io.InputStream;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.springframework.boot.ssl.SslBundles;
import org.springframework.core.io.Resource;

/** Builds the client, and its TLS context, from the {@code flowgate.*} properties. */
final class FlowgateClients {
  private FlowgateClients() {}

  static FlowgateClient build(FlowgateProperties p, SslBundles bundles) {
    FlowgateClient.Builder builder =
        FlowgateClient.builder(p.getBaseUrl().toString())
            .connectTimeout(p.getConnectTimeout())
            .requestTimeout(p.getRequestTimeout())
            .pipelining(p.getPipelining());
    if (p.getToken() != null && !p.getToken().isBlank()) {
      builder.token(p.getToken());
    }
    SSLContext tls = sslContext(p.getTls(), bundles);
    if (tls != null) {
      builder.sslContext(tls);
    }
    return builder.build();
  }

  /**
   * The TLS context the properties name, or null for the JVM's default.
   *
   * @throws IllegalStateException naming the property whose store cannot be used
   */
  static SSLContext sslContext(FlowgateProperties.Tls tls, SslBundles bundles) {
    if (tls.getBundle() != null && !tls.getBundle().isBlank()) {
      if (bundles == null) {
        throw new IllegalStateException(
            "flowgate.tls.bundle is set (" + tls.getBundle() + ") but there are no SSL bundles");
      }
      return bundles.getBundle(tls.getBundle()).createSslContext();
    }
    if (tls.getTrustStore() == null && tls.getKeyStore() == null) {
      return null;
    }
    try {
      TrustManagerFactory tmf = null;
      if (tls.getTrustStore() != null) {
        KeyStore trust =
            load(tls.getTrustStore(), tls.getTrustStoreType(), tls.getTrustStorePassword(),
                "flowgate.tls.trust-store");
        tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
      }
      KeyManagerFactory kmf = null;
      if (tls.getKeyStore() != null) {
        KeyStore keys =
            load(tls.getKeyStore(), tls.getKeyStoreType(), tls.getKeyStorePassword(),
                "flowgate.tls.key-store");
        kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(keys, chars(tls.getKeyStorePassword()));
      }
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(
          kmf == null ? null : kmf.getKeyManagers(),
          tmf == null ? null : tmf.getTrustManagers(),
          null);
      return context;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("flowgate.tls: cannot build the TLS context: " + e, e);
    }
  }

  private static KeyStore load(Resource store, String type, String password, String property) {
    try (InputStream in = store.getInputStream()) {
      KeyStore ks = KeyStore.getInstance(type);
      ks.load(in, chars(password));
      return ks;
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalStateException(
          property + ": cannot read " + store.getDescription() + " as " + type + ": " + e, e);
    }
  }

  private static char[] chars(String password) {
    return password == null ? new char[0] : password.toCharArray();
  }
}
