package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import java.io.IOException;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Fails when the client and the server's contract, {@code docs/openapi.json}, drift apart: every
 * route the client calls exists with its method; every field of every body the client sends
 * (built by {@link Bodies} with every option set) is in the route's request schema, of its type,
 * and every required field is sent; every field the client reads (the components of its answer
 * records, recursively) is in the route's answer schema; the client's enums are the document's.
 */
class OpenApiDriftTest {
  private static final PropertyNamingStrategies.SnakeCaseStrategy SNAKE =
      new PropertyNamingStrategies.SnakeCaseStrategy();

  private static JsonNode doc;

  @BeforeAll
  static void load() throws IOException {
    Path path = Path.of(System.getProperty("flowgate.repo", "../../.."), "docs", "openapi.json");
    doc = new ObjectMapper().readTree(path.toFile());
  }

  /** Each route's bodies as the client builds them, every option set. */
  private static Map<Route, List<JsonNode>> requests() {
    Descriptor d = Descriptor.of("channel", "WPG", "biz", "PAY").withHitsAddend(2);
    Request req = Request.of("payments", d, Descriptor.of("user", "7")).withCost(3);
    Report full =
        Report.outcome(req, false, Duration.ofMillis(12)).withProbe(4294967297L).withCost(5);
    Map<Route, List<JsonNode>> out = new LinkedHashMap<>();
    out.putAll(QueueDriftSamples.requests());
    out.put(Route.CHECK, List.of(Bodies.check(req)));
    out.put(
        Route.ACQUIRE,
        List.of(
            Bodies.acquire(req, AcquireOptions.waitOnClient()),
            Bodies.acquire(req, AcquireOptions.holdOnServer(Duration.ofSeconds(1)))));
    out.put(Route.RELEASE, List.of(Bodies.release("payments", d, 42)));
    out.put(
        Route.REPORT,
        List.of(
            Bodies.report(List.of(full)),
            Bodies.report(List.of(full, Report.refund(req, 7))),
            Bodies.report(List.of(Report.charge(req, 9)))));
    out.put(
        Route.RESERVE,
        List.of(Bodies.reserve(Request.of("llm", Descriptor.of("api_key", "k1")), 10,
            Duration.ofSeconds(30))));
    out.put(
        Route.COMMIT,
        List.of(Bodies.commit("5f0c2e1b9a7d4c3e8f6a1b2c3d4e5f60", null, 7),
            Bodies.commit(null, req, 7)));
    out.putAll(QueueDriftSamples.requests());
    out.put(Route.STATS, List.of());
    return out;
  }

  /** Each route's answer records: what the client reads of its 200 (and 429) answer. */
  private static Map<Route, List<Class<?>>> answers() {
    Map<Route, List<Class<?>>> out = new LinkedHashMap<>();
    out.putAll(QueueDriftSamples.answers());
    out.put(Route.CHECK, List.of(Verdict.class));
    out.put(Route.ACQUIRE, List.of(Verdict.class));
    out.put(Route.RELEASE, List.of(Released.class));
    out.put(Route.REPORT, List.of(ReportAnswer.class));
    out.put(Route.RESERVE, List.of(Verdict.class, Reservation.Fields.class));
    out.put(Route.COMMIT, List.of(CommitAnswer.class));
    out.putAll(QueueDriftSamples.answers());
    out.put(Route.STATS, List.of(Stats.class));
    return out;
  }

  @Test
  void everyRouteTheClientCallsExistsWithItsMethod() {
    List<String> missing = new ArrayList<>();
    for (Route route : Route.values()) {
      if (operation(route).isMissingNode()) {
        missing.add(route.method + " " + route.path);
      }
    }
    assertEquals(List.of(), missing, "routes the client calls that docs/openapi.json lacks");
    assertEquals(Set.of(Route.values()), requests().keySet(), "a route without a sample body");
    assertEquals(Set.of(Route.values()), answers().keySet(), "a route without its answer type");
  }

  @Test
  void everyFieldTheClientSendsIsInTheRequestSchema() {
    List<String> problems = new ArrayList<>();
    requests()
        .forEach(
            (route, bodies) -> {
              JsonNode schema =
                  operation(route).path("requestBody").path("content").path("application/json")
                      .path("schema");
              for (JsonNode body : bodies) {
                checkValue(body, schema, route.path, problems);
              }
            });
    assertEquals(List.of(), problems, "request bodies that drifted from docs/openapi.json");
  }

