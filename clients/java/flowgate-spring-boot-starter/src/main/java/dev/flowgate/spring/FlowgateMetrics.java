package dev.flowgate.spring;

import java.time.Duration;

/**
 * What the starter counts of the calls it guards. With Micrometer on the class path and a {@code
 * MeterRegistry} bean, these are meters (see {@link MicrometerFlowgateMetrics}); otherwise
 * nothing is counted. Other parts of an application (a queue worker) may count through the same
 * bean.
 */
public interface FlowgateMetrics {
  /** Counts nothing. */
  FlowgateMetrics NONE = new FlowgateMetrics() {};

  /**
   * One guarded call decided.
   *
   * @param domain the domain asked
   * @param outcome {@code allowed}, {@code over_limit}, {@code circuit_open}, {@code
   *     failed_open} (Flowgate could not answer; the call went ahead) or {@code failed_closed}
   *     (it could not answer; the call was refused)
   */
  default void call(String domain, String outcome) {}

  /**
   * A call waited for a {@code delay} rule's slot.
   *
   * @param domain the domain asked
   * @param wait how long
   */
  default void waited(String domain, Duration wait) {}

  /**
   * An outcome reported to the breakers.
   *
   * @param domain the domain
   * @param ok whether the call succeeded
   */
  default void reported(String domain, boolean ok) {}

  /**
   * A call to Flowgate that failed.
   *
   * @param domain the domain
   * @param kind {@code unavailable} (no answer, or a 5xx), {@code request} (a 4xx: the
   *     request or the credentials are wrong), {@code report} (a report or release lost)
   */
  default void error(String domain, String kind) {}
}
