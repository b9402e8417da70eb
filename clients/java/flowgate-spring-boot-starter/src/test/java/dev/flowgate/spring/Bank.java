package dev.flowgate.spring;

import java.util.concurrent.CompletableFuture;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The tests' downstream call behind a Flowgate breaker, and a rate-limited waiting call. */
public class Bank {
  @FlowgateBreaker(
      domain = "downstream",
      descriptors = "bank=#{#bank}",
      ignoreExceptions = IllegalArgumentException.class)
  public String charge(String bank, String outcome) {
    switch (outcome) {
      case "fail" -> throw new IllegalStateException("the bank failed");
      case "bad-input" -> throw new IllegalArgumentException("the caller's mistake");
      default -> {
        return "charged at " + bank;
      }
    }
  }

  @FlowgateBreaker(domain = "downstream", descriptors = "bank=#{#bank}")
  public CompletableFuture<String> chargeAsync(String bank, boolean fail) {
    return fail
        ? CompletableFuture.failedFuture(new IllegalStateException("the bank failed"))
        : CompletableFuture.completedFuture("charged at " + bank);
  }

  @FlowgateBreaker(domain = "downstream", descriptors = "bank=#{#bank}")
  public Mono<String> chargeReactive(String bank, boolean fail) {
    return fail
        ? Mono.error(new IllegalStateException("the bank failed"))
        : Mono.just("charged at " + bank);
  }

  @RateLimited(domain = "payments", descriptors = "channel=#{#channel}")
  public Flux<String> statements(String channel) {
    return Flux.just("a", "b", "c");
  }

  @RateLimited(domain = "downstream", descriptors = "bank=#{#bank}")
  @FlowgateBreaker(domain = "downstream", descriptors = "bank=#{#bank}")
  public String chargeBoth(String bank, boolean fail) {
    if (fail) {
      throw new IllegalStateException("the bank failed");
    }
    return "charged at " + bank;
  }

  @RateLimited(domain = "spaced", descriptors = "queue=#{#queue}")
  public long spaced(String queue) {
    return System.nanoTime();
  }

  @RateLimited(domain = "payments", descriptors = "channel=#{#channel}")
  public String failOpen(String channel) {
    return "ran";
  }

  @RateLimited(
      domain = "payments",
      descriptors = "channel=#{#channel}",
      onUnavailable = Unavailable.REJECT)
  public String failClosed(String channel) {
    return "ran";
  }
}
