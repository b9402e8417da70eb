package dev.flowgate.examples.refund;

import dev.flowgate.spring.FlowgateWorker;
import org.springframework.stereotype.Component;

/**
 * Drains the refunds queue: the queue releases one refund a second (its rate, across every
 * instance of this service), and each goes to the channel. A refund that throws is retried after
 * the queue's backoff, and after 5 attempts lands in the dead letters.
 */
@Component
public class RefundWorker {
  private final RefundChannel channel;

  public RefundWorker(RefundChannel channel) {
    this.channel = channel;
  }

  @FlowgateWorker(domain = "payments", descriptor = "biz=REFUND, channel=${refunds.channel}")
  public void refund(Refund refund) {
    channel.send(refund);
  }
}
