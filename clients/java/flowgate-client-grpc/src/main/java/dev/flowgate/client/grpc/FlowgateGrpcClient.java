package dev.flowgate.client.grpc;

import dev.flowgate.client.FlowgateException;
import dev.flowgate.client.Report;
import dev.flowgate.client.ReportAnswer;
import dev.flowgate.client.Request;
import dev.flowgate.client.Verdict;
import flowgate.v1.DecisionsOuterClass.CheckAnswer;
import flowgate.v1.ReportsGrpc;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitServiceGrpc;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * A client of a Flowgate server's gRPC port: decisions over one long-lived stream of {@code
 * flowgate.v1.Decisions/CheckStream} and reports through {@code flowgate.v1.Reports/Report},
 * answered with the HTTP client's types ({@link Verdict}, {@link ReportAnswer}) and exceptions
 * ({@link FlowgateException} and its subclasses).
 *
 * <p><b>Thread-safe.</b> Build one per server and share it: its calls are multiplexed on one
 * HTTP/2 connection (gRPC's channel reconnects by itself), its checks on one stream of it.
 * {@link #close()} ends the stream and shuts the channel.
 *
 * <p>A server older than the stream (which answers it {@code UNIMPLEMENTED}) is asked through
 * Envoy's rate-limit service instead ({@code ShouldRateLimit}), whose answer carries less: see
 * {@link #check(Request)}.
 *
 * <pre>{@code
 * try (FlowgateGrpcClient flowgate = FlowgateGrpcClient.builder("flowgate:8081")
 *     .token(System.getenv("DECIDE_TOKEN"))
 *     .build()) {
 *   Verdict v = flowgate.check(Request.of("payments", Descriptor.of("channel", "WPG")));
 * }
 * }</pre>
 */
public final class FlowgateGrpcClient implements AutoCloseable {
  private final ManagedChannel channel;
  private final String target;
  private final Duration timeout;
  private final RateLimitServiceGrpc.RateLimitServiceStub asyncRls;
  private final ReportsGrpc.ReportsStub asyncReports;
  /** Where the {@code Async} checks complete. */
  private final Executor executor;
  /** The checks' stream and their deadlines. */
  private final Checks checks;
  /** Set once the server answered the stream UNIMPLEMENTED: checks go through Envoy's. */
  private volatile boolean envoyOnly;

  private FlowgateGrpcClient(
      ManagedChannel channel, String target, Duration timeout, Executor executor) {
    this.channel = channel;
    this.target = target;
    this.timeout = timeout;
    this.asyncRls = RateLimitServiceGrpc.newStub(channel);
    this.asyncReports = ReportsGrpc.newStub(channel);
    this.executor = executor == null ? ForkJoinPool.commonPool() : executor;
    this.checks = new Checks(channel);
  }

  /**
   * A builder of a client of the gRPC port at {@code target}.
   *
   * @param target the server's gRPC address, {@code host:port} ({@code flowgate:8081}), or any
   *     target gRPC's name resolvers take ({@code dns:///flowgate:8081})
   * @return the builder
   */
  public static Builder builder(String target) {
    return new Builder(target);
  }

  // ---- check

  /**
   * Decides a request, as the HTTP client's {@code check}: admitted, or refused with its retry
   * time; a refusal is a {@link Verdict} whose {@code allowed} is false ({@link
   * Verdict#orThrow()} makes it an exception). The verdict holds every field of the HTTP
   * answer ({@code delay} wait, leases, probes, the refusing breaker).
   *
   * <p>The request goes on the client's {@code CheckStream}, opened at the first check (with
   * the token of that moment) and shared by every thread; a stream that ends (the server
   * restarting, the connection lost, the token revoked) fails the checks then unanswered with
   * their cause, and is opened again by the next check. A check is never sent twice: it may have
   * consumed units. Past the timeout a check fails as a gRPC deadline does ({@link
   * dev.flowgate.client.ConnectionException} whose {@code timeout()} is true) and its late
   * answer is dropped.
   *
   * <p>From a server without the stream, Envoy's answer ({@code ShouldRateLimit}) holds less:
   * no {@code delay} wait, no leases or probes; each status's rule, limit, remaining units and
   * reset as Envoy reports them (a limit over a window Envoy's units cannot express, {@code
   * 5/30s}, in the nearest unit: {@code 10/m}); a refusal's retry time never earlier than the
   * HTTP answer's.
   *
   * @param request the request
   * @return the decision
   * @throws FlowgateException when the server answers an error ({@link
   *     dev.flowgate.client.BadRequestException} naming the field at fault) or cannot be reached
   */
  public Verdict check(Request request) {
    if (envoyOnly) {
      return envoyCheck(request);
    }
    long id = checks.nextId();
    CompletableFuture<CheckAnswer> answer = new CompletableFuture<>();
    CheckStream stream = checks.send(DecisionMessages.request(id, request), answer);
    try {
      return DecisionMessages.verdict(answer.get(timeout.toNanos(), TimeUnit.NANOSECONDS));
    } catch (TimeoutException e) {
      Checks.forget(stream, id);
      throw GrpcErrors.of(lateStatus(), describe(CHECK_STREAM));
    } catch (ExecutionException e) {
      if (unimplemented(e.getCause())) {
        return envoyCheck(request);
      }
      throw failure(e.getCause());
    } catch (InterruptedException e) {
      Checks.forget(stream, id);
      Thread.currentThread().interrupt();
      throw GrpcErrors.of(
          Status.CANCELLED.withDescription("interrupted while waiting").withCause(e),
          describe(CHECK_STREAM));
    }
  }

  /**
   * {@link #check} without blocking: the future completes on the builder's executor (by
   * default the common {@link ForkJoinPool}).
   *
   * @param request the request
   * @return the decision, or the exception {@link #check} would throw
   */
  public CompletableFuture<Verdict> checkAsync(Request request) {
    if (envoyOnly) {
      return envoyCheckAsync(request);
    }
    CompletableFuture<Verdict> verdict = new CompletableFuture<>();
    try {
      long id = checks.nextId();
      CompletableFuture<CheckAnswer> answer = new CompletableFuture<>();
      CheckStream stream = checks.send(DecisionMessages.request(id, request), answer);
      ScheduledFuture<?> late =
          checks.schedule(
              () -> {
                Checks.forget(stream, id);
                answer.completeExceptionally(lateStatus().asRuntimeException());
              },
              timeout.toNanos());
      answer.whenComplete(
          (a, failed) -> {
            late.cancel(false);
            executor.execute(() -> completeAsync(request, a, failed, verdict));
          });
    } catch (RuntimeException e) {
      verdict.completeExceptionally(e);
    }
    return verdict;
  }

  private void completeAsync(
      Request request, CheckAnswer answer, Throwable failed, CompletableFuture<Verdict> verdict) {
    if (failed == null) {
      try {
        verdict.complete(DecisionMessages.verdict(answer));
      } catch (RuntimeException e) {
        verdict.completeExceptionally(e);
      }
    } else if (unimplemented(failed)) {
      envoyCheckAsync(request).whenComplete(
          (v, e) -> {
            if (e == null) {
              verdict.complete(v);
            } else {
              verdict.completeExceptionally(e);
            }
          });
    } else {
      verdict.completeExceptionally(failure(failed));
    }
  }

  private static final String CHECK_STREAM = "CheckStream";

  private Status lateStatus() {
    return Status.DEADLINE_EXCEEDED.withDescription("no answer within " + timeout);
  }

  /**
   * Whether a stream's failure is the server's UNIMPLEMENTED: it has no stream (an older
   * version), and decided nothing of it. Checks go through Envoy's service from now on.
   */
  private boolean unimplemented(Throwable failure) {
    if (failure instanceof StatusRuntimeException s
        && s.getStatus().getCode() == Status.Code.UNIMPLEMENTED) {
      envoyOnly = true;
      return true;
    }
    return false;
  }

  private FlowgateException failure(Throwable cause) {
    if (cause instanceof FlowgateException f) {
      return f;
    }
    if (cause instanceof StatusRuntimeException s) {
      return GrpcErrors.of(s.getStatus(), describe(CHECK_STREAM));
    }
    return GrpcErrors.of(Status.fromThrowable(cause), describe(CHECK_STREAM));
  }

  /** A check through Envoy's rate-limit service, for a server without the stream. */
  private Verdict envoyCheck(Request request) {
    return EnvoyMessages.verdict(
        blockingCall(
            RateLimitServiceGrpc.getShouldRateLimitMethod(),
            EnvoyMessages.request(request),
            "ShouldRateLimit"));
  }

  private CompletableFuture<Verdict> envoyCheckAsync(Request request) {
    CompletableFuture<Verdict> answer = new CompletableFuture<>();
    try {
      asyncRls
          .withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS)
          .shouldRateLimit(
              EnvoyMessages.request(request),
              completing(answer, EnvoyMessages::verdict, "ShouldRateLimit"));
    } catch (RuntimeException e) {
      answer.completeExceptionally(e);
    }
    return answer;
  }

  // ---- reports

  /**
   * Reports calls' outcomes to the circuit breakers, and costs to the rules ({@code
   * flowgate.v1.Reports/Report}): a batch of up to 1,000, checked whole, as the HTTP client's
   * {@code report}.
   *
   * @param reports the reports (at least one)
   * @return what they reached, with each charge's effect per rule
   * @throws dev.flowgate.client.BadRequestException when a report is refused (its field named)
   * @throws dev.flowgate.client.StoreUnavailableException when a cost could not be charged:
   *     nothing of the batch was; retry it
   */
  public ReportAnswer report(Report... reports) {
    List<Report> list = nonEmpty(List.of(reports));
    return ReportMessages.answer(
        blockingCall(ReportsGrpc.getReportMethod(), ReportMessages.request(list), "Report"));
  }

  /**
   * {@link #report(Report...)} without blocking.
   *
   * @param reports the reports (at least one)
   * @return what they reached
   */
  public CompletableFuture<ReportAnswer> reportAsync(List<Report> reports) {
    CompletableFuture<ReportAnswer> answer = new CompletableFuture<>();
    try {
      asyncReports
          .withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS)
          .report(
              ReportMessages.request(nonEmpty(reports)),
              completing(answer, ReportMessages::answer, "Report"));
    } catch (RuntimeException e) {
      answer.completeExceptionally(e);
    }
    return answer;
  }

  private static List<Report> nonEmpty(List<Report> reports) {
    if (reports.isEmpty()) {
      throw new IllegalArgumentException("no report to send");
    }
    return reports;
  }

  private <M, T> StreamObserver<M> completing(
      CompletableFuture<T> answer, Function<M, T> convert, String method) {
    return new StreamObserver<>() {
      @Override
      public void onNext(M message) {
        try {
          answer.complete(convert.apply(message));
        } catch (RuntimeException e) {
          answer.completeExceptionally(e);
        }
      }

      @Override
      public void onError(Throwable t) {
        answer.completeExceptionally(
            t instanceof StatusRuntimeException
                ? GrpcErrors.of(((StatusRuntimeException) t).getStatus(), describe(method))
                : t);
      }

      @Override
      public void onCompleted() {
        // A unary call's one message has completed the future.
      }
    };
  }

  /**
   * A unary call made for a blocking caller: gRPC's events (headers, message, end) handled where
   * they arrive, on the channel's network thread, the caller woken once with the answer. gRPC's
   * blocking stubs wake the caller for each event to handle it on its own thread, which cost
   * more CPU per call than the call itself under many threads (BENCHMARKS.md). Handling them is
   * short and never blocks (nothing of the caller's runs there).
   */
  private <Q, A> A blockingCall(MethodDescriptor<Q, A> method, Q request, String name) {
    ClientCall<Q, A> call =
        channel.newCall(
            method,
            CallOptions.DEFAULT
                .withExecutor(Runnable::run)
                .withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS));
    CompletableFuture<A> answer = new CompletableFuture<>();
    ClientCalls.asyncUnaryCall(
        call,
        request,
        new StreamObserver<A>() {
          @Override
          public void onNext(A message) {
            answer.complete(message);
          }

          @Override
          public void onError(Throwable t) {
            answer.completeExceptionally(t);
          }

          @Override
          public void onCompleted() {
            if (!answer.isDone()) {
              answer.completeExceptionally(
                  Status.INTERNAL.withDescription("no answer in a unary call").asRuntimeException());
            }
          }
        });
    try {
      return answer.get();
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof StatusRuntimeException s) {
        throw GrpcErrors.of(s.getStatus(), describe(name));
      }
      if (cause instanceof RuntimeException r) {
        throw r;
      }
      throw GrpcErrors.of(Status.fromThrowable(cause), describe(name));
    } catch (InterruptedException e) {
      call.cancel("the caller was interrupted", e);
      Thread.currentThread().interrupt();
      throw GrpcErrors.of(
          Status.CANCELLED.withDescription("interrupted while waiting").withCause(e),
          describe(name));
    }
  }

  private String describe(String method) {
    return target + " (" + method + ")";
  }

  /**
   * Ends the checks' stream and shuts the channel: calls in flight may finish within 5 s, then
   * are cancelled.
   */
  @Override
  public void close() {
    checks.close();
    channel.shutdown();
    try {
      if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException e) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  /** Builds a {@link FlowgateGrpcClient}. Only the target is required. */
  public static final class Builder {
    private final String target;
    private ChannelCredentials credentials = InsecureChannelCredentials.create();
    private Supplier<String> token;
    private Duration timeout = Duration.ofSeconds(10);
    private Executor executor;

    private Builder(String target) {
      this.target = Objects.requireNonNull(target, "target");
    }

    /**
     * The bearer token of every call, sent as the {@code authorization: Bearer} metadata (how
     * the server reads a token over gRPC); none by default.
     *
     * @param token the token, or null for none
     * @return this builder
     */
    public Builder token(String token) {
      this.token = token == null ? null : () -> token;
      return this;
    }

    /**
     * Where each call reads its bearer token (a token rotated while the client runs); called
     * once per call, from any thread; it may answer null for none. The checks' stream reads it
     * when it opens: a token rotated meanwhile is taken by the next stream, which opens once
     * the server ends this one (a revoked token, a restart).
     *
     * @param token the token's source
     * @return this builder
     */
    public Builder token(Supplier<String> token) {
      this.token = token;
      return this;
    }

    /**
     * The channel's credentials: clear text by default; for a server started with {@code
     * --tls-cert}, gRPC's {@code TlsChannelCredentials} trusting its CA, and for mutual TLS
     * holding the client's certificate and key (PKCS#8):
     *
     * <pre>{@code
     * TlsChannelCredentials.newBuilder()
     *     .trustManager(new File("ca.crt"))
     *     .keyManager(new File("tls.crt"), new File("tls.key"))
     *     .build()
     * }</pre>
     *
     * @param credentials the credentials
     * @return this builder
     */
    public Builder credentials(ChannelCredentials credentials) {
      this.credentials = Objects.requireNonNull(credentials, "credentials");
      return this;
    }

    /**
     * How long a call's answer may take (10 s by default): its gRPC deadline.
     *
     * @param timeout the timeout
     * @return this builder
     */
    public Builder timeout(Duration timeout) {
      if (timeout == null || timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("timeout must be positive, not " + timeout);
      }
      this.timeout = timeout;
      return this;
    }

    /**
     * The executor the {@code Async} calls complete on (by default, the checks on the common
     * {@link ForkJoinPool}, the reports on gRPC's own cached pool), and the channel's.
     *
     * @param executor the executor
     * @return this builder
     */
    public Builder executor(Executor executor) {
      this.executor = executor;
      return this;
    }

    /**
     * The client; its channel connects at the first call.
     *
     * @return a client; share it, close it at the end
     */
    public FlowgateGrpcClient build() {
      ManagedChannelBuilder<?> channel =
          Grpc.newChannelBuilder(target, credentials).userAgent("flowgate-java");
      if (executor != null) {
        channel.executor(executor);
      }
      if (token != null) {
        channel.intercept(new BearerToken(token));
      }
      return new FlowgateGrpcClient(channel.build(), target, timeout, executor);
    }
  }

  /** Adds {@code authorization: Bearer <token>} to each call's metadata. */
  private static final class BearerToken implements ClientInterceptor {
    private static final Metadata.Key<String> AUTHORIZATION =
        Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
    private final Supplier<String> token;

    BearerToken(Supplier<String> token) {
      this.token = token;
    }

    @Override
    public <Q, A> ClientCall<Q, A> interceptCall(
        MethodDescriptor<Q, A> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
        @Override
        public void start(Listener<A> listener, Metadata headers) {
          String bearer = token.get();
          if (bearer != null) {
            headers.put(AUTHORIZATION, "Bearer " + bearer);
          }
          super.start(listener, headers);
        }
      };
    }
  }
}
