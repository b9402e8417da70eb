package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.FlowgateServer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** {@code acquire} against a real server: delay waits, holds, concurrency permits, breakers. */
class AcquireTest {
  static final String RULES =
      """
      domain = "payments"

      # 5 a second, shaped: each caller told its wait, at most 1 s.
      [[rule]]
      name = "refunds"
      match = ["biz=REFUND", "channel"]
      limit = "5/s"
      algorithm = "leaky_bucket"
      mode = "delay"
      max_wait = "1s"

      # One export at a time.
      [[rule]]
      name = "exports"
      match = ["op=export"]
      limit = "1/1m"
      algorithm = "concurrency"

      [[rule]]
      name = "per-channel"
      match = ["channel"]
      limit = "1000/s"

      [[breaker]]
      name = "wpg"
      match = ["channel=WPG"]
      strategy = "error_count"
      threshold = 2
      window = "10s"
      min_calls = 2
      open_for = "1m"
      """;

  static Request refund(String channel) {
    return Request.of("payments", Descriptor.of("biz", "REFUND", "channel", channel));
  }

  @Test
  void aDelayIsWaitedOutOnTheClient() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Request req = refund("A");
      // The first takes the slot at once; the next two are each told a wait of 200 ms more.
      long start = System.nanoTime();
      try (Permit first = client.acquire(req)) {
        assertEquals(0.0, first.verdict().waitMs());
      }
      // The next two (one async, one blocking, in either order) are told 200 and 400 ms.
      CompletableFuture<Permit> second = client.acquireAsync(req);
      Permit third = client.acquire(req);
      long elapsedMs = (System.nanoTime() - start) / 1_000_000;
      double thirdWait = third.verdict().waitMs();
      assertTrue(elapsedMs >= (long) thirdWait, "returned after " + elapsedMs + " ms");
      double secondWait = second.join().verdict().waitMs();
      double shorter = Math.min(secondWait, thirdWait);
      double longer = Math.max(secondWait, thirdWait);
      assertTrue(shorter > 50 && shorter <= 200, "the shorter wait: " + shorter);
      assertTrue(longer > 250 && longer <= 400, "the longer wait: " + longer);
      assertTrue((System.nanoTime() - start) / 1e6 >= longer, "both waited out");
      third.close();

