package dev.flowgate.client.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.ConnectionException;
import dev.flowgate.client.Descriptor;
import dev.flowgate.client.Request;
import dev.flowgate.client.Verdict;
import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.Signals;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The gRPC client's blocking calls (answers handled on the channel's thread, the caller woken
 * once) against a real server: many threads each get their own answer; a stopped server times
 * a call out at its deadline; an interrupted caller is released at once.
 */
class GrpcBlockingCallTest {
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

  private static void signal(String name, long pid) {
    if (name.equals("STOP")) {
      Signals.stop(pid);
    } else {
      Signals.cont(pid);
    }
  }

  @Test
  void manyThreadsEachGetTheirOwnAnswer() throws Exception {
    int threads = 16;
    int calls = 100;
    try (FlowgateServer server = FlowgateServer.start(RULES);
        FlowgateGrpcClient grpc = FlowgateGrpcClient.builder(server.grpcAddr()).build()) {
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      try {
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
          String id = "g" + t;
          done.add(
              pool.submit(
                  () -> {
                    for (int i = 0; i < calls; i++) {
                      Verdict v = grpc.check(user(id));
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
    }
  }

  @Test
  void aStoppedServerTimesTheCallOutAndAnInterruptReleasesTheCaller() throws Exception {
    try (FlowgateServer server = FlowgateServer.start(RULES);
        FlowgateGrpcClient hasty =
            FlowgateGrpcClient.builder(server.grpcAddr()).timeout(Duration.ofMillis(400)).build();
        FlowgateGrpcClient patient =
            FlowgateGrpcClient.builder(server.grpcAddr()).timeout(Duration.ofSeconds(60)).build()) {
      assertTrue(hasty.check(user("a")).allowed());
      assertTrue(patient.check(user("a")).allowed());
      long pid = server.handle().pid();
      signal("STOP", pid);
      try {
        long start = System.nanoTime();
        ConnectionException e = assertThrows(ConnectionException.class, () -> hasty.check(user("a")));
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(e.isTimeout(), e.toString());
        assertTrue(ms >= 350 && ms < 20_000, "a timeout of 400 ms took " + ms + " ms");

        CompletableFuture<Throwable> caught = new CompletableFuture<>();
        CompletableFuture<Boolean> stillInterrupted = new CompletableFuture<>();
        Thread caller =
            new Thread(
                () -> {
                  try {
                    patient.check(user("b"));
                    caught.complete(null);
                  } catch (RuntimeException t) {
                    caught.complete(t);
                  }
                  stillInterrupted.complete(Thread.currentThread().isInterrupted());
                });
        caller.start();
        Await.until(
            Duration.ofSeconds(20), "the caller waits for its answer",
            () ->
                caller.getState() == Thread.State.WAITING
                    || caller.getState() == Thread.State.TIMED_WAITING);
        caller.interrupt();
        Throwable t = caught.get(20, TimeUnit.SECONDS);
        assertTrue(t instanceof ConnectionException, String.valueOf(t));
        assertTrue(stillInterrupted.get(20, TimeUnit.SECONDS), "the interrupt is kept");
      } finally {
        signal("CONT", pid);
      }
      assertTrue(hasty.check(user("a")).allowed(), "answers again once the server runs");
    }
  }
}
