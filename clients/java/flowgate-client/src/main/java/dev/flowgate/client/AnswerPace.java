package dev.flowgate.client;

/**
 * How long the server takes to decide a check, and so how many checks one pipelined connection
 * may carry at once.
 *
 * <p>The server answers the requests on one connection in turn: a check written behind others
 * waits for their decisions. That costs nothing when a decision takes microseconds of the
 * server's CPU (the embedded store): the server's threads would have spent them anyway, and
 * pipelining saves both sides a system call or two per check. It costs a great deal when each
 * decision waits for a store's round trip (Redis): the checks on a connection then wait for one
 * round trip after another, and the server, with fewer decisions in flight at once, sends Redis
 * fewer at a time (measured at 64 threads: half the throughput, twice the CPU per check).
 *
 * <p>So the client reads the time the server says each decision took ({@code Server-Timing:
 * decide;dur=}, not the time on the wire, which also holds the server's queue under load) and
 * keeps its moving average. A connection may carry as many checks as fit in {@link
 * #BUDGET_NANOS} of decisions at that average, between 1 and the most the client was built with:
 * all of them on the embedded store (tens of microseconds), one on Redis (hundreds), one when a
 * store stops answering (each decision its deadline). Until a decision's time is known (the first
 * answers, or a server or proxy that does not send the header), one.
 *
 * <p>Thread-safe: samples from many connections race on one average, which may lose one now and
 * then; the average is only a guide.
 */
final class AnswerPace {
  /** The decisions' time a check may wait behind on its connection, by default. */
  static final long BUDGET_NANOS = 250_000;

  /** Weight of a new sample in the average: 1 / 2^SHIFT. */
  private static final int SHIFT = 3;

  private final int maxDepth;
  private final long budgetNanos;
  /** The average time of a decision, in nanoseconds; 0 before the first sample. */
  private volatile long decideNanos;

  /**
   * @param maxDepth the most checks in flight at once on one connection (at least 1)
   */
  AnswerPace(int maxDepth) {
    this(maxDepth, BUDGET_NANOS);
  }

  /**
   * @param maxDepth the most checks in flight at once on one connection (at least 1)
   * @param budgetNanos the decisions' time a check may wait behind (the tests widen it)
   */
  AnswerPace(int maxDepth, long budgetNanos) {
    if (maxDepth < 1) {
      throw new IllegalArgumentException("maxDepth must be at least 1, not " + maxDepth);
    }
    this.maxDepth = maxDepth;
    this.budgetNanos = budgetNanos;
  }

  /**
   * Counts one answer whose decision the server says took {@code nanos} (negative: the answer
   * did not say, and is not counted).
   */
  void answered(long nanos) {
    if (nanos < 0) {
      return;
    }
    long avg = decideNanos;
    decideNanos = avg == 0 ? Math.max(1, nanos) : Math.max(1, avg + ((nanos - avg) >> SHIFT));
  }

  /** The average time of a decision, in nanoseconds (0: none known yet). */
  long decideNanos() {
    return decideNanos;
  }

  /**
   * The most checks one connection may carry now: as many as fit in the budget at the average
   * decision's time, at least 1 and at most the depth built with; 1 while none is known.
   */
  int depth() {
    long avg = decideNanos;
    if (avg == 0) {
      return 1;
    }
    return (int) Math.max(1, Math.min(maxDepth, budgetNanos / avg));
  }
}
