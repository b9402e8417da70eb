//! The rule schema: the serde types that *are* Flowgate's configuration format. TOML files and
//! JSON bodies are read by them, `GET /v1/rules` is written by them (so what it writes, `PUT`
//! reads back), and envoyproxy/ratelimit's YAML is mapped onto them. [`convert`](super::convert)
//! turns them into the core's [`Rule`] and [`QueueSpec`](flowgate_core::queue::QueueSpec) in one
//! place; [`RuleDoc::of`] is the way back.
//!
//! Adding a rule field touches three places: its field here (and in [`RuleDoc::of`]), its
//! conversion in `convert.rs`, and `docs/rules.md`.

use flowgate_core::quota::format_micros;
use flowgate_core::schedule::day_name;
use flowgate_core::{Algorithm, FailurePolicy, Limit, Mode, Override, Rule, Tz, ValueMatch};
use serde::{Deserialize, Serialize};

/// A configuration file, or a JSON body of `PUT /v1/rules`: a default domain, rules, queues,
/// alerts, circuit breakers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FileDoc {
    /// The domain of the rules and queues that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The webhooks of this file's alerts that name none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alert_webhooks: Vec<String>,
    /// The Alertmanagers of this file's alerts that name none (`http://am:9093`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alertmanagers: Vec<String>,
    /// `[[rule]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule: Vec<RuleDoc>,
    /// `[[queue]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue: Vec<QueueDoc>,
    /// `[[alert]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alert: Vec<AlertDoc>,
    /// `[[breaker]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breaker: Vec<BreakerDoc>,
}

/// One `[[breaker]]`: a circuit breaker per matched descriptor (see `docs/breakers.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BreakerDoc {
    /// Its domain (else the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Unique among the domain's breakers; part of every instance's key.
    pub name: String,
    /// The descriptor pattern, as a rule's: one breaker instance per matched descriptor.
    #[serde(rename = "match")]
    pub pattern: Pattern,
    /// `error_ratio`, `slow_call_ratio` (with `slow_call`) or `error_count`.
    pub strategy: String,
    /// `slow_call_ratio`: a call strictly slower than this is slow (`"800ms"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_call: Option<String>,
    /// A ratio over 0 and at most 1, or (`error_count`) a whole count of at least 1; it opens
    /// when the window's share or count of bad calls is at least this.
    pub threshold: f64,
    /// The sliding window (`"10s"`), in 10 buckets.
    pub window: String,
    /// Fewer calls in the window never open it (at least 1).
    pub min_calls: u64,
    /// How long it stays open (`"30s"`).
    pub open_for: String,
    /// Calls admitted at once while half-open (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<u32>,
    /// How long a probe's lease lasts before its place is free again (default `open_for`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_timeout: Option<String>,
    /// On Redis (the breaker shared by the cluster): the fewest nodes whose bad calls in the
    /// window may open it. A breaker per process ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_nodes: Option<u32>,
}

impl BreakerDoc {
    /// The document of a breaker: converting it back gives the same breaker.
    pub fn of(d: &flowgate::breakers::BreakerDef) -> Self {
        use flowgate::breakers::Strategy;
        let spec = &d.spec;
        let (strategy, slow_call) = match spec.strategy() {
            Strategy::ErrorRatio => ("error_ratio", None),
            Strategy::SlowCallRatio { slow_call } => {
                ("slow_call_ratio", Some(format_micros(slow_call)))
            }
            Strategy::ErrorCount => ("error_count", None),
            // A strategy this schema does not know yet (a newer core).
            _ => ("unknown", None),
        };
        BreakerDoc {
            domain: Some(d.domain.clone()),
            name: d.name.clone(),
            pattern: Pattern::Entries(
                d.pattern
                    .iter()
                    .map(|m| EntryDoc::Text(m.to_string()))
                    .collect(),
            ),
            strategy: strategy.to_owned(),
            slow_call,
            threshold: spec.threshold(),
            window: format_micros(spec.window()),
            min_calls: spec.min_calls(),
            open_for: format_micros(spec.open_for()),
            probes: Some(spec.probes()),
            probe_timeout: Some(format_micros(spec.probe_timeout())),
            min_nodes: d.min_nodes,
        }
    }
}

