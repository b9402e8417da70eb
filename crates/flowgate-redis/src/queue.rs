//! [`RedisQueueStore`]: shaped queues in Redis, one Lua script (`scripts/queue.lua`) applying
//! each operation of one instance atomically on Redis's clock.
//!
//! An instance's keys are `flowgate:q:{<instance>}:<suffix>`: the instance key is the hash tag,
//! so one instance lives in one slot of a Redis Cluster and many instances spread over the
//! masters. The set `flowgate:queues` lists the instances (its own slot; added to before the
//! first submit, so a listed instance may be empty but a held job is always listed).
//!
//! `submit` answers once Redis holds the jobs. How much a Redis restart can lose depends on its
//! persistence: see `docs/queues.md`, "Durability".

use std::time::Duration;

use flowgate_core::queue::{
    DeadJob, InstanceStats, LeaseOutcome, Leased, MAX_AUTO_BACKOFF, Nacked, NewJob, QueueError,
    QueueSpec, QueueStore, Submitted,
};
use flowgate_core::{Micros, StoreError};
use redis::Value;

use crate::RedisStore;
use crate::error::store_error;
use crate::scripts::QUEUE;

/// The set of every instance's key.
pub const INSTANCES_KEY: &str = "flowgate:queues";
/// The key suffixes of an instance, in the script's `KEYS` order.
const SUFFIXES: [&str; 10] = ["m", "j", "r", "rz", "d", "f", "x", "k", "kt", "bt"];
/// How long a queue operation may take (a batch of thousands of jobs takes milliseconds).
pub const QUEUE_DEADLINE: Duration = Duration::from_secs(5);

/// Shaped queues in Redis. Built by [`RedisStore::queues`]; shares the store's connection.
#[derive(Clone)]
pub struct RedisQueueStore {
    store: RedisStore,
}

fn internal(what: &str, v: &Value) -> QueueError {
    QueueError::Store(StoreError::Internal(format!(
        "queue script: unexpected {what}: {v:?}"
    )))
}

fn int(v: &Value) -> Result<i64, QueueError> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| internal("number", v)),
        _ => Err(internal("number", v)),
    }
}

fn uint(v: &Value) -> Result<u64, QueueError> {
    int(v).map(|i| i.max(0) as u64)
}

fn bytes(v: &Value) -> Result<Vec<u8>, QueueError> {
    match v {
        Value::BulkString(b) => Ok(b.clone()),
        Value::SimpleString(s) => Ok(s.clone().into_bytes()),
        _ => Err(internal("string", v)),
    }
}

fn text(v: &Value) -> Result<String, QueueError> {
    String::from_utf8(bytes(v)?).map_err(|_| internal("text", v))
}

fn array(v: &Value) -> Result<&[Value], QueueError> {
    match v {
        Value::Array(a) => Ok(a),
        _ => Err(internal("array", v)),
    }
}

/// The reply's tag (its first element) and the rest.
fn tagged(v: &Value) -> Result<(String, &[Value]), QueueError> {
    let a = array(v)?;
    let (tag, rest) = a.split_first().ok_or_else(|| internal("empty reply", v))?;
    Ok((text(tag)?, rest))
}

fn at(a: &[Value], i: usize) -> Result<&Value, QueueError> {
    a.get(i)
        .ok_or_else(|| internal("short reply", &Value::Array(a.to_vec())))
}

impl RedisStore {
    /// The queue store on this store's connection.
    pub fn queues(&self) -> RedisQueueStore {
        RedisQueueStore {
            store: self.clone(),
        }
    }
}

impl RedisQueueStore {
    /// Runs `op` on `instance` with the op's arguments.
    async fn call(
        &self,
        spec: &QueueSpec,
        instance: &str,
        op: &str,
        args: impl FnOnce(&mut redis::ScriptInvocation<'_>),
    ) -> Result<Value, QueueError> {
        let mut inv = QUEUE.prepare_invoke();
        for s in SUFFIXES {
            inv.key(format!("flowgate:q:{{{instance}}}:{s}"));
        }
        inv.arg(op);
        match self.store.clock_override() {
            Some(now) => inv.arg(now),
            None => inv.arg(""),
        };
        inv.arg(spec.max_attempts()).arg(spec.key_retention());
        args(&mut inv);
        let run = self.store.conn().invoke(&inv);
        match tokio::time::timeout(QUEUE_DEADLINE, run).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(QueueError::Store(store_error(&e))),
            Err(_) => Err(QueueError::Store(StoreError::Timeout)),
        }
    }
}

