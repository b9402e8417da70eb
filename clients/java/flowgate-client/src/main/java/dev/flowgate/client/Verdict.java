package dev.flowgate.client;

import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * The server's decision on a request: admitted or refused, why, and each descriptor's status.
 * A refusal is a value here, not an exception: {@link #orThrow()} turns it into one.
 *
 * @param allowed whether the request is admitted
 * @param code Envoy's code of the request
 * @param reason why it was refused ({@link ErrorCode#OVER_LIMIT}, {@link
 *     ErrorCode#CIRCUIT_OPEN}, or {@link ErrorCode#STORE_UNAVAILABLE} for rules' {@code closed}
 *     failure policies), or null when admitted
 * @param retryAfterMs when refused, milliseconds until the same request could pass, or null
 * @param waitMs in {@code delay} mode, milliseconds to wait before proceeding (the slot reserved)
 * @param statuses one status per descriptor, in order
 * @param leases the concurrency leases taken
 * @param probes half-open breakers' probe leases (null or empty when none)
 * @param breaker the breaker that refused the request, or null
 */
public record Verdict(
    boolean allowed,
    Code code,
    ErrorCode reason,
    Double retryAfterMs,
    double waitMs,
    List<DescriptorStatus> statuses,
    List<LeaseRef> leases,
    List<ProbeRef> probes,
    BreakerRef breaker) {

  /** Replaces absent lists by empty ones. */
  public Verdict {
    statuses = statuses == null ? List.of() : List.copyOf(statuses);
    leases = leases == null ? List.of() : List.copyOf(leases);
    probes = probes == null ? List.of() : List.copyOf(probes);
  }

  /** When refused, how long until the same request could pass; empty when admitted or unknown. */
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfterMs).map(Verdict::millis);
  }

  /** In {@code delay} mode, the wait before the reserved slot; zero otherwise. */
  public Duration waitTime() {
    return millis(waitMs);
  }

  /**
   * This verdict if admitted; otherwise throws what refused it.
   *
   * @return this verdict, admitted
   * @throws CircuitOpenException when a circuit breaker refused it
   * @throws OverLimitException when a limit refused it, or a rule's {@code closed} failure
   *     policy (its {@code code()} then {@link ErrorCode#STORE_UNAVAILABLE})
   */
  public Verdict orThrow() {
    if (allowed) {
      return this;
    }
    Duration retry = retryAfter().orElse(null);
    if (reason == ErrorCode.CIRCUIT_OPEN) {
      String name = breaker == null ? "a circuit breaker" : "breaker " + breaker.key();
      throw new CircuitOpenException(reason, name + " is open", retry, this);
    }
    if (reason == ErrorCode.STORE_UNAVAILABLE) {
      throw new OverLimitException(reason, refusedByPolicy(), retry, this);
    }
    throw new OverLimitException(ErrorCode.OVER_LIMIT, refusedBy(), retry, this);
  }

  private String refusedByPolicy() {
    for (DescriptorStatus s : statuses) {
      if (s.overLimit() && !s.shadow()) {
        return "refused by the closed failure policy of rule "
            + s.rule()
            + ": the store could not answer";
      }
    }
    return "refused by a closed failure policy: the store could not answer";
  }

  private String refusedBy() {
    for (DescriptorStatus s : statuses) {
      if (s.overLimit() && !s.shadow()) {
        return "over the limit of rule " + s.rule() + " (" + s.quota() + ")";
      }
    }
    return "over the limit";
  }

  /** A duration of fractional milliseconds, rounded up to the microsecond. */
  static Duration millis(double ms) {
    return Duration.ofNanos((long) Math.ceil(ms * 1000.0) * 1000L);
  }
}
