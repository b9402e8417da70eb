package dev.flowgate.client.testing;

import java.time.Duration;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/** Waits for a condition, polling, up to a deadline: how the tests wait, never on bare sleeps. */
public final class Await {
  private Await() {}

  /**
   * Polls {@code condition} every 20 ms until it holds; fails the test after {@code timeout}.
   *
   * @param timeout the longest wait
   * @param what the condition, for the failure's message
   * @param condition the condition
   */
  public static void until(Duration timeout, Supplier<String> what, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError("not within " + timeout + ": " + what.get());
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted while waiting for: " + what.get(), e);
      }
    }
  }

  /** {@link #until(Duration, Supplier, BooleanSupplier)} with a fixed description. */
  public static void until(Duration timeout, String what, BooleanSupplier condition) {
    until(timeout, () -> what, condition);
  }
}
