package dev.flowgate.client;

import java.time.Duration;
import java.util.Optional;

/**
 * An answer of the server that is not the one asked for, or no answer at all. Every exception of
 * this client is one: catch this type to handle them all, or a subclass for one case
 * ({@link OverLimitException}, {@link CircuitOpenException}, {@link StoreUnavailableException},
 * {@link BadRequestException}, {@link UnauthorizedException}, {@link ForbiddenException},
 * {@link NotFoundException}, {@link ConflictException}, {@link ConnectionException}).
 */
public class FlowgateException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;
  private final ErrorCode code;
  private final String detail;
  private final Duration retryAfter;

  /**
   * @param status the HTTP status (0 when no answer came)
   * @param code the server's code ({@link ErrorCode#UNKNOWN} when none)
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null when the server did not say
   * @param cause the underlying failure, or null
   */
  public FlowgateException(
      int status, ErrorCode code, String detail, Duration retryAfter, Throwable cause) {
    super(message(status, code, detail), cause);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.retryAfter = retryAfter;
  }

  private static String message(int status, ErrorCode code, String detail) {
    if (status == 0) {
      return detail;
    }
    String name = code == ErrorCode.UNKNOWN ? "error" : code.wire();
    return "HTTP " + status + " " + name + ": " + detail;
  }

  /** The HTTP status of the answer; 0 when no answer came. */
  public int status() {
    return status;
  }

  /** The server's code, for programs to switch on. */
  public ErrorCode code() {
    return code;
  }

  /** The server's detail, for people (it may change between versions). */
  public String detail() {
    return detail;
  }

  /** How long to wait before trying again, when the server said (a 429 or a 503). */
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfter);
  }
}
