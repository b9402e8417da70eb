//! Prometheus metrics.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `flowgate_decisions_total` | `domain`, `rule`, `outcome`, `descriptor` | one per request descriptor; `outcome` is `ok`, `over_limit`, `shadow_over_limit`, `failure_policy` (refused by the rule's `closed` failure policy: the store failed), `unlimited` or `no_rule`; `descriptor` is empty unless the rule has `detailed_metric`; `domain` is `_unknown` for domains with no rules |
//! | `flowgate_shadow_hits_total` | `domain`, `rule` | shadow rules that would have rejected |
//! | `flowgate_requests_total` | `api`, `code` | requests by API (`grpc`, `http`) and overall result (`ok`, `over_limit`, `invalid`) |
//! | `flowgate_decision_duration_seconds` | `api` | time to decide a request (histogram) |
//! | `flowgate_store_errors_total` | `kind` | store failures (`timeout`, `unavailable`, `internal`), decided by the rules' failure policies; while Redis is known down, decisions answered at once count as `unavailable` (`/v1/store`'s `failure` says what the probe meets) |
//! | `flowgate_memory_keys` | | keys held by the embedded store |
//! | `flowgate_memory_max_keys` | | the embedded store's cap on keys (`--max-keys`) |
//! | `flowgate_memory_evicted_keys_total` | | keys evicted at the cap to make room for new ones |
//! | `flowgate_store_degraded` | | 1 while the store fails: the last decision met a store error, or Redis is known down (cleared by the next decision that reaches it, or by the probe that finds Redis back) |
//! | `flowgate_store_down` | | 1 while Redis is known down: decisions go straight to the rules' failure policies while a probe retries it (see `GET /v1/store`) |
//! | `flowgate_store_primary` | `topology`, `address` | 1 for each Redis primary this node writes to (`topology`: `single`, `sentinel`, `cluster`); a failover replaces the series |
//! | `flowgate_store_failovers_total` | | times a Redis primary changed under this node (a promotion followed) |
//! | `flowgate_store_reconnects_total` | | times this node made a connection to Redis again after a failure |
//! | `flowgate_config_reloads_total` | `source`, `result` | rule reloads from `file` or `api`, `success` or `failure` |
//! | `flowgate_rules` | | rules in force |
//! | `flowgate_rejection_logs_suppressed_total` | | rejection log lines dropped by the log rate limit |
//! | `flowgate_queues` | | queues declared |
//! | `flowgate_queue_jobs` | `domain`, `queue`, `instance`, `state` | jobs of a queue instance by `state`: `ready`, `delayed`, `reserved` (for a waiting lease, slot ahead), `in_flight` (delivered, not acked), `dead` (the whole cluster's, read from the store every second) |
//! | `flowgate_queue_oldest_age_seconds` | `domain`, `queue`, `instance` | age of the oldest waiting job |
//! | `flowgate_queue_drain_seconds` | `domain`, `queue`, `instance` | time until the waiting jobs are released at the queue's rate (delayed ones no sooner than due) |
//! | `flowgate_queue_release_rate` | `domain`, `queue`, `instance` | deliveries per second, cluster-wide, over the current run of releases (since the last pause, at most a minute back) |
//! | `flowgate_queue_state_age_seconds` | | how old the queue gauges above are: time since the store's state was last read (grows while the store cannot be read) |
//! | `flowgate_queue_store_degraded` | | 1 while the queues' store fails for this node: from a store error of any queue call (a lease's retries, the state read every second) until it answers again after a second without one |
//! | `flowgate_redis_eviction_risk` | | 1 while Redis's `maxmemory-policy` may evict keys without expiry (queued jobs, shared rules) |
//! | `flowgate_alerts_firing` | `alert` | 1 while the alert fires, 0 otherwise (on Redis every node shows the cluster's evaluation: aggregate with `max`) |
//! | `flowgate_alert_notifications_total` | `result` | alert webhook messages and batches POSTed to Alertmanagers: `sent`, `failed` (refused, or given up after the retries; an Alertmanager batch not taken), `dropped` (an outbox full) |
//! | `flowgate_alerts_local_evaluation` | | 1 while this node evaluates the alerts alone because it cannot hold the cluster's evaluation lease in Redis (each node then announces on its own figures), 0 otherwise |
//! | `flowgate_breaker_transitions_total` | `domain`, `breaker`, `to` | circuit breaker instances' changes of phase, by the phase entered (`open`, `half_open`, `closed`) |
//! | `flowgate_breaker_open` | `domain`, `breaker` | the breaker's instances open or half-open (not closed), read when the metrics are encoded |
//! | `flowgate_breaker_reports_total` | `result` | reports of calls' outcomes: `counted` (by at least one breaker instance), `no_breaker` (matched none: dropped), `dropped` (a breaker at its cap on instances), `unsent` (counted, but in a batch Redis could not take: they fed only this node's fallback) |
//! | `flowgate_adaptive_reports_unsent_total` | | reports to adaptive concurrency limits this node could not send to Redis (too many waiting, Redis unreachable, or a flush that failed): they moved only this node's limits |
//! | `flowgate_breaker_rejections_total` | `domain`, `breaker` | requests refused because the breaker was open (`circuit_open`) |
//! | `flowgate_auth_failures_total` | `scope`, `reason` | requests refused for their credential, by the scope the route needs and why: `missing` (none presented), `wrong` (a token no credential has), `forbidden` (a credential without the scope), `slowed` (refused unread: the source used up its failed attempts) |
//! | `flowgate_charge_units_total` | `domain`, `rule`, `kind`, `result` | units charged (`kind="charge"`) and refunded (`refund`) per rule: `applied`, or `dropped` (a charge's units past `max_debt`, a refund's past empty) |
//! | `flowgate_charges_failed_total` | `kind` | charges and refunds not applied because the store could not answer (`timeout`, `unavailable`, `internal`) |
//! | `flowgate_rule_debt` | `domain`, `rule` | units charged beyond each rule's limit and not yet paid back, over the keys this node charged ([`crate::charges`]) |
//! | `flowgate_queue_operations_total` | `op`, `result` | queue operations through this node (`submit`, `lease`, `ack`, `nack`, ...; `ok`, `empty`, `full`, `not_held`, `store_unavailable`, ...) |
//!
//! Cardinality is bounded by the rules, not by descriptor values. The `descriptor` label is empty
//! unless the rule has `detailed_metric` (the descriptor's text, a shared wildcard entry written as
//! its pattern) or `value_to_metric` (as envoyproxy/ratelimit builds it: `key=value` for an exact
//! entry or one flagged `value_to_metric`, `key=pattern` for a wildcard entry, `key` alone for a
//! key-only entry); it is cut to 128 bytes, and each rule has at most [`MAX_DESCRIPTOR_LABELS`]
//! distinct labels: beyond, decisions are counted under `_other`. Queue series are
//! one per queue instance (one per matched descriptor value), for at most
//! [`MAX_QUEUE_SERIES`] instances.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The most distinct `descriptor` labels of one rule; beyond, `_other`.
pub const MAX_DESCRIPTOR_LABELS: usize = 1_000;

