package dev.flowgate.client;

import java.time.Duration;

/** The route needs a credential and none, or a wrong one, came (`unauthorized`): see the builder's `token`. */
public class UnauthorizedException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   */
  public UnauthorizedException(ErrorCode code, String detail, Duration retryAfter) {
    super(401, code, detail, retryAfter, null);
  }
}