fn not_held(tag: &str, id: u64, v: &Value) -> Result<(), QueueError> {
    match tag {
        "ok" | "retry" | "dead" => Ok(()),
        "not_held" => Err(QueueError::NotHeld { id }),
        _ => Err(internal("answer", v)),
    }
}

/// The answers of a submit from the script's reply: `now`, the first release slot, the jobs
/// ready before, the first new id, then `(index, id)` of each duplicate. New jobs are numbered in
/// order and positioned as the engine does (a delayed job is not ahead of later ones).
fn numbered(
    spec: &QueueSpec,
    jobs: &[NewJob],
    rest: &[Value],
) -> Result<Vec<Submitted>, QueueError> {
    let now = uint(at(rest, 0)?)?;
    let first = uint(at(rest, 1)?)?;
    let mut ready = uint(at(rest, 2)?)?;
    let mut id = uint(at(rest, 3)?)?;
    let mut dups = rest[4.min(rest.len())..].chunks(2).peekable();
    let mut out = Vec::with_capacity(jobs.len());
    for (i, j) in jobs.iter().enumerate() {
        if let Some([at_index, dup]) = dups.peek().copied()
            && uint(at_index)? == i as u64
        {
            out.push(Submitted {
                id: uint(dup)?,
                duplicate: true,
                position: None,
                release_at: None,
            });
            dups.next();
            continue;
        }
        let position = ready;
        if j.not_before.is_none_or(|t| t <= now) {
            ready += 1;
        }
        out.push(Submitted {
            id,
            duplicate: false,
            position: Some(position),
            release_at: Some(
                first
                    .saturating_add(position.saturating_mul(spec.spacing()))
                    .max(j.not_before.unwrap_or(0)),
            ),
        });
        id += 1;
    }
    Ok(out)
}

/// A new job's record as the script stores it: `0:0:0:<key length>:<key><payload>`.
fn record(j: &NewJob) -> Vec<u8> {
    let key = j.key.as_deref().unwrap_or("");
    let mut r = format!("0:0:0:{}:{key}", key.len()).into_bytes();
    r.extend_from_slice(&j.payload);
    r
}

impl QueueStore for RedisQueueStore {
    async fn submit(
        &self,
        spec: &QueueSpec,
        instance: &str,
        jobs: &[NewJob],
    ) -> Result<Vec<Submitted>, QueueError> {
        let mut sadd = redis::cmd("SADD");
        sadd.arg(INSTANCES_KEY).arg(instance);
        self.store.query(&sadd).await?;
        let v = self
            .call(spec, instance, "submit", |inv| {
                inv.arg(spec.max_depth())
                    .arg(spec.spacing())
                    .arg(spec.tau())
                    .arg(jobs.len())
                    .arg(jobs.iter().filter(|j| j.key.is_some()).count());
                for j in jobs {
                    inv.arg(record(j));
                    match (&j.key, j.not_before) {
                        (None, None) => inv.arg(""),
                        (key, nb) => inv.arg(format!(
                            "{}:{}",
                            nb.unwrap_or(0),
                            key.as_deref().unwrap_or("")
                        )),
                    };
                }
            })
            .await?;
        let (tag, rest) = tagged(&v)?;
        match tag.as_str() {
            "full" => Err(QueueError::QueueFull {
                held: uint(at(rest, 0)?)?,
                asked: uint(at(rest, 1)?)?,
                max: spec.max_depth(),
            }),
            "ok" => numbered(spec, jobs, rest),
            _ => Err(internal("answer", &v)),
        }
    }

    async fn lease(
        &self,
        spec: &QueueSpec,
        instance: &str,
        horizon: Micros,
        nonce: u64,
    ) -> Result<LeaseOutcome, QueueError> {
        let v = self
            .call(spec, instance, "lease", |inv| {
                inv.arg(spec.spacing())
                    .arg(spec.tau())
                    .arg(horizon)
                    .arg(spec.lease())
                    .arg(nonce);
            })
            .await?;
        let (tag, rest) = tagged(&v)?;
        match tag.as_str() {
            "job" => Ok(LeaseOutcome::Leased(Leased {
                id: uint(at(rest, 0)?)?,
                payload: bytes(at(rest, 1)?)?,
                attempt: u32::try_from(uint(at(rest, 2)?)?).unwrap_or(u32::MAX),
                nonce,
                submitted_at: uint(at(rest, 3)?)?,
                released_at: uint(at(rest, 4)?)?,
                lease_deadline: uint(at(rest, 5)?)?,
                now: uint(at(rest, 6)?)?,
            })),
            "later" => Ok(LeaseOutcome::Later(uint(at(rest, 0)?)?)),
            "empty" => {
                let next = int(at(rest, 0)?)?;
                Ok(LeaseOutcome::Empty {
                    next: (next >= 0).then_some(next as u64),
                })
            }
            _ => Err(internal("answer", &v)),
        }
    }

