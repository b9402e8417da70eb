//! [`RedisQueueStore`]: shaped queues in Redis, one Lua script (`scripts/queue.lua`) applying
//! each operation of one instance atomically on Redis's clock.
//!
//! An instance's keys are `flowgate:q:{<instance>}:<suffix>`: the instance key is the hash tag,
//! so one instance lives in one slot of a Redis Cluster and many instances spread over the
//! masters. The set `flowgate:queues` lists the instances (its own slot; added to before the
//! first submit, so a listed instance may be empty but a held job is always listed).
//!
//! No call holds Redis for long: a batch of more than 1,000 jobs, or whose records pass
//! `STAGE_ABOVE` (256 KiB), is uploaded
//! first, in chunks of at most `STAGE_CHUNK` (256 KiB) bytes, into a staging hash (plain `HSET`s, one at
//! a time, so that other commands on the connection pass between them), which the submit script
//! then renames into place: the batch stays all or nothing, and its script's cost no longer grows
//! with its bytes. Sweeps apply at most 100 expired leases (and as many due jobs and old keys) per call; purges
//! and requeues of every dead letter run in chunks of 100 jobs. Measured by Redis's SLOWLOG
//! (`tests/queue_bounds.rs`), no queue call takes more than a few milliseconds.
//!
//! `submit` answers once Redis holds the jobs. How much a Redis restart can lose depends on its
//! persistence: see `docs/queues.md`, "Durability".

use std::time::Duration;

use flowgate_core::queue::record::Record;
use flowgate_core::queue::{
    DeadJob, InstanceStats, JobStatus, LeaseOutcome, Leased, MAX_AUTO_BACKOFF, Nacked, NewJob,
    QueueError, QueueSpec, QueueStore, Submitted, fingerprint,
};
use flowgate_core::{Micros, StoreError};
use redis::Value;

use crate::RedisStore;
use crate::error::store_error;
use crate::replication::Replicated;
use crate::scripts::QUEUE;

/// The set of every instance's key.
pub const INSTANCES_KEY: &str = "flowgate:queues";
/// The key suffixes of an instance, in the script's `KEYS` order.
const SUFFIXES: [&str; 13] = [
    "m", "j", "r", "rz", "d", "f", "x", "k", "kt", "bt", "rl", "kf", "fs",
];
/// How long one queue call may take.
pub const QUEUE_DEADLINE: Duration = Duration::from_secs(5);
/// A batch whose records pass this many bytes is staged before its submit.
pub(crate) const STAGE_ABOVE: usize = 256 * 1024;
/// The most bytes of records in one staging command.
pub(crate) const STAGE_CHUNK: usize = 256 * 1024;
/// The most records in one staging command.
const STAGE_RECORDS: usize = 1_000;
/// How long a staged batch may wait for its submit before Redis drops it.
const STAGE_TTL_SECS: u64 = 3_600;
/// The most ids described in one call.
const DESCRIBE_CHUNK: usize = 250;

/// Shaped queues in Redis. Built by [`RedisStore::queues`]; shares the store's connection, but
/// for the writes that wait for replicas ([`RedisQueueStore::replicated`]).
#[derive(Clone)]
pub struct RedisQueueStore {
    store: RedisStore,
    stage_above: usize,
    replicated: Option<Replicated>,
}

/// The operations whose answer waits for the replicas, when they are asked to.
const REPLICATED_OPS: [&str; 3] = ["submit", "ack", "nack"];

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
            stage_above: STAGE_ABOVE,
            replicated: None,
        }
    }
}

#[cfg(feature = "test-support")]
impl RedisQueueStore {
    /// Stages every batch whose records pass `bytes` (0: every batch), to test both paths.
    pub fn stage_above(mut self, bytes: usize) -> Self {
        self.stage_above = bytes;
        self
    }
}

impl RedisQueueStore {
    /// Submits, acks and nacks through `replicated`'s connection, each answered only once its
    /// replicas hold it (see [`Replicated`]).
    pub fn replicated(mut self, replicated: Replicated) -> Self {
        self.replicated = Some(replicated);
        self
    }

    /// After a write of `op` on `instance` that changed something: waits for the replicas, when
    /// asked to.
    async fn confirm(&self, op: &str, instance: &str) -> Result<(), QueueError> {
        match &self.replicated {
            Some(r) if REPLICATED_OPS.contains(&op) => r
                .confirm(&format!("flowgate:q:{{{instance}}}"))
                .await
                .map_err(QueueError::Store),
            _ => Ok(()),
        }
    }

