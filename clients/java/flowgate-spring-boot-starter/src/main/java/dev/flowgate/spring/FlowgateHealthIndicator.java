package dev.flowgate.spring;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import javax.net.ssl.SSLContext;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * Whether the Flowgate server can decide this application's calls: its readiness probe, {@code
 * GET /readyz}. UP while it answers 200, with its store's health, the rules it follows and its
 * warnings as details (a store outage keeps it UP: the server's failure policies still decide);
 * DOWN while it answers 503 (starting or draining: its error and detail), another status, or
 * nothing (the failure). Each health request asks once, within the request timeout.
 */
public class FlowgateHealthIndicator implements HealthIndicator {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final URI readyz;
  private final HttpClient http;
  private final Duration timeout;

  /**
   * @param baseUrl the server's base URL
   * @param sslContext the TLS context, or null for the JVM's
   * @param connectTimeout how long connecting may take
   * @param timeout how long the answer may take
   */
  public FlowgateHealthIndicator(
      URI baseUrl, SSLContext sslContext, Duration connectTimeout, Duration timeout) {
    String base = baseUrl.toString();
    this.readyz = URI.create((base.endsWith("/") ? base : base + "/") + "readyz");
    HttpClient.Builder b = HttpClient.newBuilder().connectTimeout(connectTimeout);
    if (sslContext != null) {
      b.sslContext(sslContext);
    }
    this.http = b.build();
    this.timeout = timeout;
  }

  @Override
  public Health health() {
    HttpRequest request =
        HttpRequest.newBuilder(readyz).timeout(timeout).header("accept", "application/json").build();
    HttpResponse<String> response;
    try {
      response = http.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      return Health.down(e).withDetail("url", readyz.toString()).build();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Health.down(e).withDetail("url", readyz.toString()).build();
    }
    Health.Builder health =
        response.statusCode() == 200 ? Health.up() : Health.down();
    health.withDetail("url", readyz.toString()).withDetail("status", response.statusCode());
    try {
      JsonNode body = JSON.readTree(response.body());
      for (String field : new String[] {"error", "detail", "store", "rules", "warnings"}) {
        if (body.has(field)) {
          health.withDetail(field, JSON.treeToValue(body.get(field), Object.class));
        }
      }
    } catch (IOException e) {
      health.withDetail("body", response.body());
    }
    return health.build();
  }
}
