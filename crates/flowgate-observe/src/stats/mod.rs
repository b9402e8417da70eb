//! The figures behind the dashboard, the alerts and `GET /v1/stats`: per rule, decisions counted
//! each second (admitted, rejected, would-be rejections in shadow and of a trial limit, failure
//! policy, refused by a circuit breaker) over 15 minutes, and the heaviest keys admitted and
//! rejected (a bounded heavy-hitter [`sketch`] per rule, never one series per key); the requests
//! each breaker instance refused (`refusals.rs`); the decision latency; the queues' state.
//!
//! A decision pays a few relaxed increments and one summary update ([`cell`]). Once a second
//! [`run`] closes the second: each rule's counts go to its history, the summaries to the recent
//! window; on Redis the node publishes its figures and reads every live node's (`cluster.rs`),
//! and a new [`StatsView`] goes to the subscribers (the alerts, the stream).

pub mod cell;
mod cluster;
mod latency;
mod refusals;
pub mod sketch;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use flowgate::adaptive::AdaptiveView;
use flowgate::breakers::BreakerView as BreakerInstance;
use flowgate::{Rule, RuleSet};
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use cell::{HISTORY_SECONDS, History};
pub use cell::{Outcome, RuleCell};
use cluster::Cluster;
use latency::Latency;
use refusals::Refusals;

use crate::charges::KeyDebt;
use crate::view::{
    AdaptiveLimit, Counts, Hitter, NextChange, NodeView, QueueStats, RECENT_SECONDS, ReadTimes,
    RuleStats, RulesInfoView, Scope, Series, StatsView, StoreKind, StoreStats,
};

/// What the figures read of the server besides what the recorder counts: the limiter's rules,
/// clock, adaptive limits and breakers, the rules' version, the store's health. The server's
/// state provides them, so that the figures know nothing of it.
pub trait Sources: Send + Sync {
    /// The rules in force.
    fn rules(&self) -> Arc<RuleSet>;
    /// Now, by the store's clock (µs since the Unix epoch).
    fn now(&self) -> u64;
    /// The adaptive limits of rule `rule` of `domain`, one per matched descriptor.
    fn adaptive_limits(&self, domain: &str, rule: &str) -> Vec<AdaptiveView>;
    /// Every circuit breaker instance.
    fn breakers(&self) -> Vec<BreakerInstance>;
    /// The rules' version and where they came from.
    fn rules_info(&self) -> RulesInfoView;
    /// Whether the store's last request failed (`flowgate_store_degraded`).
    fn store_degraded(&self) -> bool;
    /// Brings the store's health into its gauges.
    fn refresh_store(&self);
    /// Where the store's primaries are (Redis only).
    fn store_topology(&self) -> Option<crate::topology::StoreTopology> {
        None
    }
    /// Rule `rule` of `domain`'s debt now: units charged past its limit not yet paid back
    /// ([`crate::charges::ChargeMetrics::rule_debt`]).
    fn rule_debt(&self, domain: &str, rule: &str) -> u64 {
        let _ = (domain, rule);
        0
    }
    /// Rule `rule` of `domain`'s keys in debt, as this node last charged them
    /// ([`crate::charges::ChargeMetrics::key_debts`]): published for the cluster's debt.
    fn key_debts(&self, domain: &str, rule: &str) -> Vec<(String, KeyDebt)> {
        let _ = (domain, rule);
        Vec::new()
    }
}
use flowgate_config::schema::{LimitDoc, RuleDoc};

/// Heavy keys shown per rule and list.
pub const TOP: usize = 10;

/// What the sampler keeps of the node as a whole.
#[derive(Default)]
struct NodeSampled {
    /// The last second closed.
    at: i64,
    /// The recent window's decision latency p50 and p99 (ms).
    latency: Option<(f64, f64)>,
    /// Per second: 1 while the store was degraded.
    degraded: History,
    /// The queues, as last read.
    queues: Vec<QueueStats>,
    /// When they were read (Unix ms).
    queues_read_ms: Option<i64>,
}

/// The server's figures.
pub struct Stats {
    /// Whether decisions are counted (`--no-stats` turns it off).
    pub on: bool,
    node: String,
    /// When the node started (Unix seconds).
    started: i64,
    store_kind: StoreKind,
    /// By (domain, rule name): a rule keeps its figures across rule changes.
    cells: RwLock<HashMap<(String, String), Arc<RuleCell>>>,
    latency: Latency,
    /// The requests each breaker instance refused.
    refusals: Refusals,
    sampled: Mutex<NodeSampled>,
    cluster: Option<Cluster>,
    views: watch::Sender<Arc<StatsView>>,
    /// Set when the server shuts down: the streams of views end.
    closed: watch::Sender<bool>,
}

