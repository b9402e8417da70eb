package dev.flowgate.spring;

import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Mono;

/** The tests' guarded service: a payment per channel, blocking and reactive. */
public class Payments {
  /** A payment to a channel. */
  public record Payment(String channel, long amount) {}

  /** What a payment answers. */
  public record Receipt(String channel, long amount) {}

  private final AtomicInteger calls = new AtomicInteger();

  /** How many payments ran (a method: the proxy's own fields are not the bean's). */
  public int calls() {
    return calls.get();
  }

  @RateLimited(domain = "payments", descriptors = "channel=#{#p.channel}")
  public Receipt pay(Payment p) {
    calls.incrementAndGet();
    return new Receipt(p.channel(), p.amount());
  }

  @RateLimited(domain = "payments", descriptors = "channel=#{#p.channel}")
  public Mono<Receipt> payReactive(Payment p) {
    return Mono.fromSupplier(
        () -> {
          calls.incrementAndGet();
          return new Receipt(p.channel(), p.amount());
        });
  }
}
