package dev.flowgate.client.queue;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.testing.FlowgateServer;
import java.time.Duration;

/** The queue tests' shared configuration and clients. */
final class QueueTesting {
  private QueueTesting() {}

  /** The admin token of the test servers (admin routes: requeue, purge). */
  static final String ADMIN = "queue-tests-admin-token-0123456789abcdef";

  /** The refund instance of channel WPG. */
  static final QueueInstance WPG =
      QueueInstance.of("payments", Descriptor.of("biz", "REFUND", "channel", "WPG"));

  /** A refunds queue, one instance per channel, of this rate and these extra fields. */
  static String queue(String rate, String extra) {
    return """
        domain = "payments"

        [[queue]]
        name = "refunds"
        match = ["biz=REFUND", "channel"]
        rate = "%s"
        %s
        """
        .formatted(rate, extra);
  }

  /** A server of this configuration, with the admin token. */
  static FlowgateServer server(String config, String... flags) {
    return FlowgateServer.builder().config(config).env("FLOWGATE_ADMIN_TOKEN", ADMIN)
        .flags(flags).start();
  }

  /** A server of this configuration at a fixed HTTP address (one started again). */
  static FlowgateServer serverAt(String httpAddr, String config, String... flags) {
    return FlowgateServer.builder().config(config).env("FLOWGATE_ADMIN_TOKEN", ADMIN)
        .httpAddr(httpAddr).flags(flags).start();
  }

  /** A client of the server at {@code baseUrl}, with the admin token. */
  static FlowgateClient client(String baseUrl) {
    return FlowgateClient.builder(baseUrl)
        .token(ADMIN)
        .connectTimeout(Duration.ofSeconds(2))
        .requestTimeout(Duration.ofSeconds(5))
        .build();
  }
}
