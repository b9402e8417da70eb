//! Circuit breakers shared by a cluster (`scripts/breaker.lua`): the transitions of
//! [`flowgate_core::breaker`] run in Redis, once, on the reports nodes send in batches.
//!
//! A breaker's state lives under one hash tag, `flowgate:brk:{<domain>:<name>:<fingerprint>}:`
//! (one slot on a Redis Cluster): a hash of its instances that are not closed (`s`), a hash of
//! why each of them opened (`o`: the calls and bad calls at the transition, so that every node
//! shows them), and per instance its sliding window, its probe leases and, with `min_nodes`, the
//! nodes that saw bad calls. The fingerprint is the breaker's parameters and pattern, so a changed breaker starts
//! closed, as it does in one process. Each transition is published on [`CHANNEL`]; a node reads
//! the breaker's phases again on a message ([`RedisBreakers::follow`]) and periodically.
//!
//! Whether a call is bad is decided by the node that reports it ([`BreakerSpec::is_bad`]); the
//! script counts calls and bad calls. A batch of an instance's reports counts as one step: its
//! calls are added to the window together and the threshold is compared once, after them.

use std::collections::HashMap;
use std::sync::Arc;

use flowgate_core::breaker::{BreakerSpec, Opened, Phase, Strategy};
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
        /// Why it opened (`None`: opened by a node whose script keeps no figures).
        opened: Option<Opened>,
    },
    /// Probes go ahead.
    HalfOpen {
        /// Probes that succeeded.
        succeeded: u32,
        /// Why it opened last, as for `Open`.
        opened: Option<Opened>,
    },
}

impl SharedPhase {
    /// Its phase at `now`: open past its time is half-open (as the script finds it at its next
    /// call).
    pub fn phase(&self, now: Micros) -> Phase {
        match *self {
            SharedPhase::Closed => Phase::Closed,
            SharedPhase::Open { until, .. } if now < until => Phase::Open,
            SharedPhase::Open { .. } | SharedPhase::HalfOpen { .. } => Phase::HalfOpen,
        }
    }

    /// Why it opened last (`None` while closed, or when no figures are held).
    pub fn opened(&self) -> Option<Opened> {
        match self {
            SharedPhase::Closed => None,
            SharedPhase::Open { opened, .. } | SharedPhase::HalfOpen { opened, .. } => *opened,
        }
    }
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
    /// Probe leases held (half-open), across the cluster.
    pub probes_out: u32,
}

