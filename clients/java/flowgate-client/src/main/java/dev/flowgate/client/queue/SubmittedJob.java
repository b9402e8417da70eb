package dev.flowgate.client.queue;

import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/**
 * One job of a submit's answer.
 *
 * @param id its id in its instance (ids grow in submission order)
 * @param duplicate true when its {@code key} named a job already known: nothing was stored, and
 *     this is that job
 * @param state where it is now
 * @param position a ready job: the ready jobs ahead of it; null otherwise
 * @param releaseAtMs when it should be released (Unix ms; an estimate), or null
 * @param releaseInMs in how long, or null
 */
public record SubmittedJob(
    long id,
    boolean duplicate,
    JobState state,
    Long position,
    Long releaseAtMs,
    Long releaseInMs) {

  /** When it should be released (an estimate: retries and other submits move it). */
  public Optional<Instant> releaseAt() {
    return Optional.ofNullable(releaseAtMs).map(Instant::ofEpochMilli);
  }

  /** In how long it should be released (an estimate). */
  public Optional<Duration> releaseIn() {
    return Optional.ofNullable(releaseInMs).map(Duration::ofMillis);
  }
}