    /// Runs `op` on `instance` with the op's arguments.
    async fn call(
        &self,
        spec: &QueueSpec,
        instance: &str,
        op: &str,
        args: impl FnOnce(&mut redis::ScriptInvocation<'_>),
    ) -> Result<Value, QueueError> {
        self.call_staged(spec, instance, op, None, args).await
    }

    /// [`Self::call`] with the staging hash of a batch as the script's last key.
    async fn call_staged(
        &self,
        spec: &QueueSpec,
        instance: &str,
        op: &str,
        stage: Option<&str>,
        args: impl FnOnce(&mut redis::ScriptInvocation<'_>),
    ) -> Result<Value, QueueError> {
        let mut inv = QUEUE.prepare_invoke();
        for s in SUFFIXES {
            inv.key(format!("flowgate:q:{{{instance}}}:{s}"));
        }
        if let Some(stage) = stage {
            inv.key(stage);
        }
        inv.arg(op);
        match self.store.clock_override() {
            Some(now) => inv.arg(now),
            None => inv.arg(""),
        };
        inv.arg(spec.max_attempts()).arg(spec.key_retention());
        args(&mut inv);
        let conn = match &self.replicated {
            Some(r) if REPLICATED_OPS.contains(&op) => r.conn(),
            _ => self.store.conn(),
        };
        let run = conn.invoke(&inv);
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
/// ready before, the first id, then `(index, id)` of each duplicate. Job `i` has id `first + i`;
/// new jobs are placed as the engine does (a delayed job is not ahead of later ones). Answers
/// for duplicates of earlier jobs of the batch are their jobs'; the others are left for
/// [`RedisQueueStore::describe`] (state `Done` until then).
fn numbered(
    spec: &QueueSpec,
    jobs: &[NewJob],
    rest: &[Value],
) -> Result<(Vec<Submitted>, Vec<usize>), QueueError> {
    let now = uint(at(rest, 0)?)?;
    let first_slot = uint(at(rest, 1)?)?;
    let mut ready = uint(at(rest, 2)?)?;
    let first = uint(at(rest, 3)?)?;
    let mut dups = rest[4.min(rest.len())..].chunks(2).peekable();
    let mut out: Vec<Submitted> = Vec::with_capacity(jobs.len());
    let mut older = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        if let Some([at_index, dup]) = dups.peek().copied()
            && uint(at_index)? == i as u64
        {
            let id = uint(dup)?;
            dups.next();
            let earlier = id
                .checked_sub(first)
                .and_then(|k| out.get(usize::try_from(k).ok()?));
            match earlier {
                Some(e) => out.push(Submitted {
                    duplicate: true,
                    ..e.clone()
                }),
                None => {
                    older.push(i);
                    out.push(Submitted::duplicate_of(id));
                }
            }
            continue;
        }
        let id = first + i as u64;
        out.push(match j.not_before {
            Some(t) if t > now => Submitted::delayed(id, t),
            _ => {
                ready += 1;
                Submitted::ready(id, ready - 1, first_slot, spec.spacing())
            }
        });
    }
    Ok((out, older))
}

/// A new job's record as the script stores it in its batch's hash: submitted 0 (the batch's
/// instant), then the payload.
fn record(j: &NewJob) -> Vec<u8> {
    Record {
        submitted: 0,
        attempts: 0,
        nonce: 0,
        key: j.key(),
        rest: &j.payload,
    }
    .encode()
}

fn status(name: &str) -> Option<JobStatus> {
    Some(match name {
        "ready" => JobStatus::Ready,
        "delayed" => JobStatus::Delayed,
        "in_flight" => JobStatus::InFlight,
        "dead" => JobStatus::Dead,
        "done" => JobStatus::Done,
        _ => return None,
    })
}

impl RedisQueueStore {
    /// Uploads the records of `jobs` into a new staging hash, a chunk at a time; answers its key.
    async fn stage(&self, instance: &str, records: &[Vec<u8>]) -> Result<String, QueueError> {
        let nonce = flowgate_core::random::seed()
            .map_err(|e| QueueError::Store(StoreError::Internal(e.to_string())))?;
        let stage = format!("flowgate:q:{{{instance}}}:s:{nonce:016x}");
        let mut i = 0;
        while i < records.len() {
            let mut cmd = redis::cmd("HSET");
            cmd.arg(&stage);
            let mut bytes = 0;
            let start = i;
            while i < records.len()
                && (i == start
                    || (bytes + records[i].len() <= STAGE_CHUNK && i - start < STAGE_RECORDS))
            {
                bytes += records[i].len();
                cmd.arg(i + 1).arg(&records[i]);
                i += 1;
            }
            let mut pipe = redis::pipe();
            pipe.add_command(cmd).ignore();
            pipe.expire(&stage, STAGE_TTL_SECS as i64).ignore();
            let run = self.store.conn().query_pipe::<()>(&pipe);
            match tokio::time::timeout(QUEUE_DEADLINE, run).await {
                Ok(r) => r?,
                Err(_) => return Err(QueueError::Store(StoreError::Timeout)),
            }
        }
        Ok(stage)
    }

    /// The state, position and release estimate of the jobs answered at `which` (duplicates of
    /// earlier batches' jobs), read after the submit in calls of at most 250 ids.
    async fn describe(
        &self,
        spec: &QueueSpec,
        instance: &str,
        out: &mut [Submitted],
        which: &[usize],
    ) -> Result<(), QueueError> {
        for chunk in which.chunks(DESCRIBE_CHUNK) {
            let v = self
                .call(spec, instance, "describe", |inv| {
                    inv.arg(spec.spacing()).arg(spec.tau());
                    for &i in chunk {
                        inv.arg(out[i].id);
                    }
                })
                .await?;
            for (&i, row) in chunk.iter().zip(array(&v)?) {
                let r = array(row)?;
                let state = status(&text(at(r, 0)?)?).ok_or_else(|| internal("state", row))?;
                let pos = int(at(r, 1)?)?;
                let release = int(at(r, 2)?)?;
                let s = &mut out[i];
                s.state = state;
                s.position = (pos >= 0).then_some(pos as u64);
                s.release_at = (release >= 0).then_some(release as u64);
            }
        }
        Ok(())
    }

    /// Adds the instance to the list of instances.
    async fn list(&self, instance: &str) -> Result<(), QueueError> {
        let mut sadd = redis::cmd("SADD");
        sadd.arg(INSTANCES_KEY).arg(instance);
        self.query(&sadd).await?;
        Ok(())
    }

    /// A plain command on the list of instances, within [`QUEUE_DEADLINE`] as every queue call
    /// (not the decisions' much shorter deadline: a Redis slow for longer than a decision may
    /// wait would fail a submit after its script stored the jobs).
    async fn query(&self, cmd: &redis::Cmd) -> Result<Value, QueueError> {
        match tokio::time::timeout(QUEUE_DEADLINE, self.store.conn().query(cmd)).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(QueueError::Store(StoreError::Timeout)),
        }
    }
}

impl QueueStore for RedisQueueStore {
    async fn submit(
        &self,
        spec: &QueueSpec,
        instance: &str,
        jobs: &[NewJob],
    ) -> Result<Vec<Submitted>, QueueError> {
        // Listed before (a held job is always listed) and after its script (a stats call that
        // forgot the idle instance before the script, and unlisted it before this, cannot leave
        // it unlisted; one that unlisted it after this reads it again, see `stats`).
        self.list(instance).await?;
        let records: Vec<Vec<u8>> = jobs.iter().map(record).collect();
        let bytes: usize = records.iter().map(Vec::len).sum();
        let stage = if bytes > self.stage_above || records.len() > STAGE_RECORDS {
            Some(self.stage(instance, &records).await?)
        } else {
            None
        };
        let v = self
            .call_staged(spec, instance, "submit", stage.as_deref(), |inv| {
                let delayed = jobs.iter().filter(|j| j.not_before.is_some()).count();
                let keyed = jobs.iter().any(|j| j.key().is_some());
                inv.arg(spec.max_depth())
                    .arg(spec.spacing())
                    .arg(spec.tau())
                    .arg(jobs.len())
                    .arg(delayed)
                    .arg(if stage.is_some() { "1" } else { "0" })
                    .arg(if keyed { "1" } else { "0" });
                for (i, j) in jobs.iter().enumerate() {
                    if let Some(nb) = j.not_before {
                        inv.arg(i + 1).arg(nb);
                    }
                }
                if keyed {
                    for j in jobs {
                        inv.arg(j.key().unwrap_or(""));
                    }
                    for j in jobs {
                        match j.key() {
                            Some(_) => inv.arg(fingerprint(&j.payload)),
                            None => inv.arg(""),
                        };
                    }
                }
                if stage.is_none() {
                    for r in &records {
                        inv.arg(r.as_slice());
                    }
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
            "conflict" => Err(QueueError::KeyConflict {
                index: usize::try_from(uint(at(rest, 0)?)?).unwrap_or(usize::MAX),
                key: text(at(rest, 1)?)?,
                id: uint(at(rest, 2)?)?,
            }),
            "lost" => Err(QueueError::Store(StoreError::Unavailable(
                "the staged batch expired before its submit: nothing was stored".into(),
            ))),
            "ok" => {
                let (mut out, older) = numbered(spec, jobs, rest)?;
                self.confirm("submit", instance).await?;
                self.list(instance).await?;
                self.describe(spec, instance, &mut out, &older).await?;
                Ok(out)
            }
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

    async fn give_back(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
        slot: Micros,
    ) -> Result<(), QueueError> {
        let v = self
            .call(spec, instance, "give_back", |inv| {
                inv.arg(id).arg(nonce).arg(slot).arg(spec.spacing());
            })
            .await?;
        not_held(&tagged(&v)?.0, id, &v)
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
        not_held(&tagged(&v)?.0, id, &v)?;
        self.confirm("ack", instance).await
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
        self.confirm("nack", instance).await?;
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
        let mut total = 0;
        loop {
            let v = self.call(spec, instance, "purge", |_| {}).await?;
            let (tag, rest) = tagged(&v)?;
            total += uint(at(rest, 0)?)?;
            if tag != "more" {
                return Ok(total);
            }
        }
    }

    async fn stats(
        &self,
        spec: &QueueSpec,
        instance: &str,
    ) -> Result<Option<InstanceStats>, QueueError> {
        if let Some(s) = self.read_stats(spec, instance).await? {
            return Ok(Some(s));
        }
        // The script forgot the instance (deleted its keys); it now leaves the list, which lives
        // in a slot of its own, so in a command after the script. A submit may have stored jobs
        // in between, and its listing after its script may have come before this removal: so
        // the instance is read again after the removal, and listed again unless it is still
        // empty. Every removal is then followed by a read and every submit's script by a
        // listing: whichever Redis ran last, an instance that holds a job stays listed.
        let mut srem = redis::cmd("SREM");
        srem.arg(INSTANCES_KEY).arg(instance);
        self.query(&srem).await?;
        let again = self.read_stats(spec, instance).await;
        if matches!(again, Ok(None)) {
            return Ok(None);
        }
        // (listed again when the read failed too: a listed instance may be empty, and is
        // forgotten again by a later read, but one that holds a job must not go unlisted)
        let listed = self.list(instance).await;
        let again = again?;
        listed?;
        Ok(again)
    }

    async fn instances(&self) -> Result<Vec<String>, QueueError> {
        let mut cmd = redis::cmd("SMEMBERS");
        cmd.arg(INSTANCES_KEY);
        let v = self.query(&cmd).await?;
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
    /// The stats script: the instance's state, or `None` when the script forgot it (deleted
    /// its keys: empty and idle for its retention), which leaves it listed.
    async fn read_stats(
        &self,
        spec: &QueueSpec,
        instance: &str,
    ) -> Result<Option<InstanceStats>, QueueError> {
        let v = self
            .call(spec, instance, "stats", |inv| {
                inv.arg(spec.spacing()).arg(spec.tau()).arg(spec.lease());
            })
            .await?;
        let (tag, a) = tagged(&v)?;
        if tag == "gone" {
            return Ok(None);
        }
        let n = |i| uint(at(a, i)?);
        let opt = |i| -> Result<Option<u64>, QueueError> {
            let v = int(at(a, i)?)?;
            Ok((v >= 0).then_some(v as u64))
        };
        Ok(Some(InstanceStats {
            ready: n(0)?,
            delayed: n(1)?,
            in_flight: n(2)?,
            reserved: n(3)?,
            dead: n(4)?,
            oldest_submitted: opt(5)?,
            submitted_total: n(6)?,
            released_total: n(7)?,
            acked_total: n(8)?,
            dead_total: n(9)?,
            next_slot: n(10)?,
            last_due: opt(11)?,
            recent_releases: n(12)?,
            first_recent_release: opt(13)?,
            now: n(14)?,
        }))
    }

    async fn dead_op(
        &self,
        spec: &QueueSpec,
        instance: &str,
        op: &str,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        let mut total = 0;
        loop {
            let v = self
                .call(spec, instance, op, |inv| {
                    for id in ids.into_iter().flatten() {
                        inv.arg(*id);
                    }
                })
                .await?;
            let (tag, rest) = tagged(&v)?;
            match tag.as_str() {
                "ok" => return Ok(total + uint(at(rest, 0)?)?),
                "more" => total += uint(at(rest, 0)?)?,
                "not_dead" => {
                    return Err(QueueError::NotDead {
                        id: uint(at(rest, 0)?)?,
                    });
                }
                _ => return Err(internal("answer", &v)),
            }
        }
    }
}
