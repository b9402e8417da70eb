//! The charges of `POST /v1/report` as its answer shows them: per report with a `cost`, per
//! rule it went to, what was applied and dropped, the debt left, and whether the key is now
//! over its limit.

use axum::http::StatusCode;
use flowgate::algorithm::Amount;
use serde::Serialize;
use utoipa::ToSchema;

use super::ApiError;
use super::error::ErrorCode;
use crate::charges::{RuleCharge, error_kind};

/// `charge` or `refund`.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum ChargeKind {
    /// Units counted, even past the limit, up to `max_debt` beyond it.
    Charge,
    /// Units given back, floored at empty.
    Refund,
}

/// One rule's part of a report's charge.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RuleCharged {
    /// The rule.
    rule: String,
    /// Index of the descriptor that matched it.
    descriptor: usize,
    /// A charge or a refund.
    kind: ChargeKind,
    /// Units counted (a charge) or given back (a refund).
    applied: u64,
    /// Units not applied: a charge's past `max_debt`, a refund's past empty.
    dropped: u64,
    /// Units counted beyond the limit now (paid back by time).
    debt: u64,
    /// Whether the key is over its limit now (in debt): a check of it is refused until
    /// `retry_after_ms`.
    over: bool,
    /// Units a check may still take now.
    remaining: u64,
    /// When over: milliseconds until a check of it is admitted again.
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<u64>,
}

/// One report's charges.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ReportCharges {
    /// Index of the report in the batch (0 for a body of one report).
    report: usize,
    /// Each rule the cost went to (none when every rule it matched is unlimited now).
    rules: Vec<RuleCharged>,
}

fn rule_charged(c: RuleCharge) -> RuleCharged {
    let d = &c.charged.decision;
    RuleCharged {
        rule: c.rule.name.clone(),
        descriptor: c.descriptor,
        kind: match c.amount {
            Amount::Charge(_) => ChargeKind::Charge,
            Amount::Refund(_) | Amount::Release { .. } => ChargeKind::Refund,
        },
        applied: c.charged.applied,
        dropped: c.charged.dropped,
        debt: c.charged.debt,
        over: !d.allowed,
        remaining: d.remaining,
        retry_after_ms: (!d.allowed)
            .then(|| d.retry_after.map(|r| r.as_millis() as u64))
            .flatten(),
    }
}

/// The answer's charges: one entry per report with a cost (`with_cost`), in order.
pub(super) fn answers(charges: Vec<Vec<RuleCharge>>, with_cost: &[bool]) -> Vec<ReportCharges> {
    charges
        .into_iter()
        .enumerate()
        .filter(|(i, _)| with_cost.get(*i).copied().unwrap_or(false))
        .map(|(report, rules)| ReportCharges {
            report,
            rules: rules.into_iter().map(rule_charged).collect(),
        })
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
