//! [`DiskQueueStore`]: the embedded queue store. Jobs live in a [redb] database file under a
//! data directory, so a node killed with SIGKILL and restarted loses no job it acknowledged.
//!
//! Why redb: a pure-Rust embedded database with ACID transactions whose commit returns only once
//! the data is on disk (fsync), a crash-safe copy-on-write file format that is stable across
//! releases, no C dependency and no background compaction; it is actively maintained. SQLite
//! (rusqlite) would do as well but brings a C build; sled's format is not stable.
//!
//! The instances live in memory ([`Instance`], the same transitions as the Redis scripts), each
//! behind its own lock (a big batch submitted to one instance never holds up another's leases),
//! and every operation's changes are written to the database before it answers. Writes are
//! group-committed by one writer thread: the changes of all operations waiting at that moment go
//! in one transaction and one fsync, so throughput grows with concurrency instead of being one
//! fsync per operation. A batch whose payloads pass 1 MiB writes them first, in
//! transactions of about that size each (`staged_payloads`), and then its jobs in one small
//! transaction: the operations of other instances commit between the chunks instead of waiting
//! behind one big commit, and the batch stays all or nothing (a staged payload no job refers to,
//! left by a failed or interrupted submit, is deleted when the store opens). Payloads are kept in
//! memory too (so a lease never reads the disk):
//! memory grows with the bytes waiting. If a commit fails (disk full), the store stops taking
//! operations (`StoreError::Unavailable`) rather than answer from memory what the disk does not
//! hold; a restart reloads the last committed state.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;

use flowgate_core::queue::engine::{Change, FinishedKey, Instance, Job, JobState, Meta, Totals};
use flowgate_core::queue::record::{MAX_RECORDED, Record};
use flowgate_core::queue::{
    DeadJob, InstanceStats, LeaseOutcome, Nacked, NewJob, QueueError, QueueSpec, QueueStore,
    Submitted,
};
use flowgate_core::{Clock, Micros, StoreError};
use parking_lot::Mutex;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::watch;

/// Instance key -> [`Meta`].
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// (instance, id) -> a job's record (see [`encode_job`]).
const JOBS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("jobs");
/// (instance, id) -> a job's payload.
const PAYLOADS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("payloads");
/// (instance, idempotency key) -> a finished job's id and finish time.
const KEYS: TableDefinition<(&str, &str), (u64, u64)> = TableDefinition::new("keys");
/// (instance, idempotency key) -> the finished job's payload fingerprint (absent for keys kept
/// before fingerprints were).
const PRINTS: TableDefinition<(&str, &str), &str> = TableDefinition::new("key_prints");

/// (stage, index) -> the payload of job `index` of a big batch, written before the batch.
const STAGED: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("staged_payloads");

/// "jobs" -> the format of the job records.
const FORMAT: TableDefinition<&str, u64> = TableDefinition::new("format");
/// The job records' format: 2, [`encode_job`]'s. A file of format 1 (no `format` table) has its
/// records rewritten when it opens.
const JOB_FORMAT: u64 = 2;

/// A batch whose payloads pass this many bytes is staged, in transactions of about this size.
const STAGE_ABOVE: usize = 1 << 20;

/// The database file's name in the data directory.
pub const FILE_NAME: &str = "queues.redb";

/// One write, computed when the operation ran.
enum Write {
    Meta(String, Meta),
    Job {
        instance: String,
        id: u64,
        state: Option<Vec<u8>>,
        payload: Option<Arc<[u8]>>,
        /// Where its payload was staged (deleted with the job).
        staged: Option<Stage>,
    },
    /// A staged payload.
    Staged(Stage, Arc<[u8]>),
    /// A staged payload no job refers to.
    Unstaged(Stage),
    Key(String, String, Option<(u64, Micros, Option<String>)>),
    /// The instance was forgotten: its record goes.
    Forget(String),
}

/// Where a staged payload is: (stage, index in its batch).
type Stage = (u64, u64);

/// One instance, where its staged jobs' payloads are, and whether it was forgotten (an
/// operation that finds it so looks it up again, and gets a fresh one).
#[derive(Default)]
struct Slot {
    inst: Instance,
    staged: HashMap<u64, Stage>,
    gone: bool,
}

/// The instances by key.
type Slots = HashMap<String, Arc<Mutex<Slot>>>;

