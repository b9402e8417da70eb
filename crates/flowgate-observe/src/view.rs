//! What the dashboard, the alerts and scripts read: the JSON of `GET /v1/stats` and of each event
//! of `GET /v1/stats/stream`. The node's own figures, or, on Redis, the whole cluster's (the sum
//! of every live node's, with a per-node breakdown).
//!
//! Series are per second, oldest first, aligned on whole seconds of the wall clock: `series.start`
//! is the first second's Unix time, and the last entry is the last complete second (`at`).

use flowgate_config::alert::AlertKind;
use serde::{Deserialize, Serialize};

/// Everything shown at one instant.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StatsView {
    /// The last complete second (Unix seconds) the figures cover.
    pub at: i64,
    /// `node` (this process's figures) or `cluster` (every live node's, summed, on Redis).
    pub scope: Scope,
    /// This node's identifier (`--node-id`).
    pub node: String,
    /// The nodes whose figures are summed (this one alone without Redis).
    pub nodes: Vec<NodeView>,
    /// One entry per rule in force that has a limit, in the rules' order.
    pub rules: Vec<RuleStats>,
    /// One entry per queue instance.
    pub queues: Vec<QueueStats>,
    /// The limiter's store.
    pub store: StoreStats,
    /// Every declared alert and its state.
    pub alerts: Vec<AlertView>,
    /// The circuit breakers' instances that are not closed, and the closed ones with calls in
    /// their window, those not closed first: the cluster's on Redis (as this node's copy holds
    /// them), this process's on the embedded store.
    #[serde(default)]
    pub breakers: Vec<BreakerView>,
    /// The outstanding reservations per rule (`POST /v1/reserve`), rules without any left out:
    /// the cluster's on Redis, this process's on the embedded store.
    #[serde(default)]
    pub reservations: Vec<crate::reservations::ReservationsView>,

    /// The rules' version and origin.
    pub rules_info: RulesInfoView,
    /// When the parts' figures were read, so that a reader can tell how old each is.
    #[serde(default)]
    pub read: ReadTimes,
    /// On a cluster: the oldest second whose figures the last read of the cluster's changed
    /// among those a node carried after failed publishes (its seconds of an outage, placed at
    /// their own seconds, older than its last 5): a reader that holds the series from before
    /// reads them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revised_from: Option<i64>,
}

/// When each part's figures were last read (Unix milliseconds; none before the first read). A
/// part that cannot be read keeps its last figures, which grow old: a reader compares these with
/// `at` to mark them stale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReadTimes {
    /// The queues' state, read from the queues' store every second.
    pub queues_ms: Option<i64>,
    /// On Redis: the cluster's figures (every node's), read every second.
    pub cluster_ms: Option<i64>,
}

/// Whose figures a view holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// This process's.
    #[default]
    Node,
    /// Every live node's on the same Redis.
    Cluster,
}

/// A node of the cluster.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeView {
    /// Its identifier.
    pub id: String,
    /// When it last published its figures (Unix milliseconds).
    pub seen_ms: i64,
    /// Whether its figures are counted (it published within the expiry).
    pub live: bool,
    /// When it started (Unix milliseconds), while it is live: its totals count from then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
}

/// Decisions counted in one second, or since a node started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Counts {
    /// Requests the rule admitted.
    pub admitted: u64,
    /// Requests the rule rejected (not in shadow).
    pub rejected: u64,
    /// Requests a shadow rule (or the global shadow switch) would have rejected.
    pub shadow_rejected: u64,
    /// Requests the rule's trial limit would have rejected.
    pub trial_rejected: u64,
    /// Requests decided by the rule's failure policy (the store failed).
    pub failure_policy: u64,
    /// Requests refused by an open circuit breaker before the rule was asked, counted under
    /// each rule their descriptors match (apart from `rejected`: the limit refused none of them).
    #[serde(default)]
    pub circuit_open: u64,
}

/// Per-second series of [`Counts`], column by column.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Series {
    /// The first second's Unix time.
    pub start: i64,
    /// Admitted per second.
    pub admitted: Vec<u64>,
    /// Rejected per second.
    pub rejected: Vec<u64>,
    /// Would-be rejections of shadow rules per second.
    pub shadow_rejected: Vec<u64>,
    /// Would-be rejections of the trial limit per second.
    pub trial_rejected: Vec<u64>,
    /// Requests refused by an open circuit breaker per second ([`Counts::circuit_open`]).
    #[serde(default)]
    pub circuit_open: Vec<u64>,
}

/// One descriptor among a rule's heaviest, over the recent window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Hitter {
    /// The descriptor's entries as `key=value, key=value`.
    pub descriptor: String,
    /// Its requests per second over the window (an upper bound: the sketch may over-count).
    pub rate: f64,
    /// The most its rate may be over-counted by.
    pub error: f64,
}

