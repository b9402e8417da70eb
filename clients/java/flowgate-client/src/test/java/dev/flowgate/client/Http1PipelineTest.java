package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Pipelined checks ({@link FlowgateClient.Builder#pipelining}, on by default) against the real
 * server: the checks of many threads on few connections each get their own answer; a server killed and
 * started again fails only the checks on its connections, and new ones reconnect; a stopped
 * server times each check out by its own deadline, and a slow answer holds up without failing
 * the checks behind it.
 */
class Http1PipelineTest {
  static final String RULES =
      """
      domain = "api"

      [[rule]]
      name = "per-user"
      match = "user"
      limit = "1000000/1h"
      algorithm = "fixed_window"
      """;

  private static Request user(String id) {
    return Request.of("api", Descriptor.of("user", id));
  }

  @Test
  void aThreadAloneKeepsOneConnection() {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Http1Wire wire = Http1WireTest.wireOf(client);
      for (int i = 0; i < 100; i++) {
        assertEquals(1_000_000L - i - 1, client.check(user("solo")).statuses().get(0).remaining());
      }
      assertEquals(1, wire.opened());
      assertEquals(100, wire.pipelinedRequests());
      assertEquals(100, wire.pipelinedWrites(), "a thread alone writes its own request");
    }
  }

  @Test
  void aConnectionTheServerClosedWhileIdleIsReplaced() {
    try (FlowgateServer server =
        FlowgateServer.builder().config(RULES).flags("--http-header-timeout", "1s").start()) {
      FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
      Http1Wire wire = Http1WireTest.wireOf(client);
      assertTrue(client.check(user("idle")).allowed());
      assertEquals(1, wire.pipelineCount());
      // The server closes a connection idle for its header timeout (1 s).
      Await.until(
          Duration.ofSeconds(20), "the server closed the idle connection",
          wire::pipelinesClosedByServer);
      // The check (a POST, never resent) goes on a new connection and gets its answer.
      assertTrue(client.check(user("idle")).allowed());
      assertEquals(2, wire.opened());
      assertEquals(1, wire.pipelineCount());
    }
  }

  @Test
  void checksOfManyThreadsShareWritesAndEachGetsItsOwnAnswer() throws Exception {
    int threads = 32;
    int calls = 150;
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      // Pipelined by default; a wide budget, so that checks share connections whatever the
      // build's speed (PipelineDepthTest).
      FlowgateClient client =
          FlowgateClient.builder(server.baseUrl()).pipelineBudget(Duration.ofSeconds(1)).build();
      Http1Wire wire = Http1WireTest.wireOf(client);
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      try {
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
          String id = "u" + t;
          done.add(
              pool.submit(
                  () -> {
                    // Each user's counter counts down by one per check: an answer given to the
                    // wrong thread (another user's) breaks the sequence.
                    for (int i = 0; i < calls; i++) {
                      Verdict v = client.check(user(id));
                      assertTrue(v.allowed());
                      assertEquals(1_000_000L - i - 1, v.statuses().get(0).remaining(), id);
                    }
                    return null;
                  }));
        }
        for (Future<?> f : done) {
          f.get(60, TimeUnit.SECONDS);
        }
      } finally {
        pool.shutdownNow();
      }
      assertEquals((long) threads * calls, wire.pipelinedRequests());
      assertTrue(
          wire.pipelinedWrites() < wire.pipelinedRequests(),
          wire.pipelinedWrites() + " writes for " + wire.pipelinedRequests() + " requests");
      assertTrue(wire.opened() <= threads, "opened " + wire.opened());
      assertEquals(0, wire.pipelinedInFlight());
    }
  }

  @Test
  void aServerKilledMidRunFailsOnlyTheChecksOnItsConnectionsAndNewOnesReconnect()
      throws Exception {
    int threads = 16;
    FlowgateServer first = FlowgateServer.start(RULES);
    String addr = "127.0.0.1:" + first.httpPort();
    FlowgateClient client =
        FlowgateClient.builder(first.baseUrl())
            .pipelining(8)
            .pipelineBudget(Duration.ofSeconds(1))
            .requestTimeout(Duration.ofSeconds(10))
            .build();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicInteger ok = new AtomicInteger();
    ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
    AtomicInteger connectionFailures = new AtomicInteger();
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    FlowgateServer second = null;
    try {
      for (int t = 0; t < threads; t++) {
        String id = "k" + t;
        pool.submit(
            () -> {
              while (!stop.get()) {
                try {
                  if (client.check(user(id)).allowed()) {
                    ok.incrementAndGet();
                  }
                } catch (ConnectionException e) {
                  connectionFailures.incrementAndGet();
                } catch (Throwable e) {
                  unexpected.add(e);
                }
              }
            });
      }
      Await.until(Duration.ofSeconds(20), "checks pass", () -> ok.get() > 500);
      first.close();
      Await.until(
          Duration.ofSeconds(20), "checks fail while no server runs",
          () -> connectionFailures.get() > threads);
      second = FlowgateServer.builder().config(RULES).httpAddr(addr).start();
      int before = ok.get();
      Await.until(
          Duration.ofSeconds(20), "checks pass on the new server", () -> ok.get() > before + 500);
    } finally {
      stop.set(true);
      pool.shutdown();
      assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS), "every check returned");
      if (second != null) {
        second.close();
      }
      first.close();
    }
    assertTrue(unexpected.isEmpty(), "only connection failures: " + unexpected);
  }

  @Test
  void aStoppedServerTimesEachCheckOutAndASlowAnswerHoldsUpWithoutFailing() throws Exception {
    int threads = 8;
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      long pid = server.handle().pid();
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      try {
        // Stopped for longer than the timeout: each check times out by its own deadline.
        FlowgateClient hasty =
            FlowgateClient.builder(server.baseUrl())
                .pipelining(16)
                .pipelineBudget(Duration.ofSeconds(1))
                .requestTimeout(Duration.ofMillis(500))
                .build();
        assertTrue(hasty.check(user("h")).allowed());
        Http1WireTest.signal("STOP", pid);
        List<Future<Long>> timeouts = new ArrayList<>();
        try {
          for (int t = 0; t < threads; t++) {
            timeouts.add(
                pool.submit(
                    () -> {
                      long start = System.nanoTime();
                      ConnectionException e =
                          assertThrows(
                              ConnectionException.class, () -> hasty.check(user("h")));
                      assertTrue(e.isTimeout(), e.toString());
                      return (System.nanoTime() - start) / 1_000_000;
                    }));
          }
          for (Future<Long> f : timeouts) {
            long ms = f.get(60, TimeUnit.SECONDS);
            assertTrue(ms >= 450 && ms < 20_000, "a timeout of 500 ms took " + ms + " ms");
          }
        } finally {
          Http1WireTest.signal("CONT", pid);
        }
        // The connections that timed out take no new check: the next one opens a new one.
        Http1Wire hastyWire = Http1WireTest.wireOf(hasty);
        long opened = hastyWire.opened();
        assertTrue(hasty.check(user("h")).allowed());
        assertEquals(opened + 1, hastyWire.opened(), "a new connection after the timeouts");

        // Stopped for less than the timeout: the checks behind the slow answer get theirs.
        FlowgateClient patient =
            FlowgateClient.builder(server.baseUrl())
                .pipelining(16)
                .pipelineBudget(Duration.ofSeconds(1))
                .requestTimeout(Duration.ofSeconds(30))
                .build();
        Http1Wire wire = Http1WireTest.wireOf(patient);
        assertTrue(patient.check(user("p0")).allowed());
        Http1WireTest.signal("STOP", pid);
        List<Future<Verdict>> held = new ArrayList<>();
        try {
          for (int t = 0; t < threads; t++) {
            String id = "p" + t;
            held.add(pool.submit(() -> patient.check(user(id))));
          }
          Await.until(
              Duration.ofSeconds(20), "every check is in flight",
              () -> wire.pipelinedInFlight() == threads);
        } finally {
          Http1WireTest.signal("CONT", pid);
        }
        for (int t = 0; t < threads; t++) {
          Verdict v = held.get(t).get(60, TimeUnit.SECONDS);
          assertTrue(v.allowed());
          assertEquals(t == 0 ? 999_998L : 999_999L, v.statuses().get(0).remaining());
        }
      } finally {
        pool.shutdownNow();
      }
    }
  }
}
