//! The cluster's figures, through Redis. Each second every node writes its figures (per rule:
//! counts since it started, its counts of each recent second, heavy-key summaries; its store's
//! state) under a key that expires after [`EXPIRY_MS`], and its last-seen time in a sorted set;
//! then it reads every live node's.
//!
//! The cluster's count for a second is the sum of the nodes' counts *of that second*: a node
//! publishes its seconds with their Unix times, and a reader places each at its time, taking each
//! node's seconds once (it remembers the last it took). A node publishes its last
//! [`RECENT_SECONDS`] seconds, so a reader that misses a few of its publishes loses nothing; after
//! publishes that failed (Redis unreachable) it also carries every second since its last
//! successful one, for [`CARRY`] successful publishes, so that every reader takes them. The
//! decisions of an outage (those of the failure policies) are thus drawn at the seconds they were
//! made, never as one burst at the reconnection. The totals are the sum of each live node's counts
//! since it started; a node that stops publishing leaves the live list when its key expires.
//! Each node also publishes the requests each breaker instance refused over the recent window
//! (at most [`super::refusals::MAX_PUBLISHED`], the most refusing); the cluster's are their
//! sums.
//!
//! Keys share the hash tag `{stats}`, so that one `MGET` reads them on a Redis Cluster.

use std::collections::HashMap;
use std::time::Duration;

use flowgate_redis::RedisConnection;
use parking_lot::{Mutex, MutexGuard};
use serde::{Deserialize, Serialize};

use super::cell::{self, HISTORY_SECONDS, History};
use super::sketch::{Counter, Summary};
use super::{RuleCell, Stats, rate};
use crate::charges::{KeyDebt, merged_debt};
use crate::view::{Counts, NodeRates, NodeView, RECENT_SECONDS, StoreStats};

/// A node's figures expire, and it leaves the live list, this long after it last published.
pub(super) const EXPIRY_MS: i64 = 5_000;
/// A node that stopped is listed (as not live) this long.
const FORGET_MS: i64 = 15 * 60 * 1000;
/// The sorted set of nodes by last-seen time (Unix ms).
const NODES_KEY: &str = "flowgate:{stats}:nodes";
/// A node's figures: this prefix and its identifier.
const NODE_PREFIX: &str = "flowgate:{stats}:node:";
/// After failed publishes, the seconds they missed are carried by this many successful ones:
/// a reader whose own exchanges failed a little longer still finds them.
const CARRY: u32 = 15;

/// A key counted in a node's summary: text, hash, count, error.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Counted(String, u64, u64, u64);

/// One second of a rule's counts on a node: its Unix second, then admitted, rejected, would-be
/// rejections in shadow and of the trial limit, decisions of the failure policy, refusals of
/// an open circuit breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Second(i64, u64, u64, u64, u64, u64, u64);

impl Second {
    fn of(at: i64, c: &Counts) -> Self {
        Second(
            at,
            c.admitted,
            c.rejected,
            c.shadow_rejected,
            c.trial_rejected,
            c.failure_policy,
            c.circuit_open,
        )
    }

    fn counts(&self) -> Counts {
        Counts {
            admitted: self.1,
            rejected: self.2,
            shadow_rejected: self.3,
            trial_rejected: self.4,
            failure_policy: self.5,
            circuit_open: self.6,
        }
    }
}

/// One rule's figures on one node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct NodeRule {
    domain: String,
    name: String,
    totals: Counts,
    /// Its seconds with counts, oldest first, from the first second it publishes (see
    /// [`Publishing::from`]) to the snapshot's `at`; seconds without counts are left out.
    #[serde(default)]
    seconds: Vec<Second>,
    top_admitted: Vec<Counted>,
    top_rejected: Vec<Counted>,
    /// Its keys in debt, as this node last charged them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    debts: Vec<(String, KeyDebt)>,
}

