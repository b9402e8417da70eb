package dev.flowgate.spring;

import dev.flowgate.client.testing.FlowgateServer;

/**
 * The real {@code flowgate} server the starter's tests share (one per test JVM, stopped and its
 * files deleted when the JVM exits), with the rules they ask. Each test uses descriptor values of
 * its own, so that their counters never meet.
 */
final class SharedServer {
  static final String RULES =
      """
      [[rule]]
      domain = "payments"
      name = "per-channel"
      match = "channel"
      limit = "2/1m"
      algorithm = "fixed_window"

      [[rule]]
      domain = "spaced"
      name = "spaced"
      match = "queue"
      limit = "1/s"
      algorithm = "leaky_bucket"
      mode = "delay"
      max_wait = "5s"

      [[breaker]]
      domain = "downstream"
      name = "bank"
      match = ["bank"]
      strategy = "error_count"
      threshold = 3
      window = "30s"
      min_calls = 3
      open_for = "60s"
      """;

  private static FlowgateServer server;

  private SharedServer() {}

  /** The server, started at the first call. */
  static synchronized FlowgateServer get() {
    if (server == null) {
      FlowgateServer s = FlowgateServer.start(RULES);
      Runtime.getRuntime().addShutdownHook(new Thread(s::close, "flowgate-shared-server-close"));
      server = s;
    }
    return server;
  }
}
