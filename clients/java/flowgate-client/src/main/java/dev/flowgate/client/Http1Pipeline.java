package dev.flowgate.client;

import java.io.EOFException;
import java.io.IOException;
import java.net.http.HttpTimeoutException;
import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One HTTP/1.1 connection carrying the checks of several threads at once, pipelined: requests
 * written back to back without waiting for the answers, answers read in the same order.
 *
 * <p><b>Why.</b> Under many threads, most of a check's cost on both sides is the kernel's: a
 * write and a read per check on each side, each a trip through the TCP stack. Here the checks
 * made while answers are awaited go out together in one write, and one read takes the answers of
 * many; the server, reading many requests at once, spends less per check too (measured:
 * BENCHMARKS.md). A thread alone is not slowed: it writes its request and reads its answer
 * itself, as on a connection of its own. The price: a wake-up per call, by the thread reading
 * for the others, and the calls on a connection wait for that thread when the scheduler holds
 * it back (a longer p99 on a machine with more runnable threads than cores).
 *
 * <p><b>Who writes and who reads.</b> No thread of its own: one calling thread at a time has
 * the turn. A caller queues its request; if no one has the turn it takes it. The thread with the
 * turn writes all queued requests in one write whenever it has no answer left to parse (so
 * before each read that may wait), reads the answers in order, hands each to its caller (waking
 * it), and stops at its own answer, passing the turn to the next caller still waiting. The
 * others sleep until their answer or the turn comes, or their deadline passes.
 *
 * <p><b>Failures concern the calls on this connection only.</b> A failed write or read, or an
 * answer that closes the connection, fails every call queued or waiting here (none is resent:
 * each may have reached the server) and no other; new calls go on other connections. A call
 * whose deadline passes fails with a timeout by itself (one not yet written is never sent); the
 * answer of one that was written is read and dropped when it comes. The connection then takes no
 * new call (those behind a slow answer wait for it) and is closed once no caller waits on it. A
 * reader whose deadline passes in the middle of an answer closes the connection (the answer's
 * start is consumed), failing the calls still on it.
 *
 * <p>Thread-safe. The connection's reading state passes from one thread to the next under the
 * lock.
 */
final class Http1Pipeline {
  /** One request on the pipeline and, once read, its answer or failure. */
  private static final class Exchange {
    final byte[] request;
    final long deadline;
    final Thread caller;
    Http1Connection.Result result;
    IOException failure;
    /** Set (after the result or failure) under the lock; read without it by a woken caller. */
    volatile boolean done;
    /** The caller has the turn: it writes and reads. */
    boolean turn;
    /** The caller gave up (its deadline passed): its answer, if written, is read and dropped. */
    boolean abandoned;

    Exchange(byte[] request, long deadline) {
      this.request = request;
      this.deadline = deadline;
      this.caller = Thread.currentThread();
    }
  }

  private final Http1Connection connection;
  private final ReentrantLock lock = new ReentrantLock();
  /** Queued, not yet written. */
  private final ArrayDeque<Exchange> unsent = new ArrayDeque<>();
  /** Written (or being written), their answers awaited, in order. */
  private final ArrayDeque<Exchange> awaiting = new ArrayDeque<>();
  /** Whether a caller has the turn. */
  private boolean turnTaken;
  /** Takes no new calls (a timeout, the server's close, a failure, idleness). */
  private volatile boolean retired;
  private boolean closed;
  /** Calls queued or awaiting (read without the lock by the pool's choice). */
  private volatile int inFlight;
  /** When the last call here ended ({@link System#nanoTime()}), for the pool's idle check. */
  private volatile long idleSince;

  /** The pace of decisions, shared by a wire's pipelines: each answer read here is a sample. */
  private final AnswerPace pace;

  /** Requests written and writes made, over all of a wire's pipelines (for the tests). */
  private final AtomicLong requestsWritten;
  private final AtomicLong writes;

  /**
   * @param connection the connection, new
   * @param pace the pace of decisions, told of each answer read
   * @param requestsWritten counts the requests written
   * @param writes counts the writes (each of one or more requests)
   */
  Http1Pipeline(
      Http1Connection connection, AnswerPace pace, AtomicLong requestsWritten, AtomicLong writes) {
    this.connection = connection;
    this.pace = pace;
    this.requestsWritten = requestsWritten;
    this.writes = writes;
    this.idleSince = System.nanoTime();
  }