/// One rule's figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RuleStats {
    /// Its domain.
    pub domain: String,
    /// Its name.
    pub name: String,
    /// Its descriptor pattern, as written (`key=value, key`).
    pub pattern: String,
    /// Whether it is a shadow rule (counts, never rejects).
    pub shadow: bool,
    /// The limit in force now, as text (`20 per 1s, token_bucket, burst 20`).
    pub limit: Option<String>,
    /// Its schedule, as text, when it has one.
    pub schedule: Option<String>,
    /// When its limit next changes (Unix milliseconds) and to what.
    pub next_change: Option<NextChange>,
    /// The trial limit being tried in shadow, as text.
    pub trial: Option<String>,
    /// Counted since each node started, summed.
    pub totals: Counts,
    /// Per second over the view's window.
    pub series: Series,
    /// Over the last [`RECENT_SECONDS`]: admitted per second.
    pub admitted_rate: f64,
    /// Over the last [`RECENT_SECONDS`]: rejected per second.
    pub rejected_rate: f64,
    /// Over the last [`RECENT_SECONDS`]: rejected ÷ (admitted + rejected), 0 without requests.
    pub rejection_ratio: f64,
    /// Over the last [`RECENT_SECONDS`]: would-be rejections of the trial limit per second.
    pub trial_rejected_rate: f64,
    /// Over the last [`RECENT_SECONDS`]: would-be rejections in shadow per second.
    pub shadow_rejected_rate: f64,
    /// Over the last [`RECENT_SECONDS`]: requests refused by an open circuit breaker per second
    /// ([`Counts::circuit_open`]; not in `rejection_ratio`).
    #[serde(default)]
    pub circuit_open_rate: f64,
    /// The descriptors admitted most, heaviest first.
    pub top_admitted: Vec<Hitter>,
    /// The descriptors rejected most, heaviest first.
    pub top_rejected: Vec<Hitter>,
    /// Per node, over the last [`RECENT_SECONDS`] (cluster views only).
    pub by_node: Vec<NodeRates>,
    /// An adaptive `concurrency` rule's limit in force per key (the cluster's on Redis, as this
    /// node's copy holds it), lowest first (at
    /// most [`flowgate::adaptive::MAX_VIEWS`]; keys not yet requested are at the rule's start).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adaptive: Vec<AdaptiveLimit>,
    /// Units charged beyond the limit and not yet paid back by time, over its keys in debt (on
    /// Redis the cluster's, each key once: [`crate::charges::merged_debt`]); 0 for a rule never
    /// charged past its limit.
    #[serde(default)]
    pub debt: u64,
}

/// One key's adaptive concurrency limit.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AdaptiveLimit {
    /// The key (the rule's state key for the descriptor).
    pub key: String,
    /// The limit in force.
    pub limit: u64,
    /// The calls in flight its latest decision saw, less the releases since.
    pub in_flight: u64,
    /// The cluster's limit, kept in Redis; `false` per process, or while this node cannot reach
    /// Redis and moves its own.
    #[serde(default)]
    pub shared: bool,
}

/// The window of the recent rates and of the heavy hitters.
pub const RECENT_SECONDS: u32 = 5;

/// A scheduled change of a rule's limit.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NextChange {
    /// When (Unix milliseconds).
    pub at_ms: i64,
    /// The limit from then, as text (none: unlimited).
    pub limit: Option<String>,
}

/// One node's recent rates for a rule.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeRates {
    /// The node.
    pub node: String,
    /// Admitted per second.
    pub admitted_rate: f64,
    /// Rejected per second.
    pub rejected_rate: f64,
}

/// One queue instance's state.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QueueStats {
    /// The instance's key.
    pub instance: String,
    /// Its queue's domain.
    pub domain: String,
    /// Its queue's name.
    pub queue: String,
    /// The queue's rate, as text (`1/s`).
    pub rate: String,
    /// Jobs held: ready, delayed, reserved and in flight (what `max_depth` bounds, as in
    /// `GET /v1/queues`).
    pub depth: u64,
    /// Jobs delivered and not yet acked.
    pub in_flight: u64,
    /// Jobs in the dead letters.
    pub dead: u64,
    /// Age of the oldest waiting job, in seconds.
    pub oldest_age_s: Option<f64>,
    /// Deliveries per second, measured.
    pub release_rate: Option<f64>,
    /// Seconds until the waiting jobs are released at the queue's rate; none when no worker
    /// takes them (`no_consumer`).
    pub drain_s: Option<f64>,
    /// Jobs are ready and none in flight, and the release they wait for has been due for
    /// longer than [`NO_CONSUMER_AFTER_S`]: no worker is leasing them.
    #[serde(default)]
    pub no_consumer: bool,
}

/// A queue whose due release nobody has taken for this long has no consumer.
pub const NO_CONSUMER_AFTER_S: f64 = 5.0;

/// The kind of the limiter's store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// The embedded memory store.
    #[default]
    Memory,
    /// Redis (a single server or a cluster).
    Redis,
}