    async fn ack(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
    ) -> Result<(), QueueError> {
        let v = self
            .call(spec, instance, "ack", |inv| {
                inv.arg(id).arg(nonce);
            })
            .await?;
        not_held(&tagged(&v)?.0, id, &v)
    }

    async fn nack(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
        retry_after: Option<Micros>,
    ) -> Result<Nacked, QueueError> {
        let cap = flowgate_core::clock::micros(MAX_AUTO_BACKOFF).max(spec.retry_backoff());
        let v = self
            .call(spec, instance, "nack", |inv| {
                inv.arg(id).arg(nonce);
                match retry_after {
                    Some(r) => inv.arg(r),
                    None => inv.arg(""),
                };
                inv.arg(spec.retry_backoff()).arg(cap);
            })
            .await?;
        let (tag, rest) = tagged(&v)?;
        not_held(&tag, id, &v)?;
        match tag.as_str() {
            "dead" => Ok(Nacked::Dead),
            _ => Ok(Nacked::Retry {
                at: uint(at(rest, 0)?)?,
            }),
        }
    }

    async fn dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<DeadJob>, QueueError> {
        let v = self
            .call(spec, instance, "dead", |inv| {
                inv.arg(offset).arg(limit);
            })
            .await?;
        array(&v)?
            .iter()
            .map(|row| {
                let r = array(row)?;
                let key = text(at(r, 5)?)?;
                Ok(DeadJob {
                    id: uint(at(r, 0)?)?,
                    payload: bytes(at(r, 1)?)?,
                    attempts: u32::try_from(uint(at(r, 2)?)?).unwrap_or(u32::MAX),
                    submitted_at: uint(at(r, 3)?)?,
                    died_at: uint(at(r, 4)?)?,
                    key: (!key.is_empty()).then_some(key),
                })
            })
            .collect()
    }

    async fn requeue_dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        self.dead_op(spec, instance, "requeue", ids).await
    }

    async fn purge_dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        self.dead_op(spec, instance, "purge_dead", ids).await
    }

    async fn purge(&self, spec: &QueueSpec, instance: &str) -> Result<u64, QueueError> {
        let v = self.call(spec, instance, "purge", |_| {}).await?;
        uint(at(tagged(&v)?.1, 0)?)
    }

    async fn stats(&self, spec: &QueueSpec, instance: &str) -> Result<InstanceStats, QueueError> {
        let v = self
            .call(spec, instance, "stats", |inv| {
                inv.arg(spec.spacing()).arg(spec.tau());
            })
            .await?;
        let a = array(&v)?;
        let n = |i| uint(at(a, i)?);
        let oldest = int(at(a, 4)?)?;
        Ok(InstanceStats {
            ready: n(0)?,
            delayed: n(1)?,
            in_flight: n(2)?,
            dead: n(3)?,
            oldest_submitted: (oldest >= 0).then_some(oldest as u64),
            submitted_total: n(5)?,
            released_total: n(6)?,
            acked_total: n(7)?,
            dead_total: n(8)?,
            next_slot: n(9)?,
            now: n(10)?,
        })
    }

    async fn instances(&self) -> Result<Vec<String>, QueueError> {
        let mut cmd = redis::cmd("SMEMBERS");
        cmd.arg(INSTANCES_KEY);
        let v = self.store.query(&cmd).await?;
        let mut out = match &v {
            Value::Array(a) => a.iter().map(text).collect::<Result<Vec<_>, _>>()?,
            Value::Set(a) => a.iter().map(text).collect::<Result<Vec<_>, _>>()?,
            _ => return Err(internal("set", &v)),
        };
        out.sort();
        Ok(out)
    }
}

impl RedisQueueStore {
    async fn dead_op(
        &self,
        spec: &QueueSpec,
        instance: &str,
        op: &str,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        let v = self
            .call(spec, instance, op, |inv| {
                for id in ids.into_iter().flatten() {
                    inv.arg(*id);
                }
            })
            .await?;
        let (tag, rest) = tagged(&v)?;
        match tag.as_str() {
            "ok" => uint(at(rest, 0)?),
            "not_dead" => Err(QueueError::NotDead {
                id: uint(at(rest, 0)?)?,
            }),
            _ => Err(internal("answer", &v)),
        }
    }
}
