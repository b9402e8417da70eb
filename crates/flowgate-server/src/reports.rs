//! Reports of protected calls, whichever front end they came through (`POST /v1/report`,
//! `flowgate.v1.Reports/Report` over gRPC): a checked report (a call's outcome, a cost, or
//! both), and recording a batch: its charges in one store call first, then its outcomes into
//! the limiter's breakers and adaptive limits, and the metrics.

use std::time::Duration;

use flowgate::breakers::Outcome;
use flowgate::store::StoreError;
use flowgate::{ChargeTarget, Descriptor, Request};

use crate::charges::{self, Applied};
use crate::rule_charge::RuleCharge;
use crate::state::AppState;

/// The most reports in one body or message.
pub(crate) const MAX_REPORTS: usize = 1_000;

/// The longest latency taken as real (a day): beyond, a unit error (microseconds sent as
/// milliseconds), refused.
pub(crate) const MAX_LATENCY_MS: f64 = 86_400_000.0;

/// A call's outcome, for the breakers and adaptive limits.
pub(crate) struct Call {
    pub(crate) outcome: Outcome,
    pub(crate) latency: Duration,
    pub(crate) probe: Option<u64>,
}

/// A report, checked: a call's outcome, its charges (planned against the rules), or both.
pub(crate) struct Report {
    pub(crate) domain: String,
    pub(crate) descriptors: Vec<Descriptor>,
    pub(crate) call: Option<Call>,
    /// Whether it gives a cost (its charges may be none: every rule it matched is unlimited
    /// now).
    pub(crate) has_cost: bool,
    pub(crate) charges: Vec<ChargeTarget>,
}

/// What a report's cost goes to, checked against the rules in force: a message naming what is
/// wrong otherwise.
pub(crate) fn plan_cost(
    state: &AppState,
    request: Request,
    refund: bool,
) -> Result<(Request, Vec<ChargeTarget>), String> {
    let targets = charges::plan(state, &request, refund, |_| true).map_err(|e| format!("{e}"))?;
    Ok((request, targets))
}

/// A latency in milliseconds, checked: from 0 to [`MAX_LATENCY_MS`].
pub(crate) fn latency(ms: f64) -> Result<Duration, String> {
    if (0.0..=MAX_LATENCY_MS).contains(&ms) {
        Ok(Duration::from_secs_f64(ms / 1000.0))
    } else {
        Err(format!(
            "{ms} is not a latency: milliseconds from 0 to {MAX_LATENCY_MS} (a day)"
        ))
    }
}

/// What a batch reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Counted by a breaker or an adaptive limit.
    pub(crate) counted: u64,
    /// Matching none.
    pub(crate) no_breaker: u64,
    /// Dropped at a breaker's cap on instances.
    pub(crate) dropped: u64,
}

/// What recording a batch did: its outcomes' tally, and each report's charges (empty for a
/// report without a cost).
pub(crate) struct Recorded {
    pub(crate) tally: Tally,
    pub(crate) charges: Vec<Vec<Applied>>,
}

impl Recorded {
    /// What each report with a cost (`with_cost`, by index) did per rule, in order: its index
    /// and its rules' answers.
    pub(crate) fn charge_answers(&self, with_cost: &[bool]) -> Vec<(usize, Vec<RuleCharge>)> {
        self.charges
            .iter()
            .enumerate()
            .filter(|(i, _)| with_cost.get(*i).copied().unwrap_or(false))
            .map(|(i, rules)| (i, rules.iter().map(Applied::answer).collect()))
            .collect()
    }
}

/// Records `reports`: their charges first, in one store call, then their outcomes into the
/// limiter; counts them in the metrics.
///
/// # Errors
/// The store's error when the charges could not be applied: nothing was recorded then.
pub(crate) async fn record(state: &AppState, reports: Vec<Report>) -> Result<Recorded, StoreError> {
    let mut plans = Vec::with_capacity(reports.len());
    let mut calls = Vec::with_capacity(reports.len());
    for r in reports {
        plans.push(r.charges);
        calls.push((r.domain, r.descriptors, r.call));
    }
    let charges = if plans.iter().all(Vec::is_empty) {
        plans.into_iter().map(|_| Vec::new()).collect()
    } else {
        charges::apply(state, plans).await?
    };
    let tally = record_calls(state, &calls);
    Ok(Recorded { tally, charges })
}

/// Records the calls' outcomes into the limiter and counts them in the metrics.
fn record_calls(state: &AppState, calls: &[(String, Vec<Descriptor>, Option<Call>)]) -> Tally {
    let mut t = Tally::default();
    for (domain, descriptors, call) in calls {
        let Some(c) = call else { continue };
        let got = state
            .limiter
            .report(domain, descriptors, c.outcome, c.latency, c.probe);
        if got.counted > 0 || got.adaptive > 0 {
            t.counted += 1;
        } else if got.dropped > 0 {
            t.dropped += 1;
        } else {
            t.no_breaker += 1;
        }
    }
    let m = &state.metrics.breakers;
    m.reports("counted", t.counted);
    m.reports("no_breaker", t.no_breaker);
    m.reports("dropped", t.dropped);
    t
}
