package dev.flowgate.client;

import com.fasterxml.jackson.annotation.JsonProperty;

/** What a charge did under a rule: counted units, or gave them back. */
public enum ChargeKind {
  /** Units counted. */
  @JsonProperty("charge")
  CHARGE,
  /** Units given back. */
  @JsonProperty("refund")
  REFUND
}
