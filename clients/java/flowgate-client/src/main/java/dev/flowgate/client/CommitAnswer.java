package dev.flowgate.client;

import java.util.List;

/**
 * The answer to a commit.
 *
 * @param id the reservation committed; null for a plain charge to a domain and descriptors
 * @param expired whether the reservation had expired (its cost is counted all the same)
 * @param rules what was applied, per rule
 */
public record CommitAnswer(String id, boolean expired, List<RuleCharge> rules) {
  /** Replaces an absent list by an empty one. */
  public CommitAnswer {
    rules = rules == null ? List.of() : List.copyOf(rules);
  }
}