struct State {
    instances: Slots,
    pending: Vec<Write>,
    /// The number of the last operation whose writes were queued.
    queued: u64,
    failed: Option<String>,
}

struct Inner {
    clock: Arc<dyn Clock>,
    /// Shared with the writer thread.
    state: Arc<Mutex<State>>,
    /// Wakes the writer; dropped (with the store) to stop it.
    wake: Option<mpsc::Sender<()>>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// The number of the last operation whose writes are committed, or an error.
    committed: watch::Receiver<Result<u64, String>>,
    path: PathBuf,
}

impl Drop for Inner {
    /// Commits what is pending and closes the database before the store is gone, so the data
    /// directory can be opened again at once.
    fn drop(&mut self) {
        self.wake.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// The embedded queue store. See the module documentation (`queue/disk.rs`).
///
/// Cloning is cheap; clones share the database. One process at a time may open a data
/// directory (redb locks the file).
#[derive(Clone)]
pub struct DiskQueueStore {
    inner: Arc<Inner>,
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("queue database: {what}: {e}"))
}

impl DiskQueueStore {
    /// Opens (or creates) the database in `dir`, creating the directory if needed, and loads
    /// every instance.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the directory or file cannot be created or read, or
    /// another process has it open.
    pub fn open(dir: impl AsRef<Path>, clock: impl Clock) -> Result<Self, StoreError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)
            .map_err(|e| unavailable(&format!("cannot create {}", dir.display()), e))?;
        let path = dir.join(FILE_NAME);
        let open = || -> Result<(Database, Slots), StoreError> {
            let db = Database::create(&path)
                .map_err(|e| unavailable(&format!("cannot open {}", path.display()), e))?;
            upgrade(&db).map_err(|e| unavailable("cannot upgrade", e))?;
            let (instances, orphans) = load(&db).map_err(|e| unavailable("cannot load", e))?;
            drop_orphans(&db, &orphans).map_err(|e| unavailable("cannot tidy", e))?;
            Ok((db, instances))
        };
        // redb panics on some damaged files (a malformed allocator state) where it could answer
        // an error: such a file is refused like any other damaged one.
        let (db, instances) = std::panic::catch_unwind(open).map_err(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            unavailable(
                &format!("cannot open {}", path.display()),
                format!("the file is damaged ({what})"),
            )
        })??;
        let (wake, rx) = mpsc::channel();
        let (tx_committed, committed) = watch::channel(Ok(0));
        let state = Arc::new(Mutex::new(State {
            instances,
            pending: Vec::new(),
            queued: 0,
            failed: None,
        }));
        let shared = Arc::clone(&state);
        let writer = std::thread::Builder::new()
            .name("flowgate-queue-writer".into())
            .spawn(move || write_loop(&db, &shared, &rx, &tx_committed))
            .map_err(|e| unavailable("cannot start the writer thread", e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                clock: Arc::new(clock),
                state,
                wake: Some(wake),
                writer: Some(writer),
                committed,
                path,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `op` on `instance` (created if absent) under the instance's lock, queues its
    /// changes, and waits until they are committed. `op` answers whether the instance may be
    /// forgotten too.
    async fn run<T>(
        &self,
        instance: &str,
        op: impl FnOnce(&mut Instance, Micros) -> Result<(T, bool), QueueError>,
    ) -> Result<T, QueueError> {
        self.run_staged(instance, None, op).await
    }

    /// [`Self::run`] for a submit whose payloads were staged as `stage`: job `i` of the batch
    /// (id `seq + 1 + i`) refers to `(stage, i)`.
    async fn run_staged<T>(
        &self,
        instance: &str,
        stage: Option<u64>,
        op: impl FnOnce(&mut Instance, Micros) -> Result<(T, bool), QueueError>,
    ) -> Result<T, QueueError> {
        let (seq, out) = loop {
            let slot = {
                let mut st = self.inner.state.lock();
                if let Some(e) = &st.failed {
                    return Err(QueueError::Store(unavailable("a commit failed", e)));
                }
                Arc::clone(st.instances.entry(instance.to_owned()).or_default())
            };
            let mut slot_guard = slot.lock();
            if slot_guard.gone {
                continue;
            }
            let now = self.inner.clock.now();
            let before = slot_guard.inst.meta().seq;
            let out = op(&mut slot_guard.inst, now);
            let changes = slot_guard.inst.take_changes();
            if let Some(stage) = stage {
                for c in &changes {
                    if let Change::New(id) = c {
                        slot_guard.staged.insert(*id, (stage, id - before - 1));
                    }
                }
            }
            let slot = &mut *slot_guard;
            let mut writes = writes(instance, &slot.inst, &mut slot.staged, changes);
            let forget = matches!(out, Ok((_, true)));
            if forget {
                slot_guard.gone = true;
                writes.push(Write::Forget(instance.to_owned()));
            }
            // Queued while the instance is locked, so its writes reach the disk in order.
            let mut st = self.inner.state.lock();
            if forget {
                st.instances.remove(instance);
            }
            if !writes.is_empty() {
                st.pending.extend(writes);
                st.queued += 1;
                if let Some(w) = &self.inner.wake {
                    let _ = w.send(());
                }
            }
            break (st.queued, out.map(|(t, _)| t));
        };
        let mut rx = self.inner.committed.clone();
        let done = rx
            .wait_for(|c| c.as_ref().map_or(true, |&c| c >= seq))
            .await
            .map_err(|_| QueueError::Store(unavailable("the writer stopped", "")))?
            .clone();
        match done {
            Ok(_) => out,
            Err(e) => Err(QueueError::Store(unavailable("a commit failed", e))),
        }
    }
}

impl DiskQueueStore {
    /// Queues `writes` (of no instance's state) and waits until they are committed.
    async fn commit_writes(&self, writes: Vec<Write>) -> Result<(), QueueError> {
        let seq = {
            let mut st = self.inner.state.lock();
            if let Some(e) = &st.failed {
                return Err(QueueError::Store(unavailable("a commit failed", e)));
            }
            st.pending.extend(writes);
            st.queued += 1;
            if let Some(w) = &self.inner.wake {
                let _ = w.send(());
            }
            st.queued
        };
        let mut rx = self.inner.committed.clone();
        let done = rx
            .wait_for(|c| c.as_ref().map_or(true, |&c| c >= seq))
            .await
            .map_err(|_| QueueError::Store(unavailable("the writer stopped", "")))?
            .clone();
        done.map(|_| ())
            .map_err(|e| QueueError::Store(unavailable("a commit failed", e)))
    }

    /// Submits a big batch: its payloads first, a transaction of about `STAGE_ABOVE` bytes at
    /// a time, then the batch; the staged payloads of jobs not stored (duplicates, or the whole
    /// batch on an error) go again.
    async fn submit_staged(
        &self,
        spec: &QueueSpec,
        instance: &str,
        jobs: &[NewJob],
    ) -> Result<Vec<Submitted>, QueueError> {
        let stage = flowgate_core::random::seed()
            .map_err(|e| QueueError::Store(StoreError::Internal(e.to_string())))?;
        let mut chunk = Vec::new();
        let mut bytes = 0;
        for (i, j) in jobs.iter().enumerate() {
            bytes += j.payload.len();
            chunk.push(Write::Staged(
                (stage, i as u64),
                Arc::from(j.payload.as_slice()),
            ));
            if bytes >= STAGE_ABOVE || i + 1 == jobs.len() {
                self.commit_writes(std::mem::take(&mut chunk)).await?;
                bytes = 0;
            }
        }
        let out = self
            .run_staged(instance, Some(stage), |i, now| {
                let first = i.meta().seq + 1;
                Ok(((i.submit(spec, now, jobs)?, first), false))
            })
            .await;
        let unused: Vec<Write> = match &out {
            Ok((subs, first)) => subs
                .iter()
                .enumerate()
                .filter(|(i, s)| s.duplicate || s.id != first + *i as u64)
                .map(|(i, _)| Write::Unstaged((stage, i as u64)))
                .collect(),
            Err(_) => (0..jobs.len() as u64)
                .map(|i| Write::Unstaged((stage, i)))
                .collect(),
        };
        if !unused.is_empty() {
            self.commit_writes(unused).await?;
        }
        out.map(|(subs, _)| subs)
    }
}

/// The writes for `changes` of `instance`, read from its current state; `staged` says where
/// staged jobs' payloads are (a deleted job's entry goes).
fn writes(
    key: &str,
    inst: &Instance,
    staged: &mut HashMap<u64, Stage>,
    changes: Vec<Change>,
) -> Vec<Write> {
    let mut out = Vec::with_capacity(changes.len());
    let mut meta = false;
    for c in changes {
        match c {
            Change::Meta => meta = true,
            Change::New(id) | Change::Job(id) => {
                let job = inst.job(id);
                let stage = staged.get(&id).copied();
                if job.is_none() {
                    staged.remove(&id);
                }
                out.push(Write::Job {
                    instance: key.to_owned(),
                    id,
                    state: job.map(|j| encode_job(j, stage)),
                    payload: match (&c, job, stage) {
                        (Change::New(_), Some(j), None) => Some(j.payload.clone()),
                        _ => None,
                    },
                    staged: stage,
                });
            }
            Change::Key(k) => {
                let v = inst
                    .finished_key(&k)
                    .map(|(id, at, print)| (id, at, print.map(str::to_owned)));
                out.push(Write::Key(key.to_owned(), k, v));
            }
        }
    }
    if meta {
        out.push(Write::Meta(key.to_owned(), inst.meta()));
    }
    out
}

/// A job's record: its fields as both stores encode them ([`Record`]), then its place: the
/// state (0 ready, 1 delayed, 2 in flight, 3 dead; bit 0x40: its payload was staged), the
/// state's instant unless it is ready (8 bytes little-endian), then where the payload was staged
/// (stage and index, 8 bytes each) if it was.
fn encode_job(j: &Job, stage: Option<Stage>) -> Vec<u8> {
    let (tag, at) = match j.state {
        JobState::Ready => (0u8, None),
        JobState::Delayed(t) => (1, Some(t)),
        JobState::InFlight(t) => (2, Some(t)),
        JobState::Dead(t) => (3, Some(t)),
    };
    let record = Record {
        submitted: j.submitted,
        attempts: j.attempts,
        nonce: j.nonce,
        key: j.key.as_deref(),
        rest: &[],
    };
    let place = 1 + if at.is_some() { 8 } else { 0 } + if stage.is_some() { 16 } else { 0 };
    // (the exact length: a larger allocation made a submit measurably slower)
    let mut b = Vec::with_capacity(record.fields_len() + place);
    record.write_fields(&mut b);
    place_job(
        &mut b,
        tag | if stage.is_some() { 0x40 } else { 0 },
        at,
        stage,
    );
    b
}

/// Appends a job's place (see [`encode_job`]).
fn place_job(b: &mut Vec<u8>, tag: u8, at: Option<Micros>, stage: Option<Stage>) {
    b.push(tag);
    if let Some(at) = at {
        b.extend_from_slice(&at.to_le_bytes());
    }
    if let Some((stage, index)) = stage {
        b.extend_from_slice(&stage.to_le_bytes());
        b.extend_from_slice(&index.to_le_bytes());
    }
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// `v` if a record may hold it.
fn recorded(v: u64) -> Option<u64> {
    (v <= MAX_RECORDED).then_some(v)
}

/// A job's fields and place from its record (see [`encode_job`]); `None` for a damaged one.
fn decode_job(id: u64, b: &[u8]) -> Option<(Record<'_>, JobState, Option<Stage>)> {
    recorded(id)?;
    let r = Record::decode(b)?;
    let (&tag, place) = r.rest.split_first()?;
    let (at, place) = if tag & !0x40 == 0 {
        (0, place)
    } else {
        (recorded(u64_at(place, 0)?)?, place.get(8..)?)
    };
    let stage = match (tag & 0x40 != 0, place.len()) {
        (true, 16) => Some((u64_at(place, 0)?, u64_at(place, 8)?)),
        (false, 0) => None,
        _ => return None,
    };
    let state = match tag & !0x40 {
        0 => JobState::Ready,
        1 => JobState::Delayed(at),
        2 => JobState::InFlight(at),
        3 => JobState::Dead(at),
        _ => return None,
    };
    Some((r, state, stage))
}

/// A job record of format 1 (before [`JOB_FORMAT`] 2) rewritten in the current format:
/// submitted (8 bytes), attempts (4), nonce (8), the tag (the state; 0x40: staged; 0x80: keyed),
/// the state's instant (8), stage and index if staged (8 each), then the key. All little-endian.
fn job_from_format_1(b: &[u8]) -> Option<Vec<u8>> {
    let tag = *b.get(20)?;
    let key_at = if tag & 0x40 != 0 { 45 } else { 29 };
    let key = std::str::from_utf8(b.get(key_at..)?).ok()?;
    let mut out = Vec::new();
    Record {
        submitted: recorded(u64_at(b, 0)?)?,
        attempts: u32::from_le_bytes(b.get(8..12)?.try_into().ok()?),
        nonce: u64_at(b, 12)?,
        key: (tag & 0x80 != 0).then_some(key),
        rest: &[],
    }
    .write_fields(&mut out);
    let at = match tag & 0x3f {
        0 => None,
        _ => Some(u64_at(b, 21)?),
    };
    let stage = match tag & 0x40 {
        0 => None,
        _ => Some((u64_at(b, 29)?, u64_at(b, 37)?)),
    };
    place_job(&mut out, tag & !0x80, at, stage);
    Some(out)
}

fn encode_meta(m: &Meta) -> [u8; 48] {
    let t = m.totals;
    let mut b = [0u8; 48];
    for (i, v) in [m.seq, m.tat, t.submitted, t.released, t.acked, t.dead]
        .into_iter()
        .enumerate()
    {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    b
}

fn decode_meta(b: &[u8]) -> Option<Meta> {
    let at = |i| recorded(u64_at(b, i)?);
    Some(Meta {
        seq: at(0)?,
        tat: at(8)?,
        totals: Totals {
            submitted: at(16)?,
            released: at(24)?,
            acked: at(32)?,
            dead: at(40)?,
        },
    })
}

type Loaded = HashMap<String, (Meta, Vec<Job>, Vec<FinishedKey>, HashMap<u64, Stage>)>;

/// Reads every instance; answers them and the staged payloads no job refers to.
fn load(db: &Database) -> Result<(Slots, Vec<Stage>), Box<dyn std::error::Error>> {
    let txn = db.begin_read()?;
    let mut all: Loaded = HashMap::new();
    let missing = |e: &redb::TableError| matches!(e, redb::TableError::TableDoesNotExist(_));
    match txn.open_table(META) {
        Ok(t) => {
            for row in t.iter()? {
                let (k, v) = row?;
                let meta = decode_meta(v.value()).ok_or("a damaged instance record")?;
                all.entry(k.value().to_owned()).or_default().0 = meta;
            }
        }
        Err(e) if missing(&e) => {}
        Err(e) => return Err(e.into()),
    }
    let staged = match txn.open_table(STAGED) {
        Ok(t) => Some(t),
        Err(e) if missing(&e) => None,
        Err(e) => return Err(e.into()),
    };
    let mut used: std::collections::HashSet<Stage> = std::collections::HashSet::new();
    if let (Ok(payloads), Ok(jobs)) = (txn.open_table(PAYLOADS), txn.open_table(JOBS)) {
        for row in jobs.iter()? {
            let (k, v) = row?;
            let (instance, id) = k.value();
            let (record, state, stage) = decode_job(id, v.value()).ok_or("a damaged job record")?;
            let payload: Arc<[u8]> = match (stage, &staged) {
                (Some(at), Some(t)) => t.get(at)?.map(|p| Arc::from(p.value())),
                (Some(_), None) => None,
                (None, _) => payloads.get((instance, id))?.map(|p| Arc::from(p.value())),
            }
            .ok_or("a job without its payload")?;
            let job = Job {
                id,
                payload,
                submitted: record.submitted,
                attempts: record.attempts,
                nonce: record.nonce,
                key: record.key.map(str::to_owned),
                state,
            };
            let entry = all.entry(instance.to_owned()).or_default();
            if let Some(at) = stage {
                used.insert(at);
                entry.3.insert(id, at);
            }
            entry.1.push(job);
        }
    }
    let prints = txn.open_table(PRINTS).ok();
    if let Ok(keys) = txn.open_table(KEYS) {
        for row in keys.iter()? {
            let (k, v) = row?;
            let (instance, key) = k.value();
            let (id, at) = v.value();
            if recorded(id).is_none() || recorded(at).is_none() {
                return Err("a damaged idempotency key record".into());
            }
            let print = match &prints {
                Some(p) => p.get((instance, key))?.map(|p| p.value().to_owned()),
                None => None,
            };
            all.entry(instance.to_owned())
                .or_default()
                .2
                .push((key.to_owned(), id, at, print));
        }
    }
    let mut orphans = Vec::new();
    if let Some(t) = &staged {
        for row in t.iter()? {
            let at = row?.0.value();
            if !used.contains(&at) {
                orphans.push(at);
            }
        }
    }
    let slots = all
        .into_iter()
        .map(|(k, (meta, jobs, keys, staged))| {
            let slot = Slot {
                inst: Instance::restore(meta, jobs, keys),
                staged,
                gone: false,
            };
            (k, Arc::new(Mutex::new(slot)))
        })
        .collect();
    Ok((slots, orphans))
}

/// Brings the job records to [`JOB_FORMAT`]: a file of format 1 has each one rewritten, in one
/// transaction; a file of a later format (a newer Flowgate's) is refused.
fn upgrade(db: &Database) -> Result<(), Box<dyn std::error::Error>> {
    let format = match db.begin_read()?.open_table(FORMAT) {
        Ok(t) => t.get("jobs")?.map(|v| v.value()),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(e.into()),
    };
    match format {
        Some(JOB_FORMAT) => return Ok(()),
        Some(f) => {
            return Err(format!(
                "its job records are of format {f}, written by a newer Flowgate (this one reads {JOB_FORMAT})"
            )
            .into());
        }
        None => {}
    }
    let txn = db.begin_write()?;
    let mut rewritten = 0u64;
    {
        let mut jobs = txn.open_table(JOBS)?;
        let mut old = Vec::new();
        for row in jobs.iter()? {
            let (k, v) = row?;
            let (instance, id) = k.value();
            let record = job_from_format_1(v.value()).ok_or("a damaged job record")?;
            old.push((instance.to_owned(), id, record));
        }
        for (instance, id, record) in old {
            jobs.insert((instance.as_str(), id), record.as_slice())?;
            rewritten += 1;
        }
        txn.open_table(FORMAT)?.insert("jobs", JOB_FORMAT)?;
    }
    txn.commit()?;
    if rewritten > 0 {
        tracing::info!(
            jobs = rewritten,
            "queue database: job records rewritten in format {JOB_FORMAT}"
        );
    }
    Ok(())
}

/// Deletes staged payloads no job refers to (a submit that failed or was cut short).
fn drop_orphans(db: &Database, orphans: &[Stage]) -> Result<(), Box<dyn std::error::Error>> {
    if orphans.is_empty() {
        return Ok(());
    }
    let txn = db.begin_write()?;
    {
        let mut t = txn.open_table(STAGED)?;
        for &at in orphans {
            t.remove(at)?;
        }
    }
    txn.commit()?;
    tracing::info!(
        payloads = orphans.len(),
        "queue database: deleted the staged payloads of an unfinished submit"
    );
    Ok(())
}

/// The writer thread: commits what is pending, one transaction at a time, until the store is
/// dropped.
fn write_loop(
    db: &Database,
    state: &Mutex<State>,
    wake: &mpsc::Receiver<()>,
    committed: &watch::Sender<Result<u64, String>>,
) {
    while wake.recv().is_ok() {
        while wake.try_recv().is_ok() {}
        let (writes, seq) = {
            let mut st = state.lock();
            (std::mem::take(&mut st.pending), st.queued)
        };
        if writes.is_empty() {
            continue;
        }
        match commit(db, writes) {
            Ok(()) => {
                let _ = committed.send_replace(Ok(seq));
            }
            Err(e) => {
                let e = e.to_string();
                tracing::error!(error = %e, "queue database commit failed; queues stop until restart");
                state.lock().failed = Some(e.clone());
                let _ = committed.send_replace(Err(e));
                return;
            }
        }
    }
}

fn commit(db: &Database, writes: Vec<Write>) -> Result<(), Box<dyn std::error::Error>> {
    let txn = db.begin_write()?;
    {
        let mut meta = txn.open_table(META)?;
        let mut jobs = txn.open_table(JOBS)?;
        let mut payloads = txn.open_table(PAYLOADS)?;
        let mut keys = txn.open_table(KEYS)?;
        let mut prints = txn.open_table(PRINTS)?;
        let mut staged = txn.open_table(STAGED)?;
        for w in writes {
            match w {
                Write::Meta(i, m) => {
                    meta.insert(i.as_str(), encode_meta(&m).as_slice())?;
                }
                Write::Staged(at, p) => {
                    staged.insert(at, &*p)?;
                }
                Write::Unstaged(at) => {
                    staged.remove(at)?;
                }
                Write::Job {
                    instance,
                    id,
                    state: Some(state),
                    payload,
                    ..
                } => {
                    jobs.insert((instance.as_str(), id), state.as_slice())?;
                    if let Some(p) = payload {
                        payloads.insert((instance.as_str(), id), &*p)?;
                    }
                }
                Write::Job {
                    instance,
                    id,
                    state: None,
                    staged: at,
                    ..
                } => {
                    jobs.remove((instance.as_str(), id))?;
                    payloads.remove((instance.as_str(), id))?;
                    if let Some(at) = at {
                        staged.remove(at)?;
                    }
                }
                Write::Key(i, k, Some((id, at, print))) => {
                    keys.insert((i.as_str(), k.as_str()), (id, at))?;
                    match print {
                        Some(p) => prints.insert((i.as_str(), k.as_str()), p.as_str())?,
                        None => prints.remove((i.as_str(), k.as_str()))?,
                    };
                }
                Write::Key(i, k, None) => {
                    keys.remove((i.as_str(), k.as_str()))?;
                    prints.remove((i.as_str(), k.as_str()))?;
                }
                Write::Forget(i) => {
                    meta.remove(i.as_str())?;
                }
            }
        }
    }
    txn.commit()?;
    Ok(())
}

impl QueueStore for DiskQueueStore {
    async fn submit(
        &self,
        spec: &QueueSpec,
        instance: &str,
        jobs: &[NewJob],
    ) -> Result<Vec<Submitted>, QueueError> {
        if jobs.iter().map(|j| j.payload.len()).sum::<usize>() > STAGE_ABOVE {
            return self.submit_staged(spec, instance, jobs).await;
        }
        self.run(instance, |i, now| Ok((i.submit(spec, now, jobs)?, false)))
            .await
    }

    async fn lease(
        &self,
        spec: &QueueSpec,
        instance: &str,
        horizon: Micros,
        nonce: u64,
    ) -> Result<LeaseOutcome, QueueError> {
        self.run(instance, |i, now| {
            Ok((i.lease(spec, now, horizon, nonce), false))
        })
        .await
    }

    async fn give_back(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
        slot: Micros,
    ) -> Result<(), QueueError> {
        self.run(instance, |i, now| {
            Ok((i.give_back(spec, now, id, nonce, slot)?, false))
        })
        .await
    }

    async fn ack(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
    ) -> Result<(), QueueError> {
        self.run(instance, |i, now| Ok((i.ack(spec, now, id, nonce)?, false)))
            .await
    }

    async fn nack(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
        retry_after: Option<Micros>,
    ) -> Result<Nacked, QueueError> {
        self.run(instance, |i, now| {
            Ok((i.nack(spec, now, id, nonce, retry_after)?, false))
        })
        .await
    }

    async fn dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<DeadJob>, QueueError> {
        self.run(instance, |i, now| {
            i.sweep(spec, now);
            Ok((i.dead(offset, limit), false))
        })
        .await
    }

    async fn requeue_dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        self.run(instance, |i, now| {
            Ok((i.requeue_dead(spec, now, ids)?, false))
        })
        .await
    }

    async fn purge_dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        self.run(instance, |i, now| {
            Ok((i.purge_dead(spec, now, ids)?, false))
        })
        .await
    }

    async fn purge(&self, spec: &QueueSpec, instance: &str) -> Result<u64, QueueError> {
        self.run(instance, |i, now| Ok((i.purge(spec, now), false)))
            .await
    }

    async fn stats(
        &self,
        spec: &QueueSpec,
        instance: &str,
    ) -> Result<Option<InstanceStats>, QueueError> {
        self.run(instance, |i, now| {
            let stats = i.stats(spec, now);
            Ok(if i.forgettable(spec, now) {
                (None, true)
            } else {
                (Some(stats), false)
            })
        })
        .await
    }

    async fn instances(&self) -> Result<Vec<String>, QueueError> {
        let slots: Vec<(String, Arc<Mutex<Slot>>)> = {
            let st = self.inner.state.lock();
            st.instances
                .iter()
                .map(|(k, s)| (k.clone(), Arc::clone(s)))
                .collect()
        };
        let mut v: Vec<String> = slots
            .into_iter()
            .filter(|(_, s)| {
                let s = s.lock();
                !s.gone && s.inst.meta().seq > 0
            })
            .map(|(k, _)| k)
            .collect();
        v.sort();
        Ok(v)
    }
}
