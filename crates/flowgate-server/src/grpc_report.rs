//! `flowgate.v1.Reports/Report` on the gRPC port: the calls' outcomes, as `POST /v1/report`
//! takes them, for callers that speak gRPC. The schema (also in `docs/breakers.md`):
//!
//! ```proto
//! package flowgate.v1;
//! service Reports { rpc Report(ReportRequest) returns (ReportResponse); }
//! message Entry { string key = 1; string value = 2; }
//! message Descriptor { repeated Entry entries = 1; }
//! enum Outcome { OUTCOME_UNSPECIFIED = 0; OK = 1; ERROR = 2; }
//! message Report {
//!   string domain = 1; repeated Descriptor descriptors = 2; Outcome outcome = 3;
//!   double latency_ms = 4; optional uint64 probe = 5;
//! }
//! message ReportRequest { repeated Report reports = 1; }
//! message ReportResponse { uint64 counted = 1; uint64 no_breaker = 2; uint64 dropped = 3; }
//! ```
//!
//! The messages are declared with prost's derive and the service by hand (what tonic's code
//! generator writes), so the build needs no `protoc`. A bad report is `INVALID_ARGUMENT` naming
//! its field (`reports[2].latency_ms`); the batch is checked whole before any report counts.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use flowgate::Request;
use flowgate::breakers::Outcome as CallOutcome;
use tonic::codegen::BoxFuture;

use crate::limits;
use crate::reports::{self, MAX_REPORTS, Report as Checked};
use crate::state::AppState;

/// The service's name.
pub const SERVICE: &str = "flowgate.v1.Reports";
/// The method's path.
pub const REPORT_PATH: &str = "/flowgate.v1.Reports/Report";

/// A descriptor entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Entry {
    /// The key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// The value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// A descriptor.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Descriptor {
    /// Its entries, in order.
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Entry>,
}

/// A call's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Outcome {
    /// Not given: refused.
    Unspecified = 0,
    /// It succeeded.
    Ok = 1,
    /// It failed.
    Error = 2,
}

/// One call's report.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Report {
    /// The domain of the breakers.
    #[prost(string, tag = "1")]
    pub domain: String,
    /// The call's descriptors.
    #[prost(message, repeated, tag = "2")]
    pub descriptors: Vec<Descriptor>,
    /// Its outcome.
    #[prost(enumeration = "Outcome", tag = "3")]
    pub outcome: i32,
    /// Its latency in milliseconds.
    #[prost(double, tag = "4")]
    pub latency_ms: f64,
    /// The lease it was admitted with as a half-open breaker's probe.
    #[prost(uint64, optional, tag = "5")]
    pub probe: Option<u64>,
}

/// A batch of reports.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReportRequest {
    /// The reports (at most 1,000).
    #[prost(message, repeated, tag = "1")]
    pub reports: Vec<Report>,
}

/// What the batch reached.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReportResponse {
    /// Counted by a breaker or an adaptive limit.
    #[prost(uint64, tag = "1")]
    pub counted: u64,
    /// Matching none.
    #[prost(uint64, tag = "2")]
    pub no_breaker: u64,
    /// Dropped at a breaker's cap on instances.
    #[prost(uint64, tag = "3")]
    pub dropped: u64,
}

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

/// The `Report` method.
struct ReportMethod(Arc<AppState>);

impl tonic::server::UnaryService<ReportRequest> for ReportMethod {
    type Response = ReportResponse;
    type Future = BoxFuture<tonic::Response<ReportResponse>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<ReportRequest>) -> Self::Future {
        let state = Arc::clone(&self.0);
        Box::pin(async move { report(&state, request.into_inner()).map(tonic::Response::new) })
    }
}

/// The `flowgate.v1.Reports` service, beside Envoy's on the gRPC port.
#[derive(Clone)]
pub(crate) struct ReportsServer(Arc<AppState>);

impl ReportsServer {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self(state)
    }
}

impl tonic::server::NamedService for ReportsServer {
    const NAME: &'static str = SERVICE;
}

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for ReportsServer {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        if req.uri().path() != REPORT_PATH {
            return Box::pin(async {
                Ok(tonic::Status::unimplemented("no such method").into_http())
            });
        }
        let method = ReportMethod(Arc::clone(&self.0));
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<ReportResponse, ReportRequest>::default();
            let mut grpc = tonic::server::Grpc::new(codec)
                .apply_max_message_size_config(Some(limits::MAX_BODY_BYTES), None);
            Ok(grpc.unary(method, req).await)
        })
    }
}
