package dev.flowgate.client;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.node.MissingNode;
import java.io.IOException;
import java.net.ConnectException;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;

/**
 * The HTTP plumbing every call of the client shares: the {@link Wire} (its keep-alive
 * connection pool, TLS, executor), the bearer token, the request timeout,
 * JSON in and out, and the mapping of the server's JSON errors to typed exceptions. Thread-safe:
 * it holds nothing that changes.
 */
final class JsonTransport {
  /**
   * JSON as the server writes it: snake_case fields; unknown fields and enum values ignored;
   * decimals read as {@link java.math.BigDecimal}, trailing zeros kept (a queue job's payload
   * keeps its amounts' digits).
   */
  static final ObjectMapper JSON =
      new ObjectMapper()
          .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
          .configure(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS, true)
          .configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false)
          .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false)
          .configure(DeserializationFeature.READ_UNKNOWN_ENUM_VALUES_AS_NULL, true);

  /**
   * Whether the calling thread is in a blocking call ({@link #blocking}): its exchanges run on
   * it, with no hand-off to another thread.
   */
  private static final ThreadLocal<Boolean> INLINE = new ThreadLocal<>();

  private final Wire wire;
  private final String base;
  private final Supplier<String> token;
  private final Duration timeout;
  private volatile boolean closed;

  /**
   * @param wire how requests are sent
   * @param base the server's base URI, for the messages of failures
   * @param token the bearer token for each request, or null for none (read at each request)
   * @param timeout how long an answer may take, by default
   */
  JsonTransport(Wire wire, String base, Supplier<String> token, Duration timeout) {
    this.wire = wire;
    this.base = base;
    this.token = token;
    this.timeout = timeout;
  }

  /** Refuses new calls and closes the wire's connections ({@link Wire#close}). Idempotent. */
  void close() {
    closed = true;
    wire.close();
  }

  /** The wire (for the tests of the connection pool). */
  Wire wire() {
    return wire;
  }

  /** The default timeout of an answer. */
  Duration timeout() {
    return timeout;
  }

  /**
   * One answer of the server: its status, its {@code Retry-After} header and its JSON body,
   * read straight into the type asked for ({@link #as}), or as a tree when looked at ({@link
   * #body}: {@link MissingNode} when empty). Used by one thread at a time.
   */
  static final class Reply {
    private final int status;
    private final String retryAfter;
    private final byte[] bytes;
    private JsonNode tree;

    /**
     * @param status the HTTP status
     * @param retryAfter the {@code Retry-After} header, or null
     * @param bytes the body
     */
    Reply(int status, String retryAfter, byte[] bytes) {
      this.status = status;
      this.retryAfter = retryAfter;
      this.bytes = bytes == null ? new byte[0] : bytes;
    }

    int status() {
      return status;
    }

    /** The body as a JSON tree; a body that is not JSON is a {@link FlowgateException}. */
    JsonNode body() {
      if (tree == null) {
        tree = parse(bytes, status);
      }
      return tree;
    }

    /** The {@code Retry-After} header, in seconds, as a duration; null when absent. */
    Duration retryAfterHeader() {
      if (retryAfter == null) {
        return null;
      }
      try {
        return Duration.ofSeconds(Long.parseLong(retryAfter.trim()));
      } catch (NumberFormatException e) {
        return null;
      }
    }

    /**
     * The body as a {@link Verdict}: read by {@link VerdictReader}, or bound as {@link #as} does
     * when of another shape.
     */
    Verdict verdict() {
      if (tree == null && bytes.length > 0) {
        Verdict v = VerdictReader.read(bytes);
        if (v != null) {
          return v;
        }
      }
      return as(Verdict.class);
    }

    /** The body as a {@code type}; a body that does not fit is a {@link FlowgateException}. */
    <T> T as(Class<T> type) {
      if (tree != null || bytes.length == 0) {
        return read(body(), type, status);
      }
      try {
        return JSON.readValue(bytes, type);
      } catch (JsonProcessingException e) {
        // Not JSON at all, or JSON of another shape: the tree tells which.
        return read(body(), type, status);
      } catch (IOException e) {
        throw new FlowgateException(
            status, ErrorCode.UNKNOWN, "the server's answer cannot be read: " + e, null, e);
      }
    }
  }

  /** A JSON node as a {@code type}; one that does not fit is a {@link FlowgateException}. */
  static <T> T read(JsonNode node, Class<T> type, int status) {
    try {
      return JSON.treeToValue(node, type);
    } catch (JsonProcessingException e) {
      throw new FlowgateException(
          status,
          ErrorCode.UNKNOWN,
          "the server's answer is not a " + type.getSimpleName() + ": " + e.getOriginalMessage(),
          null,
          e);
    }
  }

  /**
   * Sends {@code body} to {@code route} and completes with the answer if its status is one of
   * {@code accepted}; any other status completes exceptionally with the typed exception of the
   * server's error ({@link #errorOf}), a failed exchange with a {@link ConnectionException}. A
   * 429 is an answer only when its body is a verdict (a decision's refusal); a 429 of the
   * credentials' check ({@code too_many_failed_credentials}) is an error whatever the route.
   *
   * @param route the route
   * @param body the JSON body, or null for none
   * @param timeout how long the answer may take
   * @param accepted the statuses that are answers rather than errors
   * @return the answer
   */
  CompletableFuture<Reply> call(Route route, JsonNode body, Duration timeout, int... accepted) {
    byte[] bytes;
    try {
      bytes = body == null ? null : JSON.writeValueAsBytes(body);
    } catch (JsonProcessingException e) {
      return CompletableFuture.failedFuture(
          new IllegalArgumentException("cannot write the request as JSON", e));
    }
    return callBytes(route, bytes, timeout, accepted);
  }

  /** {@link #call(Route, JsonNode, Duration, int...)} of a body already written as JSON. */
  CompletableFuture<Reply> callBytes(Route route, byte[] body, Duration timeout, int... accepted) {
    return sendBytes(route, body, timeout)
        .thenApply(
            reply -> {
              for (int status : accepted) {
                if (reply.status() == status
                    && (status != 429 || reply.body().has("allowed"))) {
                  return reply;
                }
              }
              throw errorOf(reply);
            });
  }

  /**
   * Sends {@code body} to {@code route}; completes with whatever status came. Within {@link
   * #blocking} the exchange runs on the calling thread and the future is complete on return;
   * otherwise as the wire's {@code sendAsync} runs it.
   */
  CompletableFuture<Reply> send(Route route, JsonNode body, Duration timeout) {
    byte[] bytes;
    try {
      bytes = body == null ? null : JSON.writeValueAsBytes(body);
    } catch (JsonProcessingException e) {
      return CompletableFuture.failedFuture(
          new IllegalArgumentException("cannot write the request as JSON", e));
    }
    return sendBytes(route, bytes, timeout);
  }

  /** {@link #send(Route, JsonNode, Duration)} of a body already written as JSON (or null). */
  CompletableFuture<Reply> sendBytes(Route route, byte[] bytes, Duration timeout) {
    if (closed) {
      return CompletableFuture.failedFuture(new IllegalStateException("the client is closed"));
    }
    String bearer = token == null ? null : token.get();
    if (Boolean.TRUE.equals(INLINE.get())) {
      try {
        Wire.Answer answer = wire.send(route, bytes, bearer, timeout);
        return CompletableFuture.completedFuture(reply(answer));
      } catch (IOException e) {
        return CompletableFuture.failedFuture(connectionFailure(route, e));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return CompletableFuture.failedFuture(
            new ConnectionException("interrupted while waiting for the server", false, e));
      } catch (RuntimeException e) {
        return CompletableFuture.failedFuture(e);
      }
    }
    return wire.sendAsync(route, bytes, bearer, timeout)
        .handle(
            (answer, failure) -> {
              if (failure != null) {
                throw new CompletionException(connectionFailure(route, failure));
              }
              return reply(answer);
            });
  }

  private static Reply reply(Wire.Answer answer) {
    return new Reply(answer.status(), answer.retryAfter(), answer.body());
  }

  private static JsonNode parse(byte[] bytes, int status) {
    if (bytes.length == 0) {
      return MissingNode.getInstance();
    }
    try {
      return JSON.readTree(bytes);
    } catch (IOException e) {
      throw new FlowgateException(
          status, ErrorCode.UNKNOWN, "the server's answer is not JSON: " + e.getMessage(), null, e);
    }
  }

  private ConnectionException connectionFailure(Route route, Throwable failure) {
    Throwable cause = failure instanceof CompletionException && failure.getCause() != null
        ? failure.getCause()
        : failure;
    if (cause instanceof FlowgateException) {
      return cause instanceof ConnectionException c ? c : new ConnectionException(
          cause.getMessage(), false, cause);
    }
    boolean timedOut = cause instanceof HttpTimeoutException;
    String what;
    if (cause instanceof HttpConnectTimeoutException) {
      what = "could not connect in time to ";
    } else if (timedOut) {
      what = "no answer in time from ";
    } else if (cause instanceof ConnectException) {
      what = "could not connect to ";
    } else {
      what = "the exchange failed with ";
    }
    return new ConnectionException(
        what + base + " (" + route.method + " " + route.path + "): " + cause + hint(cause),
        timedOut,
        cause);
  }

  /**
   * What a failed exchange may mean, as a hint after the message: over https, a server
   * certificate the client does not trust, or a server that requires client certificates (it
   * closes a client without one); over http, a TLS port (it closes a client speaking clear
   * text). Empty for other failures.
   */
  private String hint(Throwable cause) {
    String message = String.valueOf(cause.getMessage());
    if (cause instanceof javax.net.ssl.SSLHandshakeException
        && (message.contains("PKIX") || message.contains("certification path"))) {
      return " (the server's certificate is not trusted: give this client its CA, Tls.trusting)";
    }
    boolean closed =
        cause instanceof javax.net.ssl.SSLException
            || cause instanceof java.net.SocketException
            || cause instanceof java.io.EOFException;
    if (!closed) {
      return "";
    }
    if (base.startsWith("https:")) {
      return " (if the server requires client certificates, --tls-client-ca, give this client"
          + " one: Tls.mutual)";
    }
    return " (if the server serves TLS, --tls-cert, use an https:// address)";
  }

  /**
   * The typed exception of an error answer: its status and {@code error} code decide the type,
   * its {@code detail} the message, its {@code Retry-After} the retry time.
   *
   * @param reply an answer with an error status
   * @return the exception to throw
   */
  static FlowgateException errorOf(Reply reply) {
    JsonNode body = reply.body();
    ErrorCode code = ErrorCode.of(body.path("error").asText(""));
    String detail = body.path("detail").asText(body.isMissingNode() ? "(no body)" : body.toString());
    Duration retry = reply.retryAfterHeader();
    switch (reply.status()) {
      case 400:
        return new BadRequestException(code, detail);
      case 401:
        return new UnauthorizedException(code, detail, retry);
      case 403:
        return new ForbiddenException(code, detail, retry);
      case 404:
        return new NotFoundException(code, detail, retry);
      case 409:
        return new ConflictException(code, detail, retry);
      case 429:
        return tooMany(reply, code, detail, retry);
      case 503:
        return new StoreUnavailableException(code, detail, retry);
      default:
        return new FlowgateException(reply.status(), code, detail, retry, null);
    }
  }

  /** A 429: a refused decision's body is a verdict (its {@code reason}), others an error. */
  private static FlowgateException tooMany(
      Reply reply, ErrorCode code, String detail, Duration retry) {
    JsonNode body = reply.body();
    if (body.has("allowed")) {
      Verdict verdict = reply.verdict();
      try {
        verdict.orThrow();
      } catch (FlowgateException refused) {
        return refused;
      }
    }
    switch (code) {
      case OVER_LIMIT:
        return new OverLimitException(code, detail, retry);
      case CIRCUIT_OPEN:
        return new CircuitOpenException(code, detail, retry);
      case TOO_MANY_FAILED_CREDENTIALS:
        return new CredentialsSlowedException(code, detail, retry);
      default:
        return new FlowgateException(429, code, detail, retry, null);
    }
  }

  /**
   * Runs a blocking call: the exchanges {@code call} starts run on this thread (no hand-off to
   * another), then its future's value is returned as {@link #join} does.
   *
   * @param call starts the asynchronous form of the call
   * @return the call's value
   */
  static <T> T blocking(Supplier<CompletableFuture<T>> call) {
    if (Boolean.TRUE.equals(INLINE.get())) {
      return join(call.get());
    }
    CompletableFuture<T> future;
    INLINE.set(Boolean.TRUE);
    try {
      future = call.get();
    } finally {
      INLINE.remove();
    }
    return join(future);
  }

  /**
   * Waits for {@code future} and returns its value, or throws its failure as it is (a
   * {@link FlowgateException}, not wrapped): how every blocking call joins its asynchronous form.
   * An interrupt cancels the future, keeps the thread's interrupt status and throws a
   * {@link ConnectionException}.
   */
  static <T> T join(CompletableFuture<T> future) {
    try {
      return future.get();
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof CompletionException && cause.getCause() != null) {
        cause = cause.getCause();
      }
      if (cause instanceof RuntimeException) {
        throw (RuntimeException) cause;
      }
      if (cause instanceof Error) {
        throw (Error) cause;
      }
      throw new ConnectionException("the call failed: " + cause, false, cause);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      future.cancel(true);
      throw new ConnectionException("interrupted while waiting for the server", false, e);
    }
  }
}