impl NodeRule {
    /// Its counts over the [`RECENT_SECONDS`] ending at `at`.
    fn recent(&self, at: i64) -> Counts {
        let mut sum = Counts::default();
        for s in self
            .seconds
            .iter()
            .filter(|s| s.0 > at - i64::from(RECENT_SECONDS) && s.0 <= at)
        {
            cell::add(&mut sum, &s.counts());
        }
        sum
    }
}

/// What a node publishes each second.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct NodeSnapshot {
    node: String,
    /// When it started (Unix seconds).
    started: i64,
    /// The second it closed last.
    at: i64,
    degraded: bool,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    rules: Vec<NodeRule>,
    /// Requests refused per breaker instance over the recent window (instance key, count).
    #[serde(default)]
    refused: Vec<(String, u64)>,
}

fn counted(s: &Summary) -> Vec<Counted> {
    s.counters()
        .iter()
        .map(|c| Counted(c.label.to_string(), c.hash, c.count, c.error))
        .collect()
}

fn summary(c: &[Counted]) -> Summary {
    Summary::from_counters(
        c.iter()
            .map(|Counted(label, hash, count, error)| Counter {
                hash: *hash,
                label: label.as_str().into(),
                count: *count,
                error: *error,
            })
            .collect(),
    )
}

impl Stats {
    /// This node's figures for the rules in force, as published: its seconds from `from` to
    /// `at`.
    pub(super) fn snapshot(
        &self,
        at: i64,
        from: i64,
        rules: &flowgate::RuleSet,
        state: &impl super::Sources,
    ) -> NodeSnapshot {
        let span = usize::try_from(at - from + 1)
            .unwrap_or(1)
            .clamp(1, HISTORY_SECONDS);
        let cells = self.cells.read();
        let mut out = Vec::new();
        for r in rules.rules() {
            let debts = state.key_debts(&r.domain, &r.name);
            let Some(c): Option<&std::sync::Arc<RuleCell>> =
                cells.get(&(r.domain.clone(), r.name.clone()))
            else {
                // A rule this node only charged (reports, commits): its debts alone.
                if !debts.is_empty() {
                    out.push(NodeRule {
                        domain: r.domain.clone(),
                        name: r.name.clone(),
                        totals: Counts::default(),
                        seconds: Vec::new(),
                        top_admitted: Vec::new(),
                        top_rejected: Vec::new(),
                        debts,
                    });
                }
                continue;
            };
            let s = c.sampled.lock();
            let first = at - span as i64 + 1;
            out.push(NodeRule {
                domain: r.domain.clone(),
                name: r.name.clone(),
                totals: s.last,
                seconds: s
                    .history
                    .last(span, at)
                    .iter()
                    .zip(first..)
                    .filter(|(c, _)| **c != Counts::default())
                    .map(|(c, second)| Second::of(second, c))
                    .collect(),
                top_admitted: counted(&s.top_admitted),
                top_rejected: counted(&s.top_rejected),
                debts,
            });
        }
        let sampled = self.sampled.lock();
        NodeSnapshot {
            node: self.node.clone(),
            started: self.started,
            at,
            degraded: sampled
                .degraded
                .last(1, sampled.at)
                .first()
                .is_some_and(|c| c.admitted > 0),
            p50_ms: sampled.latency.map(|l| l.0),
            p99_ms: sampled.latency.map(|l| l.1),
            rules: out,
            refused: self.refusals.published(),
        }
    }
}

/// Which seconds this node's next figures carry.
#[derive(Debug, Default)]
pub(super) struct Publishing {
    /// The newest second a successful publish carried.
    published: Option<i64>,
    /// After failed publishes: the first second they missed, and the successful publishes
    /// that carried it since.
    backlog: Option<(i64, u32)>,
}

impl Publishing {
    /// The first second to publish with second `at`: the recent window's, or the first second
    /// missed by failed publishes (at most [`HISTORY_SECONDS`] back).
    pub(super) fn from(&self, at: i64) -> i64 {
        let recent = at - i64::from(RECENT_SECONDS) + 1;
        let from = self.backlog.map_or(recent, |(first, _)| first.min(recent));
        from.max(at - HISTORY_SECONDS as i64 + 1)
    }

