package dev.flowgate.spring;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;

/**
 * The starter's meters:
 *
 * <ul>
 *   <li>{@code flowgate.client.calls} (counter; {@code domain}, {@code outcome}: {@code allowed},
 *       {@code over_limit}, {@code circuit_open}, {@code failed_open}, {@code failed_closed}:
 *       refused because Flowgate, or its store for a rule whose failure policy is {@code closed},
 *       could not decide);
 *   <li>{@code flowgate.client.rejections} (counter; {@code domain}, {@code reason}: {@code
 *       over_limit}, {@code circuit_open}, {@code unavailable}): the calls refused;
 *   <li>{@code flowgate.client.waits} (timer; {@code domain}): the waits for {@code delay} slots;
 *   <li>{@code flowgate.client.reports} (counter; {@code domain}, {@code outcome}: {@code ok},
 *       {@code error}): the outcomes reported to the breakers;
 *   <li>{@code flowgate.client.errors} (counter; {@code domain}, {@code kind}: {@code
 *       unavailable}, {@code request}, {@code report}): the calls to Flowgate that failed.
 * </ul>
 */
public final class MicrometerFlowgateMetrics implements FlowgateMetrics {
  private final MeterRegistry registry;

  /** @param registry where the meters are registered */
  public MicrometerFlowgateMetrics(MeterRegistry registry) {
    this.registry = registry;
  }

  @Override
  public void call(String domain, String outcome) {
    counter("flowgate.client.calls", "calls decided by Flowgate", domain, "outcome", outcome)
        .increment();
    String reason =
        switch (outcome) {
          case "over_limit", "circuit_open" -> outcome;
          case "failed_closed" -> "unavailable";
          default -> null;
        };
    if (reason != null) {
      counter("flowgate.client.rejections", "calls refused", domain, "reason", reason).increment();
    }
  }

  @Override
  public void waited(String domain, Duration wait) {
    Timer.builder("flowgate.client.waits")
        .description("waits for delay rules' slots")
        .tag("domain", domain)
        .register(registry)
        .record(wait);
  }

  @Override
  public void reported(String domain, boolean ok) {
    counter("flowgate.client.reports", "outcomes reported", domain, "outcome", ok ? "ok" : "error")
        .increment();
  }

  @Override
  public void error(String domain, String kind) {
    counter("flowgate.client.errors", "calls to Flowgate that failed", domain, "kind", kind)
        .increment();
  }

  private Counter counter(String name, String description, String domain, String key, String value) {
    return Counter.builder(name)
        .description(description)
        .tag("domain", domain)
        .tag(key, value)
        .register(registry);
  }
}
