package dev.flowgate.client.queue;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;
import java.util.Objects;

/**
 * A job to submit: its payload (JSON, or bytes), and optionally an idempotency {@code key} and
 * the earliest time it may be released. Immutable.
 *
 * <pre>{@code
 * NewJob.json(new Refund("R-1", "12.50")).withKey("R-1")
 * NewJob.bytes(pdf).withKey("doc-7").notBefore(Instant.now().plusSeconds(3600))
 * }</pre>
 *
 * <p>A job submitted with a {@code key} the queue knows (a job still there, or acked within the
 * queue's {@code key_retention}) is answered as that job, and nothing is stored: a resubmission
 * after a timeout never makes a second job. The same key with another payload is refused ({@link
 * dev.flowgate.client.ConflictException}, {@code key_conflict}).
 *
 * @param payload the JSON payload, or null when {@code bytes} is the payload
 * @param bytes the payload as bytes, or null when {@code payload} is
 * @param key the idempotency key (1 to 1024 bytes), or null
 * @param notBefore no release before this instant (at most 30 days ahead), or null
 */
public record NewJob(JsonNode payload, byte[] bytes, String key, Instant notBefore) {
  /** Checks that exactly one payload is present and the key is not empty. */
  public NewJob {
    if ((payload == null) == (bytes == null)) {
      throw new IllegalArgumentException("a job has one payload: JSON or bytes");
    }
    if (key != null && key.isEmpty()) {
      throw new IllegalArgumentException("a job's key is 1 to 1024 bytes, not empty");
    }
    bytes = bytes == null ? null : bytes.clone();
  }

  /**
   * A job whose payload is {@code value} as JSON (a record, a map, a {@link JsonNode}), written
   * by Jackson with the value's own field names.
   *
   * @param value the payload
   * @return the job
   */
  public static NewJob json(Object value) {
    JsonNode node =
        value instanceof JsonNode n ? n : Payloads.MAPPER.valueToTree(Objects.requireNonNull(value));
    return new NewJob(node, null, null, null);
  }

  /**
   * A job whose payload is this JSON text (numbers keep their digits).
   *
   * @param json one JSON text
   * @return the job
   * @throws IllegalArgumentException when the text is not JSON
   */
  public static NewJob jsonText(String json) {
    try {
      return new NewJob(Payloads.MAPPER.readTree(json), null, null, null);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("not one JSON text: " + e.getOriginalMessage(), e);
    }
  }

  /**
   * A job whose payload is these bytes (sent as {@code payload_base64}; answered as bytes).
   *
   * @param bytes the payload
   * @return the job
   */
  public static NewJob bytes(byte[] bytes) {
    return new NewJob(null, Objects.requireNonNull(bytes, "bytes"), null, null);
  }

  /**
   * This job with an idempotency key.
   *
   * @param key the key (1 to 1024 bytes)
   * @return the job with its key
   */
  public NewJob withKey(String key) {
    return new NewJob(payload, bytes, Objects.requireNonNull(key, "key"), notBefore);
  }

  /**
   * This job, not released before {@code instant}.
   *
   * @param instant the earliest release
   * @return the job with its time
   */
  public NewJob notBefore(Instant instant) {
    return new NewJob(payload, bytes, key, instant);
  }

  @Override
  public byte[] bytes() {
    return bytes == null ? null : bytes.clone();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof NewJob j
        && Objects.equals(payload, j.payload)
        && java.util.Arrays.equals(bytes, j.bytes)
        && Objects.equals(key, j.key)
        && Objects.equals(notBefore, j.notBefore);
  }

  @Override
  public int hashCode() {
    return Objects.hash(payload, java.util.Arrays.hashCode(bytes), key, notBefore);
  }

  @Override
  public String toString() {
    return "NewJob[key=" + key + ", notBefore=" + notBefore + ", "
        + (payload != null ? "payload=" + payload : "bytes=" + bytes.length) + "]";
  }
}
