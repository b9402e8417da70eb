package dev.flowgate.client;

/**
 * No answer came: the server could not be reached, the connection failed, or the answer did not
 * come within the timeout ({@link #isTimeout()}). Whether the request was applied is unknown.
 */
public class ConnectionException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  private final boolean timeout;

  /**
   * @param detail what failed
   * @param timeout whether the request timed out
   * @param cause the transport's exception
   */
  public ConnectionException(String detail, boolean timeout, Throwable cause) {
    super(0, ErrorCode.UNKNOWN, detail, null, cause);
    this.timeout = timeout;
  }

  /** Whether the answer did not come within the timeout (or the connection within its own). */
  public boolean isTimeout() {
    return timeout;
  }
}
