package dev.flowgate.client;

import java.util.List;

/**
 * The server's figures ({@code GET /v1/stats}, the dashboard's), in part: per rule, its decisions
 * and its debt; the outstanding reservations. The cluster's on Redis, the node's on the embedded
 * store; read once a second by the server.
 *
 * @param at when they were read, Unix milliseconds
 * @param node the node that answered
 * @param rules each rule's figures
 * @param reservations the outstanding reservations per rule (rules without any left out)
 */
public record Stats(long at, String node, List<RuleFigures> rules, List<Reservations> reservations) {

  /** Replaces absent lists by empty ones. */
  public Stats {
    rules = rules == null ? List.of() : List.copyOf(rules);
    reservations = reservations == null ? List.of() : List.copyOf(reservations);
  }

  /**
   * One rule's figures.
   *
   * @param domain its domain
   * @param name its name
   * @param limit the limit in force ({@code "20/s"}), or null
   * @param totals its decisions since the node started
   * @param admittedRate requests admitted per second, lately
   * @param rejectedRate requests rejected per second, lately
   * @param rejectionRatio the share rejected, lately
   * @param debt units charged past its limit and not yet paid back
   */
  public record RuleFigures(
      String domain,
      String name,
      String limit,
      Totals totals,
      double admittedRate,
      double rejectedRate,
      double rejectionRatio,
      long debt) {}

  /**
   * A rule's decisions since the node started.
   *
   * @param admitted requests admitted
   * @param rejected requests rejected (not in shadow)
   * @param circuitOpen requests refused by an open breaker before the rule was asked
   * @param failurePolicy requests decided by the failure policy
   */
  public record Totals(long admitted, long rejected, long circuitOpen, long failurePolicy) {}

  /**
   * A rule's outstanding reservations.
   *
   * @param domain the rule's domain
   * @param rule the rule
   * @param count reservations outstanding
   * @param units units they hold
   */
  public record Reservations(String domain, String rule, long count, long units) {}

  /** The figures of a rule, or null when the server has none for it. */
  public RuleFigures rule(String domain, String name) {
    for (RuleFigures r : rules) {
      if (r.domain().equals(domain) && r.name().equals(name)) {
        return r;
      }
    }
    return null;
  }
}
