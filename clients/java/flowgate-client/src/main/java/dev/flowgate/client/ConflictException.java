package dev.flowgate.client;

import java.time.Duration;

/** The request conflicts with the server's state (`already_committed`, `not_held`, ...): nothing changed. */
public class ConflictException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   */
  public ConflictException(ErrorCode code, String detail, Duration retryAfter) {
    super(409, code, detail, retryAfter, null);
  }
}