/// One `[[alert]]`. Its kind is given by which key is present: `rule` (a rule's rejection
/// ratio), `queue` (a queue's oldest age or depth) or `store` (the store degraded).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertDoc {
    /// Unique among the alerts; Alertmanager's `alertname`.
    pub name: String,
    /// The domain of its rule or queue (else the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// A rule alert: the rule's name in its domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// A rule alert: fires while more than this share of the rule's requests is rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection_ratio: Option<f64>,
    /// A rule alert: only at this many requests per second or more (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rate: Option<f64>,
    /// A queue alert: the queue's name in its domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// A queue alert: fires while its oldest waiting job is older than this (`"5m"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_age: Option<String>,
    /// A queue alert: fires while more jobs than this wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u64>,
    /// A store alert: `"degraded"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// A breaker alert: the circuit breaker's name in its domain; fires while any of its
    /// instances is open or half-open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<String>,
    /// How long the condition must hold before the alert fires (default `0s`).
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
    /// Where to POST its notifications (else the file's `alert_webhooks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhooks: Option<Vec<String>>,
    /// The Alertmanagers to send it to (else the file's `alertmanagers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alertmanagers: Option<Vec<String>>,
    /// The `severity` label (`page`, `ticket`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// The `summary` annotation (else one made from what it watches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The `description` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One `[[rule]]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleDoc {
    /// Its domain (else the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Unique in its domain; part of the state key.
    pub name: String,
    /// The descriptor pattern.
    #[serde(rename = "match")]
    pub pattern: Pattern,
    /// `"20/s"`, `"500/day"`, a count (per `window`, else per second), `"unlimited"` or `-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitField>,
    /// The window of a bare count: a length (`"30s"`) or a calendar unit (`"day"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// No limit.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unlimited: bool,
    /// `fixed_window`, `sliding_log`, `sliding_window` (default), `token_bucket`,
    /// `leaky_bucket`, `concurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// Token and leaky bucket size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Sliding window's buckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<u32>,
    /// `reject` (default) or `delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Delay mode: the longest wait before rejecting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<String>,
    /// `token_bucket` only: after idle, the rate starts at the limit / `cold_factor` and reaches
    /// the full limit over this period of steady use (`"30s"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<String>,
    /// With `warmup`: how much slower a cold bucket is, above 1 (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_factor: Option<f64>,
    /// `open` (default), `closed` or `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// With `failure = "local"`: how many nodes share the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// Evaluate and report, never block.
    #[serde(default, skip_serializing_if = "is_false")]
    pub shadow: bool,
    /// Rules this one replaces when both match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<String>,
    /// Metrics per descriptor value.
    #[serde(default, skip_serializing_if = "is_false")]
    pub detailed_metric: bool,
    /// Every entry's value in the metric label (an entry written as a table says it alone).
    #[serde(default, skip_serializing_if = "is_false")]
    pub value_to_metric: bool,
    /// Every wildcard entry's values share one counter (an entry written as a table says it
    /// alone).
    #[serde(default, skip_serializing_if = "is_false")]
    pub share_threshold: bool,
    /// Over its limit alone, does not reject (Envoy's `quota_mode`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub quota_mode: bool,
    /// Kept and shown with the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// IANA zone of calendar windows and schedules (default UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// A limit tried in shadow beside `limit`: it never rejects, its would-be rejections are
    /// counted (`trial_rejected` on the dashboard and in `GET /v1/stats`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial: Option<TrialDoc>,
    /// `[[rule.schedule]]`: overrides of the limit; the first that applies wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<OverrideDoc>,
    /// `concurrency` only: the limit moves with reported latency (AIMD), per matched
    /// descriptor; `limit` is then its starting point (unless `initial` is given) and its
    /// window the leases' time to live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveDoc>,
}

/// A `concurrency` rule's `adaptive = { min = 5, max = 200, max_latency = "250ms" }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdaptiveDoc {
    /// The smallest limit, at least 1 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    /// The largest limit.
    pub max: u64,
    /// A call slower than this is a sign of overload (`"250ms"`).
    pub max_latency: String,
    /// What a sign of overload multiplies the limit by, in (0, 1) (default 0.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<f64>,
    /// The limit before any report (default: the rule's `limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial: Option<u64>,
}

