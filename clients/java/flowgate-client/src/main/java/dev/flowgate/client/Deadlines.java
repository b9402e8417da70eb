package dev.flowgate.client;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The deadlines of exchanges that wait in a plain blocking read: one daemon thread, shared by
 * every client of the JVM, closes the connection of an exchange past its deadline, which ends
 * the read (its caller then reports a timeout).
 *
 * <p><b>Why.</b> A socket read with a timeout ({@code SO_TIMEOUT}) costs the JDK three system
 * calls when the answer is not there yet (a read that finds nothing, a poll, the read); without
 * one, the read waits in the kernel: one system call. Under many threads that is a tenth of the
 * client's CPU per call. The price: a deadline is seen at most {@link #TICK_NANOS} late.
 *
 * <p>It checks every {@link #TICK_NANOS} while exchanges are watched, and for {@link
 * #IDLE_NANOS} after the last one; then it sleeps until the next one is watched.
 */
final class Deadlines {
  /** How often the deadlines are checked while exchanges wait. */
  static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(5);
  /** How long the thread keeps checking after the last exchange before it sleeps. */
  static final long IDLE_NANOS = TimeUnit.SECONDS.toNanos(2);

  private static final Set<Http1Connection> WATCHED = ConcurrentHashMap.newKeySet();
  private static volatile boolean sleeping;
  private static final Thread THREAD = start();

  private Deadlines() {}

  private static Thread start() {
    Thread t = new Thread(Deadlines::run, "flowgate-client-deadlines");
    t.setDaemon(true);
    t.start();
    return t;
  }

  /** Watches {@code c}'s exchange until {@link #unwatch}: past its deadline, it is expired. */
  static void watch(Http1Connection c) {
    WATCHED.add(c);
    if (sleeping) {
      LockSupport.unpark(THREAD);
    }
  }

  static void unwatch(Http1Connection c) {
    WATCHED.remove(c);
  }

  private static void run() {
    long lastBusy = System.nanoTime();
    while (true) {
      long now = System.nanoTime();
      if (WATCHED.isEmpty()) {
        if (now - lastBusy > IDLE_NANOS) {
          sleeping = true;
          // Looked at again once the flag is seen: a watch that came meanwhile wakes it.
          if (WATCHED.isEmpty()) {
            LockSupport.park(Deadlines.class);
          }
          sleeping = false;
          lastBusy = System.nanoTime();
          continue;
        }
      } else {
        lastBusy = now;
        for (Http1Connection c : WATCHED) {
          if (now - c.watchedDeadline() >= 0) {
            WATCHED.remove(c);
            c.expire();
          }
        }
      }
      LockSupport.parkNanos(Deadlines.class, TICK_NANOS);
    }
  }
}
