//! Circuit breakers shared by a cluster (`scripts/breaker.lua`): the transitions of
//! [`flowgate_core::breaker`] run in Redis, once, on the reports nodes send in batches.
//!
//! A breaker's state lives under one hash tag, `flowgate:brk:{<domain>:<name>:<fingerprint>}:`
//! (one slot on a Redis Cluster): a hash of its instances that are not closed (`s`), and per
//! instance its sliding window, its probe leases and, with `min_nodes`, the nodes that saw bad
//! calls. The fingerprint is the breaker's parameters and pattern, so a changed breaker starts
//! closed, as it does in one process. Each transition is published on [`CHANNEL`]; a node reads
//! the breaker's phases again on a message ([`RedisBreakers::follow`]) and periodically.
//!
//! Whether a call is bad is decided by the node that reports it ([`BreakerSpec::is_bad`]); the
//! script counts calls and bad calls. A batch of an instance's reports counts as one step: its
//! calls are added to the window together and the threshold is compared once, after them.

use std::sync::Arc;

use flowgate_core::breaker::{BreakerSpec, Strategy};
use flowgate_core::{Micros, StoreError};
use redis::Value;
use tokio::sync::Notify;

use crate::error::store_error;
use crate::scripts::BREAKER;
use crate::{RedisConnection, RedisStore};

/// The channel on which a breaker's transitions are published (the message: its phases' key).
pub const CHANNEL: &str = "flowgate:breakers";

/// The most instances one script call reports on (a bigger batch is sent in several calls, so
/// that no call holds Redis for long).
pub const CHUNK: usize = 100;

/// An instance's phase as Redis holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedPhase {
    /// Calls go ahead.
    Closed,
    /// Calls are refused until `until` (µs, Redis's clock); half-open after.
    Open {
        /// When it turns half-open.
        until: Micros,
    },
    /// Probes go ahead.
    HalfOpen {
        /// Probes that succeeded.
        succeeded: u32,
    },
}

/// One instance's reports in a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceReport {
    /// The instance's key.
    pub instance: String,
    /// Calls reported that were not probes.
    pub calls: u64,
    /// Of them, the bad ones.
    pub bad: u64,
    /// Probes reported: their lease and whether the call was bad.
    pub probes: Vec<(u64, bool)>,
}

/// An instance's state after a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstanceState {
    /// Its phase.
    pub phase: SharedPhase,
    /// Calls in its window (closed).
    pub calls: u64,
    /// Bad calls in its window (closed).
    pub bad: u64,
}

/// The answer to a call asking for a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeAnswer {
    /// The instance is closed: go ahead.
    Call,
    /// Go ahead as a probe holding this lease.
    Probe(u64),
    /// Refused: open, or half-open with every probe out.
    Refused {
        /// The time until it may admit one (µs).
        retry_after: Micros,
    },
}

/// A breaker shared by the cluster: where its state lives and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedBreaker {
    prefix: String,
    spec: BreakerSpec,
    min_nodes: u32,
}

/// FNV-1a: a fingerprint every node computes alike from the same text.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl SharedBreaker {
    /// Breaker `name` of `domain` over `pattern` (its text), with `spec`, opening only on bad
    /// calls seen by at least `min_nodes` nodes in the window (0 and 1: any node).
    pub fn new(domain: &str, name: &str, pattern: &str, spec: BreakerSpec, min_nodes: u32) -> Self {
        let (kind, slow) = match spec.strategy() {
            Strategy::ErrorRatio => ("error_ratio", 0),
            Strategy::SlowCallRatio { slow_call } => ("slow_call_ratio", slow_call),
            Strategy::ErrorCount => ("error_count", 0),
            _ => ("other", 0),
        };
        let text = format!(
            "{pattern}|{kind}|{slow}|{}|{}|{}|{}|{}|{}|{min_nodes}",
            spec.threshold(),
            spec.window(),
            spec.min_calls(),
            spec.open_for(),
            spec.probes(),
            spec.probe_timeout()
        );
        Self {
            prefix: format!("flowgate:brk:{{{domain}:{name}:{:016x}}}:", fnv(&text)),
            spec,
            min_nodes,
        }
    }

    /// The key of the hash of its instances that are not closed (the message published on
    /// [`CHANNEL`] when one changes).
    pub fn phases_key(&self) -> String {
        format!("{}s", self.prefix)
    }

    /// Its parameters.
    pub fn spec(&self) -> &BreakerSpec {
        &self.spec
    }
}

