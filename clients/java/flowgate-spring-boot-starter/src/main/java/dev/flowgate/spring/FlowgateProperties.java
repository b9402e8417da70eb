package dev.flowgate.spring;

import java.net.URI;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.core.io.Resource;

/** The {@code flowgate.*} properties: the server, its credentials and TLS, the failure mode. */
@ConfigurationProperties("flowgate")
public class FlowgateProperties {
  /** The server's HTTP address (http:// or https://). */
  private URI baseUrl = URI.create("http://127.0.0.1:8080");

  /**
   * The bearer token of every request (at least 32 characters on the server); none when unset
   * (an open server, or mutual TLS).
   */
  private String token;

  /** How long opening a connection may take. */
  private Duration connectTimeout = Duration.ofSeconds(5);

  /** How long an answer may take once sent. */
  private Duration requestTimeout = Duration.ofSeconds(10);

  /**
   * The most checks in flight at once on one HTTP/1.1 connection (pipelined; fewer while answers
   * are slow); 1 turns pipelining off, for a proxy in between that mishandles it.
   */
  private int pipelining = 16;

  /**
   * Whether a guarded call goes ahead when Flowgate cannot answer (unreachable, no answer in
   * time, a 5xx), counted as failed_open and logged. An annotation's onUnavailable overrides it.
   */
  private boolean failOpen = true;

  private final Tls tls = new Tls();

  private final Web web = new Web();

  private final Worker worker = new Worker();

  public URI getBaseUrl() {
    return baseUrl;
  }

  public void setBaseUrl(URI baseUrl) {
    this.baseUrl = baseUrl;
  }

  public String getToken() {
    return token;
  }

  public void setToken(String token) {
    this.token = token;
  }

  public Duration getConnectTimeout() {
    return connectTimeout;
  }

  public void setConnectTimeout(Duration connectTimeout) {
    this.connectTimeout = connectTimeout;
  }

  public Duration getRequestTimeout() {
    return requestTimeout;
  }

  public void setRequestTimeout(Duration requestTimeout) {
    this.requestTimeout = requestTimeout;
  }

  public int getPipelining() {
    return pipelining;
  }

  public void setPipelining(int pipelining) {
    this.pipelining = pipelining;
  }

  public boolean isFailOpen() {
    return failOpen;
  }

  public void setFailOpen(boolean failOpen) {
    this.failOpen = failOpen;
  }

  public Tls getTls() {
    return tls;
  }

  public Web getWeb() {
    return web;
  }

  public Worker getWorker() {
    return worker;
  }

  /**
   * TLS towards an https:// server: an SSL bundle of spring.ssl.bundle.*, or key and trust stores.
   * The JVM's default trust otherwise.
   */
  public static class Tls {
    /** The name of an SSL bundle (spring.ssl.bundle.jks.NAME or .pem.NAME); wins over the stores. */
    private String bundle;

    /** The trust store holding the CA of the server's certificate (PKCS12 or JKS). */
    private Resource trustStore;

    /** The trust store's password. */
    private String trustStorePassword;

    /** The trust store's type. */
    private String trustStoreType = "PKCS12";

    /** The key store holding the client's certificate and key, for mutual TLS. */
    private Resource keyStore;

    /** The key store's password (also the key's). */
    private String keyStorePassword;

    /** The key store's type. */
    private String keyStoreType = "PKCS12";

    public String getBundle() {
      return bundle;
    }

    public void setBundle(String bundle) {
      this.bundle = bundle;
    }

    public Resource getTrustStore() {
      return trustStore;
    }

    public void setTrustStore(Resource trustStore) {
      this.trustStore = trustStore;
    }

    public String getTrustStorePassword() {
      return trustStorePassword;
    }

    public void setTrustStorePassword(String trustStorePassword) {
      this.trustStorePassword = trustStorePassword;
    }

    public String getTrustStoreType() {
      return trustStoreType;
    }

    public void setTrustStoreType(String trustStoreType) {
      this.trustStoreType = trustStoreType;
    }

    public Resource getKeyStore() {
      return keyStore;
    }

    public void setKeyStore(Resource keyStore) {
      this.keyStore = keyStore;
    }

    public String getKeyStorePassword() {
      return keyStorePassword;
    }

    public void setKeyStorePassword(String keyStorePassword) {
      this.keyStorePassword = keyStorePassword;
    }

    public String getKeyStoreType() {
      return keyStoreType;
    }

    public void setKeyStoreType(String keyStoreType) {
      this.keyStoreType = keyStoreType;
    }
  }

  /** Refusals in Spring MVC and WebFlux. */
  public static class Web {
    /**
     * Whether refused calls are answered as problems (429 or 503 with Retry-After,
     * application/problem+json) by the starter's controller advice.
     */
    private boolean problemDetails = true;

    public boolean isProblemDetails() {
      return problemDetails;
    }

    public void setProblemDetails(boolean problemDetails) {
      this.problemDetails = problemDetails;
    }
  }

  /** The workers of {@code @FlowgateWorker} methods. */
  public static class Worker {
    /** Whether the {@code @FlowgateWorker} methods' workers run in this application. */
    private boolean enabled = true;

    /**
     * How long jobs in flight may still run when the application stops; those still running
     * then are handed back to the queue (delivered again). Under Spring's
     * spring.lifecycle.timeout-per-shutdown-phase (30s), with room for the hand-back.
     */
    private Duration shutdownGrace = Duration.ofSeconds(20);

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public Duration getShutdownGrace() {
      return shutdownGrace;
    }

    public void setShutdownGrace(Duration shutdownGrace) {
      this.shutdownGrace = shutdownGrace;
    }
  }
}
