//! Recording a decision: the metric series it touches (resolved once, so the hot path neither
//! builds label sets nor takes the families' locks), the bounded `descriptor` labels, and the
//! rate-limited rejection log. A request refused by an open circuit breaker is counted under the
//! breaker, its instance, and each rule its descriptors match (the rules that would have decided
//! it), apart from those rules' own rejections.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use flowgate::algorithm::DirectBucket;
use flowgate::breakers::BreakerStatus;
use flowgate::decision::Status;
use flowgate::store::StoreError;
use flowgate::{Algorithm, Descriptor, Limit, Quota, Rule, RuleSet};
use flowgate::{Request, Verdict};
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use super::metrics::{
    ApiLabels, DecisionLabels, KindLabels, MAX_DESCRIPTOR_LABELS, Metrics, RequestLabels,
    RuleLabels, descriptor_label,
};
use super::stats::{Outcome, RuleCell, Stats};

/// Which front end a request came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// Envoy's rate-limit service over gRPC.
    Grpc,
    /// The HTTP/JSON API.
    Http,
}

impl Api {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Api::Grpc => "grpc",
            Api::Http => "http",
        }
    }

    fn index(self) -> usize {
        match self {
            Api::Grpc => 0,
            Api::Http => 1,
        }
    }
}

/// `flowgate_requests_total`'s `code` labels, by index.
const CODES: [&str; 3] = ["ok", "over_limit", "invalid"];
/// `flowgate_decisions_total`'s `outcome` labels of a rule, by index.
const OUTCOMES: [&str; 4] = ["ok", "over_limit", "shadow_over_limit", "failure_policy"];
/// A refusal by a rule's `closed` failure policy (the store failed: no limit was asked).
const FAILURE_POLICY: usize = 3;
const UNLIMITED: usize = 4;
/// At most this many rules' counters are cached (beyond, the labelled lookup is used).
const MAX_CACHED_RULES: usize = 65_536;

/// The metric series touched by every request, resolved once: the hot path neither builds label
/// sets (no allocation, no hashing of strings) nor takes the families' locks.
#[derive(Default)]
struct Hot {
    /// `flowgate_requests_total` by API and code.
    requests: [[OnceLock<Counter>; 3]; 2],
    /// `flowgate_decision_duration_seconds` by API.
    latency: [OnceLock<Histogram>; 2],
    /// Each rule's series and figures, by the rule's address (cleared when the rules change;
    /// addresses are not a client's to choose, so a fast hash suffices).
    rules: RwLock<HashMap<usize, RuleCounters, foldhash::fast::RandomState>>,
}

/// One rule's `flowgate_decisions_total` series, by outcome (`OUTCOMES`, then `unlimited`), and
/// its figures for the dashboard.
struct RuleCounters {
    /// Keeps the rule alive, so that its address (the key) is not reused while cached.
    _rule: Arc<Rule>,
    outcomes: [OnceLock<Counter>; 5],
    cell: Arc<RuleCell>,
}

/// Hashes a state key for the heavy-hitter summaries.
static KEY_HASH: foldhash::fast::FixedState = foldhash::fast::FixedState::with_seed(0x5eed);

/// The most rejection log lines per second (burst 20); the rest are counted, not logged.
const REJECTION_LOGS_PER_SECOND: u64 = 10;

/// Records decisions into the metrics and the rejection log.
pub struct Recorder {
    metrics: Arc<Metrics>,
    stats: Arc<Stats>,
    hot: Hot,
    /// The `descriptor` labels given so far, by rule (bounded).
    labels: Mutex<HashMap<String, HashSet<String>>>,
    log_bucket: Option<DirectBucket>,
}

impl Recorder {
    /// A recorder into `metrics`.
    pub fn new(metrics: Arc<Metrics>, stats: Arc<Stats>) -> Self {
        let log_bucket = Quota::per_second(REJECTION_LOGS_PER_SECOND)
            .ok()
            .and_then(|q| {
                Limit::builder(Algorithm::TokenBucket, q)
                    .burst(20)
                    .build()
                    .ok()
            })
            .and_then(DirectBucket::new);
        Self {
            metrics,
            stats,
            hot: Hot::default(),
            labels: Mutex::new(HashMap::new()),
            log_bucket,
        }
    }

    /// The metrics recorded into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Forgets the series cached for the rules of the set that was in force.
    pub fn rules_changed(&self) {
        self.hot.rules.write().clear();
        if let Some(envoy) = self.metrics.envoy_names() {
            envoy.rules_changed();
        }
    }

    /// Counts a request refused as invalid.
    pub fn invalid(&self, api: Api) {
        self.count_request(api, 2);
    }

