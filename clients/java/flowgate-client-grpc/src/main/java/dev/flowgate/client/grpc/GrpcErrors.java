package dev.flowgate.client.grpc;

import dev.flowgate.client.BadRequestException;
import dev.flowgate.client.ConnectionException;
import dev.flowgate.client.CredentialsSlowedException;
import dev.flowgate.client.ErrorCode;
import dev.flowgate.client.FlowgateException;
import dev.flowgate.client.ForbiddenException;
import dev.flowgate.client.StoreUnavailableException;
import dev.flowgate.client.UnauthorizedException;
import io.grpc.Status;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A failed gRPC call as the HTTP client's typed exception: the same types for the same causes,
 * so a caller handles both transports alike. The exception's {@code status()} is the HTTP
 * status of the same refusal; its detail is the server's description.
 */
final class GrpcErrors {
  /** How the server says when a slowed source may present a token again. */
  private static final Pattern TRY_AGAIN = Pattern.compile("try again in (\\d+) ms");

  private GrpcErrors() {}

  /**
   * The exception of a failed call.
   *
   * @param status the call's status
   * @param what the method, for the messages of failures without an answer
   * @return the exception to throw
   */
  static FlowgateException of(Status status, String what) {
    String detail = status.getDescription() == null ? status.getCode().name() : status.getDescription();
    if (status.getCause() != null && status.getCode() != Status.Code.DEADLINE_EXCEEDED) {
      // The client's own failure (refused, reset, a TLS handshake, not HTTP/2): no answer came.
      return new ConnectionException(
          "no answer from " + what + ": " + status + " (" + status.getCause() + ")",
          false,
          status.asRuntimeException());
    }
    switch (status.getCode()) {
      case INVALID_ARGUMENT:
      case OUT_OF_RANGE:
        return new BadRequestException(ErrorCode.BAD_REQUEST, detail);
      case UNAUTHENTICATED:
        return new UnauthorizedException(ErrorCode.UNAUTHORIZED, detail, null);
      case PERMISSION_DENIED:
        return new ForbiddenException(ErrorCode.FORBIDDEN, detail, null);
      case RESOURCE_EXHAUSTED:
        return new CredentialsSlowedException(
            ErrorCode.TOO_MANY_FAILED_CREDENTIALS, detail, tryAgain(detail));
      case UNAVAILABLE:
        if (detail.startsWith("the store")) {
          // Sent by the server: its store could not take a charge (nothing was applied).
          return new StoreUnavailableException(
              ErrorCode.STORE_UNAVAILABLE, detail, Duration.ofSeconds(1));
        }
        return new ConnectionException(
            "no answer from " + what + ": " + status, false, status.asRuntimeException());
      case DEADLINE_EXCEEDED:
        return new ConnectionException(
            "no answer in time from " + what + ": " + status, true, status.asRuntimeException());
      case CANCELLED:
        return new ConnectionException(
            what + " was cancelled: " + status, false, status.asRuntimeException());
      default:
        return new FlowgateException(
            500, ErrorCode.UNKNOWN, status.getCode() + ": " + detail, null,
            status.asRuntimeException());
    }
  }

  private static Duration tryAgain(String detail) {
    Matcher m = TRY_AGAIN.matcher(detail);
    return m.find() ? Duration.ofMillis(Long.parseLong(m.group(1))) : null;
  }
}