impl AdaptiveDoc {
    /// The document of an adaptive limit.
    pub fn of(a: &flowgate_core::adaptive::AimdSpec) -> Self {
        AdaptiveDoc {
            min: Some(a.min),
            max: a.max,
            max_latency: format_micros(a.max_latency.round() as u64),
            backoff: Some(a.backoff),
            initial: Some(a.initial),
        }
    }
}

/// A rule's `trial`: a limit watched on live traffic before it is set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TrialDoc {
    /// The quota tried, as the rule's `limit`.
    pub limit: LimitField,
    /// Its window, when `limit` is a count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// Its algorithm (else the rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// Its burst (else the rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

impl TrialDoc {
    /// The document of a trial limit.
    pub fn of(l: &Limit) -> Self {
        let d = LimitDoc::of(Some(l));
        TrialDoc {
            limit: LimitField::Text(d.limit),
            window: None,
            algorithm: d.algorithm.map(str::to_owned),
            burst: d.burst,
        }
    }
}

/// A rule's `match`: `"biz=PAY, channel"` or a list of entries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Pattern {
    /// Entries separated by commas.
    Text(String),
    /// One entry per element.
    Entries(Vec<EntryDoc>),
}

impl Default for Pattern {
    fn default() -> Self {
        Pattern::Entries(Vec::new())
    }
}

/// One entry of a `match` list: `"key"`, `"key=value"`, `"key=prefix*"`, or a table that sets
/// the entry's own flags.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum EntryDoc {
    /// The entry, with the rule's flags.
    Text(String),
    /// The entry with its own flags (Envoy's per-descriptor `share_threshold` and
    /// `value_to_metric`).
    Flagged(FlaggedEntry),
}

/// An entry with its own flags.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FlaggedEntry {
    /// `key`, `key=value` or `key=prefix*`.
    pub entry: String,
    /// Its wildcard's values share one counter.
    #[serde(default, skip_serializing_if = "is_false")]
    pub share_threshold: bool,
    /// Its value in the metric label.
    #[serde(default, skip_serializing_if = "is_false")]
    pub value_to_metric: bool,
}

/// A `limit` field: a count or a text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum LimitField {
    /// A count per `window` (per second without one); `-1`: unlimited.
    Count(i64),
    /// `"20/s"`, `"500/day"`, `"unlimited"`.
    Text(String),
}

/// One `[[rule.schedule]]` entry: a limit and when it applies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OverrideDoc {
    /// The quota in force then, or `"unlimited"`.
    pub limit: LimitField,
    /// Its algorithm (else the rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// Its burst (else the rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Inclusive local dates, `2026-11-11..2026-11-12`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dates: Option<String>,
    /// Days of the week.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<Vec<String>>,
    /// Local times, start included, may wrap midnight: `22:00-06:00`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<String>,
}

/// One `[[queue]]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueDoc {
    /// Its domain (else the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Unique among the domain's queues.
    pub name: String,
    /// One queue instance per matched descriptor.
    #[serde(rename = "match")]
    pub pattern: Pattern,
    /// Releases per window across the cluster.
    pub rate: String,
    /// Releases at once after idle (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Jobs held, waiting and in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<u64>,
    /// A job not acked within it is delivered again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// Deliveries before the dead letters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// First retry delay after a failure, doubling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_backoff: Option<String>,
    /// Bytes per job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_payload: Option<usize>,
    /// How long idempotency keys are kept after their job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_retention: Option<String>,
}

impl QueueDoc {
    /// The document of a queue: converting it back gives the same queue (bounds at their
    /// defaults left out).
    pub fn of(q: &flowgate_core::queue::QueueSpec) -> Self {
        use flowgate_core::clock::micros;
        use flowgate_core::queue as d;
        let unless = |v: u64, default: u64| (v != default).then(|| format_micros(v));
        QueueDoc {
            domain: Some(q.domain.clone()),
            name: q.name.clone(),
            pattern: Pattern::Entries(
                q.pattern
                    .iter()
                    .map(|m| EntryDoc::Text(m.to_string()))
                    .collect(),
            ),
            rate: q.rate().to_string(),
            burst: (q.burst() != 1).then(|| q.burst()),
            max_depth: (q.max_depth() != d::DEFAULT_MAX_DEPTH).then(|| q.max_depth()),
            lease: unless(q.lease(), micros(d::DEFAULT_LEASE)),
            max_attempts: (q.max_attempts() != d::DEFAULT_MAX_ATTEMPTS).then(|| q.max_attempts()),
            retry_backoff: unless(q.retry_backoff(), micros(d::DEFAULT_RETRY_BACKOFF)),
            max_payload: (q.max_payload() != d::DEFAULT_MAX_PAYLOAD).then(|| q.max_payload()),
            key_retention: unless(q.key_retention(), micros(d::DEFAULT_KEY_RETENTION)),
        }
    }
}

