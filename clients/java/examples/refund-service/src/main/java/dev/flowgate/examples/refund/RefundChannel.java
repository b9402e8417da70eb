package dev.flowgate.examples.refund;

import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * The refund channel, as this example stands it in: it logs each refund and records when it was
 * sent. A real one would call the channel's API, and throw on a failure (the worker retries).
 */
@Component
public class RefundChannel {
  private static final Logger LOG = LoggerFactory.getLogger(RefundChannel.class);

  /** A refund sent: which, and when ({@code nanos}: the JVM's monotonic clock). */
  public record Sent(String id, String amount, Instant at, long nanos) {}

  private final List<Sent> sent = new CopyOnWriteArrayList<>();

  /** Sends one refund. */
  public void send(Refund refund) {
    sent.add(
        new Sent(refund.id(), refund.amount().toPlainString(), Instant.now(), System.nanoTime()));
    LOG.info("refund {} of {} sent to the channel", refund.id(), refund.amount());
  }

  /** The refunds sent so far, in order. */
  public List<Sent> sent() {
    return List.copyOf(sent);
  }
}
