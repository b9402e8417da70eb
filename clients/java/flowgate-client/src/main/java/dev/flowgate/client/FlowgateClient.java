package dev.flowgate.client;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.URI;
import java.net.http.HttpClient;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;

/**
 * A client of a Flowgate server's HTTP/JSON API: decisions ({@link #check}, {@link #acquire}),
 * breaker reports and charges ({@link #report}), reservations ({@link #reserve}, {@link
 * #commit}).
 *
 * <p><b>Thread-safe.</b> Build one per server and share it: every call may be made from any
 * thread at once. Over HTTP/1.1 (the default) it holds a pool of keep-alive connections, one
 * per call in flight, each reused by the next call; with {@code httpVersion(HTTP_2)} one
 * {@link HttpClient} multiplexing the calls on one connection. It holds no other state.
 *
 * <p>Every call has a blocking form, which throws a {@link FlowgateException} (or one of its
 * subclasses), and an {@code Async} form, whose {@link CompletableFuture} completes
 * exceptionally with the same exception. Over HTTP/1.1 the blocking form makes its exchange on
 * the calling thread (no hand-off to another thread), and the {@code Async} form makes the
 * same blocking exchange on the client's executor ({@link Builder#executor}), which holds one
 * of its threads per call in flight; cancelling its future closes the call's connection. With
 * HTTP/2 both go through the JDK's asynchronous client.
 *
 * <pre>{@code
 * FlowgateClient flowgate = FlowgateClient.builder("http://127.0.0.1:8080")
 *     .token(System.getenv("FLOWGATE_TOKEN"))
 *     .build();
 * Verdict v = flowgate.check(Request.of("payments", Descriptor.of("channel", "WPG")));
 * if (!v.allowed()) {
 *   // v.retryAfter(): when the same request could pass
 * }
 * }</pre>
 */
public final class FlowgateClient implements AutoCloseable {
  private final JsonTransport transport;
  /** The executor of the delayed completions (a {@code delay} wait); null: the common pool. */
  private final Executor executor;

  private FlowgateClient(JsonTransport transport, Executor executor) {
    this.transport = transport;
    this.executor = executor;
  }

  /**
   * A builder of a client of the server at {@code baseUrl}.
   *
   * @param baseUrl the server's HTTP address ({@code http://flowgate:8080}, {@code
   *     https://flowgate:8443})
   * @return the builder
   */
  public static Builder builder(String baseUrl) {
    return new Builder(URI.create(baseUrl));
  }

  /**
   * Closes the client: the connections it holds idle now, the others as soon as the calls on
   * them end. Calls in flight finish; a call made afterwards throws {@link
   * IllegalStateException}. Idempotent. Spring closes a client bean with its context.
   */
  @Override
  public void close() {
    transport.close();
  }

  /** The HTTP plumbing, for the client's other parts (the queues). */
  JsonTransport transport() {
    return transport;
  }

  /**
   * The queues' calls (submit, lease, ack, nack, dead letters, figures) on this client's
   * connections; {@link dev.flowgate.client.queue.Worker} runs a handler over them.
   *
   * @return the queues' calls; thread-safe, as the client
   */
  public Queues queues() {
    return new Queues(transport);
  }


  // ---- check

  /**
   * Decides a request ({@code POST /v1/check}): admitted, or refused with its retry time.
   * A refusal is a {@link Verdict} whose {@code allowed} is false, not an exception ({@link
   * Verdict#orThrow()} makes it one).
   *
   * @param request the request
   * @return the decision
   * @throws FlowgateException when the server answers an error or cannot be reached
   */
  public Verdict check(Request request) {
    return JsonTransport.blocking(() -> checkAsync(request));
  }

  /**
   * {@link #check} without blocking.
   *
   * @param request the request
   * @return the decision
   */
  public CompletableFuture<Verdict> checkAsync(Request request) {
    byte[] body;
    try {
      body = CheckBody.of(request);
    } catch (IllegalArgumentException e) {
      return CompletableFuture.failedFuture(e);
    }
    return transport
        .callBytes(Route.CHECK, body, transport.timeout(), 200, 429)
        .thenApply(JsonTransport.Reply::verdict);
  }

  // ---- acquire

