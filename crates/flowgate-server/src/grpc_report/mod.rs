//! `flowgate.v1.Reports/Report` on the gRPC port: the calls' outcomes, as `POST /v1/report`
//! takes them, for callers that speak gRPC.
//!
//! The service and its messages are `proto/flowgate/v1/reports.proto` (what clients in other
//! languages generate from); [`flowgate.v1.rs`](self) is the Rust tonic-prost-build generates
//! from it, checked in so that a build needs no `protoc` nor a protobuf compiler
//! (`tests/contract.rs` regenerates it with protox and fails on a difference). A bad report is
//! `INVALID_ARGUMENT` naming its field (`reports[2].latency_ms`); the batch is checked whole
//! before any report counts.

use std::sync::Arc;

use flowgate::Request;
use flowgate::breakers::Outcome as CallOutcome;

use crate::limits;
use crate::reports::{self, MAX_REPORTS, Report as Checked};
use crate::state::AppState;

/// The messages and the service of `flowgate.v1`, as generated from the protos.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
mod generated {
    include!("flowgate.v1.rs");
}

pub use self::generated::reports_client::ReportsClient;
pub use self::generated::{Descriptor, Entry, Outcome, Report, ReportRequest, ReportResponse};

/// The service's name.
pub const SERVICE: &str = "flowgate.v1.Reports";
/// The method's path.
pub const REPORT_PATH: &str = "/flowgate.v1.Reports/Report";

fn invalid(at: usize, field: &str, message: impl std::fmt::Display) -> tonic::Status {
    tonic::Status::invalid_argument(format!("field `reports[{at}].{field}`: {message}"))
}

/// Checks one report.
fn check(i: usize, r: Report) -> Result<Checked, tonic::Status> {
    let outcome = match Outcome::try_from(r.outcome) {
        Ok(Outcome::Ok) => CallOutcome::Ok,
        Ok(Outcome::Error) => CallOutcome::Error,
        _ => {
            return Err(invalid(i, "outcome", "expected OK or ERROR"));
        }
    };
    let latency = reports::latency(r.latency_ms).map_err(|e| invalid(i, "latency_ms", e))?;
    let descriptors = r
        .descriptors
        .into_iter()
        .map(|d| flowgate::Descriptor::new(d.entries.into_iter().map(|e| (e.key, e.value))))
        .collect();
    let request = Request::new(r.domain, descriptors);
    limits::validate(&request)
        .map_err(|e| tonic::Status::invalid_argument(format!("reports[{i}]: {e}")))?;
    Ok(Checked {
        domain: request.domain,
        descriptors: request.descriptors,
        outcome,
        latency,
        probe: r.probe,
    })
}

/// Checks a batch whole, then records it.
fn report(state: &AppState, req: ReportRequest) -> Result<ReportResponse, tonic::Status> {
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
        .map(|(i, r)| check(i, r))
        .collect::<Result<Vec<_>, _>>()?;
    let t = reports::record(state, &checked);
    Ok(ReportResponse {
        counted: t.counted,
        no_breaker: t.no_breaker,
        dropped: t.dropped,
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
        report(&self.0, request.into_inner()).map(tonic::Response::new)
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
