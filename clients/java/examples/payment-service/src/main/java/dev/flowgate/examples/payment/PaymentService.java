package dev.flowgate.examples.payment;

import dev.flowgate.spring.RateLimited;
import org.springframework.stereotype.Service;

/**
 * Payments, limited per channel by Flowgate: each call asks the {@code payments} rules for its
 * channel first (WPG: 20 a second); one over the limit throws {@code
 * FlowgateRateLimitedException}, which the starter answers as 429 with {@code Retry-After}.
 */
@Service
public class PaymentService {
  private final ChannelClient channel;

  public PaymentService(ChannelClient channel) {
    this.channel = channel;
  }

  @RateLimited(domain = "payments", descriptors = "biz=PAY, channel=#{#p.channel}")
  public Receipt pay(Payment p) {
    return channel.charge(p);
  }
}
