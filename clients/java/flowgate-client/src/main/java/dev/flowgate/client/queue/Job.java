package dev.flowgate.client.queue;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;

/**
 * A leased job: its payload, and the delivery's {@code token}, which acks or nacks it. Held
 * until {@link #leaseDeadline()}; not acked by then, it is delivered again. Immutable.
 *
 * <p>The queue API has no lease extension: a handler must finish within the queue's {@code
 * lease} (30 s by default; declare a longer one for long work, up to 12 h).
 *
 * @param id its id in its instance
 * @param instance the queue instance's key
 * @param attempt its delivery (1: the first)
 * @param token the delivery's token, for ack and nack
 * @param payload its JSON payload, or null when it was submitted as bytes
 * @param payloadBase64 its bytes payload in base64, or null when it is JSON
 * @param submittedAtMs when it was submitted (Unix ms)
 * @param releasedAtMs its release slot (Unix ms, the store's clock)
 * @param releasedAtUs the same, in microseconds
 * @param leaseDeadlineMs when the lease ends (Unix ms)
 */
public record Job(
    long id,
    String instance,
    int attempt,
    String token,
    JsonNode payload,
    String payloadBase64,
    long submittedAtMs,
    long releasedAtMs,
    long releasedAtUs,
    long leaseDeadlineMs) {

  /**
   * The JSON payload as a {@code type} (Jackson, the type's own field names).
   *
   * @param type the type
   * @param <T> the type
   * @return the payload
   * @throws IllegalStateException when the payload is bytes
   * @throws IllegalArgumentException when the payload does not fit the type
   */
  public <T> T payloadAs(Class<T> type) {
    return Payloads.as(payload, payloadBase64, type);
  }

  /**
   * The bytes payload.
   *
   * @return the bytes, as submitted
   * @throws IllegalStateException when the payload is JSON
   */
  public byte[] payloadBytes() {
    return Payloads.bytes(payloadBase64);
  }

  /** When the lease ends: not acked by then, the job is delivered again. */
  public Instant leaseDeadline() {
    return Instant.ofEpochMilli(leaseDeadlineMs);
  }

  /** Its release slot, to the microsecond (the store's clock). */
  public Instant releasedAt() {
    return Instant.ofEpochSecond(0, releasedAtUs * 1000);
  }

  @Override
  public String toString() {
    return "Job[" + instance + " #" + id + ", attempt " + attempt + "]";
  }
}
