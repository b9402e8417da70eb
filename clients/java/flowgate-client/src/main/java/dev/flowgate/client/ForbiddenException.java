package dev.flowgate.client;

import java.time.Duration;

/** The credential lacks the route's scope (`forbidden`), or the admin routes are off (`admin_disabled`). */
public class ForbiddenException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   */
  public ForbiddenException(ErrorCode code, String detail, Duration retryAfter) {
    super(403, code, detail, retryAfter, null);
  }
}
