package dev.flowgate.client;

/** Envoy's code of a request or of one descriptor, as gRPC's {@code overall_code}. */
public enum Code {
  /** Admitted. */
  OK,
  /** Refused (by a rule not in shadow mode, or a breaker). */
  OVER_LIMIT
}
