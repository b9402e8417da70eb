package dev.flowgate.client.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import javax.net.ssl.SSLContext;

/**
 * A real {@code flowgate serve} process for a test, on ephemeral loopback ports, with its
 * configuration and working directory in a temporary directory. {@link #close()} kills it (and
 * anything it started) by its process handle and deletes the directory: open it with
 * try-with-resources, so that a failing test stops it too. A JVM that exits without closing it
 * kills it from a shutdown hook.
 *
 * <p>The binary is the system property {@code flowgate.binary}, by default {@code
 * ../../../target/debug/flowgate} (the repository's, from this module's directory).
 *
 * <pre>{@code
 * try (FlowgateServer server = FlowgateServer.builder().config(RULES).start()) {
 *   FlowgateClient client = FlowgateClient.builder(server.baseUrl()).build();
 * }
 * }</pre>
 */
public final class FlowgateServer implements AutoCloseable {
  /** How long the server may take to log that it serves, and then to be ready, each. */
  private static final Duration START = Duration.ofSeconds(30);

  private final Process process;
  private final Path dir;
  private final String baseUrl;
  private final String grpcAddr;
  private final List<String> log;
  private final Thread hook;

  private FlowgateServer(
      Process process, Path dir, String baseUrl, String grpcAddr, List<String> log, Thread hook) {
    this.process = process;
    this.dir = dir;
    this.baseUrl = baseUrl;
    this.grpcAddr = grpcAddr;
    this.log = log;
    this.hook = hook;
  }

  /** A builder of a server. */
  public static Builder builder() {
    return new Builder();
  }

  /** Starts a server of these rules (Flowgate TOML), with these extra flags. */
  public static FlowgateServer start(String rules, String... flags) {
    return builder().config(rules).flags(flags).start();
  }

  /** The binary the tests run: {@code -Dflowgate.binary}, or the repository's debug build. */
  public static Path binary() {
    String property = System.getProperty("flowgate.binary");
    Path path =
        property != null && !property.isBlank()
            ? Path.of(property)
            : Path.of("../../../target/debug/flowgate");
    Path absolute = path.toAbsolutePath().normalize();
    if (!Files.isExecutable(absolute)) {
      throw new IllegalStateException(
          "no flowgate binary at "
              + absolute
              + ": build it from the repository's root with "
              + "`cargo build -p flowgate-server --bin flowgate` (it lands in target/debug/, or "
              + "$CARGO_TARGET_DIR/debug/), or name one with -Dflowgate.binary=/path/to/flowgate");
    }
    return absolute;
  }

  /** The HTTP API's base URL: {@code http://127.0.0.1:PORT} (https with TLS). */
  public String baseUrl() {
    return baseUrl;
  }

  /** The HTTP API's port. */
  public int httpPort() {
    return URI.create(baseUrl).getPort();
  }

  /** The gRPC port's address, {@code 127.0.0.1:PORT}. */
  public String grpcAddr() {
    return grpcAddr;
  }

  /** The temporary directory of its configuration, working directory and files. */
  public Path dir() {
    return dir;
  }

  /** The lines it has logged so far. */
  public List<String> log() {
    synchronized (log) {
      return List.copyOf(log);
    }
  }

  /** The process, to check whether it still runs. */
  public ProcessHandle handle() {
    return process.toHandle();
  }

