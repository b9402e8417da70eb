package dev.flowgate.client.grpc;

import dev.flowgate.client.BadRequestException;
import dev.flowgate.client.BreakerRef;
import dev.flowgate.client.Code;
import dev.flowgate.client.Descriptor;
import dev.flowgate.client.DescriptorStatus;
import dev.flowgate.client.ErrorCode;
import dev.flowgate.client.FlowgateException;
import dev.flowgate.client.LeaseRef;
import dev.flowgate.client.ProbeRef;
import dev.flowgate.client.Request;
import dev.flowgate.client.Verdict;
import flowgate.v1.DecisionsOuterClass.CheckAnswer;
import flowgate.v1.DecisionsOuterClass.CheckError;
import flowgate.v1.DecisionsOuterClass.CheckRequest;
import flowgate.v1.DecisionsOuterClass.CheckVerdict;
import java.util.ArrayList;
import java.util.List;

/**
 * A {@link Request} as {@code flowgate.v1.CheckRequest}, and its {@code CheckAnswer} as the HTTP
 * client's {@link Verdict}, field for field (the server's message carries the HTTP answer's
 * fields), or the HTTP client's exception.
 */
final class DecisionMessages {
  private DecisionMessages() {}

  static CheckRequest request(long id, Request request) {
    CheckRequest.Builder out = CheckRequest.newBuilder().setId(id).setDomain(request.domain());
    if (request.cost() != null) {
      out.setCost(request.cost());
    }
    for (Descriptor d : request.descriptors()) {
      flowgate.v1.DecisionsOuterClass.CheckDescriptor.Builder desc = out.addDescriptorsBuilder();
      for (Descriptor.Entry e : d.entries()) {
        desc.addEntriesBuilder().setKey(e.key()).setValue(e.value());
      }
      if (d.hitsAddend() != null) {
        desc.setHitsAddend(d.hitsAddend());
      }
    }
    return out.build();
  }

  /**
   * The verdict of {@code answer}.
   *
   * @throws FlowgateException the HTTP client's exception of the request's error: a {@link
   *     BadRequestException} naming the field at fault
   */
  static Verdict verdict(CheckAnswer answer) {
    if (answer.hasError()) {
      throw error(answer.getError());
    }
    CheckVerdict v = answer.getVerdict();
    List<DescriptorStatus> statuses = new ArrayList<>(v.getStatusesCount());
    for (flowgate.v1.DecisionsOuterClass.DescriptorStatus s : v.getStatusesList()) {
      statuses.add(status(s));
    }
    List<LeaseRef> leases = new ArrayList<>(v.getLeasesCount());
    for (flowgate.v1.DecisionsOuterClass.Lease l : v.getLeasesList()) {
      leases.add(new LeaseRef(l.getDescriptorIndex(), l.getLease()));
    }
    List<ProbeRef> probes = new ArrayList<>(v.getProbesCount());
    for (flowgate.v1.DecisionsOuterClass.Probe p : v.getProbesList()) {
      probes.add(new ProbeRef(p.getDescriptorIndex(), p.getBreaker(), p.getProbe()));
    }
    BreakerRef breaker =
        v.hasBreaker()
            ? new BreakerRef(
                v.getBreaker().getDomain(), v.getBreaker().getName(), v.getBreaker().getKey())
            : null;
    return new Verdict(
        v.getAllowed(),
        code(v.getCode()),
        reason(v.getReason()),
        v.hasRetryAfterMs() ? v.getRetryAfterMs() : null,
        v.getWaitMs(),
        statuses,
        leases,
        probes,
        breaker);
  }

  private static DescriptorStatus status(flowgate.v1.DecisionsOuterClass.DescriptorStatus s) {
    return new DescriptorStatus(
        code(s.getCode()),
        s.hasRule() ? s.getRule() : null,
        s.hasLimit() ? s.getLimit() : null,
        s.hasRemaining() ? s.getRemaining() : null,
        s.hasQuota() ? s.getQuota() : null,
        s.hasResetAfterMs() ? s.getResetAfterMs() : null,
        s.hasRetryAfterMs() ? s.getRetryAfterMs() : null,
        s.getWaitMs(),
        s.getOverLimit(),
        s.getShadow(),
        s.getQuotaMode(),
        s.getCircuitOpen(),
        s.hasBreaker() ? s.getBreaker() : null,
        s.hasLease() ? s.getLease() : null,
        s.hasError() ? s.getError() : null);
  }

  private static Code code(flowgate.v1.DecisionsOuterClass.Code code) {
    return code == flowgate.v1.DecisionsOuterClass.Code.CODE_OVER_LIMIT ? Code.OVER_LIMIT : Code.OK;
  }

  private static ErrorCode reason(flowgate.v1.DecisionsOuterClass.Reason reason) {
    switch (reason) {
      case REASON_OVER_LIMIT:
        return ErrorCode.OVER_LIMIT;
      case REASON_CIRCUIT_OPEN:
        return ErrorCode.CIRCUIT_OPEN;
      case REASON_STORE_UNAVAILABLE:
        return ErrorCode.STORE_UNAVAILABLE;
      default:
        return null;
    }
  }

  /** The exception of a request the server could not decide, as the HTTP client throws it. */
  private static FlowgateException error(CheckError e) {
    ErrorCode code = ErrorCode.of(e.getError());
    String detail =
        e.getField().isEmpty() ? e.getDetail() : "field `" + e.getField() + "`: " + e.getDetail();
    if (code == ErrorCode.BAD_REQUEST) {
      return new BadRequestException(code, detail);
    }
    return new FlowgateException(500, code, detail, null, null);
  }
}
