package dev.flowgate.client;

import java.time.Duration;

/** No such thing: a route, or a reservation the server has no record of (`unknown_reservation`). */
public class NotFoundException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   */
  public NotFoundException(ErrorCode code, String detail, Duration retryAfter) {
    super(404, code, detail, retryAfter, null);
  }
}
