package dev.flowgate.client.queue;

import dev.flowgate.client.ConflictException;
import dev.flowgate.client.ConnectionException;
import dev.flowgate.client.FlowgateException;
import dev.flowgate.client.Queues;
import dev.flowgate.client.StoreUnavailableException;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Runs a handler over a queue instance's jobs: leases them with a long-poll as the queue's rate
 * releases them, runs the handler on a bounded pool, acks a job the handler finished, nacks one
 * it failed (with the handler's retry delay).
 *
 * <pre>{@code
 * Worker worker = Worker.builder(flowgate.queues(),
 *         QueueInstance.of("payments", Descriptor.of("biz", "REFUND", "channel", "WPG")))
 *     .handler(job -> {
 *       Refund r = job.payloadAs(Refund.class);
 *       return channel.refund(r) ? JobResult.ack() : JobResult.retry(Duration.ofMinutes(1));
 *     })
 *     .concurrency(4)
 *     .start();
 * // ... at shutdown: leasing stops, jobs in flight get 30 s to finish, the rest are handed back.
 * worker.stop(Duration.ofSeconds(30));
 * }</pre>
 *
 * <ul>
 *   <li><b>Bounded</b>: {@code concurrency} threads, each leasing one job and running it before
 *       it leases the next; a worker never holds more jobs than it runs.
 *   <li><b>Never spins</b>: a lease that fails (no answer, 503, any error) shuts the worker's
 *       leasing for a delay (exponential from {@code backoff}'s initial delay to its cap, with
 *       jitter, at least the server's {@code Retry-After}); then one thread probes with a lease
 *       that does not wait, and the first answer resumes them all. The first failure and the
 *       recovery are logged ({@link System.Logger}, name {@code dev.flowgate.client.queue.Worker}).
 *   <li><b>Ack and nack</b> that meet an unreachable server are retried with backoff until the
 *       job's lease ends (after that the job is delivered again: at least once).
 *   <li><b>No lease extension</b>: the queue API has none, so a handler must finish within the
 *       queue's {@code lease}; one that ran past it is logged (its job may be delivered twice).
 *   <li><b>Graceful stop</b> ({@link #stop(Duration)}, {@link #close()}): leasing stops at once
 *       (a long-poll in progress is cancelled, its connection closed, so the server keeps the job
 *       it was about to answer); jobs in flight get the grace to finish and be acked; those
 *       still running then are nacked at once, to be delivered again (a handback counts as an
 *       attempt, as an expired lease does), and their threads interrupted.
 * </ul>
 *
 * <p><b>Thread-safe</b>: {@link #start()}, {@link #stop}, {@link #close()} and {@link #stats()}
 * may be called from any thread. The handler is called from up to {@code concurrency} threads at
 * once.
 */
public final class Worker implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(Worker.class.getName());
  /** How long the hand-back nacks of a stop past its grace may take. */
  private static final Duration HANDBACK_WAIT = Duration.ofSeconds(5);

  private final Queues queues;
  private final QueueInstance queue;
  private final JobHandler handler;
  private final int concurrency;
  private final Duration leaseWait;
  private final Duration defaultGrace;
  private final ThreadFactory threads;
  private final Backoff backoff;
  private final Duration backoffInitial;
  private final Duration backoffMax;

  private final List<Slot> slots = new ArrayList<>();
  private volatile boolean stopping;
  private volatile boolean hardStopped;
  private boolean started;
  private Boolean stopResult;
  /** The monitor of pauses between ack/nack retries, which a hard stop ends. */
  private final Object pauses = new Object();

  private final AtomicLong leaseCalls = new AtomicLong();
  private final AtomicLong leaseFailures = new AtomicLong();
  private final AtomicLong acked = new AtomicLong();
  private final AtomicLong nacked = new AtomicLong();
  private final AtomicLong handedBack = new AtomicLong();
  private final AtomicLong handlerFailures = new AtomicLong();
  private final AtomicInteger inFlight = new AtomicInteger();
  private volatile long failingSince;

  Worker(WorkerBuilder b) {
    this.queues = b.queues;
    this.queue = b.queue;
    this.handler = b.handler;
    this.concurrency = b.concurrency;
    this.leaseWait = b.leaseWait;
    this.defaultGrace = b.grace;
    this.backoffInitial = b.backoffInitial;
    this.backoffMax = b.backoffMax;
    this.backoff = new Backoff(b.backoffInitial, b.backoffMax);
    String prefix = "flowgate-worker-" + queue + "-";
    AtomicInteger n = new AtomicInteger();
    this.threads =
        b.threads != null
            ? b.threads
            : r -> {
              Thread t = new Thread(r, prefix + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            };
  }

  /**
   * A builder of a worker of {@code queue}'s jobs.
   *
   * @param queues the calls it makes ({@link dev.flowgate.client.FlowgateClient#queues()})
   * @param queue the instance it drains
   * @return the builder
   */
  public static WorkerBuilder builder(Queues queues, QueueInstance queue) {
    return new WorkerBuilder(queues, queue);
  }

  /**
   * Starts leasing.
   *
   * @return this worker
   * @throws IllegalStateException when it was started already
   */
  public synchronized Worker start() {
    if (started) {
      throw new IllegalStateException("the worker was started already");
    }
    started = true;
    for (int i = 0; i < concurrency; i++) {
      Slot slot = new Slot();
      slot.thread = threads.newThread(slot);
      slots.add(slot);
    }
    slots.forEach(s -> s.thread.start());
    LOG.log(Level.INFO, "worker of {0} started: {1} at once", queue, concurrency);
    return this;
  }

  /** Whether it leases: started and not stopping. */
  public boolean isRunning() {
    synchronized (this) {
      return started && !stopping;
    }
  }

  /** Its counts since it started. */
  public WorkerStats stats() {
    return new WorkerStats(
        leaseCalls.get(),
        leaseFailures.get(),
        acked.get(),
        nacked.get(),
        handedBack.get(),
        handlerFailures.get(),
        inFlight.get());
  }

  /** {@link #stop(Duration)} with the builder's grace (30 s by default). */
  @Override
  public void close() {
    stop(defaultGrace);
  }

  /**
   * Stops: leasing ends at once; jobs in flight get {@code grace} to finish and be acked; those
   * still running then are nacked, to be delivered again, and their threads interrupted. A
   * second call answers as the first did.
   *
   * @param grace how long jobs in flight may still run
   * @return true when every job in flight finished within the grace
   */
  public boolean stop(Duration grace) {
    synchronized (this) {
      if (stopResult != null) {
        return stopResult;
      }
      stopping = true;
    }
    for (Slot s : slots) {
      CompletableFuture<?> lease = s.lease;
      if (lease != null) {
        lease.cancel(true);
      }
    }
    backoff.wake();
    boolean clean = joinAll(System.nanoTime() + grace.toNanos());
    if (!clean) {
      handBack();
      joinAll(System.nanoTime() + HANDBACK_WAIT.toNanos());
    }
    LOG.log(
        Level.INFO,
        "worker of {0} stopped{1}",
        queue,
        clean ? "" : ": jobs still running after " + grace + " were handed back");
    synchronized (this) {
      stopResult = clean;
    }
    return clean;
  }

  private boolean joinAll(long deadline) {
    for (Slot s : slots) {
      if (s.thread == Thread.currentThread()) {
        continue;
      }
      long left = deadline - System.nanoTime();
      try {
        if (left <= 0) {
          return false;
        }
        s.thread.join(Math.max(1, left / 1_000_000));
        if (s.thread.isAlive()) {
          return false;
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }

  /** The grace ended: every job still running is nacked at once and its thread interrupted. */
  private void handBack() {
    hardStopped = true;
    synchronized (pauses) {
      pauses.notifyAll();
    }
    List<CompletableFuture<?>> nacks = new ArrayList<>();
    for (Slot s : slots) {
      Running r = s.running;
      if (r != null && r.settled.compareAndSet(false, true)) {
        handedBack.incrementAndGet();
        nacked.incrementAndGet();
        LOG.log(Level.WARNING, "{0} still running at the end of the grace: handed back", r.job);
        nacks.add(queues.nackAsync(r.job.token(), Duration.ZERO));
      }
      s.thread.interrupt();
    }
    try {
      CompletableFuture.allOf(nacks.toArray(CompletableFuture[]::new))
          .get(HANDBACK_WAIT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Exception e) {
      LOG.log(
          Level.WARNING,
          "a handback of {0} failed: its jobs come back when their lease ends: {1}",
          queue,
          e.toString());
    }
  }

  /** A job being handled, and whether its ack or nack was sent (once, by its slot or a stop). */
  private static final class Running {
    final Job job;
    final AtomicBoolean settled = new AtomicBoolean();

    Running(Job job) {
      this.job = job;
    }
  }

  /** One of the {@code concurrency} loops: lease, handle, ack or nack, again. */
  private final class Slot implements Runnable {
    Thread thread;
    volatile CompletableFuture<Optional<Job>> lease;
    volatile Running running;

    @Override
    public void run() {
      try {
        loop();
      } catch (InterruptedException e) {
        // A stop past its grace: the loop ends.
      }
    }

    private void loop() throws InterruptedException {
      while (true) {
        Backoff.Turn turn = backoff.await(() -> stopping);
        if (turn == Backoff.Turn.STOP) {
          return;
        }
        Duration wait = turn == Backoff.Turn.PROBE ? Duration.ZERO : leaseWait;
        CompletableFuture<Optional<Job>> f = queues.leaseAsync(queue, wait);
        lease = f;
        leaseCalls.incrementAndGet();
        if (stopping) {
          f.cancel(true);
        }
        Optional<Job> job;
        try {
          job = f.get();
        } catch (CancellationException e) {
          return;
        } catch (ExecutionException e) {
          if (stopping) {
            return;
          }
          leaseFailed(unwrap(e));
          continue;
        } finally {
          lease = null;
        }
        int ended = backoff.success();
        if (ended > 0) {
          LOG.log(
              Level.INFO,
              "leases of {0} answered again, after {1} failures over {2} ms",
              queue,
              ended,
              (System.nanoTime() - failingSince) / 1_000_000);
        }
        if (job.isPresent()) {
          handle(job.get());
        }
      }
    }

    private void leaseFailed(Throwable failure) {
      leaseFailures.incrementAndGet();
      Duration hint =
          failure instanceof FlowgateException fe ? fe.retryAfter().orElse(null) : null;
      Backoff.Delay d = backoff.failure(hint);
      if (d.failures() == 1) {
        failingSince = System.nanoTime();
        LOG.log(
            Level.WARNING,
            "a lease of {0} failed; leasing again in {1} ms, backing off up to {2} ms until the"
                + " server answers: {3}",
            queue,
            d.delay().toMillis(),
            backoffMax.toMillis(),
            failure.toString());
      } else {
        LOG.log(
            Level.DEBUG,
            "a lease of {0} failed again ({1} in a row); next in {2} ms: {3}",
            queue,
            d.failures(),
            d.delay().toMillis(),
            failure.toString());
      }
    }

    private void handle(Job job) {
      Running r = new Running(job);
      running = r;
      inFlight.incrementAndGet();
      try {
        JobResult result = run(job);
        if (System.currentTimeMillis() > job.leaseDeadlineMs()) {
          LOG.log(
              Level.WARNING,
              "{0} ran past its lease: it may have been delivered again; declare a longer"
                  + " `lease` for the queue",
              job);
        }
        if (r.settled.compareAndSet(false, true)) {
          settle(job, result);
        }
      } finally {
        inFlight.decrementAndGet();
        running = null;
      }
    }

    private JobResult run(Job job) {
      try {
        JobResult result = handler.handle(job);
        if (result == null || result.isAck()) {
          return JobResult.ack();
        }
        handlerFailures.incrementAndGet();
        return result;
      } catch (RetryJobException e) {
        handlerFailures.incrementAndGet();
        LOG.log(Level.DEBUG, "{0} failed, retried after {1}: {2}", job, e.retryAfter(), e);
        return JobResult.retry(e.retryAfter());
      } catch (VirtualMachineError e) {
        throw e;
      } catch (Throwable e) {
        if (e instanceof InterruptedException) {
          Thread.currentThread().interrupt();
        }
        handlerFailures.incrementAndGet();
        if (hardStopped) {
          LOG.log(Level.DEBUG, "the handler of {0} ended after its handback: {1}", job, e);
          return JobResult.retryWithQueueBackoff();
        }
        LOG.log(Level.WARNING, "the handler failed on " + job + ": retried after the queue's backoff", e);
        return JobResult.retryWithQueueBackoff();
      }
    }

    /** Acks or nacks; retried with backoff while the server is unreachable and the lease lasts. */
    private void settle(Job job, JobResult result) {
      for (int attempt = 1; ; attempt++) {
        try {
          if (result.isAck()) {
            queues.ackAsync(job.token()).get();
            acked.incrementAndGet();
          } else {
            queues.nackAsync(job.token(), result.retryAfter()).get();
            nacked.incrementAndGet();
          }
          return;
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        } catch (ExecutionException e) {
          Throwable failure = unwrap(e);
          String verb = result.isAck() ? "ack" : "nack";
          if (failure instanceof ConflictException) {
            LOG.log(
                Level.WARNING,
                "the {0} of {1} was refused ({2}): its lease had ended, it is or will be"
                    + " delivered again",
                verb,
                job,
                failure.getMessage());
            return;
          }
          boolean transient_ =
              failure instanceof ConnectionException
                  || failure instanceof StoreUnavailableException;
          if (!transient_
              || hardStopped
              || System.currentTimeMillis() >= job.leaseDeadlineMs()
              || !pause(attempt)) {
            LOG.log(
                Level.WARNING,
                "the {0} of {1} failed: the job comes back when its lease ends: {2}",
                verb,
                job,
                failure.toString());
            return;
          }
          LOG.log(
              Level.DEBUG,
              "the {0} of {1} failed (attempt {2}); sending it again: {3}",
              verb,
              job,
              attempt,
              failure.toString());
        }
      }
    }

    /** Waits before an ack/nack retry; false when a hard stop ended the wait. */
    private boolean pause(int attempt) {
      long ms = Math.min(backoffMax.toMillis(), backoffInitial.toMillis() << Math.min(attempt, 20));
      long deadline = System.nanoTime() + ms * 1_000_000;
      synchronized (pauses) {
        while (!hardStopped) {
          long left = (deadline - System.nanoTime()) / 1_000_000;
          if (left <= 0) {
            return true;
          }
          try {
            pauses.wait(left);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
          }
        }
      }
      return false;
    }
  }

  private static Throwable unwrap(ExecutionException e) {
    Throwable cause = e.getCause();
    while (cause instanceof CompletionException && cause.getCause() != null) {
      cause = cause.getCause();
    }
    return cause;
  }
}