  /**
   * Acquires a permit ({@code POST /v1/acquire}): as a check, and in {@code delay} mode waits
   * for the slot reserved (on the client: see {@link AcquireOptions}). The permit holds the
   * concurrency leases taken; close it (try-with-resources) or report the call's outcome with
   * it.
   *
   * @param request the request
   * @return the permit, once the slot has come
   * @throws OverLimitException when a limit refuses the request (in {@code delay} mode: the wait
   *     would exceed {@code max_wait})
   * @throws CircuitOpenException when a circuit breaker refuses it
   * @throws FlowgateException when the server answers another error or cannot be reached
   */
  public Permit acquire(Request request) {
    return JsonTransport.blocking(() -> acquireAsync(request, AcquireOptions.waitOnClient()));
  }

  /**
   * {@link #acquire(Request)}, waiting as {@code options} says.
   *
   * @param request the request
   * @param options where the wait is passed
   * @return the permit
   */
  public Permit acquire(Request request, AcquireOptions options) {
    return JsonTransport.blocking(() -> acquireAsync(request, options));
  }

  /**
   * {@link #acquire(Request)} without blocking: the future completes once the slot has come
   * (no thread is held meanwhile), or exceptionally with the refusal.
   *
   * @param request the request
   * @return the permit
   */
  public CompletableFuture<Permit> acquireAsync(Request request) {
    return acquireAsync(request, AcquireOptions.waitOnClient());
  }

  /**
   * {@link #acquire(Request, AcquireOptions)} without blocking.
   *
   * @param request the request
   * @param options where the wait is passed
   * @return the permit
   */
  public CompletableFuture<Permit> acquireAsync(Request request, AcquireOptions options) {
    Duration timeout = transport.timeout().plus(options.longestHold());
    return transport
        .call(Route.ACQUIRE, Bodies.acquire(request, options), timeout, 200, 429)
        .thenCompose(
            reply -> {
              Verdict verdict = reply.verdict().orThrow();
              Permit permit = new Permit(this, request, verdict);
              long waitNanos = options.hold() ? 0 : verdict.waitTime().toNanos();
              if (waitNanos <= 0) {
                return CompletableFuture.completedFuture(permit);
              }
              return CompletableFuture.supplyAsync(() -> permit, delayed(waitNanos));
            });
  }

  private Executor delayed(long nanos) {
    return executor == null
        ? CompletableFuture.delayedExecutor(nanos, TimeUnit.NANOSECONDS)
        : CompletableFuture.delayedExecutor(nanos, TimeUnit.NANOSECONDS, executor);
  }

  /**
   * Gives a concurrency lease back ({@code POST /v1/release}); {@link Permit} does it for its
   * own.
   *
   * @param domain the domain of the request that took it
   * @param descriptor the descriptor that took it
   * @param lease the lease
   * @return whether it was held (false: released already, or expired)
   */
  public CompletableFuture<Boolean> releaseAsync(String domain, Descriptor descriptor, long lease) {
    return transport
        .call(Route.RELEASE, Bodies.release(domain, descriptor, lease), transport.timeout(), 200)
        .thenApply(reply -> reply.as(Released.class).released());
  }

  // ---- reports and charges

  /**
   * Reports calls' outcomes to the circuit breakers, and costs to the rules ({@code POST
   * /v1/report}): one report, or a batch of up to 1,000 checked whole (one bad report refuses the
   * batch and nothing of it counts).
   *
   * @param reports the reports
   * @return what they reached, with each charge's effect per rule
   * @throws BadRequestException when a report is refused (the field named)
   * @throws StoreUnavailableException when a cost could not be charged: nothing of the batch
   *     was; retry it
   */
  public ReportAnswer report(Report... reports) {
    return JsonTransport.blocking(() -> reportAsync(List.of(reports)));
  }

  /**
   * {@link #report(Report...)} without blocking.
   *
   * @param reports the reports (at least one)
   * @return what they reached
   */
  public CompletableFuture<ReportAnswer> reportAsync(List<Report> reports) {
    if (reports.isEmpty()) {
      return CompletableFuture.failedFuture(new IllegalArgumentException("no report to send"));
    }
    return transport
        .call(Route.REPORT, Bodies.report(reports), transport.timeout(), 200)
        .thenApply(reply -> reply.as(ReportAnswer.class));
  }

  /**
   * Charges a cost learned after the work (an LLM answer's tokens) to every rule the request's
   * descriptors match that takes charges: counted even past the limit, up to each rule's {@code
   * max_debt}.
   *
   * @param request the request (its domain and descriptors)
   * @param cost the units (0 only looks)
   * @return what the charge did, per rule
   */
  public List<RuleCharge> charge(Request request, long cost) {
    return JsonTransport.blocking(() -> chargeAsync(request, cost));
  }

