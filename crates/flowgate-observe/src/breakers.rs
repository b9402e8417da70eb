//! The circuit breakers as the server shows them: their metrics (transitions counted as they
//! happen, open instances read when the metrics are encoded, reports by result, requests
//! refused) and their part of `GET /v1/stats`; and the adaptive limits' reports not sent to
//! Redis.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use flowgate::breakers::{BreakerDef, BreakerEvent, BreakerView as Instance, Phase};

use super::view::BreakerView;

/// Labels of a breaker's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BreakerLabels {
    /// The breaker's domain.
    pub domain: String,
    /// The breaker's name.
    pub breaker: String,
}

/// Labels of `flowgate_breaker_transitions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// The breaker's domain.
    pub domain: String,
    /// The breaker's name.
    pub breaker: String,
    /// The phase entered: `open`, `half_open` or `closed`.
    pub to: &'static str,
}

/// Labels of `flowgate_breaker_reports_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReportLabels {
    /// `counted`, `no_breaker`, `dropped` or `unsent`.
    pub result: &'static str,
}

/// The breakers' metric families.
pub struct BreakerMetrics {
    transitions: Family<TransitionLabels, Counter>,
    open: Family<BreakerLabels, Gauge>,
    reports: Family<ReportLabels, Counter>,
    refused: Family<BreakerLabels, Counter>,
    shared: Gauge,
    /// The limiter's count of unsent reports at the last encoding (the counter follows it).
    unsent_seen: AtomicU64,
    adaptive_unsent: Counter,
    adaptive_unsent_seen: AtomicU64,
}

impl BreakerMetrics {
    /// The families, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            transitions: Family::default(),
            open: Family::default(),
            reports: Family::default(),
            refused: Family::default(),
            shared: Gauge::default(),
            unsent_seen: AtomicU64::new(0),
            adaptive_unsent: Counter::default(),
            adaptive_unsent_seen: AtomicU64::new(0),
        };
        // Every result exists from the start, at 0: a counter that first appears at 1 shows no
        // increase to `increase()`.
        for result in ["counted", "no_breaker", "dropped", "unsent"] {
            let _ = m.reports.get_or_create(&ReportLabels { result });
        }
        registry.register(
            "flowgate_breaker_transitions",
            "Circuit breaker instances' changes of phase, by the phase entered",
            m.transitions.clone(),
        );
        registry.register(
            "flowgate_breaker_open",
            "Circuit breaker instances open or half-open (not closed)",
            m.open.clone(),
        );
        registry.register(
            "flowgate_breaker_reports",
            "Reports of calls' outcomes: counted by a breaker, for no breaker (dropped), dropped at a breaker's cap on instances, or unsent (counted, but in a batch Redis could not take: they fed only this node's fallback)",
            m.reports.clone(),
        );
        registry.register(
            "flowgate_breakers_shared",
            "1 while the circuit breakers are the cluster's (on Redis, Redis answering); 0 per process, or while this node decides on its own reports because Redis is unreachable",
            m.shared.clone(),
        );
        registry.register(
            "flowgate_adaptive_reports_unsent",
            "Reports to adaptive concurrency limits this node could not send to Redis (too many waiting, Redis unreachable, or a flush that failed): they moved only this node's limits",
            m.adaptive_unsent.clone(),
        );
        registry.register(
            "flowgate_breaker_rejections",
            "Requests refused because a circuit breaker was open",
            m.refused.clone(),
        );
        m
    }

    /// Counts a transition.
    pub fn transition(&self, e: &BreakerEvent) {
        self.transitions
            .get_or_create(&TransitionLabels {
                domain: e.domain.clone(),
                breaker: e.breaker.clone(),
                to: e.to.name(),
            })
            .inc();
    }

    /// Counts `n` reports with `result`.
    pub fn reports(&self, result: &'static str, n: u64) {
        if n > 0 {
            self.reports
                .get_or_create(&ReportLabels { result })
                .inc_by(n);
        }
    }

    /// Counts a request refused by breaker `name` of `domain`.
    pub fn refused(&self, domain: &str, name: &str) {
        self.refused
            .get_or_create(&BreakerLabels {
                domain: domain.to_owned(),
                breaker: name.to_owned(),
            })
            .inc();
    }

    /// Brings `result="unsent"` up to the limiter's count
    /// ([`flowgate::breakers::Breakers::unsent`]).
    pub fn unsent(&self, total: u64) {
        let counter = self
            .reports
            .get_or_create(&ReportLabels { result: "unsent" });
        follow(&counter, &self.unsent_seen, total);
    }

    /// Brings `flowgate_adaptive_reports_unsent` up to the limiter's count
    /// ([`flowgate::adaptive::Adaptive::unsent`]).
    pub fn adaptive_unsent(&self, total: u64) {
        follow(&self.adaptive_unsent, &self.adaptive_unsent_seen, total);
    }

    /// Sets whether the breakers are shared now ([`flowgate::breakers::Breakers::shared`]).
    pub fn shared(&self, shared: Option<bool>) {
        self.shared.set(i64::from(shared == Some(true)));
    }

    /// Sets the open instances of every breaker in force (and drops the series of the others);
    /// gives each its transitions' series, at 0 until its first (a counter that first appears
    /// at 1 shows no increase to `increase()`, and the first opening would be missed).
    pub fn open_instances(&self, counts: &[(BreakerDef, usize)]) {
        self.open.clear();
        for (d, n) in counts {
            for to in Phase::ALL.map(Phase::name) {
                let _ = self.transitions.get_or_create(&TransitionLabels {
                    domain: d.domain.clone(),
                    breaker: d.name.clone(),
                    to,
                });
            }
            self.open
                .get_or_create(&BreakerLabels {
                    domain: d.domain.clone(),
                    breaker: d.name.clone(),
                })
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }
}

/// An instance as `GET /v1/stats` shows it, refusing `refused_rate` requests per second.
pub fn view(i: &Instance, refused_rate: f64) -> BreakerView {
    BreakerView {
        domain: i.domain.clone(),
        name: i.breaker.clone(),
        key: i.key.clone(),
        phase: i.phase.name().to_owned(),
        since_ms: i64::try_from(i.since / 1000).unwrap_or(i64::MAX),
        calls: i.calls,
        bad: i.bad,
        opened_calls: i.opened.map(|o| o.calls),
        opened_bad: i.opened.map(|o| o.bad),
        refused_rate,
        retry_after_ms: i.retry_after.map(|d| d.as_secs_f64() * 1000.0),
        probes_out: i.probes_out,
        shared: i.shared,
    }
}

/// Raises `counter` by what a cumulative `total` kept elsewhere gained since `seen`.
fn follow(counter: &Counter, seen: &AtomicU64, total: u64) {
    let before = seen.fetch_max(total, Ordering::Relaxed);
    if total > before {
        counter.inc_by(total - before);
    }
}
