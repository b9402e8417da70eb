package dev.flowgate.client.queue;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import java.util.Base64;

/**
 * How payloads meet the application's objects: Jackson with its default naming (the
 * application's field names as they are, unlike the API's snake_case), decimals read as {@link
 * java.math.BigDecimal} so that an amount keeps its digits.
 */
final class Payloads {
  static final ObjectMapper MAPPER =
      new ObjectMapper()
          .configure(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS, true)
          .configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false)
          .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

  private Payloads() {}

  static <T> T as(JsonNode payload, String base64, Class<T> type) {
    if (payload == null) {
      throw new IllegalStateException(
          base64 != null
              ? "the payload is bytes (payload_base64), not JSON: read payloadBytes()"
              : "the job has no payload");
    }
    try {
      return MAPPER.treeToValue(payload, type);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "the payload is not a " + type.getSimpleName() + ": " + e.getOriginalMessage(), e);
    }
  }

  static byte[] bytes(String base64) {
    if (base64 == null) {
      throw new IllegalStateException("the payload is JSON (payload), not bytes: read payload()");
    }
    return Base64.getDecoder().decode(base64);
  }
}