/// The shared breakers' calls to Redis, through a store's connection.
#[derive(Clone)]
pub struct RedisBreakers {
    store: RedisStore,
    /// A connection of its own: a flush's script call never queues the decisions' calls
    /// behind it on the store's connection.
    conn: RedisConnection,
    node: String,
}

impl std::fmt::Debug for RedisBreakers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBreakers")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

fn internal(what: &str, v: &Value) -> StoreError {
    StoreError::Internal(format!("breaker script: unexpected {what}: {v:?}"))
}

fn text(v: &Value) -> Option<&str> {
    match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

fn int(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        _ => text(v)?.parse().ok(),
    }
}

fn phase(p: &str, value: u64) -> Option<SharedPhase> {
    match p {
        "c" => Some(SharedPhase::Closed),
        "o" => Some(SharedPhase::Open { until: value }),
        "h" => Some(SharedPhase::HalfOpen {
            succeeded: u32::try_from(value).ok()?,
        }),
        _ => None,
    }
}

/// A phase as the phases' hash holds it: `o <until>` or `h <succeeded>`.
fn stored_phase(v: &str) -> Option<SharedPhase> {
    let (p, x) = v.split_once(' ')?;
    phase(p, x.parse().ok()?)
}

/// A phases' hash as read: each instance's phase, or the value no script writes.
fn parse_phases(fields: Vec<(String, String)>) -> Result<Vec<(String, SharedPhase)>, StoreError> {
    fields
        .into_iter()
        .map(|(k, v)| match stored_phase(&v) {
            Some(p) => Ok((k, p)),
            None => Err(StoreError::Internal(format!(
                "breaker state of {k} is not one the script writes: {v:?}"
            ))),
        })
        .collect()
}

impl RedisBreakers {
    /// Breakers shared through `store`'s Redis, on a connection of their own (made on first
    /// use, within a Tokio runtime); `node` names this node (for `min_nodes`).
    pub fn new(store: &RedisStore, node: impl Into<String>) -> Self {
        let (urls, tls) = store.subscribe_to();
        let options = crate::ConnectionOptions {
            timeout: store.deadline().max(crate::DEFAULT_TIMEOUT),
            tls: tls.cloned(),
            ..crate::ConnectionOptions::default()
        };
        let own = if store.is_cluster() {
            RedisConnection::cluster_lazy(urls, options)
        } else {
            urls.first()
                .map_or(Err(StoreError::Unavailable("no URL".into())), |u| {
                    RedisConnection::single_lazy(u, options)
                })
        };
        Self {
            store: store.clone(),
            // The URLs made the store's connection already; should one not parse again, the
            // store's connection serves.
            conn: own.unwrap_or_else(|_| store.conn().clone()),
            node: node.into(),
        }
    }

    /// Redis's clock as this node estimates it (see [`RedisStore::now`]).
    pub fn now(&self) -> Micros {
        self.store.now()
    }