  @Test
  void everyFieldTheClientReadsIsInTheAnswerSchema() {
    List<String> problems = new ArrayList<>();
    answers()
        .forEach(
            (route, types) -> {
              JsonNode responses = operation(route).path("responses");
              for (String status : List.of("200", "429")) {
                JsonNode schema =
                    responses.path(status).path("content").path("application/json").path("schema");
                if (schema.isMissingNode() || (status.equals("429") && !refusesAsVerdict(route))) {
                  continue;
                }
                for (Class<?> type : types) {
                  checkRecord(type, schema, route.path + " " + status, problems);
                }
              }
            });
    JsonNode error = resolve(doc.at("/components/schemas/ErrorBody"));
    for (String field : List.of("error", "detail")) {
      if (!error.path("properties").has(field)) {
        problems.add("ErrorBody: no `" + field + "`, which every error is read by");
      }
    }
    assertEquals(List.of(), problems, "answer fields that drifted from docs/openapi.json");
  }

  @Test
  void theClientsEnumsAreTheDocuments() {
    Set<String> codes =
        Arrays.stream(ErrorCode.values())
            .filter(c -> c != ErrorCode.UNKNOWN)
            .map(ErrorCode::wire)
            .collect(Collectors.toCollection(TreeSet::new));
    assertEquals(enumOf("ErrorCode"), codes, "ErrorCode");
    assertEquals(
        enumOf("EnvoyCode"),
        Arrays.stream(Code.values()).map(Enum::name).collect(Collectors.toCollection(TreeSet::new)),
        "Code");
    assertEquals(
        enumOf("OutcomeName"),
        Arrays.stream(Outcome.values()).map(o -> o.wire).collect(Collectors.toCollection(TreeSet::new)),
        "Outcome");
    assertEquals(
        enumOf("ChargeKind"),
        Arrays.stream(ChargeKind.values())
            .map(k -> k.name().toLowerCase(java.util.Locale.ROOT))
            .collect(Collectors.toCollection(TreeSet::new)),
        "ChargeKind");
  }

  private static boolean refusesAsVerdict(Route route) {
    return route == Route.CHECK || route == Route.ACQUIRE || route == Route.RESERVE;
  }

  private static Set<String> enumOf(String schema) {
    Set<String> out = new TreeSet<>();
    doc.at("/components/schemas/" + schema + "/enum").forEach(v -> out.add(v.asText()));
    assertTrue(!out.isEmpty(), "no enum " + schema + " in docs/openapi.json");
    return out;
  }

  private static JsonNode operation(Route route) {
    return doc.path("paths").path(route.path).path(route.method.toLowerCase(java.util.Locale.ROOT));
  }

  private static JsonNode resolve(JsonNode schema) {
    while (schema.has("$ref")) {
      schema = doc.at(schema.get("$ref").asText().substring(1));
    }
    return schema;
  }

  /** The schema's types ({@code "type": "x"} or {@code ["x", "null"]}); empty when unstated. */
  private static Set<String> types(JsonNode schema) {
    Set<String> out = new TreeSet<>();
    JsonNode type = schema.path("type");
    if (type.isArray()) {
      type.forEach(t -> out.add(t.asText()));
    } else if (type.isTextual()) {
      out.add(type.asText());
    }
    return out;
  }

  /** Checks a JSON value the client sends against a schema; adds each fault to {@code problems}. */
  private static void checkValue(JsonNode value, JsonNode schema, String at, List<String> problems) {
    schema = resolve(schema);
    for (String combinator : List.of("oneOf", "anyOf")) {
      if (schema.has(combinator)) {
        List<List<String>> tries = new ArrayList<>();
        for (JsonNode branch : schema.get(combinator)) {
          List<String> found = new ArrayList<>();
          checkValue(value, branch, at, found);
          if (found.isEmpty()) {
            return;
          }
          tries.add(found);
        }
        problems.add(at + ": fits no branch of " + combinator + ": " + tries);
        return;
      }
    }
    if (schema.isObject() && !schema.has("type") && !schema.has("properties")
        && !schema.has("items") && !schema.has("enum")) {
      return; // A schema that says nothing of its value (a job's payload): any JSON.
    }
    Set<String> types = types(schema);
    String kind = kindOf(value);
    boolean fits =
        types.isEmpty()
            || types.contains(kind)
            || (kind.equals("integer") && types.contains("number"));
    if (!fits) {
      problems.add(at + ": a " + kind + " where the document has " + types);
      return;
    }
    if (value.isObject()) {
      JsonNode props = schema.path("properties");
      for (Iterator<String> it = value.fieldNames(); it.hasNext(); ) {
        String name = it.next();
        if (!props.has(name)) {
          problems.add(at + "." + name + ": sent, but not in the document");
        } else {
          checkValue(value.get(name), props.get(name), at + "." + name, problems);
        }
      }
      for (JsonNode required : schema.path("required")) {
        if (!value.has(required.asText())) {
          problems.add(at + "." + required.asText() + ": required, but not sent");
        }
      }
    } else if (value.isArray()) {
      int i = 0;
      for (JsonNode item : value) {
        checkValue(item, schema.path("items"), at + "[" + i++ + "]", problems);
      }
    } else if (schema.has("enum")) {
      boolean known = false;
      for (JsonNode v : schema.get("enum")) {
        known |= v.equals(value);
      }
      if (!known) {
        problems.add(at + ": " + value + " is not one of " + schema.get("enum"));
      }
    }
  }

