package dev.flowgate.client;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.List;

/**
 * The JSON bodies the client sends, one function per route: the one place their fields are
 * named, which the drift test checks against {@code docs/openapi.json}.
 */
final class Bodies {
  private Bodies() {}

  /** {@code POST /v1/check}: the request to decide. */
  static ObjectNode check(Request request) {
    ObjectNode body = JsonTransport.JSON.createObjectNode();
    body.put("domain", request.domain());
    body.set("descriptors", descriptors(request.descriptors()));
    if (request.cost() != null) {
      body.put("cost", request.cost());
    }
    return body;
  }

  /** {@code POST /v1/acquire}: a check that, with {@code hold}, answers once its slot came. */
  static ObjectNode acquire(Request request, AcquireOptions options) {
    ObjectNode body = check(request);
    if (options.hold()) {
      body.put("hold", true);
    }
    return body;
  }

  /** {@code POST /v1/release}: a concurrency lease given back. */
  static ObjectNode release(String domain, Descriptor descriptor, long lease) {
    ObjectNode body = JsonTransport.JSON.createObjectNode();
    body.put("domain", domain);
    body.set("descriptor", descriptor(descriptor));
    body.put("lease", lease);
    return body;
  }

  /** {@code POST /v1/report}: one report's fields at the top, several under {@code reports}. */
  static ObjectNode report(List<Report> reports) {
    if (reports.size() == 1) {
      return reportFields(reports.get(0));
    }
    ObjectNode body = JsonTransport.JSON.createObjectNode();
    ArrayNode list = body.putArray("reports");
    reports.forEach(r -> list.add(reportFields(r)));
    return body;
  }

  static ObjectNode reportFields(Report report) {
    ObjectNode body = JsonTransport.JSON.createObjectNode();
    body.put("domain", report.domain());
    body.set("descriptors", descriptors(report.descriptors()));
    if (report.outcome() != null) {
      body.put("outcome", report.outcome().wire);
    }
    if (report.latencyMs() != null) {
      body.put("latency_ms", report.latencyMs());
    }
    if (report.probe() != null) {
      body.put("probe", report.probe());
    }
    if (report.cost() != null) {
      body.put("cost", report.cost());
    }
    if (report.refund()) {
      body.put("refund", true);
    }
    return body;
  }

  /** {@code POST /v1/reserve}: the request, its estimate, how long it may stay uncommitted. */
  static ObjectNode reserve(Request request, long estimate, Duration ttl) {
    ObjectNode body = JsonTransport.JSON.createObjectNode();
    body.put("domain", request.domain());
    body.set("descriptors", descriptors(request.descriptors()));
    body.put("estimate", estimate);
    if (ttl != null) {
      body.put("ttl", Math.max(1, ttl.toMillis()) + "ms");
    }
    return body;
  }

  /**
   * {@code POST /v1/commit}: the reservation and its actual cost; without an id (a reservation a
   * failure policy admitted), the domain and descriptors it charges instead.
   */
  static ObjectNode commit(String id, Request request, long cost) {
    ObjectNode body = JsonTransport.JSON.createObjectNode();
    if (id != null) {
      body.put("id", id);
    }
    if (request != null) {
      body.put("domain", request.domain());
      body.set("descriptors", descriptors(request.descriptors()));
    }
    body.put("cost", cost);
    return body;
  }

  /** A descriptor in Envoy's form: {@code {"entries": [{"key", "value"}], "hits_addend"}}. */
  static ObjectNode descriptor(Descriptor descriptor) {
    ObjectNode out = JsonTransport.JSON.createObjectNode();
    ArrayNode entries = out.putArray("entries");
    for (Descriptor.Entry e : descriptor.entries()) {
      entries.addObject().put("key", e.key()).put("value", e.value());
    }
    if (descriptor.hitsAddend() != null) {
      out.put("hits_addend", descriptor.hitsAddend());
    }
    return out;
  }

  static ArrayNode descriptors(List<Descriptor> descriptors) {
    ArrayNode out = JsonTransport.JSON.createArrayNode();
    descriptors.forEach(d -> out.add(descriptor(d)));
    return out;
  }
}
