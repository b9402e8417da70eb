package dev.flowgate.client;

import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * One report to {@code POST /v1/report}: a protected call's outcome for the circuit breakers
 * (and adaptive limits), a cost to charge to the rules (or refund), or both. Immutable.
 *
 * <pre>{@code
 * Report.outcome(req, true, Duration.ofMillis(40))      // a call that succeeded in 40 ms
 * Report.charge(req, 950)                               // an LLM answer's 950 tokens
 * Report.refund(req, 300)                               // 300 units given back
 * Report.outcome(req, true, latency).withCost(950)      // both
 * }</pre>
 *
 * @param domain the domain
 * @param descriptors the call's descriptors
 * @param outcome the outcome, or null for a charge alone
 * @param latencyMs the call's latency in milliseconds, or null
 * @param probe the probe lease a half-open breaker admitted the call with, or null
 * @param cost units to charge (or refund), or null
 * @param refund whether {@code cost} is given back rather than charged
 */
public record Report(
    String domain,
    List<Descriptor> descriptors,
    Outcome outcome,
    Double latencyMs,
    Long probe,
    Long cost,
    boolean refund) {

  /** Checks the report can be sent. */
  public Report {
    Objects.requireNonNull(domain, "domain");
    descriptors = List.copyOf(descriptors);
    if (outcome == null && cost == null) {
      throw new IllegalArgumentException("a report needs an outcome, a cost, or both");
    }
    if (refund && cost == null) {
      throw new IllegalArgumentException("a refund needs a cost");
    }
    if (cost != null && cost < 0) {
      throw new IllegalArgumentException(
          "cost is negative: " + cost + " (give units back with Report.refund)");
    }
    if (latencyMs != null && (latencyMs < 0 || latencyMs.isNaN())) {
      throw new IllegalArgumentException("latency is negative: " + latencyMs);
    }
  }

  /**
   * A call's outcome.
   *
   * @param request the call's request (its domain and descriptors)
   * @param ok whether it succeeded
   * @param latency how long it took
   * @return the report
   */
  public static Report outcome(Request request, boolean ok, Duration latency) {
    return new Report(
        request.domain(),
        request.descriptors(),
        ok ? Outcome.OK : Outcome.ERROR,
        latency.toNanos() / 1e6,
        null,
        null,
        false);
  }

  /**
   * A cost charged to every rule the request's descriptors match that takes charges: counted
   * even past the limit, up to the rule's {@code max_debt}.
   *
   * @param request the request
   * @param cost the units (0 only looks)
   * @return the report
   */
  public static Report charge(Request request, long cost) {
    return new Report(request.domain(), request.descriptors(), null, null, null, cost, false);
  }

  /**
   * Units given back to the rules the request's descriptors match, floored at empty.
   *
   * @param request the request
   * @param units the units
   * @return the report
   */
  public static Report refund(Request request, long units) {
    return new Report(request.domain(), request.descriptors(), null, null, null, units, true);
  }

  /**
   * This report with a cost charged as well.
   *
   * @param cost the units
   * @return a new report
   */
  public Report withCost(long cost) {
    return new Report(domain, descriptors, outcome, latencyMs, probe, cost, false);
  }

  /**
   * This report with the probe lease a half-open breaker admitted the call with.
   *
   * @param probe the lease ({@link ProbeRef#probe()})
   * @return a new report
   */
  public Report withProbe(long probe) {
    return new Report(domain, descriptors, outcome, latencyMs, probe, cost, refund);
  }
}
