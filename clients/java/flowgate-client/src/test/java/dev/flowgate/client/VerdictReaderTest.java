package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The streaming reading of a verdict ({@link VerdictReader}) gives what data binding gives for
 * every shape the server writes, and declines (null) the others, which are then bound.
 */
class VerdictReaderTest {
  private static Verdict bound(String json) throws Exception {
    return JsonTransport.JSON.readValue(json.getBytes(StandardCharsets.UTF_8), Verdict.class);
  }

  private static void same(String json) throws Exception {
    Verdict fast = VerdictReader.read(json.getBytes(StandardCharsets.UTF_8));
    assertNotNull(fast, json);
    assertEquals(bound(json), fast, json);
  }

  /** An admitted check, as the server writes it. */
  static final String ADMITTED =
      "{\"allowed\":true,\"code\":\"OK\",\"wait_ms\":0.0,\"retry_after_ms\":null,\"leases\":[],"
          + "\"statuses\":[{\"code\":\"OK\",\"rule\":\"per-key\",\"shadow\":false,"
          + "\"quota_mode\":false,\"over_limit\":false,\"limit\":100,\"quota\":\"100/s\","
          + "\"remaining\":99,\"reset_after_ms\":701.537,\"retry_after_ms\":null,\"wait_ms\":0.0,"
          + "\"lease\":null,\"error\":null,\"breaker\":null,\"circuit_open\":false}]}";

  @Test
  void theServersShapesReadAsBound() throws Exception {
    same(ADMITTED);
    same(
        "{\"allowed\":false,\"code\":\"OVER_LIMIT\",\"reason\":\"over_limit\",\"wait_ms\":0.0,"
            + "\"retry_after_ms\":312.5,\"leases\":[],\"statuses\":[{\"code\":\"OVER_LIMIT\","
            + "\"rule\":\"r\",\"shadow\":true,\"quota_mode\":true,\"over_limit\":true,\"limit\":2,"
            + "\"quota\":\"2/1m\",\"remaining\":0,\"reset_after_ms\":5,\"retry_after_ms\":312.5,"
            + "\"wait_ms\":12,\"lease\":7,\"error\":\"store_unavailable\",\"breaker\":\"b\","
            + "\"circuit_open\":true},{\"code\":\"OK\",\"rule\":null,\"limit\":null}]}");
    same(
        "{\"allowed\":true,\"code\":\"OK\",\"wait_ms\":250.25,\"leases\":[{\"descriptor\":1,"
            + "\"lease\":9007199254740993}],\"probes\":[{\"descriptor\":0,\"breaker\":\"pay\","
            + "\"probe\":42}],\"statuses\":[]}");
    same(
        "{\"allowed\":false,\"code\":\"OVER_LIMIT\",\"reason\":\"circuit_open\",\"breaker\":"
            + "{\"domain\":\"payments\",\"name\":\"downstream\",\"key\":\"channel=WPG\"},"
            + "\"statuses\":null,\"leases\":null,\"probes\":null}");
  }

  @Test
  void unknownFieldsAndValuesReadAsBound() throws Exception {
    same(
        "{\"new\":{\"deep\":[1,{\"x\":[]}]},\"allowed\":true,\"code\":\"MAYBE\","
            + "\"reason\":\"a_new_reason\",\"statuses\":[{\"code\":\"NEW\",\"more\":[true],"
            + "\"limit\":3}],\"leases\":[{\"descriptor\":0,\"lease\":1,\"ttl\":\"1s\"}],"
            + "\"breaker\":{\"domain\":\"d\",\"extra\":{}},\"tail\":null}");
    same("{}");
    same("{\"allowed\":null,\"wait_ms\":null,\"code\":null,\"reason\":null}");
    same("  {\"allowed\":true}  ");
  }

  @Test
  void otherShapesAreLeftToDataBinding() {
    for (String json :
        new String[] {
          "", "[]", "null", "{", "{\"allowed\":\"yes\"}", "{\"allowed\":true} {}",
          "{\"statuses\":{}}", "{\"statuses\":[{\"limit\":1.5}]}", "{\"wait_ms\":\"3\"}",
          "{\"leases\":[{\"descriptor\":99999999999}]}", "{\"breaker\":\"b\"}",
          "{\"statuses\":[{\"breaker\":{\"name\":\"b\"}}]}", "not json"
        }) {
      assertNull(VerdictReader.read(json.getBytes(StandardCharsets.UTF_8)), json);
    }
  }
}
