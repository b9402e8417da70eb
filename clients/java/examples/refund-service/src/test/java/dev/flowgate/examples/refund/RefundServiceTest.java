package dev.flowgate.examples.refund;

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
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.ActiveProfiles;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The refund service against the real server running the example's own {@code flowgate.toml}: a
 * batch of 4 refunds posted over HTTP reaches the channel one a second, as the queue's rate
 * spaces them.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ActiveProfiles("test")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RefundServiceTest {
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
  @Autowired RefundChannel channel;

  @Test
  void aBatchReachesTheChannelOneASecond() throws Exception {
    // One refund first, so that the batch meets a warm service: a cold JVM's first job (class
    // loading, Jackson's first binding) reaches the handler a few hundred ms after its release
    // slot, which would bring the next one closer than the queue spaced them.
    assertEquals(200, post("/refunds", "[{\"id\": \"R-0\", \"amount\": \"1.00\"}]").statusCode());
    Await.until(Duration.ofSeconds(10), "the first refund sent", () -> channel.sent().size() == 1);

    String batch =
        """
        [{"id": "R-1", "amount": "12.50"}, {"id": "R-2", "amount": "8.00"},
         {"id": "R-3", "amount": "99.99"}, {"id": "R-4", "amount": "0.10"}]
        """;
    HttpResponse<String> answer = post("/refunds", batch);
    assertEquals(200, answer.statusCode(), answer.body());
    assertTrue(answer.body().contains("payments:refunds:biz=REFUND,channel=WPG"), answer.body());
    // The same batch again (a client's retry): the same jobs, nothing sent twice.
    HttpResponse<String> again = post("/refunds", batch);
    assertTrue(again.body().contains("\"duplicate\":true"), again.body());

    Await.until(
        Duration.ofSeconds(15),
        () -> "the batch sent: " + channel.sent(),
        () -> channel.sent().size() >= 5);
    List<RefundChannel.Sent> sent = channel.sent();
    assertEquals(
        List.of("R-0", "R-1", "R-2", "R-3", "R-4"),
        sent.stream().map(RefundChannel.Sent::id).toList());
    assertEquals("12.50", sent.get(1).amount(), "the amount keeps its digits");
    // 1/s: a second apart, less a slack for what the server's tolerance and a busy machine's
    // scheduling shift one delivery more than the next.
    long slackMs = 150;
    for (int i = 2; i < sent.size(); i++) {
      long gapMs = (sent.get(i).nanos() - sent.get(i - 1).nanos()) / 1_000_000;
      assertTrue(
          gapMs >= 1000 - slackMs, sent.get(i).id() + " came " + gapMs + " ms after the previous");
    }
    long spanMs = (sent.get(4).nanos() - sent.get(1).nanos()) / 1_000_000;
    assertTrue(spanMs >= 3000 - slackMs, "4 refunds over " + spanMs + " ms");
    assertTrue(get("/refunds/sent").contains("R-4"));
  }

  private HttpResponse<String> post(String path, String json) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json))
                .build(),
            HttpResponse.BodyHandlers.ofString());
  }

  private String get(String path) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }
}
