package dev.flowgate.client;

import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * How {@link JsonTransport} sends a request and gets its answer: {@link Http1Wire} (the default,
 * HTTP/1.1 over pooled keep-alive sockets) or {@link JdkWire} (the JDK's {@code java.net.http},
 * for HTTP/2). Thread-safe.
 */
interface Wire {
  /**
   * One answer: its status, its {@code Retry-After} header (null when absent) and its body.
   *
   * @param status the HTTP status
   * @param retryAfter the {@code Retry-After} header's value, or null
   * @param body the body's bytes (empty when none)
   */
  record Answer(int status, String retryAfter, byte[] body) {}

  /**
   * Sends a request and waits for its answer on the calling thread.
   *
   * @param route the route (its method and path)
   * @param body the JSON body, or null for none
   * @param bearer the bearer token, or null for none
   * @param timeout how long the answer may take
   * @return the answer, whatever its status
   * @throws IOException when no answer came ({@link java.net.http.HttpTimeoutException} past
   *     the timeout)
   * @throws InterruptedException when the thread was interrupted while it waited
   */
  Answer send(Route route, byte[] body, String bearer, Duration timeout)
      throws IOException, InterruptedException;

  /**
   * {@link #send} without blocking the caller. Cancelling the future (or a future that depends
   * on it) abandons the exchange and closes its connection.
   *
   * @param route the route
   * @param body the JSON body, or null
   * @param bearer the bearer token, or null
   * @param timeout how long the answer may take
   * @return the answer; a failure completes it with the {@link IOException}
   */
  CompletableFuture<Answer> sendAsync(Route route, byte[] body, String bearer, Duration timeout);

  /**
   * Closes the connections held idle, and the others once their exchanges end; exchanges in
   * flight finish. Idempotent.
   */
  void close();
}