/// The `descriptor` label of a decision of `rule` on `descriptor`: `None` unless the rule has
/// `detailed_metric` or `value_to_metric` (see the module documentation).
pub fn descriptor_label(
    rule: &flowgate::Rule,
    descriptor: &flowgate::Descriptor,
) -> Option<String> {
    use flowgate::rule::ValueMatch;
    let detailed = rule.detailed_metric;
    if !detailed && !rule.pattern.iter().any(|m| m.value_to_metric) {
        return None;
    }
    let mut out = String::new();
    for (i, (e, m)) in descriptor.entries.iter().zip(&rule.pattern).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&e.key);
        let value = match &m.value {
            ValueMatch::Wildcard(w) if m.share => Some(w.text()),
            _ if detailed || m.value_to_metric => Some(e.value.as_str()),
            ValueMatch::Exact(v) => Some(v.as_str()),
            ValueMatch::Wildcard(w) => Some(w.text()),
            ValueMatch::Any => None,
        };
        if let Some(v) = value {
            out.push('=');
            out.push_str(v);
        }
    }
    if out.len() > 128 {
        let mut cut = 128;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
    }
    Some(out)
}

/// The most queue instances with series (beyond, instances are left out of the metrics; they
/// stay in `GET /v1/queues`).
pub const MAX_QUEUE_SERIES: usize = 1_000;