    /// Counts a request with `CODES[code]`.
    fn count_request(&self, api: Api, code: usize) {
        self.hot.requests[api.index()][code]
            .get_or_init(|| {
                self.metrics
                    .requests
                    .get_or_create(&RequestLabels {
                        api: api.label(),
                        code: CODES[code],
                    })
                    .clone()
            })
            .inc();
    }

    /// Runs `f` on the series and figures of `rule` (resolved once per rule set).
    fn with_rule<T>(
        &self,
        domain: &str,
        rule: &Arc<Rule>,
        f: impl FnOnce(&RuleCounters) -> T,
    ) -> T {
        let key = Arc::as_ptr(rule) as usize;
        if let Some(c) = self.hot.rules.read().get(&key) {
            return f(c);
        }
        let entry = RuleCounters {
            _rule: Arc::clone(rule),
            outcomes: Default::default(),
            cell: self.stats.cell(domain, &rule.name),
        };
        let mut cache = self.hot.rules.write();
        if cache.len() < MAX_CACHED_RULES {
            f(cache.entry(key).or_insert(entry))
        } else {
            f(&entry)
        }
    }

    /// Counts a decision of a rule for the dashboard: its outcome, its key, a trial's or a
    /// failure policy's part. A `closed` policy's refusal is the failure policy's only, not a
    /// rejection of the rule's: its rejection alerts do not fire for a store outage.
    #[inline]
    fn count_figures(&self, cell: &RuleCell, s: &Status, d: &Descriptor, outcome: usize) {
        if s.error.is_some() {
            cell.failure_policy();
        }
        if s.trial_rejected {
            cell.trial_rejected();
        }
        let counted = match outcome {
            0 => Outcome::Admitted,
            1 => Outcome::Rejected,
            2 => Outcome::ShadowRejected,
            _ => return,
        };
        cell.count(
            counted,
            std::hash::BuildHasher::hash_one(&KEY_HASH, &s.key),
            || d.to_string(),
        );
    }

    /// The `flowgate_decisions_total` series of `rule` (without a `descriptor` label) with
    /// outcome `outcome` (an index into `OUTCOMES`, or `UNLIMITED`).
    fn rule_counter(&self, domain: &str, rule: &Rule, outcome: usize) -> Counter {
        self.metrics
            .decisions
            .get_or_create(&DecisionLabels {
                domain: domain.to_owned(),
                rule: rule.name.clone(),
                outcome: OUTCOMES.get(outcome).copied().unwrap_or("unlimited"),
                descriptor: String::new(),
            })
            .clone()
    }

    /// Records a decision of `request` that took `elapsed`; `rules` are the rules in force
    /// (asked only when no rule matched, or when a circuit breaker refused the request).
    pub fn record(
        &self,
        api: Api,
        request: &Request,
        verdict: &Verdict,
        elapsed: Duration,
        rules: impl FnOnce() -> Arc<RuleSet>,
    ) {
        self.hot.latency[api.index()]
            .get_or_init(|| {
                self.metrics
                    .latency
                    .get_or_create(&ApiLabels { api: api.label() })
                    .clone()
            })
            .observe(elapsed.as_secs_f64());
        if self.stats.on {
            self.stats.latency(elapsed);
        }
        self.count(api, request, verdict, rules);
    }

    /// Counts a request refused by the open circuit breaker `b` (no rule was asked): under the
    /// breaker, and for the dashboard under its instance and under each rule that `request`'s
    /// descriptors match.
    fn count_circuit_open(
        &self,
        request: &Request,
        b: &BreakerStatus,
        rules: impl FnOnce() -> Arc<RuleSet>,
    ) {
        self.metrics.breakers.refused(&b.domain, &b.name);
        if !self.stats.on {
            return;
        }
        self.stats.breaker_refused(&b.key);
        let rules = rules();
        for d in &request.descriptors {
            if let Some(rule) = rules.find(&request.domain, d) {
                self.with_rule(&request.domain, rule, |c| c.cell.circuit_open());
            }
        }
    }

