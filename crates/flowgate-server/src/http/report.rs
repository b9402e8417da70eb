//! `POST /v1/report`: callers report each protected call's outcome and latency to the circuit
//! breakers its descriptors match, and to the adaptive limits of the `concurrency` rules they
//! match (counted as `counted`).
//!
//! ```json
//! {"domain": "payments", "descriptors": ["channel=WPG"], "outcome": "error", "latency_ms": 812.5}
//! {"reports": [{"domain": ..., "descriptors": [...], "outcome": "ok", "latency_ms": 40, "probe": 4294967297}]}
//! ```
//!
//! `probe` is the lease a half-open breaker admitted the call with (`/v1/check`'s `probes`): a
//! half-open breaker counts only its probes' reports. A batch holds at most [`MAX_REPORTS`]
//! reports, within the body bound of every route (64 KiB); it is checked whole before any report
//! is counted. A report that matches no breaker nor adaptive limit is counted
//! (`flowgate_breaker_reports_total{result="no_breaker"}`) and dropped. Answers 200 with how
//! many reports breakers counted, how many matched none, how many were dropped at a breaker's
//! cap on instances.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use flowgate::breakers::Outcome;
use flowgate::{Descriptor, Request};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiError;
use super::body::DescriptorField;
use super::doc::BodyErrors;
use super::doc::CredentialErrors;
use super::extract::{Caller, JsonBody, Reporter, RequestBody};
use crate::limits;
use crate::reports::{self, MAX_REPORTS, Report};
use crate::state::AppState;

/// A call's outcome, as a report names it.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(
    dead_code,
    reason = "only its schema is used: the field is read as text, so that its error says what it expects"
)]
enum OutcomeName {
    /// The call succeeded.
    Ok,
    /// The call failed.
    Error,
}

/// One report: every field is required (each missing one is named).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReportBody {
    /// The domain of the breakers.
    domain: Option<String>,
    /// The call's descriptors.
    descriptors: Option<Vec<DescriptorField>>,
    /// `ok` or `error`.
    #[schema(value_type = Option<OutcomeName>)]
    outcome: Option<String>,
    /// The call's latency, in milliseconds, from 0 to a day.
    #[schema(minimum = 0, maximum = 86_400_000)]
    latency_ms: Option<f64>,
    /// The lease a half-open breaker admitted the call with (`/v1/check`'s `probes`).
    probe: Option<u64>,
}

/// One report (its fields at the top) or a batch (`reports`, up to 1,000), not both.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Body {
    /// The domain of the breakers.
    domain: Option<String>,
    /// The call's descriptors.
    descriptors: Option<Vec<DescriptorField>>,
    /// `ok` or `error`.
    #[schema(value_type = Option<OutcomeName>)]
    outcome: Option<String>,
    /// The call's latency, in milliseconds, from 0 to a day.
    #[schema(minimum = 0, maximum = 86_400_000)]
    latency_ms: Option<f64>,
    /// The lease a half-open breaker admitted the call with (`/v1/check`'s `probes`).
    probe: Option<u64>,
    /// A batch of reports (at most 1,000), checked whole before any counts.
    #[schema(max_items = 1000)]
    reports: Option<Vec<ReportBody>>,
}

impl RequestBody for Body {}

/// What a body's reports reached.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Tallied {
    /// Reports counted by a breaker or an adaptive limit.
    counted: u64,
    /// Reports that matched neither (dropped).
    no_breaker: u64,
    /// Reports dropped at a breaker's cap on instances.
    dropped: u64,
}

fn field(at: &str, name: &str, message: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("field `{at}{name}`: {message}"))
}

/// Checks one report; `at` prefixes its fields' names (`reports[3].`).
fn check(b: ReportBody, at: &str) -> Result<Report, ApiError> {
    let domain = b
        .domain
        .ok_or_else(|| field(at, "domain", "missing: the domain of the breakers"))?;
    let descriptors: Vec<Descriptor> = b
        .descriptors
        .ok_or_else(|| field(at, "descriptors", "missing: the call's descriptors"))?
        .into_iter()
        .map(|d| d.0)
        .collect();
    let outcome = match b.outcome.as_deref() {
        Some("ok") => Outcome::Ok,
        Some("error") => Outcome::Error,
        Some(other) => {
            return Err(field(
                at,
                "outcome",
                format!("unknown outcome `{other}`: expected \"ok\" or \"error\""),
            ));
        }
        None => return Err(field(at, "outcome", "missing: \"ok\" or \"error\"")),
    };
    let latency_ms = b.latency_ms.ok_or_else(|| {
        field(
            at,
            "latency_ms",
            "missing: the call's latency in milliseconds",
        )
    })?;
    let latency = reports::latency(latency_ms).map_err(|e| field(at, "latency_ms", e))?;
    let request = Request::new(domain, descriptors);
    limits::validate(&request).map_err(|e| ApiError::bad_request(format!("{at}{e}")))?;
    Ok(Report {
        domain: request.domain,
        descriptors: request.descriptors,
        outcome,
        latency,
        probe: b.probe,
    })
}

/// The reports of a body, checked whole.
fn reports_of(b: Body) -> Result<Vec<Report>, ApiError> {
    let one = ReportBody {
        domain: b.domain,
        descriptors: b.descriptors,
        outcome: b.outcome,
        latency_ms: b.latency_ms,
        probe: b.probe,
    };
    let single = one.domain.is_some()
        || one.descriptors.is_some()
        || one.outcome.is_some()
        || one.latency_ms.is_some()
        || one.probe.is_some();
    match b.reports {
        Some(_) if single => Err(ApiError::bad_request(
            "field `reports`: a body is one report or a batch (`reports`), not both",
        )),
        Some(list) if list.len() > MAX_REPORTS => Err(field(
            "",
            "reports",
            format!("{} reports: at most {MAX_REPORTS} in one body", list.len()),
        )),
        Some(list) => list
            .into_iter()
            .enumerate()
            .map(|(i, r)| check(r, &format!("reports[{i}].")))
            .collect(),
        None => Ok(vec![check(one, "")?]),
    }
}

/// Report protected calls' outcomes to the circuit breakers and adaptive limits they match.
#[utoipa::path(post, path = "/v1/report", tag = "breakers", security(("reporter" = [])), request_body = Body, responses(CredentialErrors,
    (status = 200, description = "Counted.", body = Tallied),
    BodyErrors,
))]
pub(super) async fn report(
    State(state): State<Arc<AppState>>,
    _: Caller<Reporter>,
    JsonBody(body): JsonBody<Body>,
) -> Result<Json<Tallied>, ApiError> {
    let reports = reports_of(body)?;
    let t = reports::record(&state, &reports);
    Ok(Json(Tallied {
        counted: t.counted,
        no_breaker: t.no_breaker,
        dropped: t.dropped,
    }))
}
