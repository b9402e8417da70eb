package dev.flowgate.client;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * A decision's answer read into a {@link Verdict} with Jackson's streaming parser, field by
 * field, rather than by data binding (whose records' creators were a sixth of the client's CPU
 * per check under load). It reads the shapes the server writes; anything else (a value of
 * another JSON type, a body that is not JSON) answers null, and the caller binds the body as
 * before, so odd answers keep data binding's exact behaviour and errors. A test holds both
 * readings equal ({@code VerdictReaderTest}).
 */
final class VerdictReader {
  private VerdictReader() {}

  /** The answer is not of a shape read here. */
  private static final class OtherShape extends Exception {
    private static final long serialVersionUID = 1L;

    OtherShape() {
      super(null, null, false, false);
    }
  }

  private static final OtherShape OTHER_SHAPE = new OtherShape();

  /**
   * A verdict's JSON as a {@link Verdict}.
   *
   * @param json the answer's body
   * @return the verdict, or null when the body is not of the shapes read here
   */
  static Verdict read(byte[] json) {
    try (JsonParser p = JsonTransport.JSON.getFactory().createParser(json)) {
      p.nextToken();
      Verdict v = verdict(p);
      return p.nextToken() == null ? v : null;
    } catch (IOException | OtherShape e) {
      return null;
    }
  }

  private static Verdict verdict(JsonParser p) throws IOException, OtherShape {
    expect(p, JsonToken.START_OBJECT);
    boolean allowed = false;
    Code code = null;
    ErrorCode reason = null;
    Double retryAfterMs = null;
    double waitMs = 0;
    List<DescriptorStatus> statuses = null;
    List<LeaseRef> leases = null;
    List<ProbeRef> probes = null;
    BreakerRef breaker = null;
    for (String field = p.nextFieldName(); field != null; field = p.nextFieldName()) {
      JsonToken t = p.nextToken();
      switch (field) {
        case "allowed" -> allowed = bool(p, t);
        case "code" -> code = code(p, t);
        case "reason" -> {
          String s = string(p, t);
          reason = s == null ? null : ErrorCode.of(s);
        }
        case "retry_after_ms" -> retryAfterMs = number(p, t);
        case "wait_ms" -> waitMs = orZero(number(p, t));
        case "statuses" -> statuses = statuses(p, t);
        case "leases" -> leases = leases(p, t);
        case "probes" -> probes = probes(p, t);
        case "breaker" -> breaker = breaker(p, t);
        default -> p.skipChildren();
      }
    }
    expect(p, JsonToken.END_OBJECT);
    return new Verdict(
        allowed, code, reason, retryAfterMs, waitMs, statuses, leases, probes, breaker);
  }

  private static List<DescriptorStatus> statuses(JsonParser p, JsonToken t)
      throws IOException, OtherShape {
    if (t == JsonToken.VALUE_NULL) {
      return null;
    }
    expect(p, JsonToken.START_ARRAY);
    List<DescriptorStatus> out = new ArrayList<>(2);
    while (p.nextToken() != JsonToken.END_ARRAY) {
      out.add(status(p));
    }
    return out;
  }

  private static DescriptorStatus status(JsonParser p) throws IOException, OtherShape {
    expect(p, JsonToken.START_OBJECT);
    Code code = null;
    String rule = null;
    Long limit = null;
    Long remaining = null;
    String quota = null;
    Double resetAfterMs = null;
    Double retryAfterMs = null;
    double waitMs = 0;
    boolean overLimit = false;
    boolean shadow = false;
    boolean quotaMode = false;
    boolean circuitOpen = false;
    String breaker = null;
    Long lease = null;
    String error = null;
    for (String field = p.nextFieldName(); field != null; field = p.nextFieldName()) {
      JsonToken t = p.nextToken();
      switch (field) {
        case "code" -> code = code(p, t);
        case "rule" -> rule = string(p, t);
        case "limit" -> limit = integer(p, t);
        case "remaining" -> remaining = integer(p, t);
        case "quota" -> quota = string(p, t);
        case "reset_after_ms" -> resetAfterMs = number(p, t);
        case "retry_after_ms" -> retryAfterMs = number(p, t);
        case "wait_ms" -> waitMs = orZero(number(p, t));
        case "over_limit" -> overLimit = bool(p, t);
        case "shadow" -> shadow = bool(p, t);
        case "quota_mode" -> quotaMode = bool(p, t);
        case "circuit_open" -> circuitOpen = bool(p, t);
        case "breaker" -> breaker = string(p, t);
        case "lease" -> lease = integer(p, t);
        case "error" -> error = string(p, t);
        default -> p.skipChildren();
      }
    }
    expect(p, JsonToken.END_OBJECT);
    return new DescriptorStatus(
        code, rule, limit, remaining, quota, resetAfterMs, retryAfterMs, waitMs, overLimit,
        shadow, quotaMode, circuitOpen, breaker, lease, error);
  }

