package dev.flowgate.client;

import java.time.Duration;

/** The server's store could not answer (`store_unavailable`), or the node is starting or draining (`not_ready`): nothing was applied; retry after `retryAfter()`. */
public class StoreUnavailableException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  /**
   * @param code the server's code
   * @param detail what went wrong, for people
   * @param retryAfter when to try again, or null
   */
  public StoreUnavailableException(ErrorCode code, String detail, Duration retryAfter) {
    super(503, code, detail, retryAfter, null);
  }
}
