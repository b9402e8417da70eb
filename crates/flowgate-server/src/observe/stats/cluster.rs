//! The cluster's figures, through Redis. Each second every node writes its figures (per rule:
//! counts since it started, the recent window's counts and heavy-key summaries; its store's
//! state) under a key that expires after [`EXPIRY_MS`], and its last-seen time in a sorted set;
//! then it reads every live node's. The cluster's count for a second is the sum of the nodes'
//! increments since their previous figures, so the totals are exact whatever the nodes' clocks
//! and however their seconds interleave; a node that stops publishing leaves the live list when
//! its key expires. Each node also publishes the requests each breaker instance refused over
//! the recent window (at most [`super::refusals::MAX_PUBLISHED`], the most refusing); the
//! cluster's are their sums.
//!
//! Keys share the hash tag `{stats}`, so that one `MGET` reads them on a Redis Cluster.

use std::collections::HashMap;

use flowgate_redis::RedisConnection;
use parking_lot::{Mutex, MutexGuard};
use serde::{Deserialize, Serialize};

use super::cell::{self, History};
use super::sketch::{Counter, Summary};
use super::{RuleCell, Stats, rate};
use crate::observe::view::{Counts, NodeRates, NodeView, RECENT_SECONDS, StoreStats};

/// A node's figures expire, and it leaves the live list, this long after it last published.
pub(crate) const EXPIRY_MS: i64 = 5_000;
/// A node that stopped is listed (as not live) this long.
const FORGET_MS: i64 = 15 * 60 * 1000;
/// The sorted set of nodes by last-seen time (Unix ms).
const NODES_KEY: &str = "flowgate:{stats}:nodes";
/// A node's figures: this prefix and its identifier.
const NODE_PREFIX: &str = "flowgate:{stats}:node:";

/// A key counted in a node's summary: text, hash, count, error.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Counted(String, u64, u64, u64);

