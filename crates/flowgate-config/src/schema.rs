//! The rule schema: the serde types that *are* Flowgate's configuration format. TOML files and
//! JSON bodies are read by them, `GET /v1/rules` is written by them (so what it writes, `PUT`
//! reads back), and envoyproxy/ratelimit's YAML is mapped onto them. The crate's `convert`
//! module turns each into the core's rule, queue, alert or breaker in one place, one file per
//! kind, beside its way back (`RuleDoc::of`, ...).
//!
//! Adding a rule field touches three places: its field here, its conversion and its way back in
//! `convert/rule.rs`, and `docs/rules.md`.

use serde::{Deserialize, Serialize};

use crate::convert::alert::AlertFields;

/// A configuration file, or a JSON body of `PUT /v1/rules`: a default domain, rules, queues,
/// alerts, circuit breakers. The readers read it one section at a time (`[[rule]]`, then
/// `[[queue]]`, ...), so that an error is located in its table.
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
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
    /// What makes a call bad (`slow_call_ratio` with `slow_call`).
    pub strategy: StrategyDoc,
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

/// One `[[alert]]`: a name, what it watches ([`Watch`], whose keys sit beside the alert's own:
/// which of `rule`, `queue`, `store` and `breaker` is present says what it is), and where its
/// notifications go.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(try_from = "AlertFields")]
pub struct AlertDoc {
    /// Unique among the alerts; Alertmanager's `alertname`.
    pub name: String,
    /// What it watches.
    #[serde(flatten)]
    pub watch: Watch,
    /// How long the condition must hold before the alert fires (default `0s`).
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
    /// Where to POST its notifications (else the file's `alert_webhooks`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhooks: Option<Vec<String>>,
    /// The Alertmanagers to send it to (else the file's `alertmanagers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alertmanagers: Option<Vec<String>>,
    /// The `severity` label (`page`, `ticket`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// The `summary` annotation (else one made from what it watches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The `description` annotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What an alert watches, written as keys of the alert itself. A rule, queue or breaker is named
/// in its `domain` (else the file's).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Watch {
    /// `rule`: fires while more than `rejection_ratio` of the rule's requests is rejected.
    Rule {
        /// The rule's domain.
        #[serde(skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
        /// The rule's name in its domain.
        rule: String,
        /// Fires while the share rejected is strictly above it.
        rejection_ratio: f64,
        /// Only at this many requests per second or more (default 1).
        #[serde(skip_serializing_if = "Option::is_none")]
        min_rate: Option<f64>,
    },
    /// `rule` with `debt`: fires while the rule's debt (units charged past its limit, not yet
    /// paid back) is above this.
    RuleDebt {
        /// The rule's domain.
        #[serde(skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
        /// The rule's name in its domain.
        rule: String,
        /// The debt above which it fires, in the rule's units.
        debt: u64,
    },
    /// `queue` with `oldest_age`: fires while its oldest waiting job is older than this.
    QueueAge {
        /// The queue's domain.
        #[serde(skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
        /// The queue's name in its domain.
        queue: String,
        /// A duration (`"5m"`).
        oldest_age: String,
    },
    /// `queue` with `depth`: fires while more jobs than this wait.
    QueueDepth {
        /// The queue's domain.
        #[serde(skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
        /// The queue's name in its domain.
        queue: String,
        /// The depth above which it fires.
        depth: u64,
    },
    /// `store`: fires while the limiter's store is in this condition.
    Store {
        /// The condition.
        store: StoreCondition,
    },
    /// `breaker`: fires while any instance of the circuit breaker is open or half-open.
    Breaker {
        /// The breaker's domain.
        #[serde(skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
        /// The breaker's name in its domain.
        breaker: String,
    },
}

/// A store alert's `store`: the condition it fires in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StoreCondition {
    /// The store's last request failed.
    Degraded,
}

/// A limit's `algorithm` (see `docs/algorithms.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlgorithmDoc {
    /// Count per epoch-aligned window.
    FixedWindow,
    /// The timestamp and cost of each admitted request.
    SlidingLog,
    /// A ring of epoch-aligned counters (the default, but for calendar windows).
    SlidingWindow,
    /// GCRA with `burst` (default: the limit).
    TokenBucket,
    /// GCRA with `burst` 1 by default.
    LeakyBucket,
    /// Units in flight, each lease expiring after the window.
    Concurrency,
}

/// A rule's `mode`: what happens to a request over the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModeDoc {
    /// Reject at once (the default).
    Reject,
    /// Wait for the next free slot, up to `max_wait` (token and leaky buckets).
    Delay,
}

/// A rule's `failure`: what it does when its store cannot answer in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureDoc {
    /// Admit (the default).
    Open,
    /// Reject.
    Closed,
    /// Decide on this node's memory store with the limit divided by `nodes`.
    Local,
}

/// A rule's `charge`: what a gRPC request's cost (Envoy's `hits_addend`) means under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChargeDoc {
    /// A cost checked all or nothing (the default).
    Check,
    /// A cost reported after the work (Envoy's `apply_on_stream_done`): above 0 a charge,
    /// counted even past the limit up to `max_debt`; 0 a check, refused while in debt.
    Report,
}

/// A circuit breaker's `strategy`: what makes a call bad, and how its threshold reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StrategyDoc {
    /// The share of failed calls.
    ErrorRatio,
    /// The share of calls slower than `slow_call`.
    SlowCallRatio,
    /// The number of failed calls.
    ErrorCount,
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
    /// The algorithm (default `sliding_window`; `fixed_window` for a calendar window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<AlgorithmDoc>,
    /// Token and leaky bucket size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Sliding window's buckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<u32>,
    /// `reject` (default) or `delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeDoc>,
    /// Delay mode: the longest wait before rejecting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<String>,
    /// Units a charge (a cost reported after the work) may count beyond the limit, paid back
    /// by time (default: the limit, one window's worth); at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_debt: Option<i64>,
    /// `check` (default) or `report`: under `report`, a gRPC request's cost above 0 is a charge
    /// (Envoy AI Gateway's stream-end tokens) and a cost of 0 a check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charge: Option<ChargeDoc>,
    /// `token_bucket` only: after idle, the rate starts at the limit / `cold_factor` and reaches
    /// the full limit over this period of steady use (`"30s"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<String>,
    /// With `warmup`: how much slower a cold bucket is, above 1 (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_factor: Option<f64>,
    /// `open` (default), `closed` or `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureDoc>,
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
    pub algorithm: Option<AlgorithmDoc>,
    /// Its burst (else the rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
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
    pub algorithm: Option<AlgorithmDoc>,
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

/// A limit as `GET /v1/rules` shows it in force: `{limit, algorithm, burst}`, `{limit:
/// "unlimited"}` for none.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LimitDoc {
    /// The quota, or `"unlimited"`.
    pub limit: String,
    /// The algorithm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<AlgorithmDoc>,
    /// Token and leaky bucket size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if takes a reference
fn is_false(b: &bool) -> bool {
    !*b
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

/// The configuration in force as `GET /v1/rules` shows it: a [`FileDoc`] whose rules are
/// [`RuleView`]s (each with what `PUT` ignores), every declaration with its domain named and its
/// alerts' destinations written out, so that it has no file-wide defaults.
#[derive(Clone, Debug, Default, Serialize, utoipa::ToSchema)]
pub struct FileView {
    /// The rules.
    pub rule: Vec<RuleView>,
    /// The queues (the shared document's; a node following its files shows none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queue: Vec<QueueDoc>,
    /// The alerts (as the queues).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alert: Vec<AlertDoc>,
    /// The circuit breakers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaker: Vec<BreakerDoc>,
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