  /**
   * {@link #charge} without blocking.
   *
   * @param request the request
   * @param cost the units
   * @return what the charge did, per rule
   */
  public CompletableFuture<List<RuleCharge>> chargeAsync(Request request, long cost) {
    return reportAsync(List.of(Report.charge(request, cost))).thenApply(FlowgateClient::firstRules);
  }

  /**
   * Gives units back to the rules the request's descriptors match, floored at empty.
   *
   * @param request the request
   * @param units the units
   * @return what the refund did, per rule
   */
  public List<RuleCharge> refund(Request request, long units) {
    return JsonTransport.blocking(() -> refundAsync(request, units));
  }

  /**
   * {@link #refund} without blocking.
   *
   * @param request the request
   * @param units the units
   * @return what the refund did, per rule
   */
  public CompletableFuture<List<RuleCharge>> refundAsync(Request request, long units) {
    return reportAsync(List.of(Report.refund(request, units))).thenApply(FlowgateClient::firstRules);
  }

  private static List<RuleCharge> firstRules(ReportAnswer answer) {
    return answer.charges().isEmpty() ? List.of() : answer.charges().get(0).rules();
  }

  // ---- reserve and commit

  /**
   * Reserves an estimated cost at request time ({@code POST /v1/reserve}): admitted only if the
   * estimate fits every matched rule's limit, beside the other reservations. A refusal is a
   * {@link Reservation} whose {@code allowed()} is false.
   *
   * @param request the request
   * @param estimate the units to reserve (an LLM call's {@code max_tokens}), at least 1
   * @param ttl how long it may stay uncommitted, or null for the server's longest
   * @return the reservation, to commit with the actual cost
   */
  public Reservation reserve(Request request, long estimate, Duration ttl) {
    return JsonTransport.blocking(() -> reserveAsync(request, estimate, ttl));
  }

  /**
   * {@link #reserve} without blocking.
   *
   * @param request the request
   * @param estimate the units to reserve
   * @param ttl how long it may stay uncommitted, or null
   * @return the reservation
   */
  public CompletableFuture<Reservation> reserveAsync(
      Request request, long estimate, Duration ttl) {
    return transport
        .call(Route.RESERVE, Bodies.reserve(request, estimate, ttl), transport.timeout(), 200, 429)
        .thenApply(
            reply -> {
              Verdict verdict = reply.verdict();
              Reservation.Fields f = reply.as(Reservation.Fields.class);
              return new Reservation(request, verdict, f.id(), f.expiresAt(), f.estimate());
            });
  }

  /**
   * Commits a reservation's actual cost ({@code POST /v1/commit}): its estimate is given back and
   * the cost counted, past the limit up to {@code max_debt}. A reservation that a failure policy
   * admitted without an id charges the cost to its request's rules instead.
   *
   * @param reservation an admitted reservation
   * @param cost the actual cost (0 when the work failed)
   * @return what the commit did, per rule
   * @throws ConflictException when it was committed already ({@code already_committed})
   * @throws NotFoundException when the server has no record of it ({@code unknown_reservation})
   */
  public CommitAnswer commit(Reservation reservation, long cost) {
    return JsonTransport.blocking(() -> commitAsync(reservation, cost));
  }

  /**
   * {@link #commit(Reservation, long)} without blocking.
   *
   * @param reservation an admitted reservation
   * @param cost the actual cost
   * @return what the commit did
   */
  public CompletableFuture<CommitAnswer> commitAsync(Reservation reservation, long cost) {
    if (!reservation.allowed()) {
      return CompletableFuture.failedFuture(
          new IllegalArgumentException("a refused reservation has nothing to commit"));
    }
    Request charged = reservation.id() == null ? reservation.request() : null;
    return commitBody(Bodies.commit(reservation.id(), charged, cost));
  }

  /**
   * Commits the reservation of this id, made by any client ({@code POST /v1/commit}).
   *
   * @param id the reservation's id
   * @param cost the actual cost
   * @return what the commit did, per rule
   */
  public CommitAnswer commit(String id, long cost) {
    return JsonTransport.blocking(() -> commitAsync(id, cost));
  }

