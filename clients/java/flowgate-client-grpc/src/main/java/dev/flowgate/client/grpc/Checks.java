package dev.flowgate.client.grpc;

import flowgate.v1.DecisionsOuterClass.CheckAnswer;
import flowgate.v1.DecisionsOuterClass.CheckRequest;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A client's checks: the one {@link CheckStream} they share, opened at the first check and again
 * after it ends; their ids; the deadlines of the asynchronous ones.
 */
final class Checks {
  /** How often a check tries a new stream that ended before the check could go on it. */
  private static final int OPENINGS = 3;

  private final ManagedChannel channel;
  private final AtomicLong ids = new AtomicLong();
  private final Object lock = new Object();
  private volatile CheckStream stream;
  private volatile boolean closed;
  private volatile ScheduledThreadPoolExecutor timer;

  Checks(ManagedChannel channel) {
    this.channel = channel;
  }

  long nextId() {
    return ids.incrementAndGet();
  }

  /**
   * Sends {@code request} on the stream, whose answer (or failure) completes {@code answer}.
   *
   * @return the stream it went on, to forget it there if its caller stops waiting; null when
   *     it went on none ({@code answer} then failed already)
   */
  CheckStream send(CheckRequest request, CompletableFuture<CheckAnswer> answer) {
    for (int i = 0; i < OPENINGS && !closed; i++) {
      CheckStream s = current();
      if (s.send(request, answer)) {
        return s;
      }
    }
    answer.completeExceptionally(
        Status.UNAVAILABLE
            .withDescription(closed ? "the client is closed" : "the check stream ends as it opens")
            .asRuntimeException());
    return null;
  }

  /** Drops the answer of check {@code id} on {@code stream} (its caller stopped waiting). */
  static void forget(CheckStream stream, long id) {
    if (stream != null) {
      stream.forget(id);
    }
  }

  private CheckStream current() {
    CheckStream s = stream;
    if (s != null && !s.isClosed()) {
      return s;
    }
    synchronized (lock) {
      s = stream;
      if (s == null || s.isClosed()) {
        s = new CheckStream(channel, this::ended);
        stream = s;
      }
      return s;
    }
  }

  /** A stream ended: the checks it left unanswered fail with its status; the next opens anew. */
  private void ended(CheckStream.Ended end) {
    synchronized (lock) {
      if (stream == end.stream()) {
        stream = null;
      }
    }
    StatusRuntimeException failure = end.status().asRuntimeException();
    for (Long id : end.left().keySet()) {
      CompletableFuture<CheckAnswer> waiting = end.left().remove(id);
      if (waiting != null) {
        waiting.completeExceptionally(failure);
      }
    }
  }

  /** Runs {@code task} after {@code nanos}, on the deadlines' own thread. */
  ScheduledFuture<?> schedule(Runnable task, long nanos) {
    ScheduledThreadPoolExecutor t = timer;
    if (t == null) {
      synchronized (lock) {
        t = timer;
        if (t == null) {
          t =
              new ScheduledThreadPoolExecutor(
                  1,
                  r -> {
                    Thread thread = new Thread(r, "flowgate-grpc-deadlines");
                    thread.setDaemon(true);
                    return thread;
                  });
          t.setRemoveOnCancelPolicy(true);
          timer = t;
        }
      }
    }
    return t.schedule(task, nanos, TimeUnit.NANOSECONDS);
  }

  /** Ends the stream once its queued checks are sent (the server answers those in flight). */
  void close() {
    CheckStream s;
    synchronized (lock) {
      closed = true;
      s = stream;
      stream = null;
    }
    if (s != null) {
      s.finish();
    }
    ScheduledThreadPoolExecutor t = timer;
    if (t != null) {
      t.shutdown();
    }
  }
}