/// Labels of a queue instance's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InstanceLabels {
    /// The domain.
    pub domain: String,
    /// The queue.
    pub queue: String,
    /// The instance's key.
    pub instance: String,
}

/// Labels of `flowgate_queue_jobs`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    /// The domain.
    pub domain: String,
    /// The queue.
    pub queue: String,
    /// The instance's key.
    pub instance: String,
    /// `ready`, `delayed`, `in_flight` or `dead`.
    pub state: &'static str,
}

/// Labels of `flowgate_auth_failures_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AuthLabels {
    /// The scope the route needs.
    pub scope: &'static str,
    /// Why the credential was refused.
    pub reason: &'static str,
}

/// Labels of `flowgate_queue_operations_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    /// The operation.
    pub op: &'static str,
    /// Its result.
    pub result: &'static str,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// Labels of `flowgate_decisions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// The domain (`_unknown` when it has no rules).
    pub domain: String,
    /// The rule's name (empty when none matched).
    pub rule: String,
    /// `ok`, `over_limit`, `shadow_over_limit`, `failure_policy`, `unlimited` or `no_rule`.
    pub outcome: &'static str,
    /// The descriptor, only for rules with `detailed_metric`.
    pub descriptor: String,
}

/// Labels of `flowgate_shadow_hits_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    /// The domain.
    pub domain: String,
    /// The rule.
    pub rule: String,
}

/// Labels of `flowgate_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `grpc` or `http`.
    pub api: &'static str,
    /// `ok`, `over_limit` or `invalid`.
    pub code: &'static str,
}

/// Labels of `flowgate_decision_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    /// `grpc` or `http`.
    pub api: &'static str,
}

/// Labels of `flowgate_store_errors_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The kind of error.
    pub kind: &'static str,
}

/// Labels of an alert's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AlertLabels {
    /// The alert's name.
    pub alert: String,
}

/// Labels of a series counted by result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// What came of it.
    pub result: &'static str,
}

/// Labels of `flowgate_config_reloads_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `file` or `api`.
    pub source: &'static str,
    /// `success` or `failure`.
    pub result: &'static str,
}

type HistogramFamily = Family<ApiLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 10 us .. ~0.33 s.
    Histogram::new(exponential_buckets(0.000_01, 2.0, 16))
}

