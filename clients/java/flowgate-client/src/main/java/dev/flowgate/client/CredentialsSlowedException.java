package dev.flowgate.client;

import java.time.Duration;

/** This address presented too many wrong tokens (`too_many_failed_credentials`): its credentials are refused unread until `retryAfter()`. */
public class CredentialsSlowedException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   */
  public CredentialsSlowedException(ErrorCode code, String detail, Duration retryAfter) {
    super(429, code, detail, retryAfter, null);
  }
}
