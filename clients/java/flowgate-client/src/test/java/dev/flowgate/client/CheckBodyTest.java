package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The check's body written to bytes ({@link CheckBody}) is the JSON of {@link Bodies#check},
 * which the drift test holds to the OpenAPI document: field names, optional fields, escaping.
 */
class CheckBodyTest {
  private static void same(Request request) throws Exception {
    // Both read back, so that numbers compare by value whatever their node types.
    JsonNode fast = JsonTransport.JSON.readTree(CheckBody.of(request));
    JsonNode tree =
        JsonTransport.JSON.readTree(JsonTransport.JSON.writeValueAsBytes(Bodies.check(request)));
    assertEquals(tree, fast, new String(CheckBody.of(request), "UTF-8"));
  }

  @Test
  void everyShapeOfRequestIsWrittenAsTheTree() throws Exception {
    same(Request.of("payments", Descriptor.of("channel", "WPG")));
    same(Request.of("payments", Descriptor.of("channel", "WPG")).withCost(0));
    same(Request.of("payments", Descriptor.of("channel", "WPG")).withCost(Long.MAX_VALUE));
    same(
        Request.of(
            "llm",
            List.of(
                Descriptor.of("api_key", "k1", "model", "m").withHitsAddend(1200),
                Descriptor.of("tenant", "").withHitsAddend(0),
                Descriptor.of("user", "7"))));
  }

  @Test
  void stringsAreEscapedAndUtf8() throws Exception {
    same(Request.of("d\"q\\b/s", Descriptor.of("k\n\t\r\b\f", "\u0000\u001f\u007f")));
    same(Request.of("płatności", Descriptor.of("kanał", "支付 😀 é", "emoji", "😀😀x")));
    same(Request.of("", Descriptor.of("", "")));
  }

  @Test
  void anUnpairedSurrogateIsRefused() {
    assertThrows(
        IllegalArgumentException.class,
        () -> CheckBody.of(Request.of("d", Descriptor.of("k", "x\ud83d"))));
    assertThrows(
        IllegalArgumentException.class,
        () -> CheckBody.of(Request.of("d", Descriptor.of("k", "\ude00y"))));
  }
}
