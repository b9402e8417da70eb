//! Reports of protected calls, whichever front end they came through (`POST /v1/report`,
//! `flowgate.v1.Reports/Report` over gRPC): a checked report, and recording a batch into the
//! limiter's breakers and adaptive limits and the metrics.

use std::time::Duration;

use flowgate::Descriptor;
use flowgate::breakers::Outcome;

use crate::state::AppState;

/// The most reports in one body or message.
pub(crate) const MAX_REPORTS: usize = 1_000;

/// The longest latency taken as real (a day): beyond, a unit error (microseconds sent as
/// milliseconds), refused.
pub(crate) const MAX_LATENCY_MS: f64 = 86_400_000.0;

/// A report, checked.
pub(crate) struct Report {
    pub(crate) domain: String,
    pub(crate) descriptors: Vec<Descriptor>,
    pub(crate) outcome: Outcome,
    pub(crate) latency: Duration,
    pub(crate) probe: Option<u64>,
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

/// Records `reports` into the limiter and counts them in the metrics.
pub(crate) fn record(state: &AppState, reports: &[Report]) -> Tally {
    let mut t = Tally::default();
    for r in reports {
        let got = state
            .limiter
            .report(&r.domain, &r.descriptors, r.outcome, r.latency, r.probe);
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
