package dev.flowgate.client.queue;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonValue;

/** Where a submitted job is: the submit answer's {@code state}. */
public enum JobState {
  /** Waiting for its release slot. */
  READY("ready"),
  /** Waiting for its {@code not_before_ms} or its retry time. */
  DELAYED("delayed"),
  /** Leased, or reserved for a lease. */
  IN_FLIGHT("in_flight"),
  /** In the dead letters. */
  DEAD("dead"),
  /** Acked; its key is remembered. */
  DONE("done"),
  /** A state this client does not know (a newer server's). */
  UNKNOWN("");

  private final String wire;

  JobState(String wire) {
    this.wire = wire;
  }

  /** The state as the server writes it. */
  @JsonValue
  public String wire() {
    return wire;
  }

  /** The state the server wrote; {@link #UNKNOWN} for one this client does not know. */
  @JsonCreator
  public static JobState of(String wire) {
    for (JobState s : values()) {
      if (s != UNKNOWN && s.wire.equals(wire)) {
        return s;
      }
    }
    return UNKNOWN;
  }
}