/// An instance that is not closed, as every node reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenInstance {
    /// The instance's key.
    pub instance: String,
    /// Its phase (never [`SharedPhase::Closed`]).
    pub phase: SharedPhase,
    /// Probe leases held, across the cluster, when read (0 unless half-open).
    pub probes_out: u32,
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

    /// The key of the hash of why its instances that are not closed opened.
    fn opened_key(&self) -> String {
        format!("{}o", self.prefix)
    }

    /// The key of an instance's probe leases.
    fn probes_key(&self, instance: &str) -> String {
        format!("{}p:{instance}", self.prefix)
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

fn phase(p: &str, value: u64, opened: Option<Opened>) -> Option<SharedPhase> {
    match p {
        "c" => Some(SharedPhase::Closed),
        "o" => Some(SharedPhase::Open {
            until: value,
            opened,
        }),
        "h" => Some(SharedPhase::HalfOpen {
            succeeded: u32::try_from(value).ok()?,
            opened,
        }),
        _ => None,
    }
}

/// Why an instance opened, from a script's answer: two counts, or two empty strings when no
/// figures are held (`Some(None)`); anything else is not an answer (`None`).
fn opened_of(calls: &Value, bad: &Value) -> Option<Option<Opened>> {
    match (text(calls), text(bad)) {
        (Some(""), Some("")) => Some(None),
        _ => Some(Some(Opened {
            calls: int(calls)?,
            bad: int(bad)?,
        })),
    }
}

/// A phase as the phases' hash holds it (`o <until>` or `h <succeeded>`), with why it opened as
/// the figures' hash holds it (`<calls> <bad>`, if any).
fn stored_phase(v: &str, why: Option<&String>) -> Option<SharedPhase> {
    let (p, x) = v.split_once(' ')?;
    let opened = why.and_then(|w| {
        let (calls, bad) = w.split_once(' ')?;
        Some(Opened {
            calls: calls.parse().ok()?,
            bad: bad.parse().ok()?,
        })
    });
    phase(p, x.parse().ok()?, opened)
}

/// A phases' hash and its figures' hash as read: each instance's phase, or the value no script
/// writes.
fn parse_phases(
    fields: Vec<(String, String)>,
    why: &HashMap<String, String>,
) -> Result<Vec<OpenInstance>, StoreError> {
    fields
        .into_iter()
        .map(|(k, v)| match stored_phase(&v, why.get(&k)) {
            Some(phase) => Ok(OpenInstance {
                instance: k,
                phase,
                probes_out: 0,
            }),
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
        let (urls, options) = store.subscribe_to();
        let options = options
            .clone()
            .timeout(store.deadline().max(crate::DEFAULT_TIMEOUT));
        let own = if store.is_cluster() {
            RedisConnection::cluster_lazy(urls, options)
        } else {
            urls.first()
                .map_or(Err(StoreError::Unavailable("no URL".into())), |u| {
                    RedisConnection::connect_lazy(u, options)
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
        inv.key(b.phases_key())
            .key(format!("{}seq", b.prefix))
            .key(b.opened_key());
        for i in instances {
            inv.key(format!("{}w:{i}", b.prefix))
                .key(b.probes_key(i))
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
                        Value::Array(f) if f.len() == 7 => (|| {
                            Some(InstanceState {
                                phase: phase(text(&f[0])?, int(&f[1])?, opened_of(&f[4], &f[5])?)?,
                                calls: int(&f[2])?,
                                bad: int(&f[3])?,
                                probes_out: u32::try_from(int(&f[6])?).ok()?,
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
    /// the decision, the instance's phase after it and the probe leases it holds then.
    ///
    /// # Errors
    /// As [`RedisBreakers::report`].
    pub async fn probe(
        &self,
        b: &SharedBreaker,
        instance: &str,
    ) -> Result<(ProbeAnswer, SharedPhase, u32), StoreError> {
        let mut inv = self.invoke("probe");
        Self::breaker(&mut inv, b, std::iter::once(instance));
        inv.arg(instance);
        let v = self.run(&inv).await?;
        let parsed = match &v {
            Value::Array(f) if f.len() == 7 => (|| {
                let value = int(&f[1])?;
                let answer = match text(&f[0])? {
                    "call" => ProbeAnswer::Call,
                    "probe" => ProbeAnswer::Probe(value),
                    "refused" => ProbeAnswer::Refused { retry_after: value },
                    _ => return None,
                };
                let opened = opened_of(&f[4], &f[5])?;
                let out = u32::try_from(int(&f[6])?).ok()?;
                Some((answer, phase(text(&f[2])?, int(&f[3])?, opened)?, out))
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

    /// Breaker `b`'s instances that are not closed: their phases, why they opened, and the
    /// probe leases held by those half-open.
    ///
    /// # Errors
    /// As [`RedisBreakers::report`]; a value no script writes is [`StoreError::Internal`]
    /// naming it.
    pub async fn read(&self, b: &SharedBreaker) -> Result<Vec<OpenInstance>, StoreError> {
        let mut all = self.read_many(&[b]).await?;
        Ok(all.pop().unwrap_or_default())
    }

    /// Several breakers' instances that are not closed, as [`RedisBreakers::read`]: on a single
    /// Redis in one round trip (a pipeline of `HGETALL`s), then, when some instance is
    /// half-open, a second one counting their probe leases; on a Redis Cluster the same per
    /// breaker (each breaker's keys share a slot).
    ///
    /// # Errors
    /// As [`RedisBreakers::read`].
    pub async fn read_many(
        &self,
        breakers: &[&SharedBreaker],
    ) -> Result<Vec<Vec<OpenInstance>>, StoreError> {
        if self.store.is_cluster() {
            let mut out = Vec::with_capacity(breakers.len());
            for b in breakers {
                out.extend(self.read_together(&[b]).await?);
            }
            return Ok(out);
        }
        self.read_together(breakers).await
    }

    /// [`RedisBreakers::read_many`] in one pipeline (then one more for the probes out).
    async fn read_together(
        &self,
        breakers: &[&SharedBreaker],
    ) -> Result<Vec<Vec<OpenInstance>>, StoreError> {
        let mut pipe = redis::pipe();
        for b in breakers {
            pipe.cmd("HGETALL")
                .arg(b.phases_key())
                .cmd("HGETALL")
                .arg(b.opened_key());
        }
        let all: Vec<Vec<(String, String)>> = self.conn.query_pipe(&pipe).await?;
        let mut out = Vec::with_capacity(breakers.len());
        let mut pairs = all.into_iter();
        while let (Some(phases), Some(why)) = (pairs.next(), pairs.next()) {
            out.push(parse_phases(phases, &why.into_iter().collect())?);
        }
        // The probes out of the instances half-open (or open past their time): leases whose
        // deadline is later than now, as the script counts them.
        let now = self.now();
        let half_open = |i: &OpenInstance| match i.phase {
            SharedPhase::HalfOpen { .. } => true,
            SharedPhase::Open { until, .. } => until <= now,
            SharedPhase::Closed => false,
        };
        let mut pipe = redis::pipe();
        let mut asked = 0;
        for (b, instances) in breakers.iter().zip(&out) {
            for i in instances.iter().filter(|i| half_open(i)) {
                pipe.cmd("ZCOUNT")
                    .arg(b.probes_key(&i.instance))
                    .arg(format!("({now}"))
                    .arg("+inf");
                asked += 1;
            }
        }
        if asked > 0 {
            let counts: Vec<u32> = self.conn.query_pipe(&pipe).await?;
            let mut counts = counts.into_iter();
            for i in out.iter_mut().flatten().filter(|i| half_open(i)) {
                i.probes_out = counts.next().unwrap_or(0);
            }
        }
        Ok(out)
    }

    /// Wakes `notify` whenever a shared breaker changes phase anywhere in the cluster (and after
    /// a lost subscription); runs until its task is dropped.
    pub async fn follow(&self, notify: Arc<Notify>) {
        let (urls, options) = self.store.subscribe_to();
        crate::pubsub::follow(urls, options, CHANNEL, "breakers", notify).await;
    }
}
