package dev.flowgate.examples.payment;

/** The channel's API failed (an error answer, or none). */
public class ChannelFailedException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public ChannelFailedException(String channel, Throwable cause) {
    super("channel " + channel + " failed: " + cause.getMessage(), cause);
  }
}
