package dev.flowgate.client;

import java.time.Duration;
import java.util.Optional;

/**
 * What a charge did under one rule: the same answer for a report's cost ({@link
 * ReportAnswer#charges()}) and a reservation's commit ({@link CommitAnswer#rules()}).
 *
 * @param domain the rule's domain
 * @param rule the rule's name
 * @param key the state key charged ({@code llm:tokens:api_key=k1})
 * @param descriptor the index of the report's descriptor that matched the rule; null in a commit
 * @param kind a charge or a refund
 * @param released units of the reservation's estimate given back (a commit); 0 in a report
 * @param applied units counted (a charge) or given back (a refund)
 * @param dropped units not applied: a charge's past {@code max_debt}, a refund's past empty
 * @param debt units counted beyond the limit now
 * @param over whether the key is in debt: its checks are refused until {@code retryAfterMs}
 * @param remaining units a check may still take now
 * @param retryAfterMs when over, milliseconds until a check of the key is admitted again; null
 *     when not over
 */
public record RuleCharge(
    String domain,
    String rule,
    String key,
    Integer descriptor,
    ChargeKind kind,
    long released,
    long applied,
    long dropped,
    long debt,
    boolean over,
    long remaining,
    Long retryAfterMs) {

  /** When over, how long until a check of the key is admitted again. */
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfterMs).map(Duration::ofMillis);
  }
}
