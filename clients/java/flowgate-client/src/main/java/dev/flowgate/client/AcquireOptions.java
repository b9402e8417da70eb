package dev.flowgate.client;

import java.time.Duration;
import java.util.Objects;

/**
 * How an acquire waits for a {@code delay} rule's slot: on the client (the default: the server
 * answers at once with the wait, and the client completes the acquire when it has passed,
 * holding no thread meanwhile), or on the server ({@code "hold": true}: the answer comes once the
 * slot has come, which keeps the request open that long).
 */
public final class AcquireOptions {
  private static final AcquireOptions CLIENT = new AcquireOptions(false, Duration.ZERO);

  private final boolean hold;
  private final Duration longestHold;

  private AcquireOptions(boolean hold, Duration longestHold) {
    this.hold = hold;
    this.longestHold = longestHold;
  }

  /** The wait is passed on the client (the default). */
  public static AcquireOptions waitOnClient() {
    return CLIENT;
  }

  /**
   * The server holds the answer until the slot.
   *
   * @param longestHold the longest the server may hold it (the rules' {@code max_wait}): added
   *     to the request timeout
   * @return the options
   */
  public static AcquireOptions holdOnServer(Duration longestHold) {
    Objects.requireNonNull(longestHold, "longestHold");
    if (longestHold.isNegative()) {
      throw new IllegalArgumentException("longestHold is negative: " + longestHold);
    }
    return new AcquireOptions(true, longestHold);
  }

  boolean hold() {
    return hold;
  }

  Duration longestHold() {
    return longestHold;
  }
}
