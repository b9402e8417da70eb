package dev.flowgate.client.queue;

import java.time.Instant;
import java.util.Optional;

/**
 * What a nack did: the job is retried at {@code retryAtMs}, or that was its last attempt and it
 * is a dead letter.
 *
 * @param state {@code "retry"} or {@code "dead"}
 * @param retryAtMs when it is retried (Unix ms), or null when dead
 * @param retryInMs in how long, or null when dead
 */
public record NackAnswer(String state, Long retryAtMs, Long retryInMs) {
  /** Whether the job went to the dead letters (its last attempt failed). */
  public boolean dead() {
    return "dead".equals(state);
  }

  /** When the job is retried; empty when it is dead. */
  public Optional<Instant> retryAt() {
    return Optional.ofNullable(retryAtMs).map(Instant::ofEpochMilli);
  }
}
