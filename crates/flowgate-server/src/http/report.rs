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
use flowgate::Descriptor;
use flowgate::breakers::Outcome;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiError;
use super::body::DescriptorField;
use super::doc::BodyErrors;
use super::doc::CredentialErrors;
use super::error::ErrorBody;
use super::extract::{Caller, JsonBody, Reporter, RequestBody};
use crate::charges;
use crate::limits;
use crate::reports::{self, Call, MAX_REPORTS, Report};
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

/// One report: a call's outcome (`outcome`, `latency_ms`, `probe`), a `cost`, or both.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReportBody {
    /// The domain of the breakers.
    domain: Option<String>,
    /// The call's descriptors.
    descriptors: Option<Vec<DescriptorField>>,
    /// `ok` or `error` (with `latency_ms`); may be left out when the report has a `cost`.
    #[schema(value_type = Option<OutcomeName>)]
    outcome: Option<String>,
    /// The call's latency, in milliseconds, from 0 to a day.
    #[schema(minimum = 0, maximum = 86_400_000)]
    latency_ms: Option<f64>,
    /// The lease a half-open breaker admitted the call with (`/v1/check`'s `probes`).
    probe: Option<u64>,
    /// Units to charge to every rule the descriptors match that takes charges (an LLM
    /// answer's tokens): counted even past the limit, up to the rule's `max_debt`. A whole
    /// number from 0 to 4,294,967,295; with or without an `outcome`.
    #[schema(value_type = Option<u64>, minimum = 0, maximum = 4_294_967_295_u64)]
    cost: Option<serde_json::Number>,
    /// With `cost`: give the units back instead (Envoy's `is_negative_hits`), floored at empty.
    refund: Option<bool>,
}

// `ReportBody`'s fields are repeated here rather than flattened: serde cannot refuse unknown
// fields through `#[serde(flatten)]`, and a misspelt field must be an error naming it.
/// One report (its fields at the top) or a batch (`reports`, up to 1,000), not both.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Body {
    /// The domain of the breakers.
    domain: Option<String>,
    /// The call's descriptors.
    descriptors: Option<Vec<DescriptorField>>,
    /// `ok` or `error` (with `latency_ms`); may be left out when the report has a `cost`.
    #[schema(value_type = Option<OutcomeName>)]
    outcome: Option<String>,
    /// The call's latency, in milliseconds, from 0 to a day.
    #[schema(minimum = 0, maximum = 86_400_000)]
    latency_ms: Option<f64>,
    /// The lease a half-open breaker admitted the call with (`/v1/check`'s `probes`).
    probe: Option<u64>,
    /// Units to charge to every rule the descriptors match that takes charges (an LLM
    /// answer's tokens): counted even past the limit, up to the rule's `max_debt`. A whole
    /// number from 0 to 4,294,967,295; with or without an `outcome`.
    #[schema(value_type = Option<u64>, minimum = 0, maximum = 4_294_967_295_u64)]
    cost: Option<serde_json::Number>,
    /// With `cost`: give the units back instead (Envoy's `is_negative_hits`), floored at empty.
    refund: Option<bool>,
    /// A batch of reports (at most 1,000), checked whole before any counts.
    #[schema(max_items = 1000)]
    reports: Option<Vec<ReportBody>>,
}

impl RequestBody for Body {}

/// What a body's reports reached.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Tallied {
    /// Reports with an outcome counted by a breaker or an adaptive limit.
    counted: u64,
    /// Reports with an outcome that matched neither (dropped).
    no_breaker: u64,
    /// Reports dropped at a breaker's cap on instances.
    dropped: u64,
    /// The charges of the reports with a `cost`, in the order of the reports (absent when
    /// none has one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    charges: Vec<super::charged::ReportCharges>,
}

fn field(at: &str, name: &str, message: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("field `{at}{name}`: {message}"))
}