/// The server's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    /// Decisions per descriptor.
    pub decisions: Family<DecisionLabels, Counter>,
    /// Shadow rules that would have rejected.
    pub shadow_hits: Family<RuleLabels, Counter>,
    /// Requests by API and result.
    pub requests: Family<RequestLabels, Counter>,
    /// Decision latency.
    pub latency: HistogramFamily,
    /// Store errors by kind.
    pub store_errors: Family<KindLabels, Counter>,
    /// 1 while degraded.
    pub store_degraded: Gauge,
    /// 1 while the store is known down (decisions go straight to the failure policies).
    pub store_down: Gauge,
    /// Reloads.
    pub reloads: Family<ReloadLabels, Counter>,
    /// Rules in force.
    pub rules: Gauge,
    /// Rejection log lines dropped.
    pub logs_suppressed: Counter<u64, AtomicU64>,
    /// Queues declared.
    pub queues: Gauge,
    /// Jobs per queue instance and state.
    pub queue_jobs: Family<JobLabels, Gauge>,
    /// Age of each instance's oldest waiting job.
    pub queue_oldest: Family<InstanceLabels, FloatGauge>,
    /// Time to drain each instance.
    pub queue_drain: Family<InstanceLabels, FloatGauge>,
    /// Measured release rate of each instance.
    pub queue_rate: Family<InstanceLabels, FloatGauge>,
    /// Queue operations through this node.
    pub queue_ops: Family<OpLabels, Counter>,
    /// Requests refused for their credential.
    pub auth_failures: Family<AuthLabels, Counter>,
    /// 1 while the queues' store fails (set from the queue's own record when encoded).
    pub queue_degraded: Gauge,
    /// 1 while Redis's eviction policy may evict keys without expiry.
    pub redis_eviction_risk: Gauge,
    /// 1 while an alert fires.
    alerts_firing: Family<AlertLabels, Gauge>,
    /// Alert webhook messages by result.
    alert_notifications: Family<ResultLabels, Counter>,
    /// 1 while this node evaluates the alerts alone.
    pub alerts_local: Gauge,
    /// Keys held by the embedded store.
    memory_keys: Gauge,
    /// The embedded store's cap.
    memory_max_keys: Gauge,
    /// Keys evicted at the cap.
    memory_evicted: Counter<u64, AtomicU64>,
    /// Seconds since the queue gauges were read, set when the metrics are encoded.
    queue_age: FloatGauge,
    /// When the queues' state was last read (µs since the epoch; 0: never).
    queue_read_at: AtomicU64,
    /// The circuit breakers' series.
    pub breakers: super::breakers::BreakerMetrics,
    /// Charges and refunds, and each rule's debt.
    pub charges: super::charges::ChargeMetrics,
    /// The outstanding reservations' series.
    pub reservations: super::reservations::ReservationMetrics,
    /// Where Redis's primaries are.
    pub topology: super::topology::TopologyMetrics,
    /// envoyproxy/ratelimit's series (`--envoy-metric-names`); unset, they are neither recorded
    /// nor exposed.
    envoy: std::sync::OnceLock<super::envoy_names::EnvoyNames>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        let shadow_hits = Family::<RuleLabels, Counter>::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: HistogramFamily = Family::new_with_constructor(latency_histogram);
        let store_errors = Family::<KindLabels, Counter>::default();
        for kind in ["timeout", "unavailable", "internal"] {
            let _ = store_errors.get_or_create(&KindLabels { kind });
        }
        let store_degraded = Gauge::default();
        let reloads = Family::<ReloadLabels, Counter>::default();
        // Every reload series exists from the start, at 0 (as the store errors' above): a
        // counter that first appears at 1 shows no increase to `increase()` and `rate()`, and
        // the first failure would page no one.
        for source in ["file", "api"] {
            for result in ["success", "failure"] {
                let _ = reloads.get_or_create(&ReloadLabels { source, result });
            }
        }
        let rules = Gauge::default();
        let logs_suppressed = Counter::default();
        let queues = Gauge::default();
        let queue_jobs = Family::<JobLabels, Gauge>::default();
        let queue_oldest = Family::<InstanceLabels, FloatGauge>::default();
        let queue_drain = Family::<InstanceLabels, FloatGauge>::default();
        let queue_rate = Family::<InstanceLabels, FloatGauge>::default();
        let queue_ops = Family::<OpLabels, Counter>::default();
        let auth_failures = Family::<AuthLabels, Counter>::default();
        registry.register(
            "flowgate_auth_failures",
            "Requests refused for their credential, by the scope the route needs and why",
            auth_failures.clone(),
        );
        let queue_degraded = Gauge::default();
        let redis_eviction_risk = Gauge::default();
        registry.register(
            "flowgate_redis_eviction_risk",
            "1 while Redis's maxmemory-policy may evict keys without expiry (queued jobs, shared rules)",
            redis_eviction_risk.clone(),
        );
        let alerts_firing = Family::<AlertLabels, Gauge>::default();
        let alert_notifications = Family::<ResultLabels, Counter>::default();
        // At 0 from the start, as the reloads' above: the first failed message must show.
        for result in ["sent", "failed", "dropped"] {
            let _ = alert_notifications.get_or_create(&ResultLabels { result });
        }
        registry.register(
            "flowgate_alerts_firing",
            "1 while the alert fires",
            alerts_firing.clone(),
        );
        registry.register(
            "flowgate_alert_notifications",
            "Alert webhook messages and Alertmanager batches by result: sent, failed, dropped",
            alert_notifications.clone(),
        );
        let alerts_local = Gauge::default();
        registry.register(
            "flowgate_alerts_local_evaluation",
            "1 while this node evaluates the alerts alone: it cannot hold the cluster's evaluation lease in Redis",
            alerts_local.clone(),
        );
        let queue_age = FloatGauge::default();
        let memory_keys = Gauge::default();
        let memory_max_keys = Gauge::default();
        let memory_evicted = Counter::<u64, AtomicU64>::default();
        registry.register(
            "flowgate_memory_keys",
            "Keys held by the embedded store",
            memory_keys.clone(),
        );
        registry.register(
            "flowgate_memory_max_keys",
            "The embedded store's cap on keys",
            memory_max_keys.clone(),
        );
        registry.register(
            "flowgate_memory_evicted_keys",
            "Keys evicted at the embedded store's cap to make room for new ones",
            memory_evicted.clone(),
        );
        registry.register("flowgate_queues", "Queues declared", queues.clone());
        registry.register(
            "flowgate_queue_state_age_seconds",
            "Time since the queues' state (the flowgate_queue_* gauges) was last read",
            queue_age.clone(),
        );
        registry.register(
            "flowgate_queue_store_degraded",
            "1 while the queues' store fails for this node (until it answers again after a second without error)",
            queue_degraded.clone(),
        );
        registry.register(
            "flowgate_queue_jobs",
            "Jobs of a queue instance by state (cluster-wide)",
            queue_jobs.clone(),
        );
        registry.register(
            "flowgate_queue_oldest_age_seconds",
            "Age of the oldest waiting job of a queue instance",
            queue_oldest.clone(),
        );
        registry.register(
            "flowgate_queue_drain_seconds",
            "Time to release the waiting jobs of a queue instance at its rate",
            queue_drain.clone(),
        );
        registry.register(
            "flowgate_queue_release_rate",
            "Deliveries per second of a queue instance over its current run of releases (cluster-wide)",
            queue_rate.clone(),
        );
        registry.register(
            "flowgate_queue_operations",
            "Queue operations through this node, by operation and result",
            queue_ops.clone(),
        );
        registry.register(
            "flowgate_decisions",
            "Decisions per request descriptor, by domain, rule and outcome",
            decisions.clone(),
        );
        registry.register(
            "flowgate_shadow_hits",
            "Shadow-mode rules that would have rejected",
            shadow_hits.clone(),
        );
        registry.register(
            "flowgate_requests",
            "Requests by API and overall result",
            requests.clone(),
        );
        registry.register(
            "flowgate_decision_duration_seconds",
            "Time to decide a request",
            latency.clone(),
        );
        registry.register(
            "flowgate_store_errors",
            "Store failures, decided by the rules' failure policies",
            store_errors.clone(),
        );
        registry.register(
            "flowgate_store_degraded",
            "1 while the store fails: the last decision met a store error, or Redis is known down",
            store_degraded.clone(),
        );
        let store_down = Gauge::default();
        registry.register(
            "flowgate_store_down",
            "1 while Redis is known down: decisions go straight to the rules' failure policies while a probe retries it",
            store_down.clone(),
        );
        registry.register(
            "flowgate_config_reloads",
            "Rule reloads by source and result",
            reloads.clone(),
        );
        registry.register("flowgate_rules", "Rules in force", rules.clone());
        registry.register(
            "flowgate_rejection_logs_suppressed",
            "Rejection log lines dropped by the log rate limit",
            logs_suppressed.clone(),
        );
        let breakers = super::breakers::BreakerMetrics::register(&mut registry);
        let reservations = super::reservations::ReservationMetrics::register(&mut registry);
        let topology = super::topology::TopologyMetrics::register(&mut registry);
        let charges = super::charges::ChargeMetrics::register(&mut registry);
        Self {
            registry,
            breakers,
            charges,
            reservations,
            topology,
            decisions,
            shadow_hits,
            requests,
            latency,
            store_errors,
            store_degraded,
            store_down,
            reloads,
            rules,
            logs_suppressed,
            queues,
            queue_jobs,
            queue_oldest,
            queue_drain,
            queue_rate,
            queue_ops,
            auth_failures,
            queue_degraded,
            redis_eviction_risk,
            alerts_firing,
            alert_notifications,
            alerts_local,
            queue_age,
            memory_keys,
            memory_max_keys,
            memory_evicted,
            queue_read_at: AtomicU64::new(0),
            envoy: std::sync::OnceLock::new(),
        }
    }

    /// Records and exposes envoyproxy/ratelimit's series from now on.
    pub fn enable_envoy_names(&self) {
        let _ = self.envoy.set(super::envoy_names::EnvoyNames::default());
    }

    /// envoyproxy/ratelimit's series, when enabled.
    pub fn envoy_names(&self) -> Option<&super::envoy_names::EnvoyNames> {
        self.envoy.get()
    }

    /// Records that the queues' state was read, at `at` (µs since the epoch).
    pub fn queue_state_read(&self, at: u64) {
        self.queue_read_at.store(at, Ordering::Relaxed);
    }

    /// Counts a queue operation.
    pub fn queue_op(&self, op: &'static str, result: &'static str) {
        self.queue_ops.get_or_create(&OpLabels { op, result }).inc();
    }

    /// Copies the embedded store's counters into the metrics (when they are encoded).
    pub fn memory_store(&self, s: flowgate::store::MemoryStats) {
        self.memory_keys
            .set(i64::try_from(s.keys).unwrap_or(i64::MAX));
        self.memory_max_keys
            .set(i64::try_from(s.max_keys).unwrap_or(i64::MAX));
        let counted = self.memory_evicted.get();
        self.memory_evicted
            .inc_by(s.evicted_keys.saturating_sub(counted));
    }

    /// Counts a reload.
    pub fn reload(&self, source: &'static str, ok: bool) {
        self.reloads
            .get_or_create(&ReloadLabels {
                source,
                result: if ok { "success" } else { "failure" },
            })
            .inc();
    }

    /// Sets whether `alert` fires.
    pub fn alert_firing(&self, alert: &str, firing: bool) {
        self.alerts_firing
            .get_or_create(&AlertLabels {
                alert: alert.to_owned(),
            })
            .set(i64::from(firing));
    }

    /// Drops the series of an alert no longer declared.
    pub fn alert_gone(&self, alert: &str) {
        self.alerts_firing.remove(&AlertLabels {
            alert: alert.to_owned(),
        });
    }

    /// Counts an alert message `sent`, `failed` or `dropped`.
    pub fn alert_notification(&self, result: &'static str) {
        self.alert_notifications
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        let read = self.queue_read_at.load(Ordering::Relaxed);
        if read > 0 {
            let age = flowgate::clock::system_now().saturating_sub(read);
            self.queue_age.set(age as f64 / 1e6);
        }
        let mut out = String::with_capacity(4096);
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        if let Some(envoy) = self.envoy.get() {
            // Its families go before the closing `# EOF`.
            let eof = out.rfind("# EOF").unwrap_or(out.len());
            let tail = out.split_off(eof);
            envoy.encode(&mut out);
            out.push_str(&tail);
        }
        out
    }
}