  private static List<LeaseRef> leases(JsonParser p, JsonToken t) throws IOException, OtherShape {
    if (t == JsonToken.VALUE_NULL) {
      return null;
    }
    expect(p, JsonToken.START_ARRAY);
    List<LeaseRef> out = new ArrayList<>(1);
    while (p.nextToken() != JsonToken.END_ARRAY) {
      expect(p, JsonToken.START_OBJECT);
      long descriptor = 0;
      long lease = 0;
      for (String field = p.nextFieldName(); field != null; field = p.nextFieldName()) {
        JsonToken v = p.nextToken();
        switch (field) {
          case "descriptor" -> descriptor = orZero(integer(p, v));
          case "lease" -> lease = orZero(integer(p, v));
          default -> p.skipChildren();
        }
      }
      out.add(new LeaseRef(toInt(descriptor), lease));
    }
    return out;
  }

  private static List<ProbeRef> probes(JsonParser p, JsonToken t) throws IOException, OtherShape {
    if (t == JsonToken.VALUE_NULL) {
      return null;
    }
    expect(p, JsonToken.START_ARRAY);
    List<ProbeRef> out = new ArrayList<>(1);
    while (p.nextToken() != JsonToken.END_ARRAY) {
      expect(p, JsonToken.START_OBJECT);
      long descriptor = 0;
      String breaker = null;
      long probe = 0;
      for (String field = p.nextFieldName(); field != null; field = p.nextFieldName()) {
        JsonToken v = p.nextToken();
        switch (field) {
          case "descriptor" -> descriptor = orZero(integer(p, v));
          case "breaker" -> breaker = string(p, v);
          case "probe" -> probe = orZero(integer(p, v));
          default -> p.skipChildren();
        }
      }
      out.add(new ProbeRef(toInt(descriptor), breaker, probe));
    }
    return out;
  }

  private static BreakerRef breaker(JsonParser p, JsonToken t) throws IOException, OtherShape {
    if (t == JsonToken.VALUE_NULL) {
      return null;
    }
    expect(p, JsonToken.START_OBJECT);
    String domain = null;
    String name = null;
    String key = null;
    for (String field = p.nextFieldName(); field != null; field = p.nextFieldName()) {
      JsonToken v = p.nextToken();
      switch (field) {
        case "domain" -> domain = string(p, v);
        case "name" -> name = string(p, v);
        case "key" -> key = string(p, v);
        default -> p.skipChildren();
      }
    }
    return new BreakerRef(domain, name, key);
  }

  private static void expect(JsonParser p, JsonToken t) throws OtherShape {
    if (p.currentToken() != t) {
      throw OTHER_SHAPE;
    }
  }

  private static boolean bool(JsonParser p, JsonToken t) throws OtherShape {
    return switch (t) {
      case VALUE_TRUE -> true;
      case VALUE_FALSE, VALUE_NULL -> false;
      default -> throw OTHER_SHAPE;
    };
  }

  private static String string(JsonParser p, JsonToken t) throws IOException, OtherShape {
    return switch (t) {
      case VALUE_STRING -> p.getText();
      case VALUE_NULL -> null;
      default -> throw OTHER_SHAPE;
    };
  }

  /** An enum value by its name; an unknown one is null, as the client's mapper reads it. */
  private static Code code(JsonParser p, JsonToken t) throws IOException, OtherShape {
    String s = string(p, t);
    if (s == null) {
      return null;
    }
    return switch (s) {
      case "OK" -> Code.OK;
      case "OVER_LIMIT" -> Code.OVER_LIMIT;
      default -> null;
    };
  }

  private static Double number(JsonParser p, JsonToken t) throws IOException, OtherShape {
    return switch (t) {
      case VALUE_NUMBER_FLOAT, VALUE_NUMBER_INT -> p.getDoubleValue();
      case VALUE_NULL -> null;
      default -> throw OTHER_SHAPE;
    };
  }

  private static Long integer(JsonParser p, JsonToken t) throws IOException, OtherShape {
    if (t == JsonToken.VALUE_NULL) {
      return null;
    }
    if (t != JsonToken.VALUE_NUMBER_INT || p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
      throw OTHER_SHAPE;
    }
    return p.getLongValue();
  }

  private static int toInt(long v) throws OtherShape {
    if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
      throw OTHER_SHAPE;
    }
    return (int) v;
  }

  private static double orZero(Double v) {
    return v == null ? 0 : v;
  }

  private static long orZero(Long v) {
    return v == null ? 0 : v;
  }
}
