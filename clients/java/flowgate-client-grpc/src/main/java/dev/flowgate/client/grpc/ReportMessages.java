package dev.flowgate.client.grpc;

import dev.flowgate.client.ChargeKind;
import dev.flowgate.client.Descriptor;
import dev.flowgate.client.Outcome;
import dev.flowgate.client.Report;
import dev.flowgate.client.ReportAnswer;
import dev.flowgate.client.RuleCharge;
import flowgate.v1.ReportsOuterClass;
import flowgate.v1.ReportsOuterClass.ReportCharges;
import flowgate.v1.ReportsOuterClass.ReportRequest;
import flowgate.v1.ReportsOuterClass.ReportResponse;
import flowgate.v1.ReportsOuterClass.RuleCharged;
import java.util.ArrayList;
import java.util.List;

/** {@link Report}s as {@code flowgate.v1.ReportRequest}, and the answer as {@link ReportAnswer}. */
final class ReportMessages {
  private ReportMessages() {}

  static ReportRequest request(List<Report> reports) {
    ReportRequest.Builder out = ReportRequest.newBuilder();
    for (Report r : reports) {
      ReportsOuterClass.Report.Builder report =
          out.addReportsBuilder().setDomain(r.domain()).setRefund(r.refund());
      for (Descriptor d : r.descriptors()) {
        ReportsOuterClass.Descriptor.Builder desc = report.addDescriptorsBuilder();
        for (Descriptor.Entry e : d.entries()) {
          desc.addEntriesBuilder().setKey(e.key()).setValue(e.value());
        }
      }
      if (r.outcome() != null) {
        report.setOutcome(
            r.outcome() == Outcome.OK
                ? ReportsOuterClass.Outcome.OK
                : ReportsOuterClass.Outcome.ERROR);
      }
      if (r.latencyMs() != null) {
        report.setLatencyMs(r.latencyMs());
      }
      if (r.probe() != null) {
        report.setProbe(r.probe());
      }
      if (r.cost() != null) {
        report.setCost(r.cost());
      }
    }
    return out.build();
  }

  static ReportAnswer answer(ReportResponse response) {
    List<ReportAnswer.Charges> charges = new ArrayList<>();
    for (ReportCharges c : response.getChargesList()) {
      List<RuleCharge> rules = new ArrayList<>();
      for (RuleCharged r : c.getRulesList()) {
        rules.add(ruleCharge(r));
      }
      charges.add(new ReportAnswer.Charges(c.getReport(), rules));
    }
    return new ReportAnswer(
        response.getCounted(), response.getNoBreaker(), response.getDropped(), charges);
  }

  private static RuleCharge ruleCharge(RuleCharged r) {
    return new RuleCharge(
        emptyAsNull(r.getDomain()),
        r.getRule(),
        emptyAsNull(r.getKey()),
        // `descriptor` in proto/flowgate/v1/reports.proto, renamed for Java at build (pom.xml).
        r.hasDescriptorIndex() ? r.getDescriptorIndex() : null,
        r.getKind() == ReportsOuterClass.ChargeKind.REFUND ? ChargeKind.REFUND : ChargeKind.CHARGE,
        r.getReleased(),
        r.getApplied(),
        r.getDropped(),
        r.getDebt(),
        r.getOver(),
        r.getRemaining(),
        r.hasRetryAfterMs() ? r.getRetryAfterMs() : null);
  }

  /** An unset string (a server older than the one answer shape), as JSON's absent field. */
  private static String emptyAsNull(String s) {
    return s.isEmpty() ? null : s;
  }
}
