package dev.flowgate.client;

import java.util.List;

/**
 * What a body of reports reached.
 *
 * @param counted reports with an outcome counted by a breaker or an adaptive limit
 * @param noBreaker reports with an outcome that matched neither (dropped)
 * @param dropped reports dropped at a breaker's cap on instances
 * @param charges the charges of the reports with a cost, in the order of the reports
 */
public record ReportAnswer(long counted, long noBreaker, long dropped, List<Charges> charges) {

  /** Replaces an absent list by an empty one. */
  public ReportAnswer {
    charges = charges == null ? List.of() : List.copyOf(charges);
  }

  /**
   * One report's charges.
   *
   * @param report the report's index in the body
   * @param rules each rule the cost went to (none when every rule it matched is unlimited now)
   */
  public record Charges(int report, List<RuleCharge> rules) {
    /** Replaces an absent list by an empty one. */
    public Charges {
      rules = rules == null ? List.of() : List.copyOf(rules);
    }
  }
}
