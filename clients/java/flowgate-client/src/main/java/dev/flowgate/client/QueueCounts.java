package dev.flowgate.client;

import dev.flowgate.client.queue.DeadLetter;
import java.util.List;

/** The small answers of the queue routes, read by {@link Queues}. */
final class QueueCounts {
  private QueueCounts() {}

  /** {@code POST /v1/queues/ack}: always true. */
  record Acked(boolean acked) {}

  /** {@code POST /v1/queues/dead}: dead letters, oldest first. */
  record DeadLetters(List<DeadLetter> jobs) {
    DeadLetters {
      jobs = jobs == null ? List.of() : List.copyOf(jobs);
    }
  }

  /** {@code POST /v1/queues/dead/requeue}. */
  record Requeued(long requeued) {}

  /** {@code POST /v1/queues/dead/purge} and {@code /v1/queues/purge}. */
  record Purged(long purged) {}
}