    /// A script call: `op`, the clock, this node and the channel (the parameters and keys of
    /// each breaker follow, added by [`RedisBreakers::breaker`]).
    fn invoke(&self, op: &str) -> redis::ScriptInvocation<'static> {
        let mut inv = BREAKER.prepare_invoke();
        inv.arg(op);
        match self.store.clock_override() {
            Some(now) => inv.arg(now),
            None => inv.arg(""),
        };
        inv.arg(&self.node).arg(CHANNEL);
        inv
    }

    /// Adds breaker `b` to `inv`: its keys (with those of `instances`) and its parameters.
    fn breaker<'a>(
        inv: &mut redis::ScriptInvocation<'static>,
        b: &SharedBreaker,
        instances: impl Iterator<Item = &'a str>,
    ) {
        inv.key(b.phases_key()).key(format!("{}seq", b.prefix));
        for i in instances {
            inv.key(format!("{}w:{i}", b.prefix))
                .key(format!("{}p:{i}", b.prefix))
                .key(format!("{}n:{i}", b.prefix));
        }
        let spec = &b.spec;
        inv.arg(u8::from(spec.strategy() == Strategy::ErrorCount))
            .arg(spec.threshold().to_string())
            .arg(spec.min_calls())
            .arg(spec.window())
            .arg(flowgate_core::breaker::DEFAULT_BUCKETS)
            .arg(spec.open_for())
            .arg(spec.probes())
            .arg(spec.probe_timeout())
            .arg(b.min_nodes);
    }

    async fn run(&self, inv: &redis::ScriptInvocation<'_>) -> Result<Value, StoreError> {
        let conn = &self.conn;
        match tokio::time::timeout(self.store.deadline().max(conn.timeout()), conn.invoke(inv))
            .await
        {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(store_error(&e)),
            Err(_) => Err(StoreError::Timeout),
        }
    }

    /// Counts a batch of reports of breaker `b` (at most [`CHUNK`] instances per script call),
    /// deciding each instance's transition, and answers each instance's state after it.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot be reached, or answers what this script never does.
    /// Chunks counted before a failing one stay counted.
    pub async fn report(
        &self,
        b: &SharedBreaker,
        reports: &[InstanceReport],
    ) -> Result<Vec<InstanceState>, StoreError> {
        let mut out = self.report_many(&[(b, reports)]).await?;
        Ok(out.pop().unwrap_or_default())
    }

    /// Counts the reports of several breakers: on a single Redis in one script call per
    /// [`CHUNK`] instances, whichever breakers they belong to (one round trip per flush, however
    /// many breakers have reports); on a Redis Cluster, whose breakers live in different slots,
    /// one call per breaker and chunk. Answers each breaker's instances' states, in order.
    ///
    /// # Errors
    /// As [`RedisBreakers::report`].
    pub async fn report_many(
        &self,
        batches: &[(&SharedBreaker, &[InstanceReport])],
    ) -> Result<Vec<Vec<InstanceState>>, StoreError> {
        // The calls: each a list of (batch, its instances in this call).
        let mut calls: Vec<Vec<(usize, &[InstanceReport])>> = Vec::new();
        let together = !self.store.is_cluster();
        let mut size = 0;
        for (at, (_, reports)) in batches.iter().enumerate() {
            for chunk in reports.chunks(CHUNK) {
                if !together || calls.is_empty() || size + chunk.len() > CHUNK {
                    calls.push(Vec::new());
                    size = 0;
                }
                size += chunk.len();
                if let Some(call) = calls.last_mut() {
                    call.push((at, chunk));
                }
            }
        }
        let mut out: Vec<Vec<InstanceState>> = batches
            .iter()
            .map(|(_, r)| Vec::with_capacity(r.len()))
            .collect();
        for call in calls {
            let mut inv = self.invoke("report");
            inv.arg(call.len());
            for (at, chunk) in &call {
                Self::breaker(
                    &mut inv,
                    batches[*at].0,
                    chunk.iter().map(|r| r.instance.as_str()),
                );
                inv.arg(chunk.len());
                for r in *chunk {
                    inv.arg(&r.instance)
                        .arg(r.calls)
                        .arg(r.bad)
                        .arg(r.probes.len());
                    for (lease, bad) in &r.probes {
                        inv.arg(*lease).arg(u8::from(*bad));
                    }
                }
            }
            let v = self.run(&inv).await?;
            let Value::Array(rows) = &v else {
                return Err(internal("report answer", &v));
            };
            let expected: usize = call.iter().map(|(_, c)| c.len()).sum();
            if rows.len() != expected {
                return Err(internal("report answer", &v));
            }
            let mut rows = rows.iter();
            for (at, chunk) in &call {
                for row in rows.by_ref().take(chunk.len()) {
                    let state = match row {
                        Value::Array(f) if f.len() == 4 => (|| {
                            Some(InstanceState {
                                phase: phase(text(&f[0])?, int(&f[1])?)?,
                                calls: int(&f[2])?,
                                bad: int(&f[3])?,
                            })
                        })(),
                        _ => None,
                    };
                    out[*at].push(state.ok_or_else(|| internal("report row", row))?);
                }
            }
        }
        Ok(out)
    }

    /// Asks for a probe of instance `instance` (open past its time turns half-open): answers
    /// the decision and the instance's phase after it.
    ///
    /// # Errors
    /// As [`RedisBreakers::report`].
    pub async fn probe(
        &self,
        b: &SharedBreaker,
        instance: &str,
    ) -> Result<(ProbeAnswer, SharedPhase), StoreError> {
        let mut inv = self.invoke("probe");
        Self::breaker(&mut inv, b, std::iter::once(instance));
        inv.arg(instance);
        let v = self.run(&inv).await?;
        let parsed = match &v {
            Value::Array(f) if f.len() == 4 => (|| {
                let value = int(&f[1])?;
                let answer = match text(&f[0])? {
                    "call" => ProbeAnswer::Call,
                    "probe" => ProbeAnswer::Probe(value),
                    "refused" => ProbeAnswer::Refused { retry_after: value },
                    _ => return None,
                };
                Some((answer, phase(text(&f[2])?, int(&f[3])?)?))
            })(),
            _ => None,
        };
        parsed.ok_or_else(|| internal("probe answer", &v))
    }

    /// Gives back probe `lease` of `instance` unused (the call it was taken for did not go
    /// ahead), freeing its place at once.
    ///
    /// # Errors
    /// As [`RedisBreakers::report`].
    pub async fn cancel(
        &self,
        b: &SharedBreaker,
        instance: &str,
        lease: u64,
    ) -> Result<(), StoreError> {
        let mut inv = self.invoke("cancel");
        Self::breaker(&mut inv, b, std::iter::once(instance));
        inv.arg(instance).arg(lease);
        self.run(&inv).await.map(|_| ())
    }

    /// The phases of breaker `b`'s instances that are not closed (one `HGETALL`).
    ///
    /// # Errors
    /// As [`RedisBreakers::report`]; a value no script writes is [`StoreError::Internal`]
    /// naming it.
    pub async fn read(&self, b: &SharedBreaker) -> Result<Vec<(String, SharedPhase)>, StoreError> {
        let fields: Vec<(String, String)> = self
            .conn
            .query(redis::cmd("HGETALL").arg(b.phases_key()))
            .await?;
        parse_phases(fields)
    }

    /// The phases of several breakers: on a single Redis in one round trip (a pipeline of
    /// `HGETALL`s), on a Redis Cluster one call per breaker.
    ///
    /// # Errors
    /// As [`RedisBreakers::read`].
    pub async fn read_many(
        &self,
        breakers: &[&SharedBreaker],
    ) -> Result<Vec<Vec<(String, SharedPhase)>>, StoreError> {
        if self.store.is_cluster() {
            let mut out = Vec::with_capacity(breakers.len());
            for b in breakers {
                out.push(self.read(b).await?);
            }
            return Ok(out);
        }
        let mut pipe = redis::pipe();
        for b in breakers {
            pipe.cmd("HGETALL").arg(b.phases_key());
        }
        let all: Vec<Vec<(String, String)>> = self.conn.query_pipe(&pipe).await?;
        all.into_iter().map(parse_phases).collect()
    }

    /// Wakes `notify` whenever a shared breaker changes phase anywhere in the cluster (and after
    /// a lost subscription); runs until its task is dropped.
    pub async fn follow(&self, notify: Arc<Notify>) {
        let (urls, tls) = self.store.subscribe_to();
        crate::pubsub::follow(urls, tls, CHANNEL, "breakers", notify).await;
    }
}
