package dev.flowgate.client;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpTimeoutException;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * HTTP/1.1 over a pool of keep-alive sockets, blocking, on the calling thread: the client's
 * default wire. Each exchange takes an idle connection (the one used last) or opens one, writes
 * the request in one write, reads the whole answer, and gives the connection back unless the
 * server said {@code Connection: close}; so the pool holds as many connections as there were
 * exchanges at once. A connection that failed is closed, never given back.
 *
 * <p>Written by hand rather than taken from OkHttp or Apache HttpClient 5: the client promises
 * one dependency (Jackson), and what it needs of HTTP/1.1 is small (fixed JSON requests,
 * answers framed by {@code Content-Length} or chunks, no redirects, cookies, proxies or
 * caching). The JDK's {@code java.net.http} hands each exchange between threads, which is what
 * made it slow on a busy machine; it stays the wire of HTTP/2 ({@link JdkWire}).
 *
 * <p><b>Stale connections and retries.</b> The server closes a connection idle for longer than
 * its {@code --http-header-timeout} (10 s by default). A connection idle for more than {@link
 * #CHECK_AFTER_NANOS} is checked before it is used (a 1 ms read that sees the server's close),
 * and one idle for more than {@link #MAX_IDLE_NANOS} is closed rather than used. A request that
 * still meets a closed connection (no byte of answer) is sent again once, on a new connection,
 * only if it is a {@code GET}: a {@code POST} (a decision, a charge, a queue call) that may have
 * reached the server is never resent; it fails with a {@link ConnectionException}, whose caller
 * knows what resending it would mean.
 *
 * <p>Thread-safe.
 */
final class Http1Wire implements Wire {
  /** A connection idle for longer is checked for the server's close before it is used. */
  static final long CHECK_AFTER_NANOS = Duration.ofMillis(500).toNanos();
  /** A connection idle for longer is closed rather than used (under the server's 10 s). */
  static final long MAX_IDLE_NANOS = Duration.ofSeconds(8).toNanos();

  private final String host;
  private final int port;
  private final String hostHeader;
  private final String pathPrefix;
  private final SSLContext tls;
  private final SSLParameters sslParameters;
  private final int connectTimeoutMs;
  private final Executor executor;
  /** Idle connections, the one given back last first. */
  private final ConcurrentLinkedDeque<Http1Connection> idle = new ConcurrentLinkedDeque<>();
  private final AtomicLong opened = new AtomicLong();
  /**
   * The largest body pipelined: the requests and answers in flight on a pipelined connection stay
   * far below the sockets' buffers, so that its writer never waits on a server that waits for its
   * answers to be read.
   */
  static final int MAX_PIPELINED_BODY = 4096;

  /** The most checks in flight at once on one pipelined connection; 1: no pipelining. */
  private final int pipelineDepth;
  /** The server's time per decision, which sets how many checks a connection takes now. */
  private final AnswerPace pace;
  /** The connections that pipeline checks, the first ones filled first. */
  private final CopyOnWriteArrayList<Http1Pipeline> pipelines = new CopyOnWriteArrayList<>();
  private final AtomicLong pipelinedRequests = new AtomicLong();
  private final AtomicLong pipelinedWrites = new AtomicLong();
  /** No new connection is pooled or pipelined (closed by {@link #close}). */
  private volatile boolean closed;

  /**
   * @param base the server's base URI ({@code http://host:port} or {@code https://...}, perhaps
   *     with a path prefix)
   * @param tls the TLS context of an {@code https} URI (null: the JVM's default)
   * @param sslParameters the TLS parameters (protocols, cipher suites), or null
   * @param connectTimeout how long opening a connection (and its TLS handshake) may take
   * @param executor where the {@code Async} exchanges run
   * @param pipelineDepth the most blocking checks in flight at once on one connection (1: one)
   * @param pipelineBudget the decisions' time a pipelined check may wait behind ({@link
   *     AnswerPace})
   */
  Http1Wire(
      URI base,
      SSLContext tls,
      SSLParameters sslParameters,
      Duration connectTimeout,
      Executor executor,
      int pipelineDepth,
      Duration pipelineBudget) {
    if (pipelineDepth < 1) {
      throw new IllegalArgumentException("pipelineDepth must be at least 1, not " + pipelineDepth);
    }
    this.pipelineDepth = pipelineDepth;
    this.pace = new AnswerPace(pipelineDepth, pipelineBudget.toNanos());
    boolean https = "https".equals(base.getScheme());
    String h = base.getHost();
    if (h == null) {
      throw new IllegalArgumentException("no host in " + base);
    }
    this.host = h.startsWith("[") ? h.substring(1, h.length() - 1) : h;
    this.port = base.getPort() != -1 ? base.getPort() : https ? 443 : 80;
    this.hostHeader = base.getPort() != -1 ? h + ":" + base.getPort() : h;
    String path = base.getRawPath() == null ? "" : base.getRawPath();
    this.pathPrefix = path.endsWith("/") ? path.substring(0, path.length() - 1) : path;
    try {
      this.tls = https ? (tls != null ? tls : SSLContext.getDefault()) : null;
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("the JVM has no default TLS context", e);
    }
    this.sslParameters = sslParameters;
    this.connectTimeoutMs = (int) Math.min(Integer.MAX_VALUE, connectTimeout.toMillis());
    this.executor = executor;
  }

  /** How many connections were opened so far (for the tests of reuse). */
  long opened() {
    return opened.get();
  }

  /** How many connections are idle in the pool now. */
  int idleCount() {
    return idle.size();
  }

  /**
   * Whether every idle connection was closed by the server (for the tests: waits for the
   * server's idle timeout without sleeping a fixed time). Checks each one as a reuse would.
   */
  boolean idleClosedByServer() {
    for (Http1Connection c : idle) {
      if (!c.stale()) {
        return false;
      }
    }
    return !idle.isEmpty();
  }

  /**
   * Whether every pipelined connection was closed by the server while idle (for the tests: waits
   * for the server's idle timeout without sleeping a fixed time). Checks each idle one as a new
   * check would, which retires it when closed.
   */
  boolean pipelinesClosedByServer() {
    for (Http1Pipeline p : pipelines) {
      if (p.inFlight() > 0 || p.stillOpen()) {
        return false;
      }
    }
    return !pipelines.isEmpty();
  }

  /** How many pipelined connections are in use now (for the tests). */
  int pipelineCount() {
    return pipelines.size();
  }

  /** The average decision time the server reported, in nanoseconds (for the tests). */
  long decideNanos() {
    return pace.decideNanos();
  }

  /** How many checks one pipelined connection may carry now (for the tests). */
  int pipelineDepth() {
    return pace.depth();
  }

  /** How many checks are in flight on pipelined connections now (for the tests). */
  int pipelinedInFlight() {
    return pipelines.stream().mapToInt(Http1Pipeline::inFlight).sum();
  }

  /** How many requests were written on pipelined connections (for the tests). */
  long pipelinedRequests() {
    return pipelinedRequests.get();
  }

  /** How many writes carried them (for the tests: fewer when requests went together). */
  long pipelinedWrites() {
    return pipelinedWrites.get();
  }

  @Override
  public Answer send(Route route, byte[] body, String bearer, Duration timeout)
      throws IOException {
    boolean small = body == null || body.length <= MAX_PIPELINED_BODY;
    if (pipelineDepth > 1 && route.pipelined && small) {
      return pipelined(route, body, bearer, timeout);
    }
    return exchange(route, body, bearer, timeout, null);
  }

  /**
   * A blocking exchange on a pipelined connection ({@link Http1Pipeline}): the first one with
   * room, else a new one. Filling the first ones first keeps the checks of many threads on few
   * connections, so that they share writes and reads (the last ones, left unused, are closed).
   * Idle connections are checked and closed as the pool's are; a check is never resent.
   */
  private Answer pipelined(Route route, byte[] body, String bearer, Duration timeout)
      throws IOException {
    byte[] request = encode(route, body, bearer);
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      Http1Pipeline p = firstWithRoom();
      if (p == null) {
        p = new Http1Pipeline(open(false), pace, pipelinedRequests, pipelinedWrites);
        pipelines.add(p);
        if (closed) {
          p.retire(); // closed meanwhile: this call is its last
        }
      }
      Http1Connection.Result r = p.exchange(request, deadline);
      if (r != null) {
        return r.answer();
      }
      pipelines.remove(p); // retired before it took the call: nothing was sent
    }
  }

  private Http1Pipeline firstWithRoom() {
    int depth = pace.depth();
    long now = System.nanoTime();
    for (Http1Pipeline p : pipelines) {
      int n = p.inFlight();
      if (n == 0) {
        long idleFor = now - p.idleSince();
        if (idleFor > MAX_IDLE_NANOS) {
          p.retire();
        } else if (idleFor > CHECK_AFTER_NANOS) {
          p.stillOpen();
        }
      }
      if (p.retired()) {
        pipelines.remove(p);
      } else if (n < depth) {
        return p;
      }
    }
    return null;
  }

  @Override
  public CompletableFuture<Answer> sendAsync(
      Route route, byte[] body, String bearer, Duration timeout) {
    Abort abort = new Abort();
    AbortableFuture<Answer> answer = new AbortableFuture<>(abort);
    try {
      executor.execute(
          () -> {
            try {
              answer.complete(exchange(route, body, bearer, timeout, abort));
            } catch (IOException | RuntimeException e) {
              answer.completeExceptionally(e);
            }
          });
    } catch (RejectedExecutionException e) {
      answer.completeExceptionally(new IOException("the client's executor refused the call", e));
    }
    return answer;
  }

  private Answer exchange(
      Route route, byte[] body, String bearer, Duration timeout, Abort abort) throws IOException {
    byte[] request = encode(route, body, bearer);
    long deadline = System.nanoTime() + timeout.toNanos();
    for (int attempt = 0; ; attempt++) {
      // A GET sent again after a stale connection goes on a new one.
      Http1Connection c = attempt == 0 ? checkout() : open();
      if (abort != null && !abort.hold(c)) {
        c.close();
        throw new IOException("cancelled");
      }
      try {
        Http1Connection.Result r = c.exchange(request, deadline);
        if (abort != null) {
          abort.release();
        }
        if (r.keepAlive()) {
          giveBack(c);
        } else {
          c.close();
        }
        return r.answer();
      } catch (IOException | RuntimeException e) {
        c.close();
        boolean staleGet =
            c.reused
                && !c.answering()
                && attempt == 0
                && "GET".equals(route.method)
                && !(e instanceof HttpTimeoutException)
                && (abort == null || !abort.cancelled());
        if (!staleGet) {
          throw e;
        }
      }
    }
  }

  private byte[] encode(Route route, byte[] body, String bearer) {
    StringBuilder head = new StringBuilder(256);
    head.append(route.method).append(' ').append(pathPrefix).append(route.path)
        .append(" HTTP/1.1\r\nHost: ").append(hostHeader)
        .append("\r\nAccept: application/json\r\n");
    if (body != null) {
      head.append("Content-Type: application/json\r\nContent-Length: ")
          .append(body.length).append("\r\n");
    } else if (!"GET".equals(route.method)) {
      head.append("Content-Length: 0\r\n");
    }
    if (bearer != null) {
      for (int i = 0; i < bearer.length(); i++) {
        char ch = bearer.charAt(i);
        if (ch < 0x20 || ch > 0x7e) {
          throw new IllegalArgumentException("the token holds a character not allowed in a header");
        }
      }
      head.append("Authorization: Bearer ").append(bearer).append("\r\n");
    }
    head.append("\r\n");
    byte[] h = head.toString().getBytes(StandardCharsets.ISO_8859_1);
    if (body == null || body.length == 0) {
      return h;
    }
    byte[] all = new byte[h.length + body.length];
    System.arraycopy(h, 0, all, 0, h.length);
    System.arraycopy(body, 0, all, h.length, body.length);
    return all;
  }

  @Override
  public void close() {
    closed = true;
    for (Http1Connection c = idle.pollFirst(); c != null; c = idle.pollFirst()) {
      c.close();
    }
    for (Http1Pipeline p : pipelines) {
      p.retire();
    }
    pipelines.clear();
  }

  /** The connection used last that is still fit, or a new one. */
  private Http1Connection checkout() throws IOException {
    for (Http1Connection c = idle.pollFirst(); c != null; c = idle.pollFirst()) {
      long idleFor = System.nanoTime() - c.idleSince;
      if (idleFor > MAX_IDLE_NANOS || (idleFor > CHECK_AFTER_NANOS && c.stale())) {
        c.close();
        continue;
      }
      return c;
    }
    return open();
  }

  private void giveBack(Http1Connection c) {
    long now = System.nanoTime();
    c.idleSince = now;
    c.reused = true;
    idle.offerFirst(c);
    if (closed && idle.remove(c)) {
      c.close(); // closed meanwhile: its call was the last on it
      return;
    }
    // The oldest idle connections, unused for too long, are closed as the pool is used.
    for (Http1Connection old = idle.peekLast();
        old != null && old != c && now - old.idleSince > MAX_IDLE_NANOS;
        old = idle.peekLast()) {
      if (idle.removeLastOccurrence(old)) {
        old.close();
      }
    }
  }

  /**
   * A new connection. A plain one for one exchange at a time is a blocking channel's socket,
   * whose reads wait without a timeout, {@link Deadlines} keeping their deadlines (a system call
   * per read rather than three); a TLS one, and one that pipelines (whose reader may pass its
   * turn on at its deadline and leave the connection open), read with timeouts.
   */
  private Http1Connection open() throws IOException {
    return open(tls == null);
  }

  private Http1Connection open(boolean watched) throws IOException {
    Socket socket = watched ? SocketChannel.open().socket() : new Socket();
    try {
      socket.setTcpNoDelay(true);
      socket.setKeepAlive(true);
      try {
        socket.connect(new InetSocketAddress(host, port), connectTimeoutMs);
      } catch (SocketTimeoutException e) {
        throw new HttpConnectTimeoutException("could not connect within " + connectTimeoutMs + " ms");
      }
      if (tls != null) {
        socket = handshake(socket);
      }
      opened.incrementAndGet();
      return new Http1Connection(socket, watched && tls == null);
    } catch (IOException | RuntimeException e) {
      socket.close();
      throw e;
    }
  }

  private Socket handshake(Socket plain) throws IOException {
    SSLSocket ssl =
        (SSLSocket) tls.getSocketFactory().createSocket(plain, host, port, true);
    SSLParameters p = ssl.getSSLParameters();
    if (sslParameters != null) {
      if (sslParameters.getProtocols() != null) {
        p.setProtocols(sslParameters.getProtocols());
      }
      if (sslParameters.getCipherSuites() != null) {
        p.setCipherSuites(sslParameters.getCipherSuites());
      }
      if (sslParameters.getServerNames() != null) {
        p.setServerNames(sslParameters.getServerNames());
      }
    }
    p.setEndpointIdentificationAlgorithm("HTTPS");
    p.setApplicationProtocols(new String[] {"http/1.1"});
    ssl.setSSLParameters(p);
    ssl.setSoTimeout(connectTimeoutMs);
    try {
      ssl.startHandshake();
    } catch (SocketTimeoutException e) {
      ssl.close();
      throw new HttpConnectTimeoutException("no TLS handshake within " + connectTimeoutMs + " ms");
    } catch (IOException e) {
      ssl.close();
      throw e;
    }
    return ssl;
  }

  /** The connection of an asynchronous exchange, closed when its future is cancelled. */
  static final class Abort implements Runnable {
    private Http1Connection held;
    private boolean cancelled;

    /** Records the exchange's connection; false when the exchange was cancelled already. */
    synchronized boolean hold(Http1Connection c) {
      held = c;
      return !cancelled;
    }

    synchronized void release() {
      held = null;
    }

    synchronized boolean cancelled() {
      return cancelled;
    }

    @Override
    public synchronized void run() {
      cancelled = true;
      if (held != null) {
        held.close();
        held = null;
      }
    }
  }
}
