package dev.flowgate.examples.payment;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.ActiveProfiles;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The payment service over real HTTP, against the real server running the example's own {@code
 * flowgate.toml}: WPG's 20 a second answers 429 with {@code Retry-After} past its limit, and a
 * failing channel opens its breaker (503 with {@code Retry-After}) until it recovers.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ActiveProfiles("test")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PaymentServiceTest {
  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private static FlowgateServer server;

  @DynamicPropertySource
  static void flowgate(DynamicPropertyRegistry registry) throws IOException {
    server = FlowgateServer.builder().config(Files.readString(Path.of("flowgate.toml"))).start();
    registry.add("flowgate.base-url", server::baseUrl);
  }

  @AfterAll
  static void stop() {
    if (server != null) {
      server.close();
    }
  }

  @LocalServerPort int port;

  @Test
  void wpgPastTwentyASecondIsRefusedWithRetryAfter() throws Exception {
    // 60 payments at once from 8 clients: more than 20 a second can take, however slow the
    // machine (the bucket refills at 20 a second, and holds 20).
    ExecutorService clients = Executors.newFixedThreadPool(8);
    List<Future<HttpResponse<String>>> answers = new ArrayList<>();
    try {
      for (int i = 0; i < 60; i++) {
        answers.add(clients.submit(() -> pay("WPG", "10.00")));
      }
      int ok = 0;
      HttpResponse<String> refused = null;
      for (Future<HttpResponse<String>> f : answers) {
        HttpResponse<String> a = f.get(30, TimeUnit.SECONDS);
        if (a.statusCode() == 200) {
          ok++;
        } else {
          assertEquals(429, a.statusCode(), a.body());
          refused = a;
        }
      }
      assertTrue(ok >= 20, ok + " payments went through: the burst is 20");
      assertTrue(refused != null, "all 60 went through");
      long retryAfter = Long.parseLong(refused.headers().firstValue("retry-after").orElseThrow());
      assertTrue(retryAfter >= 1 && retryAfter <= 2, "Retry-After " + retryAfter);
      assertTrue(refused.body().contains("over_limit"), refused.body());
    } finally {
      clients.shutdownNow();
    }
  }

  @Test
  void aFailingChannelOpensItsBreakerAndRecovers() throws Exception {
    assertEquals(200, pay("ACME", "5.00").statusCode());
    failing(true);
    // Three failures (the breaker's threshold), each the channel's own: 502.
    for (int i = 0; i < 3; i++) {
      HttpResponse<String> a = pay("ACME", "5.00");
      assertEquals(502, a.statusCode(), a.body());
    }
    // Open: refused at once, without calling the channel.
    HttpResponse<String> open = pay("ACME", "5.00");
    assertEquals(503, open.statusCode(), open.body());
    long retryAfter = Long.parseLong(open.headers().firstValue("retry-after").orElseThrow());
    assertTrue(retryAfter >= 1 && retryAfter <= 5, "Retry-After " + retryAfter);
    assertTrue(open.body().contains("circuit_open"), open.body());
    // Another channel has a breaker of its own.
    failing(false);
    assertEquals(200, pay("OTHER", "5.00").statusCode());

    // The channel is back: once open_for (5 s) has passed, a probe goes through and closes it.
    Await.until(
        Duration.ofSeconds(20),
        "a payment through ACME again",
        () -> pay("ACME", "5.00").statusCode() == 200);
    assertEquals(200, pay("ACME", "5.00").statusCode(), "closed again");
  }

  private HttpResponse<String> pay(String channel, String amount) {
    String body = "{\"channel\": \"" + channel + "\", \"amount\": \"" + amount + "\"}";
    return send(
        HttpRequest.newBuilder(uri("/payments"))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)));
  }

  private void failing(boolean on) {
    assertEquals(
        200,
        send(HttpRequest.newBuilder(uri("/fake-channel/failing?on=" + on))
                .PUT(HttpRequest.BodyPublishers.noBody()))
            .statusCode());
  }

  private URI uri(String path) {
    return URI.create("http://127.0.0.1:" + port + path);
  }

  private static HttpResponse<String> send(HttpRequest.Builder request) {
    try {
      return HTTP.send(
          request.timeout(Duration.ofSeconds(20)).build(), HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
