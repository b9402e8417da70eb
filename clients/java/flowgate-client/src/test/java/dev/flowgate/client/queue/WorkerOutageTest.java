package dev.flowgate.client.queue;

import static dev.flowgate.client.queue.QueueTesting.WPG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.Queues;
import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.RedisProcess;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker through an outage of its server (the queue in a real Redis, so that it survives):
 * it backs off instead of spinning, and resumes when a server is back on the same port.
 */
class WorkerOutageTest {
  private static final Duration WAIT = Duration.ofSeconds(30);
  /** A short lease: a job a killed server had reserved comes back soon. */
  private static final String CONFIG = QueueTesting.queue("20/s", "lease = \"3s\"");

  @Test
  @Timeout(90)
  void anAckThatMeetsTheServerDownIsSentAgainWhenItIsBack() throws Exception {
    String config = QueueTesting.queue("20/s", "lease = \"60s\"");
    try (RedisProcess redis = RedisProcess.start()) {
      FlowgateServer server = QueueTesting.server(config, "--redis-url", redis.url());
      int port = server.httpPort();
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      CountDownLatch started = new CountDownLatch(1);
      CountDownLatch release = new CountDownLatch(1);
      Worker worker =
          Worker.builder(queues, WPG)
              .leaseWait(Duration.ofSeconds(2))
              .backoff(Duration.ofMillis(100), Duration.ofSeconds(1))
              .handler(
                  job -> {
                    started.countDown();
                    assertTrue(release.await(30, TimeUnit.SECONDS));
                    return JobResult.ack();
                  })
              .start();
      try {
        String instance = queues.submit(WPG, NewJob.json(Map.of("n", 1))).instance();
        assertTrue(started.await(30, TimeUnit.SECONDS));
        server.close();
        // The job is done while the server is down: its ack fails, and is sent again.
        release.countDown();
        server = QueueTesting.serverAt("127.0.0.1:" + port, config, "--redis-url", redis.url());
        Await.until(WAIT, () -> "the ack: " + worker.stats(), () -> worker.stats().acked() == 1);
        InstanceStats stats = queues.overview().instance(instance).orElseThrow();
        assertEquals(1L, stats.ackedTotal(), stats.toString());
        assertEquals(0L, stats.depth(), stats.toString());
        assertEquals(0, worker.stats().nacked());
      } finally {
        worker.stop(Duration.ofSeconds(5));
        server.close();
      }
    }
  }

  @Test
  @Timeout(90)
  void theWorkerBacksOffWhileTheServerIsDownAndResumesWhenItIsBack() {
    try (RedisProcess redis = RedisProcess.start()) {
      FlowgateServer server = QueueTesting.server(CONFIG, "--redis-url", redis.url());
      int port = server.httpPort();
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      Set<Long> done = ConcurrentHashMap.newKeySet();
      Worker worker =
          Worker.builder(queues, WPG)
              .concurrency(2)
              .leaseWait(Duration.ofSeconds(2))
              .backoff(Duration.ofMillis(100), Duration.ofSeconds(1))
              .handler(
                  job -> {
                    done.add(job.id());
                    return JobResult.ack();
                  })
              .start();
      try {
        long first = queues.submit(WPG, NewJob.json(Map.of("n", 1)).withKey("o-1")).jobs().get(0).id();
        Await.until(WAIT, "the first job acked", () -> done.contains(first));
        // Due after the outage: it waits in Redis meanwhile.
        long second =
            queues
                .submit(
                    WPG,
                    NewJob.json(Map.of("n", 2))
                        .withKey("o-2")
                        .notBefore(Instant.now().plusSeconds(2)))
                .jobs()
                .get(0)
                .id();

        long calls0 = worker.stats().leaseCalls();
        long failures0 = worker.stats().leaseFailures();
        long down = System.nanoTime();
        server.close();
        // The outage: at least 3 s, and enough failures to have backed off to the cap.
        Await.until(
            WAIT,
            () -> "an outage of 3 s and 6 failures: " + worker.stats(),
            () ->
                System.nanoTime() - down >= 3_000_000_000L
                    && worker.stats().leaseFailures() - failures0 >= 6);
        long outageMs = (System.nanoTime() - down) / 1_000_000;
        long calls = worker.stats().leaseCalls() - calls0;
        // 100 ms doubling to 1 s, half of it jittered: one lease per 500 ms at the cap at least,
        // plus the ramp (4 delays) and the 2 long-polls the kill cut. A spinning worker would
        // send thousands.
        long bound = 2 + 4 + outageMs / 500 + 1;
        System.out.printf("WorkerOutageTest: %d leases over an outage of %d ms (bound %d)%n",
            calls, outageMs, bound);
        assertTrue(calls <= bound, calls + " leases over an outage of " + outageMs + " ms");

        // A server back on the same port, on the same Redis: the worker finds it by itself.
        server = QueueTesting.serverAt("127.0.0.1:" + port, CONFIG, "--redis-url", redis.url());
        Await.until(WAIT, () -> "the job due after the outage acked: " + worker.stats(),
            () -> done.contains(second));
        long third = queues.submit(WPG, NewJob.json(Map.of("n", 3))).jobs().get(0).id();
        Await.until(WAIT, "a job submitted after the outage acked", () -> done.contains(third));
      } finally {
        worker.stop(Duration.ofSeconds(5));
        server.close();
      }
    }
  }
}