    /// The publish of second `at` succeeded.
    fn succeeded(&mut self, at: i64) {
        self.published = Some(at);
        self.backlog = match self.backlog {
            Some((first, n)) if n + 1 < CARRY => Some((first, n + 1)),
            _ => None,
        };
    }

    /// The publish of second `at` failed: its seconds, those since the last success, and the
    /// recent window before it are carried by the next ones (a reader whose own exchanges
    /// failed first may have missed the last publishes before the outage; it takes none twice).
    fn failed(&mut self, at: i64) {
        let first = match self.backlog {
            Some((first, _)) => first,
            None => self
                .published
                .map_or(at, |p| p + 1 - i64::from(RECENT_SECONDS)),
        };
        self.backlog = Some((first, 0));
    }
}

/// The cluster's figures, as last read.
#[derive(Default)]
pub(super) struct ClusterState {
    /// Whether the last exchange with Redis succeeded (else the view is the node's own).
    pub(super) ok: bool,
    /// When the figures were last read from Redis (Unix ms).
    pub(super) read_ms: Option<i64>,
    /// Since when the exchanges fail (Unix ms): this node cannot reach Redis.
    pub(super) failing_since_ms: Option<i64>,
    /// Every node seen within [`FORGET_MS`].
    pub(super) nodes: Vec<crate::view::NodeView>,
    /// Per rule, the cluster's count per second.
    pub(super) history: HashMap<(String, String), History>,
    /// The oldest second that the last read changed among those a node carried after failed
    /// publishes (older than its recent window): seconds placed where they belong, after an
    /// outage.
    pub(super) revised_from: Option<i64>,
    /// The live nodes' figures.
    snapshots: Vec<NodeSnapshot>,
    /// Requests refused per breaker instance over the recent window, summed over the live
    /// nodes.
    refused: HashMap<String, u64>,
    /// Each node's newest second taken into the history, and the second it was last listed at.
    taken: HashMap<String, (i64, i64)>,
}

