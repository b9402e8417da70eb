package dev.flowgate.client.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real {@code redis-server} for a test, on a free loopback port, persisting nothing; {@link
 * #close()} (or {@link #stop()}) kills it by its process handle.
 */
public final class RedisServer implements AutoCloseable {
  private final Process process;
  private final int port;
  private final Path dir;

  private RedisServer(Process process, int port, Path dir) {
    this.process = process;
    this.port = port;
    this.dir = dir;
  }

  /** Starts one and waits until it accepts connections. */
  public static RedisServer start() {
    try {
      int port;
      try (ServerSocket probe = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
        port = probe.getLocalPort();
      }
      Path dir = Files.createTempDirectory("flowgate-redis-");
      Process process =
          new ProcessBuilder(
                  List.of(
                      "redis-server", "--port", String.valueOf(port), "--bind", "127.0.0.1",
                      "--save", "", "--appendonly", "no", "--dir", dir.toString()))
              .redirectErrorStream(true)
              .redirectOutput(dir.resolve("redis.log").toFile())
              .start();
      RedisServer redis = new RedisServer(process, port, dir);
      long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      while (System.nanoTime() < deadline && process.isAlive()) {
        try (Socket s = new Socket()) {
          s.connect(new InetSocketAddress("127.0.0.1", port), 200);
          return redis;
        } catch (IOException notYet) {
          Thread.sleep(20);
        }
      }
      redis.close();
      throw new IllegalStateException(
          "redis-server did not listen on " + port + ": " + Files.readString(dir.resolve("redis.log")));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start redis-server (apt-get install redis-server)", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** Its URL for {@code --redis-url}. */
  public String url() {
    return "redis://127.0.0.1:" + port + "/";
  }

  /** Its process id (to stop and continue it: {@link Signals}). */
  public long pid() {
    return process.pid();
  }

  /** Kills it: the store is gone until the test ends. */
  public void stop() {
    process.destroyForcibly();
    try {
      process.waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    stop();
    dir.resolve("redis.log").toFile().delete();
    dir.toFile().delete();
  }
}
