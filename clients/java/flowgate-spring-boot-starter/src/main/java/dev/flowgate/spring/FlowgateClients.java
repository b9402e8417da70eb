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
    String token = token(p.getToken());
    if (token != null) {
      builder.token(token);
    }
    SSLContext tls = sslContext(p.getTls(), bundles);
    if (tls != null) {
      builder.sslContext(tls);
    }
    return builder.build();
  }

  /**
   * The token to send: null for none (unset or blank, as {@code ${VAR:}} of an unset variable
   * gives), else the token, checked here so that a wrong one fails the start rather than every
   * call. Spring leaves a placeholder it cannot resolve as written, {@code ${VAR}} of an unset
   * variable, which would otherwise be sent as the token.
   *
   * @throws IllegalStateException naming the property, and the placeholder but never the token,
   *     when it holds an unresolved placeholder or a character other than printable ASCII without
   *     spaces (what the server accepts, and what a header can carry)
   */
  static String token(String token) {
    if (token == null || token.isBlank()) {
      return null;
    }
    String placeholder = placeholder(token);
    if (placeholder != null) {
      String name = placeholder.substring(2, placeholder.length() - 1).split(":", 2)[0];
      throw new IllegalStateException(
          "flowgate.token holds an unresolved placeholder "
              + placeholder
              + ": set "
              + name
              + " (an environment variable or a property), or write ${"
              + name
              + ":} for no token");
    }
    for (int i = 0; i < token.length(); i++) {
      char ch = token.charAt(i);
      if (ch <= 0x20 || ch > 0x7e) {
        String kind =
            ch == ' '
                ? "a space"
                : ch < 0x20 || ch == 0x7f ? "a control character" : "a non-ASCII character";
        throw new IllegalStateException(
            "flowgate.token holds "
                + kind
                + " (character "
                + (i + 1)
                + "): a token is printable ASCII without spaces");
      }
    }
    return token;
  }

  /** The first {@code ${...}} in a value (nested ones within it), or null when none. */
  private static String placeholder(String value) {
    int start = value.indexOf("${");
    while (start >= 0) {
      int depth = 0;
      for (int i = start; i < value.length(); i++) {
        if (value.startsWith("${", i)) {
          depth++;
          i++;
        } else if (value.charAt(i) == '}' && --depth == 0) {
          return value.substring(start, i + 1);
        }
      }
      start = value.indexOf("${", start + 2);
    }
    return null;
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
