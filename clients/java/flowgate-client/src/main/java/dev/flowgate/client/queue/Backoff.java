package dev.flowgate.client.queue;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.BooleanSupplier;

/**
 * The gate a worker's lease loops pass before each lease. While leases succeed it is open.
 * After a failure it is shut until a delay has passed (exponential from {@code initial}, capped
 * at {@code max}, with jitter, and never shorter than the server's {@code Retry-After}); then one
 * loop at a time probes (a lease that does not wait), and the first success opens it for all.
 * So a worker whose server is down sends one lease per backoff delay, whatever its concurrency.
 * Thread-safe (its monitor).
 */
final class Backoff {
  /** What a loop may send once through the gate. */
  enum Turn {
    /** A long-poll: the server answered last time. */
    LEASE,
    /** A lease that does not wait: the server failed last time; this asks whether it is back. */
    PROBE,
    /** The worker stops. */
    STOP
  }

  /** The longest {@code Retry-After} honoured: a server's wish, not a reason to stall. */
  private static final long MAX_HINT_NANOS = Duration.ofSeconds(60).toNanos();

  private final long initialNanos;
  private final long maxNanos;
  private int failures;
  private long resumeAt;
  private boolean probing;

  Backoff(Duration initial, Duration max) {
    this.initialNanos = initial.toNanos();
    this.maxNanos = max.toNanos();
  }

  /**
   * Waits until this loop may lease: at once while the server answers; after a failure, until
   * the delay passed and no other loop is probing.
   *
   * @param stopping whether the worker stops (checked at each wake-up)
   * @return what to send
   */
  synchronized Turn await(BooleanSupplier stopping) throws InterruptedException {
    while (true) {
      if (stopping.getAsBoolean()) {
        return Turn.STOP;
      }
      if (failures == 0) {
        return Turn.LEASE;
      }
      long now = System.nanoTime();
      if (!probing && now - resumeAt >= 0) {
        probing = true;
        return Turn.PROBE;
      }
      long waitMs = probing ? 1000 : Math.max(1, (resumeAt - now + 999_999) / 1_000_000);
      wait(waitMs);
    }
  }

  /**
   * A lease was answered: the gate opens.
   *
   * @return the failures in a row it ends (0 when none)
   */
  synchronized int success() {
    int ended = failures;
    failures = 0;
    probing = false;
    notifyAll();
    return ended;
  }

  /**
   * A lease failed: the gate shuts for the next delay.
   *
   * @param hint the server's {@code Retry-After}, or null
   * @return the delay, and the failures in a row so far
   */
  synchronized Delay failure(Duration hint) {
    failures++;
    long base = initialNanos;
    for (int i = 1; i < failures && base < maxNanos; i++) {
      base *= 2;
    }
    base = Math.min(base, maxNanos);
    // Equal jitter: half the delay fixed, half random, so that workers that failed together do
    // not come back together.
    long delay = base / 2 + ThreadLocalRandom.current().nextLong(base / 2 + 1);
    if (hint != null) {
      delay = Math.max(delay, Math.min(hint.toNanos(), MAX_HINT_NANOS));
    }
    resumeAt = System.nanoTime() + delay;
    probing = false;
    notifyAll();
    return new Delay(Duration.ofNanos(delay), failures);
  }

  /** Wakes the loops waiting at the gate (the worker stops). */
  synchronized void wake() {
    notifyAll();
  }

  /** A failure's delay, and the failures in a row. */
  record Delay(Duration delay, int failures) {}
}