/// A limit as `GET /v1/rules` shows it in force: `{limit, algorithm, burst}`, `{limit:
/// "unlimited"}` for none.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LimitDoc {
    /// The quota, or `"unlimited"`.
    pub limit: String,
    /// The algorithm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<&'static str>,
    /// Token and leaky bucket size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

impl LimitDoc {
    /// The document of `limit` (`None`: unlimited).
    pub fn of(limit: Option<&Limit>) -> Self {
        match limit {
            None => LimitDoc {
                limit: "unlimited".into(),
                algorithm: None,
                burst: None,
            },
            Some(l) => LimitDoc {
                limit: l.quota().to_string(),
                algorithm: Some(l.algorithm().name()),
                burst: matches!(
                    l.algorithm(),
                    Algorithm::TokenBucket | Algorithm::LeakyBucket
                )
                .then(|| l.burst()),
            },
        }
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if takes a reference
fn is_false(b: &bool) -> bool {
    !*b
}

impl RuleDoc {
    /// The document of a rule: converting it back gives the same rule.
    pub fn of(r: &Rule) -> Self {
        let in_force = LimitDoc::of(r.limit.as_ref());
        let wildcard = |v: &ValueMatch| matches!(v, ValueMatch::Wildcard(_));
        let share_threshold = r.pattern.iter().any(|m| m.share)
            && r.pattern.iter().all(|m| m.share || !wildcard(&m.value));
        let value_to_metric = !r.pattern.is_empty() && r.pattern.iter().all(|m| m.value_to_metric);
        let entries = r
            .pattern
            .iter()
            .map(|m| {
                let implied_share = share_threshold && wildcard(&m.value);
                if m.share == implied_share && m.value_to_metric == value_to_metric {
                    EntryDoc::Text(m.to_string())
                } else {
                    EntryDoc::Flagged(FlaggedEntry {
                        entry: m.to_string(),
                        share_threshold: m.share,
                        value_to_metric: m.value_to_metric,
                    })
                }
            })
            .collect();
        let (failure, nodes) = match r.failure {
            FailurePolicy::Open => (None, None),
            FailurePolicy::Closed => (Some("closed".to_owned()), None),
            FailurePolicy::Local { nodes } => (Some("local".to_owned()), Some(nodes)),
        };
        let limit = r.limit.as_ref();
        let delay = limit.filter(|l| l.mode() == Mode::Delay);
        RuleDoc {
            domain: Some(r.domain.clone()),
            name: r.name.clone(),
            pattern: Pattern::Entries(entries),
            limit: Some(LimitField::Text(in_force.limit)),
            window: None,
            unlimited: false,
            algorithm: in_force.algorithm.map(str::to_owned),
            burst: in_force.burst,
            buckets: limit
                .filter(|l| l.algorithm() == Algorithm::SlidingWindow)
                .map(Limit::buckets),
            mode: delay.map(|_| "delay".to_owned()),
            max_wait: delay.map(|l| format_micros(l.max_wait())),
            warmup: limit
                .and_then(Limit::warmup)
                .map(|w| format_micros(w.period())),
            cold_factor: limit
                .and_then(Limit::warmup)
                .map(|w| w.cold_factor())
                .filter(|&c| c != flowgate_core::limit::DEFAULT_COLD_FACTOR),
            failure,
            nodes,
            shadow: r.shadow,
            replaces: r.replaces.clone(),
            detailed_metric: r.detailed_metric,
            value_to_metric,
            share_threshold,
            quota_mode: r.quota_mode,
            metadata: r.metadata.as_ref().map(|m| {
                serde_json::from_str(m).unwrap_or_else(|_| serde_json::Value::String(m.clone()))
            }),
            time_zone: (r.time_zone != Tz::UTC).then(|| r.time_zone.name().to_owned()),
            schedule: r
                .schedule
                .as_ref()
                .map(|s| s.overrides().iter().map(OverrideDoc::of).collect())
                .unwrap_or_default(),
            trial: r.trial.as_ref().map(TrialDoc::of),
            adaptive: r.adaptive.as_ref().map(AdaptiveDoc::of),
        }
    }
}

impl OverrideDoc {
    /// The document of a schedule's override.
    pub fn of(o: &Override) -> Self {
        let l = LimitDoc::of(o.limit.as_ref());
        OverrideDoc {
            limit: LimitField::Text(l.limit),
            algorithm: l.algorithm.map(str::to_owned),
            burst: l.burst,
            dates: o.dates.as_ref().map(ToString::to_string),
            days: (!o.days.is_empty())
                .then(|| o.days.iter().map(|d| day_name(*d).to_owned()).collect()),
            hours: o.hours.as_ref().map(ToString::to_string),
        }
    }
}

/// A rule as `GET /v1/rules` shows it: its document, and what `PUT` ignores
/// ([`RuleView::READ_ONLY`]): the limit in force now and, for a scheduled rule, the next change.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct RuleView {
    /// The rule.
    #[serde(flatten)]
    pub doc: RuleDoc,
    /// The limit in force now.
    pub in_force: LimitDoc,
    /// A scheduled rule's next change (`null` when none within the schedule's horizon).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_change: Option<Option<NextChange>>,
}

/// When another limit comes into force, and which.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct NextChange {
    /// The limit then.
    #[serde(flatten)]
    pub limit: LimitDoc,
    /// RFC 3339, in the rule's zone.
    pub at: String,
}