impl ClusterState {
    fn rules<'a>(
        &'a self,
        key: &'a (String, String),
    ) -> impl Iterator<Item = (&'a NodeSnapshot, &'a NodeRule)> {
        self.snapshots.iter().filter_map(move |s| {
            s.rules
                .iter()
                .find(|r| r.domain == key.0 && r.name == key.1)
                .map(|r| (s, r))
        })
    }

    /// A rule's totals, summed over the live nodes.
    pub(super) fn totals(&self, key: &(String, String)) -> Counts {
        let mut t = Counts::default();
        for (_, r) in self.rules(key) {
            cell::add(&mut t, &r.totals);
        }
        t
    }

    /// A rule's heaviest admitted and rejected keys, merged over the live nodes.
    pub(super) fn tops(&self, key: &(String, String)) -> (Summary, Summary) {
        let a: Vec<Summary> = self
            .rules(key)
            .map(|(_, r)| summary(&r.top_admitted))
            .collect();
        let r: Vec<Summary> = self
            .rules(key)
            .map(|(_, r)| summary(&r.top_rejected))
            .collect();
        (Summary::merge(&a), Summary::merge(&r))
    }

    /// A rule's recent rates per node.
    pub(super) fn by_node(&self, key: &(String, String)) -> Vec<NodeRates> {
        self.rules(key)
            .map(|(s, r)| {
                let recent = r.recent(s.at);
                NodeRates {
                    node: s.node.clone(),
                    admitted_rate: rate(recent.admitted),
                    rejected_rate: rate(recent.rejected),
                }
            })
            .collect()
    }

    /// A rule's debt at `now` (store clock): its keys in debt as the live nodes published them
    /// and as this node (`mine`) charged them since, each key once, as its latest charge found
    /// it.
    pub(super) fn debt(
        &self,
        key: &(String, String),
        mine: Vec<(String, KeyDebt)>,
        now: u64,
    ) -> u64 {
        let published = self
            .rules(key)
            .flat_map(|(_, r)| r.debts.iter().map(|(k, d)| (k.as_str(), d)));
        merged_debt(
            published.chain(mine.iter().map(|(k, d)| (k.as_str(), d))),
            now,
        )
    }

    /// Requests breaker instance `key` refused over the recent window, on every live node.
    pub(super) fn refused(&self, key: &str) -> u64 {
        self.refused.get(key).copied().unwrap_or(0)
    }

    /// The store as the cluster sees it: degraded when a node is, the worst node's latency.
    pub(super) fn store(&self, mut node: StoreStats) -> StoreStats {
        node.degraded |= self.snapshots.iter().any(|s| s.degraded);
        let worst = |f: fn(&NodeSnapshot) -> Option<f64>| {
            self.snapshots.iter().filter_map(f).reduce(f64::max)
        };
        node.p50_ms = worst(|s| s.p50_ms).or(node.p50_ms);
        node.p99_ms = worst(|s| s.p99_ms).or(node.p99_ms);
        node
    }

    /// Takes in the live nodes' figures read for second `at`: each node's seconds not taken
    /// yet, up to `at`, each at its own second.
    fn update(&mut self, at: i64, nodes: Vec<NodeView>, snapshots: Vec<NodeSnapshot>) {
        for h in self.history.values_mut() {
            h.push(at, Counts::default());
        }
        self.refused.clear();
        for (key, n) in snapshots.iter().flat_map(|s| &s.refused) {
            *self.refused.entry(key.clone()).or_default() += n;
        }
        let mut revised: Option<i64> = None;
        for s in &snapshots {
            let taken = self.taken.get(&s.node).map(|&(t, _)| t);
            // A node whose clock is ahead: its later seconds are taken at a later read.
            let upto = s.at.min(at);
            for r in &s.rules {
                let new = r
                    .seconds
                    .iter()
                    .filter(|x| taken.is_none_or(|t| x.0 > t) && x.0 <= upto);
                for x in new {
                    let h = self
                        .history
                        .entry((r.domain.clone(), r.name.clone()))
                        .or_default();
                    if h.seconds.is_empty() {
                        h.push(at, Counts::default());
                    }
                    h.add(x.0, x.counts());
                    // A second carried after failed publishes (older than the node's recent
                    // window), not one a second late: a node whose clock is behind does not
                    // revise the past each second.
                    if x.0 < at && x.0 <= s.at - i64::from(RECENT_SECONDS) {
                        revised = Some(revised.map_or(x.0, |v| v.min(x.0)));
                    }
                }
            }
            self.taken
                .insert(s.node.clone(), (taken.map_or(upto, |t| t.max(upto)), at));
        }
        // A node forgotten (not seen for FORGET_MS) is taken afresh if it comes back; one only
        // missing from a read (Redis restarted empty, its first publish not there yet) is not:
        // its seconds already taken, which it carries again, would be counted twice.
        for (node, (_, seen)) in &mut self.taken {
            if nodes.iter().any(|v| &v.id == node) {
                *seen = at;
            }
        }
        self.taken
            .retain(|_, &mut (_, seen)| at - seen < FORGET_MS / 1000);
        self.revised_from = revised;
        self.nodes = nodes;
        self.snapshots = snapshots;
        self.ok = true;
    }
}

/// A node's connection to the cluster's figures.
pub(super) struct Cluster {
    conn: RedisConnection,
    state: Mutex<ClusterState>,
    publishing: Mutex<Publishing>,
}

impl Cluster {
    pub(super) fn new(conn: RedisConnection) -> Self {
        Self {
            conn,
            state: Mutex::new(ClusterState::default()),
            publishing: Mutex::new(Publishing::default()),
        }
    }

