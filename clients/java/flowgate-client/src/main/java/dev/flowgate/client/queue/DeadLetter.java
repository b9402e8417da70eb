package dev.flowgate.client.queue;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;

/**
 * A job whose every attempt failed: it waits in its instance's dead letters until requeued or
 * purged.
 *
 * @param id its id
 * @param attempts the attempts it had
 * @param key its idempotency key, or null
 * @param payload its JSON payload, or null when bytes
 * @param payloadBase64 its bytes payload in base64, or null when JSON
 * @param submittedAtMs when it was submitted (Unix ms)
 * @param diedAtMs when it died (Unix ms)
 */
public record DeadLetter(
    long id,
    int attempts,
    String key,
    JsonNode payload,
    String payloadBase64,
    long submittedAtMs,
    long diedAtMs) {

  /**
   * The JSON payload as a {@code type}.
   *
   * @param type the type
   * @param <T> the type
   * @return the payload
   */
  public <T> T payloadAs(Class<T> type) {
    return Payloads.as(payload, payloadBase64, type);
  }

  /** The bytes payload; throws {@link IllegalStateException} when it is JSON. */
  public byte[] payloadBytes() {
    return Payloads.bytes(payloadBase64);
  }

  /** When it died. */
  public Instant diedAt() {
    return Instant.ofEpochMilli(diedAtMs);
  }
}