  /** Calls queued or awaiting their answer here now. */
  int inFlight() {
    return inFlight;
  }

  /** When the last call here ended, if none is in flight ({@link System#nanoTime()}). */
  long idleSince() {
    return idleSince;
  }

  /** Whether it takes no more calls. */
  boolean retired() {
    return retired;
  }

  /**
   * Whether a pipeline unused for a while may still be used: one in use is; an idle one is
   * checked for the server's close as the pool checks an idle connection ({@link
   * Http1Connection#stale}), and retired if closed.
   */
  boolean stillOpen() {
    lock.lock();
    try {
      if (retired) {
        return false;
      }
      if (turnTaken || inFlight > 0) {
        return true;
      }
      if (connection.stale()) {
        retired = true;
        closeIfDone();
        return false;
      }
      idleSince = System.nanoTime();
      return true;
    } finally {
      lock.unlock();
    }
  }

  /** Takes it out of use: closed now if no caller waits on it, else once none does. */
  void retire() {
    lock.lock();
    try {
      retired = true;
      closeIfDone();
    } finally {
      lock.unlock();
    }
  }

  /**
   * Sends a request and waits for its answer.
   *
   * @param request the request's bytes
   * @param deadline when its answer must have come ({@link System#nanoTime()})
   * @return the answer, or null when the pipeline took no new call (retired): nothing was sent,
   *     so the call may go on another connection
   * @throws IOException when the exchange failed ({@link HttpTimeoutException} past the
   *     deadline)
   */
  Http1Connection.Result exchange(byte[] request, long deadline) throws IOException {
    Exchange x = new Exchange(request, deadline);
    lock.lock();
    try {
      if (retired) {
        return null;
      }
      unsent.addLast(x);
      inFlight++;
      if (!turnTaken) {
        turnTaken = true;
        x.turn = true;
      }
    } finally {
      lock.unlock();
    }
    if (!x.turn && !awaitAnswerOrTurn(x)) {
      return outcome(x);
    }
    takeTurn(x);
    return outcome(x);
  }

  /**
   * Sleeps until {@code x} is answered (false) or given the turn (true); past its deadline, gives
   * it up and throws the timeout.
   */
  private boolean awaitAnswerOrTurn(Exchange x) throws IOException {
    while (true) {
      if (x.done) {
        return false; // the common wake-up: its answer came; no need to contend for the lock
      }
      lock.lock();
      try {
        if (x.done) {
          return false;
        }
        if (x.turn) {
          return true;
        }
        if (System.nanoTime() - x.deadline >= 0) {
          x.abandoned = true;
          if (unsent.remove(x)) {
            x.done = true; // never written: nothing to drop
            ended();
          }
          retired = true;
          closeIfDone();
          throw new HttpTimeoutException("no answer in time");
        }
      } finally {
        lock.unlock();
      }
      LockSupport.parkNanos(this, x.deadline - System.nanoTime());
    }
  }

  /**
   * The turn: writes the queued requests whenever no answer is left to parse, reads answers in
   * order and hands each to its caller, until {@code x}'s; then passes the turn on.
   */
  private void takeTurn(Exchange x) {
    while (true) {
      if (!connection.buffered() && !writeQueued()) {
        return;
      }
      Http1Connection.Result r;
      try {
        r = connection.readAnswer(x.deadline);
      } catch (HttpTimeoutException e) {
        timedOut(x, e);
        return;
      } catch (IOException e) {
        lock.lock();
        try {
          fail(e);
        } finally {
          lock.unlock();
        }
        return;
      }
      Thread wake = null;
      lock.lock();
      try {
        Exchange head = awaiting.pollFirst();
        if (head == null) {
          fail(new IOException("an answer to no request"));
          return;
        }
        pace.answered(r.decidedNanos());
        if (!head.done) {
          head.result = r;
          head.done = true;
          ended();
          if (head != x && !head.abandoned) {
            wake = head.caller;
          }
        }
        if (!r.keepAlive()) {
          fail(new EOFException("the server closed the connection after an answer"));
          wake = null; // woken by fail
          return;
        }
        if (x.done) {
          wake = passTurn();
          return;
        }
      } finally {
        lock.unlock();
        // Woken outside the lock, so that the others do not wait on it for a system call.
        if (wake != null) {
          LockSupport.unpark(wake);
        }
      }
    }
  }

