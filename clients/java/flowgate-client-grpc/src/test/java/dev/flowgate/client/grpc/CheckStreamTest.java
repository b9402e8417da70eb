package dev.flowgate.client.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.BadRequestException;
import dev.flowgate.client.ConnectionException;
import dev.flowgate.client.Descriptor;
import dev.flowgate.client.ErrorCode;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.FlowgateException;
import dev.flowgate.client.Request;
import dev.flowgate.client.UnauthorizedException;
import dev.flowgate.client.Verdict;
import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import dev.flowgate.client.testing.Signals;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Checks over the client's {@code CheckStream} against a real server: many at once answered each
 * with its own verdict, the HTTP answer's fields, a bad request failing alone, a stream broken
 * (server killed, credential revoked) failing the checks in flight and opened again by the next.
 */
class CheckStreamTest {
  static final String RULES =
      """
      domain = "api"

      [[rule]]
      name = "per-user"
      match = "user"
      limit = "1000000/1h"
      algorithm = "fixed_window"

      [[rule]]
      name = "burst"
      match = "burst"
      limit = "3/1h"
      algorithm = "fixed_window"

      [[rule]]
      name = "odd"
      match = "odd"
      limit = "5/30s"
      """;

  static final String TOKEN_A = "stream-token-A-0123456789abcdefghijklmnop";
  static final String TOKEN_B = "stream-token-B-0123456789abcdefghijklmnop";

  /** A request whose answer tells it apart: its cost, in the remaining units it leaves. */
  private static Request costly(String user, long cost) {
    return Request.of("api", Descriptor.of("user", user)).withCost(cost);
  }

