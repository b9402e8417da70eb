package dev.flowgate.client.queue;

import dev.flowgate.client.Descriptor;
import java.util.Objects;

/**
 * One queue instance: the domain of a declared queue and a descriptor its {@code match} picks
 * (each descriptor it matches is an instance of its own, with its own jobs and schedule).
 * Immutable.
 *
 * <pre>{@code
 * QueueInstance refundsWpg =
 *     QueueInstance.of("payments", Descriptor.of("biz", "REFUND", "channel", "WPG"));
 * }</pre>
 *
 * @param domain the queue's domain
 * @param descriptor the descriptor that picks the queue and its instance
 */
public record QueueInstance(String domain, Descriptor descriptor) {
  /** Refuses a missing domain or descriptor. */
  public QueueInstance {
    Objects.requireNonNull(domain, "domain");
    Objects.requireNonNull(descriptor, "descriptor");
  }

  /**
   * The instance of {@code domain} that {@code descriptor} picks.
   *
   * @param domain the queue's domain
   * @param descriptor the descriptor
   * @return the instance
   */
  public static QueueInstance of(String domain, Descriptor descriptor) {
    return new QueueInstance(domain, descriptor);
  }

  @Override
  public String toString() {
    StringBuilder out = new StringBuilder(domain).append('[');
    String sep = "";
    for (Descriptor.Entry e : descriptor.entries()) {
      out.append(sep).append(e.key()).append('=').append(e.value());
      sep = ", ";
    }
    return out.append(']').toString();
  }
}