  /**
   * {@link #commit(String, long)} without blocking.
   *
   * @param id the reservation's id
   * @param cost the actual cost
   * @return what the commit did
   */
  public CompletableFuture<CommitAnswer> commitAsync(String id, long cost) {
    return commitBody(Bodies.commit(Objects.requireNonNull(id, "id"), null, cost));
  }

  private CompletableFuture<CommitAnswer> commitBody(ObjectNode body) {
    return transport
        .call(Route.COMMIT, body, transport.timeout(), 200)
        .thenApply(reply -> reply.as(CommitAnswer.class));
  }

  // ---- figures

  /**
   * The server's figures ({@code GET /v1/stats}; scope {@code reader}): per rule its decisions
   * and debt, the outstanding reservations.
   *
   * @return the figures
   */
  public Stats stats() {
    return JsonTransport.blocking(() -> statsAsync());
  }

  /**
   * {@link #stats()} without blocking.
   *
   * @return the figures
   */
  public CompletableFuture<Stats> statsAsync() {
    return transport
        .call(Route.STATS, null, transport.timeout(), 200)
        .thenApply(reply -> reply.as(Stats.class));
  }

  /**
   * Builds a {@link FlowgateClient}. Only the base URL is required; the defaults suit a server
   * on the same network.
   */
  public static final class Builder {
    /** The default of {@link #pipelining}. */
    static final int DEFAULT_PIPELINING = 16;

    private final URI baseUrl;
    private Supplier<String> token;
    private Duration connectTimeout = Duration.ofSeconds(5);
    private Duration requestTimeout = Duration.ofSeconds(10);
    private SSLContext sslContext;
    private SSLParameters sslParameters;
    private Executor executor;
    private HttpClient.Version version = HttpClient.Version.HTTP_1_1;
    private int pipelining = DEFAULT_PIPELINING;
    private Duration pipelineBudget = Duration.ofNanos(AnswerPace.BUDGET_NANOS);

    private Builder(URI baseUrl) {
      this.baseUrl = Objects.requireNonNull(baseUrl, "baseUrl");
      String scheme = baseUrl.getScheme();
      if (!"http".equals(scheme) && !"https".equals(scheme)) {
        throw new IllegalArgumentException(
            "the base URL must be http:// or https://, not " + baseUrl);
      }
    }

    /**
     * The bearer token of every request ({@code Authorization: Bearer}); none by default (a
     * server whose scopes are open, or mutual TLS).
     *
     * @param token the token (at least 32 characters on the server), or null for none
     * @return this builder
     */
    public Builder token(String token) {
      this.token = token == null ? null : () -> token;
      return this;
    }

    /**
     * Where each request reads its bearer token: for tokens rotated while the client runs (a
     * file a secret manager rewrites). Called once per request, from any thread.
     *
     * @param token the token's source; it may answer null for none
     * @return this builder
     */
    public Builder token(Supplier<String> token) {
      this.token = token;
      return this;
    }

    /**
     * How long opening a connection may take (5 s by default).
     *
     * @param timeout the timeout
     * @return this builder
     */
    public Builder connectTimeout(Duration timeout) {
      this.connectTimeout = positive(timeout, "connectTimeout");
      return this;
    }

    /**
     * How long an answer may take once sent (10 s by default); a held acquire adds its longest
     * wait to it.
     *
     * @param timeout the timeout
     * @return this builder
     */
    public Builder requestTimeout(Duration timeout) {
      this.requestTimeout = positive(timeout, "requestTimeout");
      return this;
    }

    /**
     * The TLS context of an {@code https://} server: its trust store holds the server's CA; for
     * mutual TLS its key manager holds the client's certificate and key ({@link Tls} builds one
     * from PEM files). The JVM's default context otherwise.
     *
     * @param sslContext the context
     * @return this builder
     */
    public Builder sslContext(SSLContext sslContext) {
      this.sslContext = sslContext;
      return this;
    }

    /**
     * The TLS parameters (protocols, cipher suites); the JDK's defaults otherwise.
     *
     * @param sslParameters the parameters
     * @return this builder
     */
    public Builder sslParameters(SSLParameters sslParameters) {
      this.sslParameters = sslParameters;
      return this;
    }

