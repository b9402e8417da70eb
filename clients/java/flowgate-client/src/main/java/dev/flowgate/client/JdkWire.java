package dev.flowgate.client;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * The JDK's {@code java.net.http} as the wire: used for {@code httpVersion(HTTP_2)} (calls
 * multiplexed on one connection). Its asynchronous machinery hands each exchange between
 * threads (the caller, its selector thread, the executor), which is why HTTP/1.1 goes through
 * {@link Http1Wire} instead.
 */
final class JdkWire implements Wire {
  private final HttpClient http;
  private final String base;
  private final Executor executor;

  /**
   * @param http the client whose connections are used
   * @param base the server's base URI, without a trailing slash
   * @param executor where asynchronous answers complete, or null for the HTTP client's threads
   */
  JdkWire(HttpClient http, String base, Executor executor) {
    this.http = http;
    this.base = base;
    this.executor = executor;
  }

  private HttpRequest request(Route route, byte[] body, String bearer, Duration timeout) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create(base + route.path))
            .timeout(timeout)
            .header("accept", "application/json");
    if (body == null) {
      request.method(route.method, HttpRequest.BodyPublishers.noBody());
    } else {
      request
          .header("content-type", "application/json")
          .method(route.method, HttpRequest.BodyPublishers.ofByteArray(body));
    }
    if (bearer != null) {
      request.header("authorization", "Bearer " + bearer);
    }
    return request.build();
  }

  private static Answer answer(HttpResponse<byte[]> response) {
    byte[] body = response.body();
    return new Answer(
        response.statusCode(),
        response.headers().firstValue("retry-after").orElse(null),
        body == null ? new byte[0] : body);
  }

  @Override
  public Answer send(Route route, byte[] body, String bearer, Duration timeout)
      throws IOException, InterruptedException {
    return answer(
        http.send(request(route, body, bearer, timeout), HttpResponse.BodyHandlers.ofByteArray()));
  }

  @Override
  public CompletableFuture<Answer> sendAsync(
      Route route, byte[] body, String bearer, Duration timeout) {
    CompletableFuture<HttpResponse<byte[]>> sent =
        http.sendAsync(
            request(route, body, bearer, timeout), HttpResponse.BodyHandlers.ofByteArray());
    return executor == null
        ? sent.thenApply(JdkWire::answer)
        : sent.thenApplyAsync(JdkWire::answer, executor);
  }

  /**
   * Closes the JDK's client where it can be (Java 21 and later, after its exchanges in flight);
   * on Java 17 its connections and thread end once it is unreachable.
   */
  @Override
  public void close() {
    if (http instanceof AutoCloseable closeable) {
      try {
        closeable.close();
      } catch (Exception e) {
        // Closing is all that is left to do with it.
      }
    }
  }
}