/// The call's outcome of a report, if it gives one: `outcome` with `latency_ms`.
fn call_of(b: &ReportBody, at: &str) -> Result<Option<Call>, ApiError> {
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
        None if b.cost.is_some() && b.latency_ms.is_none() && b.probe.is_none() => {
            return Ok(None);
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
    Ok(Some(Call {
        outcome,
        latency,
        probe: b.probe,
    }))
}

/// Checks one report against the rules in force; `at` prefixes its fields' names
/// (`reports[3].`).
fn check(state: &AppState, b: ReportBody, at: &str) -> Result<Report, ApiError> {
    if b.refund.is_some() && b.cost.is_none() {
        return Err(field(
            at,
            "refund",
            "needs a `cost`: the units to give back",
        ));
    }
    let call = call_of(&b, at)?;
    let domain = b.domain.ok_or_else(|| {
        field(
            at,
            "domain",
            "missing: the domain of the rules and breakers",
        )
    })?;
    let descriptors: Vec<Descriptor> = b
        .descriptors
        .ok_or_else(|| field(at, "descriptors", "missing: the call's descriptors"))?
        .into_iter()
        .map(|d| d.0)
        .collect();
    let units = b
        .cost
        .as_ref()
        .map(charges::cost_units)
        .transpose()
        .map_err(|e| field(at, "cost", e))?;
    if b.refund.is_some() && units.is_none() {
        return Err(field(
            at,
            "refund",
            "needs a `cost`: the units to give back",
        ));
    }
    let request = charges::request(domain, descriptors, units.unwrap_or(0));
    limits::validate(&request).map_err(|e| ApiError::bad_request(format!("{at}{e}")))?;
    let (request, charges) = match units {
        Some(_) => reports::plan_cost(state, request, b.refund == Some(true))
            .map_err(|e| field(at, "descriptors", format!("cannot take the cost: {e}")))?,
        None => (request, Vec::new()),
    };
    Ok(Report {
        domain: request.domain,
        descriptors: request.descriptors,
        call,
        has_cost: units.is_some(),
        charges,
    })
}

/// The reports of a body, checked whole.
fn reports_of(state: &AppState, b: Body) -> Result<Vec<Report>, ApiError> {
    let one = ReportBody {
        domain: b.domain,
        descriptors: b.descriptors,
        outcome: b.outcome,
        latency_ms: b.latency_ms,
        probe: b.probe,
        cost: b.cost,
        refund: b.refund,
    };
    let single = one.domain.is_some()
        || one.descriptors.is_some()
        || one.outcome.is_some()
        || one.latency_ms.is_some()
        || one.probe.is_some()
        || one.cost.is_some()
        || one.refund.is_some();
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
            .map(|(i, r)| check(state, r, &format!("reports[{i}].")))
            .collect(),
        None => Ok(vec![check(state, one, "")?]),
    }
}

/// Report protected calls' outcomes to the circuit breakers and adaptive limits they match,
/// and their costs to the rules they match (charges, counted even past the limit up to each
/// rule's `max_debt`, or refunds).
#[utoipa::path(post, path = "/v1/report", tag = "breakers", security(("reporter" = [])), request_body = Body, responses(CredentialErrors,
    (status = 200, description = "Counted and charged.", body = Tallied),
    BodyErrors,
    (status = 503, description = "The store could not take the charges: nothing was recorded (`store_unavailable`, the error's kind in `detail`).", body = ErrorBody),
))]
pub(super) async fn report(
    State(state): State<Arc<AppState>>,
    _: Caller<Reporter>,
    JsonBody(body): JsonBody<Body>,
) -> Result<Json<Tallied>, ApiError> {
    let reports = reports_of(&state, body)?;
    let with_cost: Vec<bool> = reports.iter().map(|r| r.has_cost).collect();
    let recorded = reports::record(&state, reports)
        .await
        .map_err(|e| super::charged::unavailable(&e))?;
    let t = recorded.tally;
    Ok(Json(Tallied {
        counted: t.counted,
        no_breaker: t.no_breaker,
        dropped: t.dropped,
        charges: super::charged::answers(&recorded, &with_cost),
    }))
}