    /// The cluster's figures, if the last exchange succeeded.
    pub(super) fn read(&self) -> Option<MutexGuard<'_, ClusterState>> {
        let s = self.state.lock();
        s.ok.then_some(s)
    }

    /// When the cluster's figures were last read, and since when the exchanges fail (Unix ms).
    pub(super) fn reach(&self) -> (Option<i64>, Option<i64>) {
        let s = self.state.lock();
        (s.read_ms, s.failing_since_ms)
    }

    /// The first second the figures published with second `at` carry.
    pub(super) fn publish_from(&self, at: i64) -> i64 {
        self.publishing.lock().from(at)
    }

    /// Publishes `mine` and reads every live node's figures, within `budget`: past it (a Redis
    /// that hangs) the exchange fails, so that the next second is closed on time.
    pub(super) async fn exchange(&self, mine: NodeSnapshot, at: i64, budget: Duration) {
        let result = tokio::time::timeout(budget, self.try_exchange(&mine))
            .await
            .unwrap_or_else(|_| Err(format!("Redis did not answer within {budget:?}")));
        let now_ms = (flowgate::clock::system_now() / 1000) as i64;
        match result {
            Ok((nodes, snapshots)) => {
                self.publishing.lock().succeeded(at);
                let mut s = self.state.lock();
                s.update(at, nodes, snapshots);
                s.read_ms = Some(now_ms);
                s.failing_since_ms = None;
            }
            Err(e) => {
                self.publishing.lock().failed(at);
                let mut s = self.state.lock();
                if s.ok {
                    tracing::warn!(error = %e, "cannot share the figures with the cluster: the dashboard shows this node's own");
                }
                s.ok = false;
                s.failing_since_ms.get_or_insert(now_ms);
            }
        }
    }

    async fn try_exchange(
        &self,
        mine: &NodeSnapshot,
    ) -> Result<(Vec<NodeView>, Vec<NodeSnapshot>), String> {
        let json = serde_json::to_string(mine).map_err(|e| e.to_string())?;
        let now_ms = (flowgate::clock::system_now() / 1000) as i64;
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(format!("{NODE_PREFIX}{}", mine.node))
            .arg(json)
            .arg("PX")
            .arg(EXPIRY_MS)
            .ignore()
            .cmd("ZADD")
            .arg(NODES_KEY)
            .arg(now_ms)
            .arg(&mine.node)
            .ignore()
            .cmd("ZREMRANGEBYSCORE")
            .arg(NODES_KEY)
            .arg("-inf")
            .arg(now_ms - FORGET_MS)
            .ignore()
            .cmd("ZRANGE")
            .arg(NODES_KEY)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES");
        let (seen,): (Vec<(String, i64)>,) = self
            .conn
            .query_pipe(&pipe)
            .await
            .map_err(|e| e.to_string())?;
        let nodes: Vec<NodeView> = seen
            .into_iter()
            .map(|(id, seen_ms)| NodeView {
                live: seen_ms >= now_ms - EXPIRY_MS,
                id,
                seen_ms,
                started_ms: None,
            })
            .collect();
        let live: Vec<String> = nodes
            .iter()
            .filter(|n| n.live)
            .map(|n| format!("{NODE_PREFIX}{}", n.id))
            .collect();
        let mut snapshots = Vec::new();
        if !live.is_empty() {
            let texts: Vec<Option<String>> = self
                .conn
                .query(redis::cmd("MGET").arg(&live))
                .await
                .map_err(|e| e.to_string())?;
            for t in texts.into_iter().flatten() {
                match serde_json::from_str::<NodeSnapshot>(&t) {
                    Ok(s) => snapshots.push(s),
                    Err(e) => tracing::warn!(error = %e, "a node's figures cannot be read"),
                }
            }
        }
        let nodes = nodes
            .into_iter()
            .map(|mut n| {
                let snapshot = snapshots.iter().find(|s| s.node == n.id);
                n.live &= snapshot.is_some();
                n.started_ms = snapshot.map(|s| s.started * 1000);
                n
            })
            .collect();
        Ok((nodes, snapshots))
    }
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