  /** Kills the process (and its descendants) by its handle, waits for it, deletes its files. */
  @Override
  public void close() {
    kill(process);
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException shuttingDown) {
      // The JVM is exiting: the hook runs anyway.
    }
    deleteTree(dir);
  }

  private static void kill(Process process) {
    process.descendants().forEach(ProcessHandle::destroyForcibly);
    process.destroyForcibly();
    try {
      process.waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void deleteTree(Path dir) {
    try (Stream<Path> paths = Files.walk(dir)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // Left for the system's temporary directory cleaner.
    }
  }

  /** Builds and starts a {@link FlowgateServer}. */
  public static final class Builder {
    private String config = "domain = \"test\"\n";
    private final List<String> flags = new ArrayList<>();
    private final Map<String, String> env = new LinkedHashMap<>();
    private final Map<String, String> files = new LinkedHashMap<>();
    private SSLContext tls;
    private String httpAddr = "127.0.0.1:0";
    private String grpcAddr = "127.0.0.1:0";

    private Builder() {}

    /**
     * The gRPC address ({@code 127.0.0.1:0}, an ephemeral port, by default): a fixed one to start
     * a server again where its gRPC clients expect it ({@link FlowgateServer#grpcAddr()}).
     */
    public Builder grpcAddr(String addr) {
      this.grpcAddr = addr;
      return this;
    }

    /**
     * The HTTP address ({@code 127.0.0.1:0}, an ephemeral port, by default): a fixed one to start
     * a server again where its clients expect it ({@link FlowgateServer#httpPort()}).
     */
    public Builder httpAddr(String addr) {
      this.httpAddr = addr;
      return this;
    }

    /** The rules, Flowgate TOML, written to {@code flowgate.toml} in the server's directory. */
    public Builder config(String toml) {
      this.config = toml;
      return this;
    }

    /** Extra flags of {@code flowgate serve}; {@code {dir}} in them is the server's directory. */
    public Builder flags(String... flags) {
      this.flags.addAll(List.of(flags));
      return this;
    }

    /** An environment variable of the process. */
    public Builder env(String name, String value) {
      env.put(name, value);
      return this;
    }

    /** A file written in the server's directory before it starts (credentials, certificates). */
    public Builder file(String name, String content) {
      files.put(name, content);
      return this;
    }

    /** The server serves TLS: readiness is asked over https with this context. */
    public Builder tls(SSLContext context) {
      this.tls = context;
      return this;
    }

    /** Starts the server and waits until {@code /readyz} answers 200. */
    public FlowgateServer start() {
      Path binary = binary();
      Path dir;
      try {
        dir = Files.createTempDirectory("flowgate-test-");
        Files.writeString(dir.resolve("flowgate.toml"), config);
        for (Map.Entry<String, String> f : files.entrySet()) {
          Files.writeString(dir.resolve(f.getKey()), f.getValue());
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      List<String> command = new ArrayList<>(List.of(binary.toString(), "serve"));
      command.addAll(
          List.of(
              "--config",
              dir.resolve("flowgate.toml").toString(),
              "--http-addr",
              httpAddr,
              "--grpc-addr",
              grpcAddr));
      flags.forEach(f -> command.add(f.replace("{dir}", dir.toString())));
      ProcessBuilder pb =
          new ProcessBuilder(command).directory(dir.toFile()).redirectOutput(ProcessBuilder.Redirect.DISCARD);
      pb.environment().put("FLOWGATE_LOG", "info");
      pb.environment().putAll(env);
      Process process;
      try {
        process = pb.start();
      } catch (IOException e) {
        deleteTree(dir);
        throw new UncheckedIOException("cannot start " + binary, e);
      }
      Thread hook = new Thread(() -> kill(process), "flowgate-test-server-kill");
      Runtime.getRuntime().addShutdownHook(hook);
      List<String> log = new ArrayList<>();
      try {
        String serving = readLog(process, log);
        String http = field(serving, "http_addr=");
        String grpc = field(serving, "grpc_addr=");
        String baseUrl = (tls != null ? "https://" : "http://") + http;
        FlowgateServer server = new FlowgateServer(process, dir, baseUrl, grpc, log, hook);
        awaitReady(server, tls);
        return server;
      } catch (RuntimeException | Error e) {
        kill(process);
        Runtime.getRuntime().removeShutdownHook(hook);
        deleteTree(dir);
        throw e;
      }
    }

    /** Drains the log into {@code log}; answers its "flowgate serving" line. */
    private static String readLog(Process process, List<String> log) {
      CompletableFuture<String> serving = new CompletableFuture<>();
      Thread reader =
          new Thread(
              () -> {
                try (BufferedReader r =
                    new BufferedReader(
                        new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8))) {
                  String line;
                  while ((line = r.readLine()) != null) {
                    synchronized (log) {
                      log.add(line);
                    }
                    if (line.contains("flowgate serving")) {
                      serving.complete(line);
                    }
                  }
                } catch (IOException e) {
                  // The process ended.
                }
                serving.completeExceptionally(new IllegalStateException("the log ended"));
              },
              "flowgate-test-server-log");
      reader.setDaemon(true);
      reader.start();
      try {
        return serving.get(START.toMillis(), TimeUnit.MILLISECONDS);
      } catch (Exception e) {
        String tail;
        synchronized (log) {
          tail = String.join("\n", log.subList(Math.max(0, log.size() - 30), log.size()));
        }
        throw new IllegalStateException(
            "flowgate did not start within " + START + " (" + e + "); its log:\n" + tail, e);
      }
    }

    private static String field(String line, String name) {
      for (String word : line.split("\\s+")) {
        if (word.startsWith(name)) {
          return word.substring(name.length());
        }
      }
      throw new IllegalStateException("no " + name + " in the start line: " + line);
    }

    private static void awaitReady(FlowgateServer server, SSLContext tls) {
      HttpClient.Builder builder = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2));
      if (tls != null) {
        builder.sslContext(tls);
      }
      HttpClient http = builder.build();
      HttpRequest ready =
          HttpRequest.newBuilder(URI.create(server.baseUrl() + "/readyz"))
              .timeout(Duration.ofSeconds(2))
              .build();
      long deadline = System.nanoTime() + START.toNanos();
      String last = "no answer";
      while (System.nanoTime() < deadline) {
        if (!server.process.isAlive()) {
          throw new IllegalStateException(
              "flowgate exited (" + server.process.exitValue() + "); its log:\n" + server.log());
        }
        try {
          HttpResponse<String> r = http.send(ready, HttpResponse.BodyHandlers.ofString());
          if (r.statusCode() == 200) {
            return;
          }
          last = r.statusCode() + " " + r.body();
        } catch (IOException e) {
          last = e.toString();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("interrupted", e);
        }
        try {
          Thread.sleep(50);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("interrupted", e);
        }
      }
      throw new IllegalStateException("flowgate was not ready within " + START + ": " + last);
    }
  }
}