  private static String kindOf(JsonNode value) {
    if (value.isObject()) {
      return "object";
    } else if (value.isArray()) {
      return "array";
    } else if (value.isIntegralNumber()) {
      return "integer";
    } else if (value.isNumber()) {
      return "number";
    } else if (value.isBoolean()) {
      return "boolean";
    } else if (value.isNull()) {
      return "null";
    }
    return "string";
  }

  /** An object schema's properties: its own, its {@code allOf}'s, its object branch's. */
  private static Map<String, JsonNode> properties(JsonNode schema) {
    schema = resolve(schema);
    Map<String, JsonNode> out = new LinkedHashMap<>();
    schema.path("properties").properties().forEach(e -> out.put(e.getKey(), e.getValue()));
    for (String combinator : List.of("allOf", "oneOf", "anyOf")) {
      for (JsonNode branch : schema.path(combinator)) {
        out.putAll(properties(branch));
      }
    }
    return out;
  }

  /**
   * The properties a {@link RuleCharge} is read from. The document names one schema,
   * {@code RuleCharge}, for a report's and a commit's per-rule answer; a document that still has
   * the two schemas it unified ({@code RuleCharged} for reports, {@code RuleCommitted} for
   * commits) is read as their union, which is the unified shape's fields exactly.
   */
  private static Map<String, JsonNode> ruleChargeProperties(JsonNode schema) {
    if (doc.at("/components/schemas/RuleCharge").isMissingNode()) {
      Map<String, JsonNode> union = new LinkedHashMap<>();
      union.putAll(properties(doc.at("/components/schemas/RuleCharged")));
      union.putAll(properties(doc.at("/components/schemas/RuleCommitted")));
      return union;
    }
    return properties(schema);
  }

  /** Checks that every component of {@code type} is a property of {@code schema}, recursively. */
  private static void checkRecord(Class<?> type, JsonNode schema, String at, List<String> problems) {
    Map<String, JsonNode> props =
        type == RuleCharge.class ? ruleChargeProperties(schema) : properties(schema);
    if (props.isEmpty()) {
      problems.add(at + ": " + type.getSimpleName() + " read from a schema without properties");
      return;
    }
    for (RecordComponent c : type.getRecordComponents()) {
      String name = SNAKE.translate(c.getName());
      JsonNode prop = props.get(name);
      if (prop == null) {
        problems.add(at + "." + name + ": read by " + type.getSimpleName() + ", not in the document");
        continue;
      }
      Class<?> inner = recordOf(c.getGenericType());
      if (inner != null) {
        JsonNode target = resolve(prop);
        if (target.has("items")) {
          target = target.get("items");
        }
        checkRecord(inner, nonNull(target), at + "." + name, problems);
      }
    }
  }

  /** A record type, or a list's record type; null for others. */
  private static Class<?> recordOf(Type type) {
    if (type instanceof Class<?> c && c.isRecord()) {
      return c;
    }
    if (type instanceof ParameterizedType p && p.getRawType() == List.class) {
      return recordOf(p.getActualTypeArguments()[0]);
    }
    return null;
  }

  /** The object branch of a nullable schema ({@code oneOf: [X, {"type": "null"}]}). */
  private static JsonNode nonNull(JsonNode schema) {
    schema = resolve(schema);
    for (JsonNode branch : schema.path("oneOf")) {
      if (!types(resolve(branch)).equals(Set.of("null"))) {
        return branch;
      }
    }
    return schema;
  }
}