/// The window of the view sent to subscribers each second.
pub const SUBSCRIBER_WINDOW: usize = 60;

/// Text of a limit: `20/1s, token_bucket, burst 20`.
fn limit_text(l: Option<&flowgate::Limit>) -> Option<String> {
    l?;
    let d = LimitDoc::of(l);
    let mut out = d.limit;
    if let Some(a) = d.algorithm {
        out.push_str(", ");
        out.push_str(flowgate::Algorithm::from(a).name());
    }
    if let Some(b) = d.burst {
        out.push_str(&format!(", burst {b}"));
    }
    Some(out)
}

/// Text of a rule's schedule: each override's fields, `limit=50/s days=[sat, sun]; ...`.
fn schedule_text(r: &Rule) -> String {
    let doc = RuleDoc::of(r);
    doc.schedule
        .iter()
        .map(|o| match serde_json::to_value(o) {
            Ok(serde_json::Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k}={s}"),
                    v => format!("{k}={v}"),
                })
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn rate(sum: u64) -> f64 {
    sum as f64 / f64::from(RECENT_SECONDS)
}

fn hitters(s: &sketch::Summary) -> Vec<Hitter> {
    s.top(TOP)
        .into_iter()
        .map(|c| Hitter {
            descriptor: c.label.to_string(),
            rate: rate(c.count),
            error: rate(c.error),
        })
        .collect()
}

/// The sums over the last `n` entries of `w`.
fn sum_last(w: &[Counts], n: usize) -> Counts {
    let mut s = Counts::default();
    for c in w.iter().rev().take(n) {
        cell::add(&mut s, c);
    }
    s
}

fn series(start: i64, w: &[Counts]) -> Series {
    Series {
        start,
        admitted: w.iter().map(|c| c.admitted).collect(),
        rejected: w.iter().map(|c| c.rejected).collect(),
        shadow_rejected: w.iter().map(|c| c.shadow_rejected).collect(),
        trial_rejected: w.iter().map(|c| c.trial_rejected).collect(),
        circuit_open: w.iter().map(|c| c.circuit_open).collect(),
    }
}

impl Stats {
    /// Figures of node `node`, whose limiter's store is `store_kind`; shared with the cluster
    /// through `redis` when given; decisions are counted when `on`.
    pub fn new(
        node: String,
        store_kind: StoreKind,
        redis: Option<flowgate_redis::RedisConnection>,
        on: bool,
    ) -> Self {
        Self {
            on,
            node,
            started: second_now().0,
            store_kind,
            cells: RwLock::new(HashMap::new()),
            latency: Latency::new(RECENT_SECONDS as usize),
            refusals: Refusals::default(),
            sampled: Mutex::new(NodeSampled::default()),
            cluster: redis.map(Cluster::new),
            views: watch::channel(Arc::new(StatsView::default())).0,
            closed: watch::channel(false).0,
        }
    }

    /// A new view each second (window [`SUBSCRIBER_WINDOW`], alerts not filled).
    pub fn subscribe(&self) -> watch::Receiver<Arc<StatsView>> {
        self.views.subscribe()
    }

    /// Turns `true` when the server shuts down.
    pub fn closed(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// The figures of `rule` (made on first use).
    pub fn cell(&self, domain: &str, rule: &str) -> Arc<RuleCell> {
        let key = (domain.to_owned(), rule.to_owned());
        if let Some(c) = self.cells.read().get(&key) {
            return Arc::clone(c);
        }
        Arc::clone(self.cells.write().entry(key).or_default())
    }

    /// Counts a decision's latency.
    #[inline]
    pub fn latency(&self, d: Duration) {
        self.latency.record(d);
    }

    /// Counts a request refused by circuit breaker instance `key`.
    pub fn breaker_refused(&self, key: &str) {
        self.refusals.count(key);
    }

    /// The queues' state, as just read.
    pub fn set_queues(&self, queues: Vec<QueueStats>) {
        let mut s = self.sampled.lock();
        s.queues = queues;
        s.queues_read_ms = Some((flowgate::clock::system_now() / 1000) as i64);
    }

    /// Closes second `at`: every rule's counts and summaries, the latency window, the store's
    /// state; forgets the figures of rules no longer in force.
    fn sample(&self, at: i64, degraded: bool, in_force: &[Arc<Rule>]) {
        let cells: Vec<Arc<RuleCell>> = {
            let mut cells = self.cells.write();
            cells.retain(|(d, n), c| {
                Arc::strong_count(c) > 1 || in_force.iter().any(|r| &r.domain == d && &r.name == n)
            });
            cells.values().cloned().collect()
        };
        for c in &cells {
            c.sample(at);
        }
        self.refusals.sample();
        let latency = self.latency.sample();
        let mut s = self.sampled.lock();
        s.at = at;
        s.latency = latency;
        s.degraded.push(
            at,
            Counts {
                admitted: u64::from(degraded),
                ..Counts::default()
            },
        );
    }

    /// The view over the last `window` seconds (at most 900); the cluster's when the node is on
    /// Redis and `scope` allows it.
    pub fn view(&self, state: &impl Sources, window: usize, scope: Option<Scope>) -> StatsView {
        let window = window.clamp(1, HISTORY_SECONDS);
        let rules = state.rules();
        let now = state.now();
        let (at, latency, degraded, queues, queues_read_ms) = {
            let s = self.sampled.lock();
            (
                s.at,
                s.latency,
                s.degraded.last(window, s.at),
                s.queues.clone(),
                s.queues_read_ms,
            )
        };
        let (cluster_read_ms, unreachable_since_ms) =
            self.cluster.as_ref().map_or((None, None), Cluster::reach);
        let cluster = match scope {
            Some(Scope::Node) => None,
            _ => self.cluster.as_ref().and_then(|c| c.read()),
        };
        let start = at - window as i64 + 1;
        let mut failure_policy = vec![0u64; window];
        let mut out_rules = Vec::new();
        for r in rules
            .rules()
            .iter()
            .filter(|r| r.limit.is_some() || r.schedule.is_some())
        {
            let key = (r.domain.clone(), r.name.clone());
            let (w, totals, top_a, top_r, by_node) = match &cluster {
                Some(c) => {
                    let w = c
                        .history
                        .get(&key)
                        .map(|h| h.last(window.max(RECENT_SECONDS as usize), at))
                        .unwrap_or_else(|| {
                            vec![Counts::default(); window.max(RECENT_SECONDS as usize)]
                        });
                    let (top_a, top_r) = c.tops(&key);
                    (
                        w,
                        c.totals(&key),
                        hitters(&top_a),
                        hitters(&top_r),
                        c.by_node(&key),
                    )
                }
                None => {
                    let cell = self.cells.read().get(&key).cloned();
                    match cell {
                        Some(cell) => {
                            let s = cell.sampled.lock();
                            (
                                s.history.last(window.max(RECENT_SECONDS as usize), at),
                                cell.totals(),
                                hitters(&s.top_admitted),
                                hitters(&s.top_rejected),
                                Vec::new(),
                            )
                        }
                        None => (
                            vec![Counts::default(); window.max(RECENT_SECONDS as usize)],
                            Counts::default(),
                            Vec::new(),
                            Vec::new(),
                            Vec::new(),
                        ),
                    }
                }
            };
            let recent = sum_last(&w, RECENT_SECONDS as usize);
            let w = &w[w.len() - window..];
            for (f, c) in failure_policy.iter_mut().zip(w) {
                *f += c.failure_policy;
            }
            let decided = recent.admitted + recent.rejected;
            out_rules.push(RuleStats {
                domain: r.domain.clone(),
                name: r.name.clone(),
                pattern: r.pattern_text(),
                shadow: r.shadow,
                limit: limit_text(r.limit_at(now)),
                schedule: r.schedule.as_ref().map(|_| schedule_text(r)),
                next_change: r.schedule.as_ref().and_then(|_| {
                    r.next_change(now).map(|(at, l)| NextChange {
                        at_ms: (at / 1000) as i64,
                        limit: limit_text(l),
                    })
                }),
                trial: limit_text(r.trial.as_ref()),
                totals,
                series: series(start, w),
                admitted_rate: rate(recent.admitted),
                rejected_rate: rate(recent.rejected),
                rejection_ratio: if decided == 0 {
                    0.0
                } else {
                    recent.rejected as f64 / decided as f64
                },
                trial_rejected_rate: rate(recent.trial_rejected),
                shadow_rejected_rate: rate(recent.shadow_rejected),
                circuit_open_rate: rate(recent.circuit_open),
                top_admitted: top_a,
                top_rejected: top_r,
                by_node,
                adaptive: match r.adaptive {
                    None => Vec::new(),
                    Some(_) => state
                        .adaptive_limits(&r.domain, &r.name)
                        .into_iter()
                        .map(|a| AdaptiveLimit {
                            key: a.key,
                            limit: a.limit,
                            in_flight: a.in_flight,
                            shared: a.shared,
                        })
                        .collect(),
                },
                debt: match &cluster {
                    Some(c) => c.debt(&key, state.key_debts(&r.domain, &r.name), now),
                    None => state.rule_debt(&r.domain, &r.name),
                },
            });
        }
        let node_store = StoreStats {
            kind: self.store_kind,
            degraded: state.store_degraded(),
            p50_ms: latency.map(|l| l.0),
            p99_ms: latency.map(|l| l.1),
            degraded_series: degraded.iter().map(|c| c.admitted.min(1) as u8).collect(),
            failure_policy_series: failure_policy,
            unreachable_since_ms,
            topology: state.store_topology(),
        };
        let revised_from = cluster.as_ref().and_then(|c| c.revised_from);
        let (scope, nodes, store) = match &cluster {
            Some(c) => (Scope::Cluster, c.nodes.clone(), c.store(node_store)),
            None => (
                Scope::Node,
                vec![NodeView {
                    id: self.node.clone(),
                    seen_ms: at * 1000,
                    live: true,
                    started_ms: Some(self.started * 1000),
                }],
                node_store,
            ),
        };
        StatsView {
            at,
            scope,
            node: self.node.clone(),
            nodes,
            rules: out_rules,
            queues,
            store,
            alerts: Vec::new(),
            reservations: Vec::new(),
            breakers: state
                .breakers()
                .iter()
                .map(|b| {
                    let refused = match &cluster {
                        Some(c) => c.refused(&b.key),
                        None => self.refusals.recent(&b.key),
                    };
                    super::breakers::view(b, rate(refused))
                })
                .collect(),
            rules_info: state.rules_info(),
            read: ReadTimes {
                queues_ms: queues_read_ms,
                cluster_ms: cluster_read_ms,
            },
            revised_from,
        }
    }
}

/// The Unix second now, and how long until the next one starts.
fn second_now() -> (i64, Duration) {
    let us = flowgate::clock::system_now();
    let s = (us / 1_000_000) as i64;
    (s, Duration::from_micros(1_000_000 - us % 1_000_000))
}

impl Stats {
    /// Closes the second in progress and, on Redis, publishes this node's figures a last time:
    /// a node that stops leaves the cluster every decision it made, not its figures of the last
    /// second short. For a shutdown, once the requests in flight are answered and [`run`] has
    /// ended (it closes no second after this one). Waits on Redis (its connection's timeout):
    /// bound it where that matters.
    pub async fn publish_last(&self, state: &impl Sources) {
        let (now, _) = second_now();
        let rules = state.rules();
        state.refresh_store();
        self.sample(now, state.store_degraded(), rules.rules());
        if let Some(c) = &self.cluster {
            let mine = self.snapshot(now, c.publish_from(now), &rules, state);
            c.exchange(mine, now, LAST_EXCHANGE).await;
        }
    }
}

/// How long the last exchange, at shutdown, may wait on Redis.
const LAST_EXCHANGE: Duration = Duration::from_secs(1);

/// How long a second's exchange with the cluster may take: until shortly before the next second
/// ends to be closed, so that a Redis that hangs delays no second's figures, views or alerts
/// (each second closed late would be merged with the next: a chart of 0 and twice the rate).
fn exchange_budget() -> Duration {
    const MARGIN: Duration = Duration::from_millis(50);
    const LEAST: Duration = Duration::from_millis(100);
    let (_, left) = second_now();
    left.saturating_sub(MARGIN).max(LEAST)
}

/// Closes each second as it ends, until `shutdown`: samples the figures, shares them with the
/// cluster, and sends the new view to the subscribers. The second in progress at `shutdown` is
/// left to [`Stats::publish_last`], once the requests in flight are answered.
pub async fn run(state: Arc<impl Sources>, stats: Arc<Stats>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let (_, wait) = second_now();
        tokio::select! {
            () = tokio::time::sleep(wait + Duration::from_millis(2)) => {}
            _ = shutdown.changed() => {
                stats.closed.send_replace(true);
                return;
            }
        }
        let (now, _) = second_now();
        let at = now - 1;
        let rules = state.rules();
        // The store's health as of now, not as of the last refresh (the store alert reads it).
        state.refresh_store();
        let degraded = state.store_degraded();
        stats.sample(at, degraded, rules.rules());
        if let Some(c) = &stats.cluster {
            let mine = stats.snapshot(at, c.publish_from(at), &rules, state.as_ref());
            c.exchange(mine, at, exchange_budget()).await;
        }
        let view = stats.view(state.as_ref(), SUBSCRIBER_WINDOW, None);
        stats.views.send_replace(Arc::new(view));
    }
}