impl StoreKind {
    /// Its name in logs, metrics and JSON: `memory` or `redis`.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Redis => "redis",
        }
    }
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The limiter's store.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StoreStats {
    /// Which it is.
    pub kind: StoreKind,
    /// Whether the last request that reached the store failed.
    pub degraded: bool,
    /// Decision latency at the store's median over the recent window, in milliseconds.
    pub p50_ms: Option<f64>,
    /// Decision latency at the 99th percentile over the recent window, in milliseconds.
    pub p99_ms: Option<f64>,
    /// Seconds of the series during which the store was degraded (1) or not (0).
    pub degraded_series: Vec<u8>,
    /// Decisions taken by a failure policy, per second (same window as the rules' series).
    pub failure_policy_series: Vec<u64>,
    /// On Redis: since when this node cannot reach it (Unix milliseconds; none while it can).
    /// Meanwhile the figures are this node's own and the limits are decided by the rules'
    /// failure policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_since_ms: Option<i64>,
    /// On Redis: the primaries this node writes to, failovers followed and reconnections (this
    /// node's view; every node follows the same primaries once a failover is over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<crate::topology::StoreTopology>,
}

/// An alert's state.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AlertView {
    /// Its name.
    pub name: String,
    /// What it watches, as text (`rule api/per-client rejection ratio > 0.5 for 10s`).
    pub watches: String,
    /// `inactive`, `pending` (its condition holds, not yet for its duration) or `firing`.
    pub state: String,
    /// Since when it is pending, or firing (when it fired: its `startsAt`), in Unix milliseconds.
    pub since_ms: Option<i64>,
    /// The value last evaluated (a ratio, an age in seconds, a depth).
    pub value: Option<f64>,
    /// What it watches, by name: a page links it to the rule, queue or breaker shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watched: Option<Watched>,
}

/// What an alert watches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Watched {
    /// A rule.
    Rule {
        /// Its domain.
        domain: String,
        /// Its name.
        name: String,
    },
    /// A queue (every instance of it).
    Queue {
        /// Its domain.
        domain: String,
        /// Its name.
        name: String,
    },
    /// A circuit breaker (every instance of it).
    Breaker {
        /// Its domain.
        domain: String,
        /// Its name.
        name: String,
    },
    /// The limiter's store.
    Store,
}

impl Watched {
    /// What an alert of `kind` watches.
    pub fn of(kind: &AlertKind) -> Self {
        match kind {
            AlertKind::Rule { domain, rule, .. } | AlertKind::RuleDebt { domain, rule, .. } => {
                Watched::Rule {
                    domain: domain.clone(),
                    name: rule.clone(),
                }
            }
            AlertKind::QueueAge { domain, queue, .. }
            | AlertKind::QueueDepth { domain, queue, .. } => Watched::Queue {
                domain: domain.clone(),
                name: queue.clone(),
            },
            AlertKind::StoreDegraded => Watched::Store,
            AlertKind::Breaker { domain, breaker } => Watched::Breaker {
                domain: domain.clone(),
                name: breaker.clone(),
            },
        }
    }
}

/// The rules' version and origin.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RulesInfoView {
    /// The version in force.
    pub version: u64,
    /// `file` or `redis`.
    pub source: String,
}

/// A circuit breaker instance's state.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BreakerView {
    /// The breaker's domain.
    pub domain: String,
    /// The breaker's name.
    pub name: String,
    /// The instance's key (`<domain>:<breaker>:<k>=<v>,...`): one per matched descriptor.
    pub key: String,
    /// `closed`, `open` or `half_open`.
    pub phase: String,
    /// When it entered its phase (Unix milliseconds, by the store's clock).
    pub since_ms: i64,
    /// Calls in its window (closed).
    pub calls: u64,
    /// Bad calls in its window (closed).
    pub bad: u64,
    /// Open or half-open: why it opened last, the calls counted at the transition (the
    /// window's; after a failed probe, the probes reported while half-open). `None` while closed,
    /// or when the cluster's state holds no figures (opened by an older node).
    #[serde(default)]
    pub opened_calls: Option<u64>,
    /// Of `opened_calls`, the bad ones.
    #[serde(default)]
    pub opened_bad: Option<u64>,
    /// Requests it refused per second over the last [`RECENT_SECONDS`]: the cluster's (every
    /// live node's refusals summed) in a cluster view, else this node's.
    #[serde(default)]
    pub refused_rate: f64,
    /// Open: milliseconds until half-open. Half-open: until the first probe lease expires.
    pub retry_after_ms: Option<f64>,
    /// Half-open: probes admitted and not yet reported, lease not expired: the cluster's when
    /// `shared` (as this node last read them, at most a second old), else this process's.
    pub probes_out: u32,
    /// Decided by the cluster's state in Redis; `false` per process (the embedded store), or
    /// while this node cannot reach Redis and decides on its own reports.
    pub shared: bool,
}
