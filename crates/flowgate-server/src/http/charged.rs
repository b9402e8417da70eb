//! The charges of `POST /v1/report` as its answer shows them: per report with a `cost`, what
//! the charge did under each rule it went to ([`RuleCharge`], as a commit's answer tells it).

use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::ApiError;
use super::error::ErrorCode;
use crate::charges::error_kind;
use crate::reports::Recorded;
use crate::rule_charge::RuleCharge;

/// One report's charges.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ReportCharges {
    /// Index of the report in the batch (0 for a body of one report).
    report: usize,
    /// Each rule the cost went to (none when every rule it matched is unlimited now).
    rules: Vec<RuleCharge>,
}

/// The answer's charges: one entry per report with a cost (`with_cost`), in order.
pub(super) fn answers(recorded: &Recorded, with_cost: &[bool]) -> Vec<ReportCharges> {
    recorded
        .charge_answers(with_cost)
        .into_iter()
        .map(|(report, rules)| ReportCharges { report, rules })
        .collect()
}

/// The 503 of charges the store could not take: nothing was recorded; the error's kind is
/// told, its own text logged.
pub(super) fn unavailable(e: &flowgate::store::StoreError) -> ApiError {
    crate::store_errors::log("POST /v1/report", e);
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::StoreUnavailable,
        format!(
            "the store could not take the charges ({}): nothing was charged nor reported; try again after Retry-After",
            error_kind(e)
        ),
    )
}
