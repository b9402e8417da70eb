package dev.flowgate.client;

/** A protected call's outcome, as a report names it. */
public enum Outcome {
  /** The call succeeded. */
  OK("ok"),
  /** The call failed. */
  ERROR("error");

  final String wire;

  Outcome(String wire) {
    this.wire = wire;
  }
}