/// One rule's figures on one node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct NodeRule {
    domain: String,
    name: String,
    totals: Counts,
    recent: Counts,
    top_admitted: Vec<Counted>,
    top_rejected: Vec<Counted>,
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
    /// This node's figures for the rules in force, as published.
    pub(super) fn snapshot(&self, at: i64, rules: &flowgate_core::RuleSet) -> NodeSnapshot {
        let cells = self.cells.read();
        let mut out = Vec::new();
        for r in rules.rules() {
            let Some(c): Option<&std::sync::Arc<RuleCell>> =
                cells.get(&(r.domain.clone(), r.name.clone()))
            else {
                continue;
            };
            let s = c.sampled.lock();
            out.push(NodeRule {
                domain: r.domain.clone(),
                name: r.name.clone(),
                totals: s.last,
                recent: super::sum_last(
                    &s.history.last(RECENT_SECONDS as usize, at),
                    RECENT_SECONDS as usize,
                ),
                top_admitted: counted(&s.top_admitted),
                top_rejected: counted(&s.top_rejected),
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

/// The cluster's figures, as last read.
#[derive(Default)]
pub(super) struct ClusterState {
    /// Whether the last exchange with Redis succeeded (else the view is the node's own).
    pub(super) ok: bool,
    /// Every node seen within [`FORGET_MS`].
    pub(super) nodes: Vec<crate::observe::view::NodeView>,
    /// Per rule, the cluster's count per second.
    pub(super) history: HashMap<(String, String), History>,
    /// The live nodes' figures.
    snapshots: Vec<NodeSnapshot>,
    /// Requests refused per breaker instance over the recent window, summed over the live
    /// nodes.
    refused: HashMap<String, u64>,
    /// Each (node, domain, rule)'s totals at the previous read.
    prev: HashMap<(String, String, String), Counts>,
    /// The nodes read at the previous read.
    known: std::collections::HashSet<String>,
}

impl ClusterState {
    fn rules<'a>(
        &'a self,
        key: &'a (String, String),
    ) -> impl Iterator<Item = (&'a str, &'a NodeRule)> {
        self.snapshots.iter().filter_map(move |s| {
            s.rules
                .iter()
                .find(|r| r.domain == key.0 && r.name == key.1)
                .map(|r| (s.node.as_str(), r))
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
            .map(|(node, r)| NodeRates {
                node: node.to_owned(),
                admitted_rate: rate(r.recent.admitted),
                rejected_rate: rate(r.recent.rejected),
            })
            .collect()
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

    /// Takes in the live nodes' figures read for second `at`.
    fn update(
        &mut self,
        at: i64,
        started: i64,
        nodes: Vec<NodeView>,
        snapshots: Vec<NodeSnapshot>,
    ) {
        let mut seconds: HashMap<(String, String), Counts> = HashMap::new();
        let mut prev = HashMap::new();
        for s in &snapshots {
            for r in &s.rules {
                let key = (s.node.clone(), r.domain.clone(), r.name.clone());
                let t = &r.totals;
                let inc = match self.prev.get(&key) {
                    // A node restarted under the same name counts from zero again.
                    Some(before)
                        if t.admitted < before.admitted
                            || t.rejected < before.rejected
                            || t.shadow_rejected < before.shadow_rejected
                            || t.circuit_open < before.circuit_open =>
                    {
                        Some(*t)
                    }
                    Some(before) => Some(cell::minus(t, before)),
                    // A rule's first decisions on a node already known, or on a node that
                    // started after this one (all it counted, this one could have seen).
                    None if self.known.contains(&s.node) || s.started >= started => Some(*t),
                    // An older node seen for the first time: its figures so far are its
                    // baseline (they would show as one spike).
                    None => None,
                };
                if let Some(inc) = inc {
                    cell::add(
                        seconds
                            .entry((r.domain.clone(), r.name.clone()))
                            .or_default(),
                        &inc,
                    );
                }
                prev.insert(key, r.totals);
            }
        }
        self.prev = prev;
        self.known = snapshots.iter().map(|s| s.node.clone()).collect();
        for (key, counts) in seconds {
            self.history.entry(key).or_default().push(at, counts);
        }
        for h in self.history.values_mut() {
            if h.end < at {
                h.push(at, Counts::default());
            }
        }
        self.refused.clear();
        for (key, n) in snapshots.iter().flat_map(|s| &s.refused) {
            *self.refused.entry(key.clone()).or_default() += n;
        }
        self.nodes = nodes;
        self.snapshots = snapshots;
        self.ok = true;
    }
}

/// A node's connection to the cluster's figures.
pub(super) struct Cluster {
    conn: RedisConnection,
    state: Mutex<ClusterState>,
}

impl Cluster {
    pub(super) fn new(conn: RedisConnection) -> Self {
        Self {
            conn,
            state: Mutex::new(ClusterState::default()),
        }
    }

    /// The cluster's figures, if the last exchange succeeded.
    pub(super) fn read(&self) -> Option<MutexGuard<'_, ClusterState>> {
        let s = self.state.lock();
        s.ok.then_some(s)
    }

    /// Publishes `mine` and reads every live node's figures.
    pub(super) async fn exchange(&self, mine: NodeSnapshot, at: i64) {
        match self.try_exchange(&mine).await {
            Ok((nodes, snapshots)) => {
                self.state.lock().update(at, mine.started, nodes, snapshots);
            }
            Err(e) => {
                let mut s = self.state.lock();
                if s.ok {
                    tracing::warn!(error = %e, "cannot share the figures with the cluster: the dashboard shows this node's own");
                }
                s.ok = false;
            }
        }
    }

    async fn try_exchange(
        &self,
        mine: &NodeSnapshot,
    ) -> Result<(Vec<NodeView>, Vec<NodeSnapshot>), String> {
        let json = serde_json::to_string(mine).map_err(|e| e.to_string())?;
        let now_ms = (flowgate_core::clock::system_now() / 1000) as i64;
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
                n.live &= snapshots.iter().any(|s| s.node == n.id);
                n
            })
            .collect();
        Ok((nodes, snapshots))
    }
}