  /** Writes the queued requests in one write; false when the connection failed. */
  private boolean writeQueued() {
    byte[] bytes;
    lock.lock();
    try {
      if (unsent.isEmpty()) {
        return true;
      }
      requestsWritten.addAndGet(unsent.size());
      writes.incrementAndGet();
      bytes = concat(unsent);
      // Awaited before they are written: answers come in this order.
      awaiting.addAll(unsent);
      unsent.clear();
    } finally {
      lock.unlock();
    }
    try {
      connection.write(bytes);
      return true;
    } catch (IOException e) {
      lock.lock();
      try {
        fail(e);
      } finally {
        lock.unlock();
      }
      return false;
    }
  }

  private static byte[] concat(ArrayDeque<Exchange> batch) {
    if (batch.size() == 1) {
      return batch.peekFirst().request;
    }
    int n = 0;
    for (Exchange x : batch) {
      n += x.request.length;
    }
    byte[] all = new byte[n];
    int at = 0;
    for (Exchange x : batch) {
      System.arraycopy(x.request, 0, all, at, x.request.length);
      at += x.request.length;
    }
    return all;
  }

  /** The turn's own deadline passed while it waited for an answer. */
  private void timedOut(Exchange x, HttpTimeoutException e) {
    Thread next = null;
    lock.lock();
    try {
      x.failure = e;
      if (connection.answering()) {
        // Part of an answer is consumed: no one can read on.
        fail(new IOException("the connection was closed: its server stalled within an answer"));
        return;
      }
      // It stays in the order, abandoned, so that its answer, if it comes, is dropped.
      x.abandoned = true;
      retired = true;
      next = passTurn();
      closeIfDone();
    } finally {
      lock.unlock();
      if (next != null) {
        LockSupport.unpark(next);
      }
    }
  }

  /**
   * Gives the turn to the first caller still waiting, if any (under the lock).
   *
   * @return its thread, to wake once the lock is released; null when none waits
   */
  private Thread passTurn() {
    turnTaken = false;
    for (ArrayDeque<Exchange> q : List.of(awaiting, unsent)) {
      for (Exchange e : q) {
        if (!e.done && !e.abandoned) {
          turnTaken = true;
          e.turn = true;
          return e.caller;
        }
      }
    }
    return null;
  }

  /** One call fewer in flight (under the lock). */
  private void ended() {
    inFlight--;
    if (inFlight == 0) {
      idleSince = System.nanoTime();
    }
  }

  /**
   * Fails every call on the connection not yet answered with {@code e} (or its own timeout) and
   * closes it (under the lock): any may have reached the server.
   */
  private void fail(IOException e) {
    retired = true;
    turnTaken = false;
    for (ArrayDeque<Exchange> q : List.of(awaiting, unsent)) {
      for (Exchange x : q) {
        if (!x.done) {
          if (x.failure == null) {
            x.failure = e;
          }
          x.done = true;
          ended();
          if (!x.abandoned) {
            LockSupport.unpark(x.caller);
          }
        }
      }
      q.clear();
    }
    close();
  }

  /**
   * Closes a retired connection once no caller waits on it (under the lock): the answers still
   * due are only those of calls that gave up.
   */
  private void closeIfDone() {
    if (!retired || closed) {
      return;
    }
    for (ArrayDeque<Exchange> q : List.of(awaiting, unsent)) {
      for (Exchange x : q) {
        if (!x.done && !x.abandoned) {
          return;
        }
      }
    }
    for (ArrayDeque<Exchange> q : List.of(awaiting, unsent)) {
      for (Exchange x : q) {
        if (!x.done) {
          x.done = true;
          ended();
        }
      }
      q.clear();
    }
    close();
  }

  private void close() {
    closed = true;
    connection.close();
  }

  private static Http1Connection.Result outcome(Exchange x) throws IOException {
    if (x.failure != null) {
      throw x.failure;
    }
    return x.result;
  }
}
