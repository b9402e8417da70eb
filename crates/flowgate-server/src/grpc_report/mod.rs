//! `flowgate.v1.Reports/Report` on the gRPC port: the calls' outcomes, as `POST /v1/report`
//! takes them, for callers that speak gRPC.
//!
//! The service and its messages are `proto/flowgate/v1/reports.proto` (what clients in other
//! languages generate from); [`flowgate.v1.rs`](self) is the Rust tonic-prost-build generates
//! from it, checked in so that a build needs no `protoc` nor a protobuf compiler
//! (`tests/contract.rs` regenerates it with protox and fails on a difference). A bad report is
//! `INVALID_ARGUMENT` naming its field (`reports[2].latency_ms`); the batch is checked whole
//! before any report counts. A report's `cost` is charged (or, with `refund`, given back) to
//! every rule its descriptors match that takes charges, as `POST /v1/report` does; a batch
//! whose charges the store cannot take is `UNAVAILABLE`, nothing of it recorded.

use std::sync::Arc;

use flowgate::breakers::Outcome as CallOutcome;

use crate::charges;
use crate::limits;
use crate::reports::{self, MAX_REPORTS, Report as Checked};
use crate::rule_charge::{self, RuleCharge};
use crate::state::AppState;

/// The messages and the services of `flowgate.v1` (`Reports` and `Decisions`), as generated
/// from the protos.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub(crate) mod generated {
    include!("flowgate.v1.rs");
}

pub use self::generated::reports_client::ReportsClient;
pub use self::generated::{
    ChargeKind, Descriptor, Entry, Outcome, Report, ReportCharges, ReportRequest, ReportResponse,
    RuleCharged,
};

/// The service's name.
pub const SERVICE: &str = "flowgate.v1.Reports";
/// The method's path.
pub const REPORT_PATH: &str = "/flowgate.v1.Reports/Report";

fn invalid(at: usize, field: &str, message: impl std::fmt::Display) -> tonic::Status {
    tonic::Status::invalid_argument(format!("field `reports[{at}].{field}`: {message}"))
}

/// The call's outcome of report `i`, if it gives one (a report with a cost may leave it
/// out).
fn call_of(i: usize, r: &Report) -> Result<Option<reports::Call>, tonic::Status> {
    let outcome = match Outcome::try_from(r.outcome) {
        Ok(Outcome::Ok) => CallOutcome::Ok,
        Ok(Outcome::Error) => CallOutcome::Error,
        Ok(Outcome::Unspecified) if r.cost.is_some() && r.probe.is_none() => return Ok(None),
        _ => {
            return Err(invalid(
                i,
                "outcome",
                "expected OK or ERROR (or a cost, for a charge alone)",
            ));
        }
    };
    let latency = reports::latency(r.latency_ms).map_err(|e| invalid(i, "latency_ms", e))?;
    Ok(Some(reports::Call {
        outcome,
        latency,
        probe: r.probe,
    }))
}

/// Checks one report against the rules in force.
fn check(state: &AppState, i: usize, r: Report) -> Result<Checked, tonic::Status> {
    let call = call_of(i, &r)?;
    if let Some(c) = r.cost.filter(|&c| c > charges::MAX_COST) {
        return Err(invalid(
            i,
            "cost",
            format!(
                "{c} units is more than a limit can count (at most {}): is it in the rule's units?",
                charges::MAX_COST
            ),
        ));
    }
    if r.refund && r.cost.is_none() {
        return Err(invalid(i, "refund", "needs a cost: the units to give back"));
    }
    let descriptors = r
        .descriptors
        .into_iter()
        .map(|d| flowgate::Descriptor::new(d.entries.into_iter().map(|e| (e.key, e.value))))
        .collect();
    let request = charges::request(r.domain, descriptors, r.cost.unwrap_or(0));
    limits::validate(&request)
        .map_err(|e| tonic::Status::invalid_argument(format!("reports[{i}]: {e}")))?;
    let (request, targets) = match r.cost {
        Some(_) => reports::plan_cost(state, request, r.refund)
            .map_err(|e| invalid(i, "descriptors", format!("cannot take the cost: {e}")))?,
        None => (request, Vec::new()),
    };
    Ok(Checked {
        domain: request.domain,
        descriptors: request.descriptors,
        call,
        has_cost: r.cost.is_some(),
        charges: targets,
    })
}

/// The message of what a charge did under one rule: the HTTP answer's fields, one for one.
fn rule_charged(c: RuleCharge) -> RuleCharged {
    let kind = match c.kind {
        rule_charge::ChargeKind::Charge => ChargeKind::Charge,
        rule_charge::ChargeKind::Refund => ChargeKind::Refund,
    };
    RuleCharged {
        domain: c.domain,
        rule: c.rule,
        key: c.key,
        descriptor: c.descriptor.map(|d| u32::try_from(d).unwrap_or(u32::MAX)),
        kind: kind as i32,
        refund: kind == ChargeKind::Refund,
        released: c.released,
        applied: c.applied,
        dropped: c.dropped,
        debt: c.debt,
        over: c.over,
        remaining: c.remaining,
        retry_after_ms: c.retry_after_ms,
    }
}

/// Checks a batch whole, then records it.
async fn report(state: &AppState, req: ReportRequest) -> Result<ReportResponse, tonic::Status> {
    if req.reports.len() > MAX_REPORTS {
        return Err(tonic::Status::invalid_argument(format!(
            "field `reports`: {} reports: at most {MAX_REPORTS} in one message",
            req.reports.len()
        )));
    }
    let checked = req
        .reports
        .into_iter()
        .enumerate()
        .map(|(i, r)| check(state, i, r))
        .collect::<Result<Vec<_>, _>>()?;
    let with_cost: Vec<bool> = checked.iter().map(|r| r.has_cost).collect();
    let recorded = reports::record(state, checked).await.map_err(|e| {
        crate::store_errors::log("gRPC flowgate.v1.Reports/Report", &e);
        tonic::Status::unavailable(format!(
            "the store could not take the charges ({}): nothing was charged nor reported",
            charges::error_kind(&e)
        ))
    })?;
    let t = recorded.tally;
    Ok(ReportResponse {
        counted: t.counted,
        no_breaker: t.no_breaker,
        dropped: t.dropped,
        charges: recorded
            .charge_answers(&with_cost)
            .into_iter()
            .map(|(i, rules)| ReportCharges {
                report: u32::try_from(i).unwrap_or(u32::MAX),
                rules: rules.into_iter().map(rule_charged).collect(),
            })
            .collect(),
    })
}

/// The `flowgate.v1.Reports` service.
struct Reports(Arc<AppState>);

#[tonic::async_trait]
impl generated::reports_server::Reports for Reports {
    async fn report(
        &self,
        request: tonic::Request<ReportRequest>,
    ) -> Result<tonic::Response<ReportResponse>, tonic::Status> {
        crate::grpc::authorize(
            &self.0,
            crate::auth::Scope::Reporter,
            &request,
            "/flowgate.v1.Reports/Report",
        )?;
        report(&self.0, request.into_inner())
            .await
            .map(tonic::Response::new)
    }
}

/// The `flowgate.v1.Reports` service, beside Envoy's on the gRPC port: messages of at most
/// [`limits::MAX_BODY_BYTES`], as Envoy's.
pub(crate) fn server(
    state: Arc<AppState>,
) -> generated::reports_server::ReportsServer<impl generated::reports_server::Reports> {
    generated::reports_server::ReportsServer::new(Reports(state))
        .max_decoding_message_size(limits::MAX_BODY_BYTES)
}
