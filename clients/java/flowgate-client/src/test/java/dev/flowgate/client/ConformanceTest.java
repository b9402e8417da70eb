package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.flowgate.client.testing.FlowgateServer;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Runs the shared request/answer vectors ({@code clients/conformance/vectors.json}, described in
 * that directory's README) through this client against the real server: one dynamic test per
 * suite, each with a server of its own.
 */
class ConformanceTest {
  @TestFactory
  Stream<DynamicTest> vectors() throws IOException {
    Path file =
        Path.of(System.getProperty("flowgate.repo", "../../.."), "clients", "conformance",
            "vectors.json");
    JsonNode doc = JsonTransport.JSON.readTree(file.toFile());
    assertEquals(1, doc.path("version").asInt(), "the vectors' format version");
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode suite : doc.path("suites")) {
      tests.add(DynamicTest.dynamicTest(suite.path("name").asText(), () -> run(suite)));
    }
    return tests.stream();
  }

  private static void run(JsonNode suite) {
    FlowgateServer.Builder builder = FlowgateServer.builder().config(suite.path("config").asText());
    suite.path("files").properties().forEach(f -> builder.file(f.getKey(), f.getValue().asText()));
    suite.path("flags").forEach(f -> builder.flags(f.asText()));
    try (FlowgateServer server = builder.start()) {
      Steps steps = new Steps(server.baseUrl());
      int i = 0;
      for (JsonNode step : suite.path("steps")) {
        String where = "step " + i++ + " (" + step.path("call").asText() + ")";
        JsonNode actual = steps.run(step);
        JsonNode expect = step.path("expect");
        if (expect.isMissingNode()) {
          if (actual.path("status").asInt() >= 400) {
            fail(where + ": failed: " + actual);
          }
          continue;
        }
        List<String> problems = new ArrayList<>();
        match(expect, actual, "", problems);
        if (!problems.isEmpty()) {
          fail(where + ": " + problems + "\n  expected " + expect + "\n  got      " + actual);
        }
      }
    }
  }

  /** Whether {@code actual} has what {@code expected} says, as the README defines matching. */
  static void match(JsonNode expected, JsonNode actual, String at, List<String> problems) {
    if (expected.isTextual() && expected.asText().equals("*")) {
      if (actual.isMissingNode() || actual.isNull()) {
        problems.add(at + ": missing");
      }
    } else if (expected.isObject() && expected.has("$between")) {
      double lo = expected.get("$between").get(0).asDouble();
      double hi = expected.get("$between").get(1).asDouble();
      if (!actual.isNumber() || actual.asDouble() < lo || actual.asDouble() > hi) {
        problems.add(at + ": " + actual + " is not between " + lo + " and " + hi);
      }
    } else if (expected.isObject()) {
      expected
          .properties()
          .forEach(e -> match(e.getValue(), actual.path(e.getKey()), at + "." + e.getKey(), problems));
    } else if (expected.isArray()) {
      if (!actual.isArray() || actual.size() != expected.size()) {
        problems.add(at + ": " + actual + " is not an array of " + expected.size());
        return;
      }
      for (int i = 0; i < expected.size(); i++) {
        match(expected.get(i), actual.get(i), at + "[" + i + "]", problems);
      }
    } else if (expected.isNull()) {
      if (!actual.isMissingNode() && !actual.isNull()) {
        problems.add(at + ": " + actual + ", expected null");
      }
    } else if (expected.isNumber()) {
      if (!actual.isNumber() || actual.asDouble() != expected.asDouble()) {
        problems.add(at + ": " + actual + ", expected " + expected);
      }
    } else if (!expected.equals(actual)) {
      problems.add(at + ": " + actual + ", expected " + expected);
    }
  }

  /** The calls of a suite, through the client; what a step saved (permits, reservations). */
  static final class Steps {
    private final String baseUrl;
    private final Map<String, FlowgateClient> clients = new HashMap<>();
    private final Map<String, Permit> permits = new HashMap<>();
    private final Map<String, Reservation> reservations = new HashMap<>();

    Steps(String baseUrl) {
      this.baseUrl = baseUrl;
    }

    private FlowgateClient client(JsonNode step) {
      String token = step.path("token").asText("");
      return clients.computeIfAbsent(
          token,
          t -> FlowgateClient.builder(baseUrl).token(t.isEmpty() ? null : t).build());
    }

    /** Runs a step: {@code {"status", "answer"}}, or {@code {"status", "error", ...}}. */
    JsonNode run(JsonNode step) {
      try {
        return answer(step);
      } catch (FlowgateException e) {
        ObjectNode out = JsonTransport.JSON.createObjectNode();
        out.put("status", e.status());
        out.put("error", e.code().wire());
        out.put("retry_after", e.retryAfter().isPresent());
        if (e instanceof BadRequestException bad) {
          bad.field().ifPresent(f -> out.put("field", f));
        }
        out.put("detail", e.detail());
        return out;
      }
    }

    private JsonNode answer(JsonNode step) {
      FlowgateClient client = client(step);
      JsonNode args = step.path("args");
      String save = step.path("save").asText(null);
      switch (step.path("call").asText()) {
        case "check":
          {
            Verdict v = client.check(request(args));
            return reply(v.allowed() ? 200 : 429, v);
          }
        case "acquire":
          {
            AcquireOptions options =
                args.path("hold").asBoolean(false)
                    ? AcquireOptions.holdOnServer(Duration.ofSeconds(5))
                    : AcquireOptions.waitOnClient();
            Permit p = client.acquire(request(args), options);
            if (save != null) {
              permits.put(save, p);
            }
            return reply(200, p.verdict());
          }
        case "release":
          permits.get(args.path("permit").asText()).release();
          return reply(200, null);
        case "permit_report":
          {
            Permit p = permits.get(args.path("permit").asText());
            Duration latency = Duration.ofNanos((long) (args.path("latency_ms").asDouble() * 1e6));
            return reply(200, p.report(args.path("ok").asBoolean(), latency));
          }
        case "report":
          {
            List<Report> reports = new ArrayList<>();
            args.path("reports").forEach(r -> reports.add(report(r)));
            return reply(200, client.report(reports.toArray(new Report[0])));
          }
        case "reserve":
          {
            JsonNode ttl = args.path("ttl_ms");
            Reservation r =
                client.reserve(
                    request(args),
                    args.path("estimate").asLong(),
                    ttl.isMissingNode() ? null : Duration.ofMillis(ttl.asLong()));
            if (save != null) {
              reservations.put(save, r);
            }
            ObjectNode answer = JsonTransport.JSON.valueToTree(r.verdict());
            answer.put("id", r.id());
            answer.put("expires_at", r.expiresAtMs());
            answer.put("estimate", r.estimate());
            ObjectNode out = JsonTransport.JSON.createObjectNode();
            out.put("status", r.allowed() ? 200 : 429);
            out.set("answer", answer);
            return out;
          }
        case "commit":
          {
            long cost = args.path("cost").asLong();
            CommitAnswer c =
                args.has("reservation")
                    ? client.commit(reservations.get(args.path("reservation").asText()), cost)
                    : client.commit(args.path("id").asText(), cost);
            return reply(200, c);
          }
        default:
          throw new IllegalArgumentException("unknown call " + step.path("call"));
      }
    }

    private static JsonNode reply(int status, Object answer) {
      ObjectNode out = JsonTransport.JSON.createObjectNode();
      out.put("status", status);
      if (answer != null) {
        out.set("answer", JsonTransport.JSON.valueToTree(answer));
      }
      return out;
    }

    private static Request request(JsonNode args) {
      List<Descriptor> descriptors = new ArrayList<>();
      args.path("descriptors").forEach(d -> descriptors.add(descriptor(d.asText())));
      Request req = Request.of(args.path("domain").asText(), descriptors);
      return args.has("cost") ? req.withCost(args.path("cost").asLong()) : req;
    }

    /** {@code "k=v, k2=v2"}: the descriptors' text form, as the server reads it. */
    static Descriptor descriptor(String text) {
      List<String> kv = new ArrayList<>();
      for (String entry : text.split(",")) {
        String[] parts = entry.trim().split("=", 2);
        kv.add(parts[0]);
        kv.add(parts.length > 1 ? parts[1] : "");
      }
      return Descriptor.of(kv.toArray(new String[0]));
    }

    private static Report report(JsonNode r) {
      Request req = request(r);
      Outcome outcome =
          r.has("outcome") ? (r.path("outcome").asText().equals("ok") ? Outcome.OK : Outcome.ERROR)
              : null;
      Double latency = r.has("latency_ms") ? r.path("latency_ms").asDouble() : null;
      Long cost = r.has("cost") ? r.path("cost").asLong() : null;
      return new Report(req.domain(), req.descriptors(), outcome, latency, null, cost,
          r.path("refund").asBoolean(false));
    }
  }
}
