package dev.flowgate.client.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real {@code redis-server} for a test, on a free loopback port, without persistence, its
 * working directory temporary. {@link #close()} kills it by its process handle and deletes the
 * directory; a JVM that exits without closing it kills it from a shutdown hook.
 *
 * <p>The binary is the system property {@code redis.binary}, by default {@code
 * /usr/bin/redis-server}.
 */
public final class RedisProcess implements AutoCloseable {
  private static final Duration START = Duration.ofSeconds(20);

  private final Process process;
  private final Path dir;
  private final int port;
  private final Thread hook;

  private RedisProcess(Process process, Path dir, int port, Thread hook) {
    this.process = process;
    this.dir = dir;
    this.port = port;
    this.hook = hook;
  }

  /** Starts a server and waits until it answers {@code PING}. */
  public static RedisProcess start() {
    String binary = System.getProperty("redis.binary", "/usr/bin/redis-server");
    Path dir;
    int port;
    try {
      dir = Files.createTempDirectory("flowgate-test-redis-");
      try (ServerSocket probe = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
        port = probe.getLocalPort();
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<String> command =
        List.of(
            binary, "--port", String.valueOf(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", dir.toString());
    Process process;
    try {
      process =
          new ProcessBuilder(command)
              .directory(dir.toFile())
              .redirectErrorStream(true)
              .redirectOutput(dir.resolve("redis.log").toFile())
              .start();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start " + binary, e);
    }
    Thread hook = new Thread(() -> kill(process), "redis-test-kill");
    Runtime.getRuntime().addShutdownHook(hook);
    RedisProcess redis = new RedisProcess(process, dir, port, hook);
    try {
      redis.awaitPong();
    } catch (RuntimeException | Error e) {
      redis.close();
      throw e;
    }
    return redis;
  }

  /** The URL Flowgate's {@code --redis-url} takes. */
  public String url() {
    return "redis://127.0.0.1:" + port + "/";
  }

  private void awaitPong() {
    long deadline = System.nanoTime() + START.toNanos();
    String last = "no answer";
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new IllegalStateException("redis-server exited: " + log());
      }
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress("127.0.0.1", port), 500);
        s.setSoTimeout(1000);
        OutputStream out = s.getOutputStream();
        out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
        out.flush();
        InputStream in = s.getInputStream();
        byte[] buf = new byte[7];
        int n = in.read(buf);
        if (n > 0 && new String(buf, 0, n, StandardCharsets.US_ASCII).startsWith("+PONG")) {
          return;
        }
      } catch (IOException e) {
        last = e.toString();
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted", e);
      }
    }
    throw new IllegalStateException("redis-server did not answer within " + START + ": " + last);
  }

  private String log() {
    try {
      return Files.readString(dir.resolve("redis.log"));
    } catch (IOException e) {
      return e.toString();
    }
  }

  /** Kills the process by its handle, waits for it, deletes its directory. */
  @Override
  public void close() {
    kill(process);
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException shuttingDown) {
      // The JVM is exiting: the hook runs anyway.
    }
    try (Stream<Path> paths = Files.walk(dir)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // Left for the system's temporary directory cleaner.
    }
  }

  private static void kill(Process process) {
    process.destroyForcibly();
    try {
      process.waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