    fn count(
        &self,
        api: Api,
        request: &Request,
        verdict: &Verdict,
        rules: impl FnOnce() -> Arc<RuleSet>,
    ) {
        let m = &self.metrics;
        self.count_request(api, if verdict.allowed { 0 } else { 1 });
        if let Some(b) = verdict.circuit_open() {
            self.count_circuit_open(request, b, rules);
            self.log_rejection(request, verdict);
            return;
        }
        let known = verdict.statuses.iter().any(|s| s.rule.is_some())
            || rules().has_domain(&request.domain);
        let domain = if known {
            request.domain.as_str()
        } else {
            "_unknown"
        };
        let mut error: Option<&StoreError> = None;
        let mut stored = false;
        for (s, d) in verdict.statuses.iter().zip(&request.descriptors) {
            if let Some(e) = &s.error {
                error = Some(e);
            }
            let (rule, outcome) = match &s.rule {
                None => {
                    m.decisions
                        .get_or_create(&DecisionLabels {
                            domain: domain.to_owned(),
                            rule: String::new(),
                            outcome: "no_rule",
                            descriptor: String::new(),
                        })
                        .inc();
                    continue;
                }
                Some(r) if !s.is_limited() => (r, UNLIMITED),
                Some(r) => {
                    stored = true;
                    if let Some(envoy) = m.envoy_names() {
                        let hits = d.cost.unwrap_or(request.cost);
                        envoy.record(domain, r, d, &s.decision, hits);
                    }
                    let outcome = if s.decision.allowed {
                        0
                    } else if r.shadow || verdict.shadowed {
                        m.shadow_hits
                            .get_or_create(&RuleLabels {
                                domain: domain.to_owned(),
                                rule: r.name.clone(),
                            })
                            .inc();
                        2
                    } else if s.error.is_some() && r.failure == flowgate::FailurePolicy::Closed {
                        FAILURE_POLICY
                    } else {
                        1
                    };
                    (r, outcome)
                }
            };
            let label = descriptor_label(rule, d);
            self.with_rule(domain, rule, |c| {
                if self.stats.on {
                    self.count_figures(&c.cell, s, d, outcome);
                }
                if label.is_none() {
                    c.outcomes[outcome]
                        .get_or_init(|| self.rule_counter(domain, rule, outcome))
                        .inc();
                }
            });
            let Some(label) = label else {
                continue;
            };
            let descriptor = self.bounded_label(domain, rule, label);
            m.decisions
                .get_or_create(&DecisionLabels {
                    domain: domain.to_owned(),
                    rule: rule.name.clone(),
                    outcome: OUTCOMES.get(outcome).copied().unwrap_or("unlimited"),
                    descriptor,
                })
                .inc();
        }
        match error {
            Some(e) => {
                let kind = match e {
                    StoreError::Timeout => "timeout",
                    StoreError::Unavailable(_) => "unavailable",
                    _ => "internal",
                };
                m.store_errors.get_or_create(&KindLabels { kind }).inc();
                m.store_degraded.set(1);
            }
            // Written only when it changes: every request that reached the store passes here,
            // and a read leaves the gauge's cache line shared between the cores.
            None if stored && m.store_degraded.get() != 0 => {
                m.store_degraded.set(0);
            }
            None => {}
        }
        if !verdict.allowed {
            self.log_rejection(request, verdict);
        }
    }

    /// `label`, or `_other` once the rule has [`MAX_DESCRIPTOR_LABELS`] others.
    fn bounded_label(&self, domain: &str, rule: &Rule, label: String) -> String {
        let mut seen = self.labels.lock();
        let set = seen.entry(format!("{domain}:{}", rule.name)).or_default();
        if set.contains(&label) {
            return label;
        }
        if set.len() >= MAX_DESCRIPTOR_LABELS {
            return "_other".into();
        }
        set.insert(label.clone());
        label
    }

    fn log_rejection(&self, request: &Request, verdict: &Verdict) {
        let allowed = self.log_bucket.as_ref().is_none_or(|b| b.check(1).allowed);
        if !allowed {
            self.metrics.logs_suppressed.inc();
            return;
        }
        let Some((i, s)) = verdict
            .statuses
            .iter()
            .enumerate()
            .find(|(_, s)| s.blocks())
            .or_else(|| {
                verdict
                    .statuses
                    .iter()
                    .enumerate()
                    .find(|(_, s)| s.over_limit())
            })
        else {
            return;
        };
        let rule = s.rule.as_ref().map(|r| r.name.as_str()).unwrap_or("");
        let descriptor = request
            .descriptors
            .get(i)
            .map(ToString::to_string)
            .unwrap_or_default();
        let retry_after_ms = verdict.retry_after().map(|d| d.as_millis() as u64);
        if verdict.refused_by_failure_policy() {
            tracing::info!(
                target: "flowgate::rejections",
                domain = %request.domain,
                rule,
                %descriptor,
                retry_after_ms,
                "request refused by the rule's closed failure policy: the store failed"
            );
            return;
        }
        tracing::info!(
            target: "flowgate::rejections",
            domain = %request.domain,
            rule,
            %descriptor,
            limit = s.decision.limit,
            retry_after_ms,
            "request over limit"
        );
    }
}