      // A wait over max_wait (1 s at 5/s: the seventh in line) is refused with its retry time.
      // Thirty in line at once: on a busy machine the blocking call may still reach the server
      // before them (then it is admitted at once), so it is tried again until one is refused.
      for (int i = 0; i < 30; i++) {
        client.acquireAsync(refund("B"));
      }
      OverLimitException over = null;
      for (int i = 0; i < 5 && over == null; i++) {
        try {
          client.acquire(refund("B")).close();
        } catch (OverLimitException e) {
          over = e;
        }
      }
      assertNotNull(over, "a blocking acquire behind thirty in line is refused");
      assertTrue(over.retryAfter().isPresent());
      assertEquals("refunds", over.verdict().orElseThrow().statuses().get(0).rule());
    }
  }

  @Test
  void theGivenExecutorCompletesTheWaits() throws Exception {
    java.util.concurrent.ExecutorService pool =
        java.util.concurrent.Executors.newFixedThreadPool(
            2,
            r -> {
              Thread t = new Thread(r, "app-pool");
              t.setDaemon(true);
              return t;
            });
    // The pool runs nothing until the test's stages are chained: a call completed before its
    // stage was chained would run the stage on the test's thread, whatever completed it.
    java.util.concurrent.CountDownLatch chained = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.Executor gated =
        r ->
            pool.execute(
                () -> {
                  try {
                    chained.await();
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  }
                  r.run();
                });
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).executor(gated).build();
      // Four at once: all but the first wait for their slots, 200 ms apart; every one completes
      // on the pool, waited or not.
      List<CompletableFuture<String>> acquired = new java.util.ArrayList<>();
      for (int i = 0; i < 4; i++) {
        acquired.add(
            client
                .acquireAsync(refund("E"))
                .thenApply(
                    p -> {
                      p.releaseAsync();
                      return (p.verdict().waitMs() > 0 ? "waited " : "")
                          + Thread.currentThread().getName();
                    }));
      }
      chained.countDown();
      int waited = 0;
      for (CompletableFuture<String> a : acquired) {
        String thread = a.get(30, java.util.concurrent.TimeUnit.SECONDS);
        if (thread.startsWith("waited ")) {
          waited++;
          thread = thread.substring("waited ".length());
        }
        assertEquals("app-pool", thread, "the thread that completed an acquire");
      }
      assertTrue(waited >= 2, "waits: " + waited);
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aHeldAcquireAnswersOnceTheSlotCame() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      AcquireOptions hold = AcquireOptions.holdOnServer(Duration.ofSeconds(1));
      client.acquire(refund("C"), hold).close();
      long start = System.nanoTime();
      Permit held = client.acquire(refund("C"), hold);
      long elapsedMs = (System.nanoTime() - start) / 1_000_000;
      // The server held the answer until the slot (200 ms after the first), less the time the
      // first call's answer took to come back.
      assertTrue(elapsedMs >= 100, "answered after " + elapsedMs + " ms");
      held.close();
    }
  }

  @Test
  void anAnswerPastTheTimeoutIsAConnectionTimeout() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client =
          FlowgateClient.builder(server.baseUrl()).requestTimeout(Duration.ofMillis(100)).build();
      // The third in line is held 400 ms by the server: past the 100 ms the client waits.
      AcquireOptions hold = AcquireOptions.holdOnServer(Duration.ZERO);
      client.acquireAsync(refund("D"));
      client.acquireAsync(refund("D"));
      ConnectionException e =
          assertThrows(ConnectionException.class, () -> {
            for (int i = 0; i < 3; i++) {
              client.acquire(refund("D"), hold).close();
            }
          });
      assertTrue(e.isTimeout(), e.getMessage());
    }
  }

  @Test
  void aPermitReleasesItsLeaseOnClose() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Request export = Request.of("payments", Descriptor.of("op", "export"));
      try (Permit permit = client.acquire(export)) {
        assertEquals(1, permit.verdict().leases().size());
        OverLimitException e = assertThrows(OverLimitException.class, () -> client.acquire(export));
        assertTrue(e.retryAfter().isPresent());
      }
      // Closed: the lease is back, another export may start; a report releases it too.
      Permit again = client.acquire(export);
      ReportAnswer answer = again.report(true, Duration.ofMillis(5));
      assertEquals(0, answer.counted());
      assertEquals(1, answer.noBreaker());
      assertTrue(client.acquireAsync(export).join().releaseAsync().thenApply(v -> true).join());
      // Released twice does nothing more.
      again.close();
      again.release();
    }
  }

  @Test
  void aProbesReportClosesTheBreaker() {
    String rules =
        """
        domain = "payments"

        [[breaker]]
        name = "wpg"
        match = ["channel=WPG"]
        strategy = "error_count"
        threshold = 2
        window = "10s"
        min_calls = 2
        open_for = "300ms"
        probes = 1
        probe_timeout = "1m"
        """;
    try (FlowgateServer server = FlowgateServer.start(rules)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Request pay = Request.of("payments", Descriptor.of("channel", "WPG"));
      client.report(
          Report.outcome(pay, false, Duration.ofMillis(1)),
          Report.outcome(pay, false, Duration.ofMillis(1)));
      assertEquals(ErrorCode.CIRCUIT_OPEN, client.check(pay).reason());
      // Half-open after 300 ms: the first acquire admitted is the probe.
      Permit probe = null;
      long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      while (probe == null && System.nanoTime() < deadline) {
        try {
          probe = client.acquire(pay);
        } catch (CircuitOpenException open) {
          sleep(open.retryAfter().orElse(Duration.ofMillis(50)));
        }
      }
      assertTrue(probe != null, "never half-open");
      assertEquals(1, probe.verdict().probes().size());
      assertEquals("wpg", probe.verdict().probes().get(0).breaker());
      // Its one probe taken, the breaker refuses others until the probe reports.
      assertEquals(ErrorCode.CIRCUIT_OPEN, client.check(pay).reason());
      assertEquals(1, probe.report(true, Duration.ofMillis(3)).counted());
      assertTrue(client.check(pay).allowed(), "closed by the probe's success");
      assertTrue(client.check(pay).allowed());
    }
  }

  private static void sleep(Duration d) {
    try {
      Thread.sleep(Math.max(1, Math.min(d.toMillis(), 200)));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  @Test
  void failedCallsOpenTheBreaker() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Request pay = Request.of("payments", Descriptor.of("channel", "WPG"));
      for (int i = 0; i < 2; i++) {
        try (Permit permit = client.acquire(pay)) {
          ReportAnswer answer = permit.report(false, Duration.ofMillis(800));
          assertEquals(1, answer.counted());
        }
      }
      Verdict refused = client.check(pay);
      assertFalse(refused.allowed());
      assertEquals(ErrorCode.CIRCUIT_OPEN, refused.reason());
      assertEquals("wpg", refused.breaker().name());
      CircuitOpenException open = assertThrows(CircuitOpenException.class, () -> client.acquire(pay));
      assertEquals("payments:wpg:channel=WPG", open.breaker().orElseThrow().key());
      Duration retry = open.retryAfter().orElseThrow();
      assertTrue(retry.compareTo(Duration.ofSeconds(50)) > 0, "half-open in " + retry);
      // Another channel is not behind that breaker.
      assertTrue(client.check(Request.of("payments", Descriptor.of("channel", "ACME"))).allowed());
    }
  }
}
