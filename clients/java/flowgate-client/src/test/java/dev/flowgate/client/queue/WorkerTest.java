package dev.flowgate.client.queue;

import static dev.flowgate.client.queue.QueueTesting.WPG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.Queues;
import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The worker against a real server: the rate it sees, retries, dead letters, stopping. */
class WorkerTest {
  private static final Duration WAIT = Duration.ofSeconds(30);

  private static List<NewJob> jobs(int n, String prefix) {
    List<NewJob> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(NewJob.json(Map.of("n", i)).withKey(prefix + i));
    }
    return out;
  }

  /** When the handler saw a job: its release slot, and the time it was called. */
  record Seen(long slotUs, long wallMs, long nanos) {}

  @Test
  @Timeout(60)
  void drainsAtTheQueuesRateWhateverItsConcurrency() {
    // 5/s: a slot every 200 ms. Three threads, so the rate, not the pool, spaces the jobs.
    try (FlowgateServer server = QueueTesting.server(QueueTesting.queue("5/s", ""))) {
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      int n = 8;
      queues.submit(WPG, jobs(n, "rate-"));
      List<Seen> seenList = Collections.synchronizedList(new ArrayList<>());
      try (Worker worker =
          Worker.builder(queues, WPG)
              .concurrency(3)
              .leaseWait(Duration.ofSeconds(5))
              .handler(
                  job -> {
                    seenList.add(
                        new Seen(job.releasedAtUs(), System.currentTimeMillis(), System.nanoTime()));
                    return JobResult.ack();
                  })
              .start()) {
        Await.until(WAIT, () -> "all acked: " + worker.stats(), () -> worker.stats().acked() == n);
        assertEquals(0, worker.stats().nacked());
      }
      List<Seen> seen = new ArrayList<>(seenList);
      seen.sort(java.util.Comparator.comparingLong(Seen::nanos));
      List<Long> gaps = new ArrayList<>();
      List<Long> late = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        late.add(seen.get(i).wallMs() - seen.get(i).slotUs() / 1000);
        if (i > 0) {
          gaps.add((seen.get(i).nanos() - seen.get(i - 1).nanos()) / 1_000_000);
        }
      }
      System.out.println(
          "WorkerTest: the handler saw 5/s jobs these ms apart: " + gaps + ", each this late "
              + "after its release slot: " + late);
      for (int i = 1; i < n; i++) {
        // The slots the store gave, in the order the handler saw them: never closer than the
        // spacing (so the worker ran them in order, none before its turn).
        long slotGapUs = seen.get(i).slotUs() - seen.get(i - 1).slotUs();
        assertTrue(slotGapUs >= 199_000, "release slots " + slotGapUs + " µs apart");
        // What the handler saw: the spacing less the server's tolerance (at most 25 ms, and the
        // clocks' 5 ms), and less how late the handler was called for the earlier job (a busy
        // machine can stall this JVM past the next job's slot: that job then runs right after).
        long slack = 30 + Math.max(0, late.get(i - 1));
        assertTrue(
            gaps.get(i - 1) >= 200 - slack,
            "the handler saw jobs " + gaps + " ms apart, " + late + " ms late");
      }
    }
  }

  @Test
  @Timeout(60)
  void holdsNoMoreJobsThanItRuns() throws Exception {
    try (FlowgateServer server = QueueTesting.server(QueueTesting.queue("50/s", ""))) {
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      String instance = queues.submit(WPG, jobs(5, "bound-")).instance();
      CountDownLatch release = new CountDownLatch(1);
      try (Worker worker =
          Worker.builder(queues, WPG)
              .concurrency(2)
              .leaseWait(Duration.ofSeconds(5))
              .handler(
                  job -> {
                    assertTrue(release.await(20, TimeUnit.SECONDS));
                    return JobResult.ack();
                  })
              .start()) {
        Await.until(WAIT, () -> "two running: " + worker.stats(),
            () -> worker.stats().inFlight() == 2);
        // Both threads busy: no lease is sent, the other jobs stay with the server.
        assertEquals(2, worker.stats().leaseCalls());
        InstanceStats stats = queues.overview().instance(instance).orElseThrow();
        assertEquals(2L, stats.inFlight(), stats.toString());
        assertEquals(3L, stats.waiting(), stats.toString());
        release.countDown();
        Await.until(WAIT, () -> "all acked: " + worker.stats(), () -> worker.stats().acked() == 5);
      }
    }
  }

  @Test
  @Timeout(60)
  void aFailedJobIsRetriedAfterTheHandlersDelayThenAcked() {
    // The queue's own backoff is 10 s: a retry sooner proves the handler's delay was sent.
    try (FlowgateServer server =
        QueueTesting.server(QueueTesting.queue("50/s", "retry_backoff = \"10s\""))) {
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      SubmitAnswer submitted = queues.submit(WPG, jobs(2, "retry-"));
      long thrower = submitted.jobs().get(0).id();
      Map<String, Long> seen = new ConcurrentHashMap<>();
      Duration delay = Duration.ofMillis(500);
      try (Worker worker =
          Worker.builder(queues, WPG)
              .concurrency(2)
              .leaseWait(Duration.ofSeconds(5))
              .handler(
                  job -> {
                    seen.put(job.id() + "/" + job.attempt(), System.nanoTime());
                    if (job.attempt() > 1) {
                      return JobResult.ack();
                    }
                    if (job.id() == thrower) {
                      throw new RetryJobException("the channel said 429", delay);
                    }
                    return JobResult.retry(delay);
                  })
              .start()) {
        Await.until(WAIT, () -> "both acked: " + worker.stats() + " " + seen.keySet(),
            () -> worker.stats().acked() == 2);
        WorkerStats stats = worker.stats();
        assertEquals(2, stats.nacked());
        assertEquals(2, stats.handlerFailures());
      }
      for (SubmittedJob j : submitted.jobs()) {
        long gapMs = (seen.get(j.id() + "/2") - seen.get(j.id() + "/1")) / 1_000_000;
        assertTrue(gapMs >= delay.toMillis() - 50, "retried after " + gapMs + " ms");
        assertTrue(gapMs < 5_000, "retried after " + gapMs + " ms: the queue's backoff, not ours");
      }
    }
  }

  @Test
  @Timeout(60)
  void aJobFailingEveryAttemptIsADeadLetterAndIsRequeued() {
    try (FlowgateServer server =
        QueueTesting.server(QueueTesting.queue("50/s", "max_attempts = 2"))) {
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      List<SubmittedJob> submitted = queues.submit(WPG, jobs(2, "dead-")).jobs();
      AtomicBoolean failing = new AtomicBoolean(true);
      try (Worker worker =
          Worker.builder(queues, WPG)
              .leaseWait(Duration.ofSeconds(5))
              .handler(
                  job -> {
                    if (failing.get()) {
                      throw new IllegalStateException("the channel is down");
                    }
                    return JobResult.ack();
                  })
              .start()) {
        // A plain exception: retried after the queue's backoff (1 s by default), then dead.
        // (the worker counts a nack once its answer is back, after the server acted on it)
        Await.until(WAIT, () -> "two dead letters, four nacks: " + worker.stats(),
            () -> queues.deadLetters(WPG, 0, 10).size() == 2 && worker.stats().nacked() == 4);
        List<DeadLetter> dead = queues.deadLetters(WPG, 0, 10);
        assertEquals(2, dead.get(0).attempts());
        assertEquals("dead-0", dead.get(0).key());
        assertEquals(0, dead.get(0).payload().get("n").asInt());
        assertEquals(4, worker.stats().nacked());

        failing.set(false);
        // One back in line, the other deleted.
        assertEquals(1, queues.requeueDead(WPG, List.of(submitted.get(0).id())));
        assertEquals(1, queues.purgeDead(WPG, List.of(submitted.get(1).id())));
        Await.until(WAIT, () -> "the requeued job acked: " + worker.stats(),
            () -> worker.stats().acked() == 1);
        assertEquals(List.of(), queues.deadLetters(WPG, 0, 10));
      }
    }
  }

  @Test
  @Timeout(60)
  void aStopLetsTheJobInFlightFinishAndLeasesNoMore() throws Exception {
    try (FlowgateServer server = QueueTesting.server(QueueTesting.queue("50/s", ""))) {
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      queues.submit(WPG, jobs(1, "stop-"));
      CountDownLatch started = new CountDownLatch(1);
      CountDownLatch release = new CountDownLatch(1);
      // Two threads: one runs the job, the other waits in a long-poll when the stop comes.
      Worker worker =
          Worker.builder(queues, WPG)
              .concurrency(2)
              .leaseWait(Duration.ofSeconds(40))
              .handler(
                  job -> {
                    started.countDown();
                    assertTrue(release.await(20, TimeUnit.SECONDS));
                    return JobResult.ack();
                  })
              .start();
      assertTrue(started.await(20, TimeUnit.SECONDS));
      Await.until(WAIT, "the other thread's long-poll", () -> worker.stats().leaseCalls() >= 2);
      CompletableFuture<Boolean> stopped =
          CompletableFuture.supplyAsync(() -> worker.stop(Duration.ofSeconds(20)));
      Await.until(WAIT, "stopping", () -> !worker.isRunning());
      assertFalse(stopped.isDone(), "the stop waits for the job in flight");
      release.countDown();
      // Well before the 40 s long-poll would have ended: the stop cancelled it.
      assertTrue(stopped.get(20, TimeUnit.SECONDS), "finished within the grace");
      assertEquals(1, worker.stats().acked());
      assertEquals(0, worker.stats().inFlight());

      // The cancelled long-poll holds nothing: a job submitted now stays in line (watched for a
      // second, in which a long-poll left open would have taken it at its slot), and another
      // lease gets it, its first attempt.
      SubmitAnswer after = queues.submit(WPG, jobs(1, "after-"));
      long next = after.jobs().get(0).id();
      long watchUntil = System.nanoTime() + 1_000_000_000L;
      while (System.nanoTime() < watchUntil) {
        InstanceStats s = queues.overview().instance(after.instance()).orElseThrow();
        assertEquals(0L, s.inFlight() + s.reserved(), "a lease left open took the job: " + s);
      }
      Job job = queues.lease(WPG, Duration.ofSeconds(10)).orElseThrow();
      assertEquals(next, job.id());
      assertEquals(1, job.attempt());
      assertTrue(worker.stop(Duration.ZERO), "a second stop answers as the first");
    }
  }

  @Test
  @Timeout(60)
  void aJobStillRunningAfterTheGraceIsHandedBack() throws Exception {
    try (FlowgateServer server = QueueTesting.server(QueueTesting.queue("50/s", ""))) {
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      long id = queues.submit(WPG, jobs(1, "slow-")).jobs().get(0).id();
      CountDownLatch started = new CountDownLatch(1);
      CountDownLatch interrupted = new CountDownLatch(1);
      Worker worker =
          Worker.builder(queues, WPG)
              .leaseWait(Duration.ofSeconds(5))
              .handler(
                  job -> {
                    started.countDown();
                    try {
                      new CountDownLatch(1).await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                      interrupted.countDown();
                      throw e;
                    }
                    return JobResult.ack();
                  })
              .start();
      assertTrue(started.await(20, TimeUnit.SECONDS));
      assertFalse(worker.stop(Duration.ofMillis(300)), "the job outlived the grace");
      assertTrue(interrupted.await(10, TimeUnit.SECONDS), "its thread was interrupted");
      WorkerStats stats = worker.stats();
      assertEquals(1, stats.handedBack());
      assertEquals(0, stats.acked());
      // Handed back by a nack without delay: delivered again at once, its second attempt.
      Job again = queues.lease(WPG, Duration.ofSeconds(10)).orElseThrow();
      assertEquals(id, again.id());
      assertEquals(2, again.attempt());
    }
  }
}