impl RuleView {
    /// The fields a view adds to its document, which `PUT` ignores.
    pub const READ_ONLY: [&str; 2] = ["in_force", "next_change"];

    /// The view of `r` at `now` (µs since the Unix epoch, by the store's clock).
    pub fn of(r: &Rule, now: u64) -> Self {
        RuleView {
            doc: RuleDoc::of(r),
            in_force: LimitDoc::of(r.limit_at(now)),
            next_change: r.schedule.as_ref().map(|_| {
                r.next_change(now).map(|(at, l)| NextChange {
                    limit: LimitDoc::of(l),
                    at: flowgate_core::calendar::rfc3339(r.time_zone, at),
                })
            }),
        }
    }
}

impl AlertDoc {
    /// The document of an alert: converting it back gives the same alert (its webhooks and
    /// Alertmanagers written out, its domain named).
    pub fn of(a: &crate::observe::alerts::AlertSpec) -> Self {
        use crate::observe::alerts::AlertKind;
        let mut doc = AlertDoc {
            name: a.name.clone(),
            for_: (a.for_ms > 0).then(|| format_micros(a.for_ms.saturating_mul(1000))),
            webhooks: Some(a.webhooks.clone()),
            alertmanagers: Some(a.alertmanagers.clone()),
            severity: a.severity.clone(),
            summary: a.summary.clone(),
            description: a.description.clone(),
            ..AlertDoc::default()
        };
        match &a.kind {
            AlertKind::Rule {
                domain,
                rule,
                ratio,
                min_rate,
            } => {
                doc.domain = Some(domain.clone());
                doc.rule = Some(rule.clone());
                doc.rejection_ratio = Some(*ratio);
                doc.min_rate = Some(*min_rate);
            }
            AlertKind::QueueAge {
                domain,
                queue,
                seconds,
            } => {
                doc.domain = Some(domain.clone());
                doc.queue = Some(queue.clone());
                doc.oldest_age = Some(format_micros((seconds * 1e6).round() as u64));
            }
            AlertKind::QueueDepth {
                domain,
                queue,
                depth,
            } => {
                doc.domain = Some(domain.clone());
                doc.queue = Some(queue.clone());
                doc.depth = Some(*depth);
            }
            AlertKind::StoreDegraded => doc.store = Some("degraded".to_owned()),
            AlertKind::Breaker { domain, breaker } => {
                doc.domain = Some(domain.clone());
                doc.breaker = Some(breaker.clone());
            }
        }
        doc
    }
}
