package dev.flowgate.bench;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.Request;
import dev.flowgate.client.Verdict;
import dev.flowgate.client.grpc.FlowgateGrpcClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;

/**
 * The Java client's {@code check} under load, as {@code flowgate bench} loads the server: {@code
 * --threads} threads each calling the blocking {@code check} in a loop on one shared client, the
 * descriptor {@code key=<0..keys-1>} of domain {@code bench} drawn at random per call, for
 * {@code --duration} seconds after {@code --warmup}. Prints one JSON line: calls per second,
 * p50 and p99 of the calls' latency in microseconds, errors, and the CPU time (user and system)
 * per call of this JVM and, with {@code --server-pid}, of the server, over the measured phase.
 *
 * <p>Usage: {@code ClientBench --api http|grpc --addr 127.0.0.1:PORT [--threads 64] [--keys
 * 10000] [--duration 5] [--warmup 2] [--executor default|direct] [--server-pid PID] [--pipelining N]}
 */
public final class ClientBench {
  private ClientBench() {}

  public static void main(String[] args) throws Exception {
    String api = "http";
    String addr = null;
    int threads = 1;
    int keys = 10_000;
    double duration = 5;
    double warmup = 2;
    boolean direct = false;
    long serverPid = 0;
    int pipelining = 0;
    for (int i = 0; i + 1 < args.length; i += 2) {
      String v = args[i + 1];
      switch (args[i]) {
        case "--api" -> api = v;
        case "--addr" -> addr = v;
        case "--threads" -> threads = Integer.parseInt(v);
        case "--keys" -> keys = Integer.parseInt(v);
        case "--duration" -> duration = Double.parseDouble(v);
        case "--warmup" -> warmup = Double.parseDouble(v);
        case "--executor" -> direct = v.equals("direct");
        case "--server-pid" -> serverPid = Long.parseLong(v);
        case "--pipelining" -> pipelining = Integer.parseInt(v);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    if (addr == null) {
      throw new IllegalArgumentException("--addr 127.0.0.1:PORT is required");
    }
    Request[] requests = new Request[keys];
    for (int k = 0; k < keys; k++) {
      requests[k] = Request.of("bench", Descriptor.of("key", Integer.toString(k)));
    }
    Function<Request, Verdict> check;
    AutoCloseable closer = () -> {};
    if (api.equals("http")) {
      FlowgateClient.Builder builder = FlowgateClient.builder("http://" + addr);
      if (pipelining > 0) {
        builder.pipelining(pipelining);
      }
      if (direct) {
        // The HTTP client's work and the answers on its selector thread: no hand-off per call.
        builder.executor(Runnable::run);
      }
      FlowgateClient client = builder.build();
      check = client::check;
    } else if (api.equals("grpc")) {
      FlowgateGrpcClient client = FlowgateGrpcClient.builder(addr).build();
      check = client::check;
      closer = client;
    } else {
      throw new IllegalArgumentException("--api is http or grpc, not " + api);
    }
    Result r = run(check, requests, threads, warmup, duration, serverPid);
    closer.close();
    System.out.printf(
        Locale.ROOT,
        "{\"api\":\"%s\",\"threads\":%d,\"pipelining\":%d,\"keys\":%d,\"calls\":%d,"
            + "\"errors\":%d,"
            + "\"seconds\":%.2f,\"throughput\":%.0f,\"p50_us\":%d,\"p99_us\":%d,"
            + "\"cpu_us_per_call\":%.1f,\"server_cpu_us_per_call\":%.1f}%n",
        api, threads, Math.max(1, pipelining), keys, r.calls, r.errors, r.seconds,
        r.calls / r.seconds, r.p50Us, r.p99Us, perCall(r.cpuUs, r.calls), perCall(r.serverCpuUs, r.calls));
  }

  /** CPU microseconds per call; -1 when unknown. */
  private static double perCall(long cpuUs, long calls) {
    return cpuUs < 0 || calls == 0 ? -1 : (double) cpuUs / calls;
  }

  private record Result(
      long calls, long errors, double seconds, long p50Us, long p99Us, long cpuUs,
      long serverCpuUs) {}

  /** Each thread's latencies of the measured phase, in nanoseconds. */
  private static final class Samples {
    long[] nanos = new long[1 << 16];
    int n;

    void add(long v) {
      if (n == nanos.length) {
        nanos = Arrays.copyOf(nanos, n * 2);
      }
      nanos[n++] = v;
    }
  }

  private static Result run(
      Function<Request, Verdict> check, Request[] requests, int threads, double warmup,
      double duration, long serverPid) throws InterruptedException {
    AtomicBoolean measuring = new AtomicBoolean(false);
    AtomicBoolean stop = new AtomicBoolean(false);
    LongAdder errors = new LongAdder();
    List<Samples> samples = new ArrayList<>();
    CountDownLatch done = new CountDownLatch(threads);
    for (int t = 0; t < threads; t++) {
      Samples mine = new Samples();
      samples.add(mine);
      Thread worker =
          new Thread(
              () -> {
                ThreadLocalRandom random = ThreadLocalRandom.current();
                while (!stop.get()) {
                  Request req = requests[random.nextInt(requests.length)];
                  long start = System.nanoTime();
                  try {
                    check.apply(req);
                  } catch (RuntimeException e) {
                    if (measuring.get()) {
                      errors.increment();
                    }
                    continue;
                  }
                  if (measuring.get()) {
                    mine.add(System.nanoTime() - start);
                  }
                }
                done.countDown();
              },
              "bench-" + t);
      worker.setDaemon(true);
      worker.start();
    }
    Thread.sleep(Duration.ofMillis((long) (warmup * 1000)).toMillis());
    long cpuStart = Cpu.self();
    long serverCpuStart = Cpu.of(serverPid);
    long start = System.nanoTime();
    measuring.set(true);
    Thread.sleep((long) (duration * 1000));
    measuring.set(false);
    double seconds = (System.nanoTime() - start) / 1e9;
    long cpu = Cpu.self() - cpuStart;
    long serverCpu = Cpu.of(serverPid) - serverCpuStart;
    stop.set(true);
    done.await();
    int total = samples.stream().mapToInt(s -> s.n).sum();
    long[] all = new long[total];
    int at = 0;
    for (Samples s : samples) {
      System.arraycopy(s.nanos, 0, all, at, s.n);
      at += s.n;
    }
    Arrays.sort(all);
    long p50 = total == 0 ? 0 : all[(int) Math.min(total - 1, (long) (total * 0.50))] / 1000;
    long p99 = total == 0 ? 0 : all[(int) Math.min(total - 1, (long) (total * 0.99))] / 1000;
    return new Result(
        total, errors.sum(), seconds, p50, p99, cpuStart < 0 ? -1 : cpu,
        serverCpuStart < 0 ? -1 : serverCpu);
  }
}