    /**
     * The executor of the {@code Async} calls: over HTTP/1.1 each runs its blocking exchange on
     * one of its threads (holding it until the answer: a long-poll lease for its whole wait), so
     * give it a thread per call in flight (by default a pool of daemon threads that grows as
     * needed); with HTTP/2 it runs the HTTP client's work. Every {@code Async} answer completes
     * on it, so the stages a caller chains run there, and the end of a {@code delay} wait too.
     * Blocking calls never use it over HTTP/1.1: they run on the caller's thread.
     *
     * @param executor the executor
     * @return this builder
     */
    public Builder executor(Executor executor) {
      this.executor = executor;
      return this;
    }

    /**
     * The HTTP version: HTTP/1.1 by default (the client's own blocking HTTP/1.1 over a pool of
     * keep-alive sockets, plain or TLS); {@code HTTP_2} multiplexes the calls on one connection
     * through the JDK's {@code java.net.http} (over TLS, where the server offers {@code h2}).
     *
     * @param version the version
     * @return this builder
     */
    public Builder httpVersion(HttpClient.Version version) {
      this.version = Objects.requireNonNull(version, "version");
      return this;
    }

    /**
     * HTTP/1.1 pipelining of the blocking {@code check}s: the most in flight at once on one
     * connection (16 by default; 1: a connection per check in flight). The checks made at once by
     * several threads share a connection: written together in one write, their answers read
     * together, which costs the server and the client less CPU per check (at 64 threads, about a
     * third less: BENCHMARKS.md) for a longer p99 (one thread at a time reads for the others and
     * wakes them). A thread alone keeps its connection to itself.
     *
     * <p>The server answers the checks on one connection in turn, so each waits for the
     * decisions of those ahead of it: nothing when they take microseconds of the server's CPU
     * (the embedded store), a store's round trip each on Redis. The client reads how long the
     * server says each decision took ({@code Server-Timing}) and lets a connection carry only as
     * many checks as fit in 0.25 ms of decisions, at most this many: all of them on the embedded
     * store, one on Redis or when a store stops answering, one until the first answer.
     * A connection's failure, or a timeout, concerns only the checks on it;
     * none is resent. Other calls (acquire, reports, queues), {@code Async} calls, and checks of
     * bodies over 4 KiB have a connection each. Set 1 in front of a proxy that mishandles
     * pipelined requests (HTTP/1.1 requires servers and proxies to answer them in order).
     *
     * @param maxChecksPerConnection at least 1
     * @return this builder
     */
    public Builder pipelining(int maxChecksPerConnection) {
      if (maxChecksPerConnection < 1) {
        throw new IllegalArgumentException(
            "pipelining must be at least 1, not " + maxChecksPerConnection);
      }
      this.pipelining = maxChecksPerConnection;
      return this;
    }

    /**
     * The decisions' time a pipelined check may wait behind ({@link AnswerPace}): for the tests,
     * which widen it so that checks share connections whatever the build's speed.
     */
    Builder pipelineBudget(Duration budget) {
      this.pipelineBudget = Objects.requireNonNull(budget, "budget");
      return this;
    }

    /**
     * The client.
     *
     * @return a client; share it
     */
    public FlowgateClient build() {
      String text = baseUrl.toString();
      String base = text.endsWith("/") ? text.substring(0, text.length() - 1) : text;
      Wire wire;
      if (version == HttpClient.Version.HTTP_1_1) {
        Executor async = executor != null ? executor : asyncThreads();
        wire =
            new Http1Wire(
                baseUrl, sslContext, sslParameters, connectTimeout, async, pipelining, pipelineBudget);
      } else {
        HttpClient.Builder http =
            HttpClient.newBuilder()
                .connectTimeout(connectTimeout)
                .version(version)
                .followRedirects(HttpClient.Redirect.NEVER);
        if (sslContext != null) {
          http.sslContext(sslContext);
        }
        if (sslParameters != null) {
          http.sslParameters(sslParameters);
        }
        if (executor != null) {
          http.executor(executor);
        }
        wire = new JdkWire(http.build(), base, executor);
      }
      return new FlowgateClient(new JsonTransport(wire, base, token, requestTimeout), executor);
    }

    /**
     * The threads of the {@code Async} calls over HTTP/1.1 when no executor is given: as many as
     * calls at once, daemon, ended after a minute unused.
     */
    private static Executor asyncThreads() {
      AtomicInteger n = new AtomicInteger();
      return Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "flowgate-client-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
          });
    }

    private static Duration positive(Duration d, String name) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(name + " must be positive, not " + d);
      }
      return d;
    }
  }
}