  @Test
  void manyChecksAtOnceEachGetTheirOwnAnswer() throws Exception {
    try (FlowgateServer server = FlowgateServer.start(RULES);
        FlowgateGrpcClient grpc = FlowgateGrpcClient.builder(server.grpcAddr()).build()) {
      // Asynchronous: 2,000 in flight at once on the one stream (past the server's 256).
      List<CompletableFuture<Verdict>> async = new ArrayList<>();
      for (int i = 0; i < 2_000; i++) {
        async.add(grpc.checkAsync(costly("async-" + i, 1 + i % 500)));
      }
      for (int i = 0; i < async.size(); i++) {
        Verdict v = async.get(i).get(60, TimeUnit.SECONDS);
        assertTrue(v.allowed());
        assertEquals(1_000_000L - 1 - i % 500, v.statuses().get(0).remaining(), "check " + i);
      }
      // Blocking, from 32 threads.
      ExecutorService pool = Executors.newFixedThreadPool(32);
      try {
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < 32; t++) {
          int thread = t;
          done.add(
              pool.submit(
                  () -> {
                    for (int i = 0; i < 100; i++) {
                      long cost = 1 + (thread * 100 + i) % 97;
                      Verdict v = grpc.check(costly("t" + thread + "-" + i, cost));
                      assertEquals(1_000_000L - cost, v.statuses().get(0).remaining());
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
  void theVerdictHasTheHttpAnswersFieldsAndABadRequestFailsAlone() {
    try (FlowgateServer server = FlowgateServer.start(RULES);
        FlowgateGrpcClient grpc = FlowgateGrpcClient.builder(server.grpcAddr()).build()) {
      FlowgateClient http = FlowgateClient.builder(server.baseUrl()).build();
      for (int i = 0; i < 4; i++) {
        Verdict g = grpc.check(Request.of("api", Descriptor.of("burst", "grpc")));
        Verdict h = http.check(Request.of("api", Descriptor.of("burst", "http")));
        assertEquals(i < 3, g.allowed(), "check " + i);
        assertEquals(h.allowed(), g.allowed());
        assertEquals(h.code(), g.code());
        assertEquals(h.reason(), g.reason());
        assertEquals(h.waitMs(), g.waitMs());
        assertEquals(h.leases(), g.leases());
        assertEquals(h.probes(), g.probes());
        assertEquals(h.breaker(), g.breaker());
        assertEquals(h.retryAfterMs() == null, g.retryAfterMs() == null);
        var hs = h.statuses().get(0);
        var gs = g.statuses().get(0);
        assertEquals(hs.rule(), gs.rule());
        assertEquals(hs.limit(), gs.limit());
        assertEquals(hs.remaining(), gs.remaining());
        assertEquals(hs.quota(), gs.quota());
        assertEquals(hs.overLimit(), gs.overLimit());
        assertEquals(hs.shadow(), gs.shadow());
        assertEquals(hs.quotaMode(), gs.quotaMode());
        assertEquals(hs.error(), gs.error());
      }
      Verdict refused = grpc.check(Request.of("api", Descriptor.of("burst", "grpc")));
      assertEquals(ErrorCode.OVER_LIMIT, refused.reason());
      Duration retry = refused.retryAfter().orElseThrow();
      assertTrue(retry.compareTo(Duration.ofHours(1)) <= 0 && !retry.isZero(), retry.toString());

      BadRequestException bad =
          assertThrows(BadRequestException.class, () -> grpc.check(costly("x", 1L << 40)));
      assertEquals("cost", bad.field().orElseThrow(), bad.getMessage());
      assertEquals(400, bad.status());
      CompletionException async =
          assertThrows(
              CompletionException.class, () -> grpc.checkAsync(costly("x", 1L << 40)).join());
      assertTrue(async.getCause() instanceof BadRequestException, async.toString());
      // The stream goes on.
      assertTrue(grpc.check(costly("x", 1)).allowed());
      // The limit as the rule has it (Envoy's answer would say 10/m).
      Verdict odd = grpc.check(Request.of("api", Descriptor.of("odd", "o")));
      assertEquals("5/30s", odd.statuses().get(0).quota());
    }
  }

  @Test
  void aKilledServerFailsTheChecksInFlightAndTheNextReachesItsSuccessor() throws Exception {
    String addr;
    try (ServerSocket s = new ServerSocket(0)) {
      addr = "127.0.0.1:" + s.getLocalPort();
    }
    FlowgateServer first = FlowgateServer.builder().config(RULES).grpcAddr(addr).start();
    try (FlowgateGrpcClient grpc =
        FlowgateGrpcClient.builder(addr).timeout(Duration.ofSeconds(60)).build()) {
      assertTrue(grpc.check(costly("k", 1)).allowed());
      Signals.stop(first.handle().pid());
      CompletableFuture<Verdict> inFlight = grpc.checkAsync(costly("k", 1));
      long start = System.nanoTime();
      first.close();
      ExecutionFailure failure = ExecutionFailure.of(inFlight);
      long ms = (System.nanoTime() - start) / 1_000_000;
      assertTrue(failure.cause instanceof ConnectionException, failure.cause.toString());
      assertFalse(((ConnectionException) failure.cause).isTimeout(), failure.cause.toString());
      assertTrue(ms < 20_000, "the broken stream failed its check after " + ms + " ms");

      try (FlowgateServer second = FlowgateServer.builder().config(RULES).grpcAddr(addr).start()) {
        AtomicReference<Verdict> after = new AtomicReference<>();
        Await.until(
            Duration.ofSeconds(30),
            "a check reaches the server started again",
            () -> {
              try {
                after.set(grpc.check(costly("k", 1)));
                return true;
              } catch (ConnectionException e) {
                return false;
              }
            });
        // A new server's count: the check of the killed one is not sent again.
        assertEquals(1_000_000L - 1, after.get().statuses().get(0).remaining());
      }
    } finally {
      first.close();
    }
  }

  @Test
  void aRevokedTokenEndsTheStreamAndANewTokenOpensAnother() throws Exception {
    try (FlowgateServer server =
        FlowgateServer.builder()
            .config(RULES)
            .file("credentials", "app:decide:" + TOKEN_A + "\n")
            .flags("--credentials-file", "{dir}/credentials")
            .start()) {
      AtomicReference<String> token = new AtomicReference<>(TOKEN_A);
      try (FlowgateGrpcClient grpc =
          FlowgateGrpcClient.builder(server.grpcAddr()).token(token::get).build()) {
        assertTrue(grpc.check(costly("r", 1)).allowed());
        Files.writeString(server.dir().resolve("credentials"), "app:decide:" + TOKEN_B + "\n");
        Signals.hangup(server.handle().pid());
        // Refused on the open stream once the server reads the file again: the stream ends.
        AtomicReference<FlowgateException> refused = new AtomicReference<>();
        Await.until(
            Duration.ofSeconds(30),
            "the revoked token is refused",
            () -> {
              try {
                grpc.check(costly("r", 1));
                return false;
              } catch (UnauthorizedException e) {
                refused.set(e);
                return true;
              }
            });
        assertEquals(401, refused.get().status());
        token.set(TOKEN_B);
        assertTrue(grpc.check(costly("r", 1)).allowed(), "a new stream, with the new token");
      }
    }
  }

  @Test
  void closeLetsTheChecksInFlightFinishThenRefusesMore() throws Exception {
    try (FlowgateServer server = FlowgateServer.start(RULES)) {
      FlowgateGrpcClient grpc = FlowgateGrpcClient.builder(server.grpcAddr()).build();
      assertTrue(grpc.check(costly("c", 1)).allowed());
      List<CompletableFuture<Verdict>> inFlight = new ArrayList<>();
      for (int i = 0; i < 200; i++) {
        inFlight.add(grpc.checkAsync(costly("c", 1)));
      }
      grpc.close();
      for (CompletableFuture<Verdict> f : inFlight) {
        assertTrue(f.get(20, TimeUnit.SECONDS).allowed());
      }
      assertThrows(ConnectionException.class, () -> grpc.check(costly("c", 1)));
    }
  }

  /** The cause of a future's failure, waited for. */
  private record ExecutionFailure(Throwable cause) {
    static ExecutionFailure of(CompletableFuture<?> f) throws Exception {
      try {
        f.get(30, TimeUnit.SECONDS);
      } catch (java.util.concurrent.ExecutionException e) {
        return new ExecutionFailure(e.getCause());
      }
      throw new AssertionError("the check succeeded");
    }
  }
}
