package dev.flowgate.client.grpc;

import com.google.protobuf.UInt64Value;
import dev.flowgate.client.BadRequestException;
import dev.flowgate.client.Code;
import dev.flowgate.client.Descriptor;
import dev.flowgate.client.DescriptorStatus;
import dev.flowgate.client.ErrorCode;
import dev.flowgate.client.Request;
import dev.flowgate.client.Verdict;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.common.ratelimit.v3.RateLimitDescriptor;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitRequest;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse;
import io.envoyproxy.envoy.service.ratelimit.v3.RateLimitResponse.RateLimit;
import java.util.ArrayList;
import java.util.List;

/**
 * A {@link Request} as Envoy's {@code RateLimitRequest}, and Envoy's answer as the HTTP client's
 * {@link Verdict}: the one place the two shapes meet.
 */
final class EnvoyMessages {
  /** The largest cost a request carries (Envoy's {@code hits_addend} is a uint32). */
  static final long MAX_COST = 0xFFFF_FFFFL;

  private EnvoyMessages() {}

  /**
   * The request as Envoy sends it. A cost of 0 (a look that takes nothing) has no request-level
   * form in Envoy's message, where {@code hits_addend} 0 means 1: each descriptor without a cost
   * of its own then carries {@code hits_addend} 0, which the server reads as a look.
   *
   * @throws BadRequestException when the cost is over 4,294,967,295, as the server would refuse
   */
  static RateLimitRequest request(Request request) {
    Long cost = request.cost();
    if (cost != null && cost > MAX_COST) {
      throw new BadRequestException(
          ErrorCode.BAD_REQUEST, "field `cost`: " + cost + " is over 4294967295");
    }
    RateLimitRequest.Builder out = RateLimitRequest.newBuilder().setDomain(request.domain());
    boolean look = cost != null && cost == 0;
    if (cost != null && cost > 0) {
      out.setHitsAddend((int) (long) cost);
    }
    for (Descriptor d : request.descriptors()) {
      RateLimitDescriptor.Builder desc = RateLimitDescriptor.newBuilder();
      for (Descriptor.Entry e : d.entries()) {
        desc.addEntriesBuilder().setKey(e.key()).setValue(e.value());
      }
      if (d.hitsAddend() != null) {
        desc.setHitsAddend(UInt64Value.of(d.hitsAddend()));
      } else if (look) {
        desc.setHitsAddend(UInt64Value.of(0));
      }
      out.addDescriptors(desc);
    }
    return out.build();
  }

  /**
   * Envoy's answer as a {@link Verdict}. What Envoy's message does not carry is left empty: no
   * {@code delay} wait, leases, probes or breaker name; a status's {@code shadow}, {@code
   * quotaMode} and {@code error} false or null. A refusal's retry time is the sooner of the
   * answer's {@code retry-after} (whole seconds, rounded up; sent with {@code
   * --response-headers}, and always for an open breaker) and the latest reset among the
   * descriptors over their limit: never earlier than the HTTP answer's exact one.
   */
  static Verdict verdict(RateLimitResponse response) {
    boolean allowed = response.getOverallCode() != RateLimitResponse.Code.OVER_LIMIT;
    ErrorCode said = null;
    Double headerRetryMs = null;
    for (HeaderValue h : response.getResponseHeadersToAddList()) {
      String key = h.getKey().toLowerCase(java.util.Locale.ROOT);
      if (key.equals("x-flowgate-reason")) {
        said = ErrorCode.of(h.getValue());
      } else if (key.equals("retry-after")) {
        try {
          headerRetryMs = Long.parseLong(h.getValue().trim()) * 1000.0;
        } catch (NumberFormatException e) {
          // Not a number of seconds: the descriptors' resets stand alone.
        }
      }
    }
    boolean circuitOpen = said == ErrorCode.CIRCUIT_OPEN;
    List<DescriptorStatus> statuses = new ArrayList<>();
    Double latestReset = 0.0;
    boolean anyOver = false;
    for (RateLimitResponse.DescriptorStatus s : response.getStatusesList()) {
      DescriptorStatus status = status(s, !allowed && circuitOpen);
      statuses.add(status);
      if (status.overLimit()) {
        anyOver = true;
        latestReset =
            latestReset == null || status.retryAfterMs() == null
                ? null
                : Math.max(latestReset, status.retryAfterMs());
      }
    }
    Double retry = null;
    if (!allowed) {
      retry = anyOver ? latestReset : null;
      if (headerRetryMs != null && (retry == null || headerRetryMs < retry)) {
        retry = headerRetryMs;
      }
    }
    // The server says why when a breaker or a closed failure policy refused it; else a limit.
    ErrorCode reason =
        allowed
            ? null
            : circuitOpen || said == ErrorCode.STORE_UNAVAILABLE ? said : ErrorCode.OVER_LIMIT;
    return new Verdict(
        allowed,
        allowed ? Code.OK : Code.OVER_LIMIT,
        reason,
        retry,
        0.0,
        statuses,
        List.of(),
        List.of(),
        null);
  }

  private static DescriptorStatus status(RateLimitResponse.DescriptorStatus s, boolean breaker) {
    boolean over = s.getCode() == RateLimitResponse.Code.OVER_LIMIT;
    Double reset =
        s.hasDurationUntilReset()
            ? s.getDurationUntilReset().getSeconds() * 1000.0
                + s.getDurationUntilReset().getNanos() / 1e6
            : null;
    if (!s.hasCurrentLimit()) {
      // No rule matched (OK), an unlimited rule (OK), or an open breaker (OVER_LIMIT).
      boolean circuit = over && breaker;
      return new DescriptorStatus(
          over ? Code.OVER_LIMIT : Code.OK, null, null, null, null, reset,
          over ? reset : null, 0.0, over, false, false, circuit, null, null, null);
    }
    RateLimit limit = s.getCurrentLimit();
    long perUnit = Integer.toUnsignedLong(limit.getRequestsPerUnit());
    // A limit of 0 never admits: no retry time, as the HTTP answer has none.
    Double retry = over && perUnit > 0 ? reset : null;
    return new DescriptorStatus(
        over ? Code.OVER_LIMIT : Code.OK,
        limit.getName().isEmpty() ? null : limit.getName(),
        perUnit,
        Integer.toUnsignedLong(s.getLimitRemaining()),
        perUnit + "/" + unit(limit.getUnit()),
        reset,
        retry,
        0.0,
        over,
        false,
        false,
        false,
        null,
        null,
        null);
  }

  /** Envoy's unit as Flowgate writes a window ({@code 20/s}, {@code 100/7d}). */
  private static String unit(RateLimit.Unit unit) {
    switch (unit) {
      case SECOND:
        return "s";
      case MINUTE:
        return "m";
      case HOUR:
        return "h";
      case DAY:
        return "d";
      case WEEK:
        return "7d";
      case MONTH:
        return "30d";
      case YEAR:
        return "365d";
      default:
        return unit.name().toLowerCase(java.util.Locale.ROOT);
    }
  }
}
