//! One queue instance in memory: its jobs, its release schedule, and every transition, as pure
//! functions of `now`. The embedded store keeps its instances here and persists what each
//! transition changed ([`Instance::take_changes`]); the Redis store runs the same transitions
//! in Lua, and the queue conformance table and a differential property test (random operation
//! sequences, `flowgate-redis/tests/queue_props.rs`) hold both to the same answers.
//!
//! A job is in exactly one state: ready (ordered by id, so submission order), delayed (until an
//! instant), in flight (until its lease deadline) or dead. Every operation first applies what
//! time has done ([`Instance::sweep`]): due delayed jobs become ready, expired leases give their
//! job back (or to the dead letters after its last attempt), and idempotency keys past their
//! retention are forgotten. Each kind of these is applied at most [`SWEEP_LIMIT`] at a time, so
//! no operation's cost grows with a backlog that expired at once (the rest goes at the next
//! operations).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use super::job::{
    DeadJob, InstanceStats, JobStatus, LeaseOutcome, Leased, Nacked, NewJob, QueueError,
    RELEASE_LOG, RELEASE_WINDOW, Submitted, fingerprint,
};
use super::release::{Slot, first_slot, next_slot};
use super::spec::QueueSpec;
use crate::clock::Micros;

/// The most expired leases, due delayed jobs and old idempotency keys one operation applies
/// (of each kind); the Redis script's bound too.
pub const SWEEP_LIMIT: usize = 100;

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for its release slot.
    Ready,
    /// Waiting until this instant (`not_before`, or a retry's delay).
    Delayed(Micros),
    /// Leased until this instant.
    InFlight(Micros),
    /// In the dead letters since this instant.
    Dead(Micros),
}

/// A job held by an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// Its id.
    pub id: u64,
    /// Its payload.
    pub payload: Arc<[u8]>,
    /// When it was submitted.
    pub submitted: Micros,
    /// Deliveries so far.
    pub attempts: u32,
    /// The nonce of its last delivery (0: never delivered).
    pub nonce: u64,
    /// Its idempotency key.
    pub key: Option<String>,
    /// Where it is.
    pub state: JobState,
}

/// Counters of an instance since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Jobs submitted (duplicates not counted).
    pub submitted: u64,
    /// Releases, retries included.
    pub released: u64,
    /// Jobs acked.
    pub acked: u64,
    /// Jobs sent to the dead letters.
    pub dead: u64,
}

/// The instance-wide values: the last id given, the TAT, the totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// The last id given.
    pub seq: u64,
    /// The release schedule's theoretical arrival time.
    pub tat: Micros,
    /// The totals.
    pub totals: Totals,
}

/// Something a transition changed, to persist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The instance's [`Meta`].
    Meta,
    /// A new job: write it with its payload.
    New(u64),
    /// A job's state: write it as it is now (its payload is unchanged), or delete it (with its
    /// payload) if it is gone.
    Job(u64),
    /// A finished job's idempotency key: write it (with its id and finish time) or delete it.
    Key(String),
}

/// One queue instance. See the [module documentation](self).
#[derive(Clone, Debug, Default)]
pub struct Instance {
    meta: Meta,
    jobs: HashMap<u64, Job>,
    ready: BTreeSet<u64>,
    delayed: BTreeSet<(Micros, u64)>,
    in_flight: BTreeSet<(Micros, u64)>,
    dead: BTreeSet<(Micros, u64)>,
    /// Idempotency keys of live jobs and of finished jobs within their retention: the job's id
    /// and its payload's [`fingerprint`] (none for a key kept by an older version).
    keys: HashMap<String, (u64, Option<String>)>,
    /// Finished jobs' keys: key -> (id, finished at), and the same ordered by time.
    finished: HashMap<String, (u64, Micros)>,
    finished_by_time: BTreeSet<(Micros, String)>,
    /// The slots of the last releases, oldest first but for a given-back slot used again
    /// (at most [`RELEASE_LOG`]; not persisted).
    releases: VecDeque<Micros>,
    /// Slots given back before they came, with the id of the job that held them: the next
    /// leases take them before new ones (not persisted: a restart loses them, and with them
    /// only throughput).
    free: BTreeSet<(Micros, u64)>,
    changes: Vec<Change>,
}

/// The pause between two releases that ends a run of them for the measured rate: five
/// spacings, at least 2 s.
pub fn release_gap(spacing: Micros) -> Micros {
    spacing.saturating_mul(5).max(2_000_000)
}

/// A finished job's idempotency key as persisted: the key, the job's id, when it finished, and
/// its payload's fingerprint.
pub type FinishedKey = (String, u64, Micros, Option<String>);

impl Instance {
    /// An empty instance.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuilds an instance from what was persisted.
    pub fn restore(
        meta: Meta,
        jobs: impl IntoIterator<Item = Job>,
        finished: impl IntoIterator<Item = FinishedKey>,
    ) -> Self {
        let mut inst = Self {
            meta,
            ..Self::default()
        };
        for job in jobs {
            if let Some(k) = &job.key {
                inst.keys
                    .insert(k.clone(), (job.id, Some(fingerprint(&job.payload))));
            }
            inst.index(job.id, job.state);
            inst.jobs.insert(job.id, job);
        }
        for (key, id, at, print) in finished {
            inst.keys.insert(key.clone(), (id, print));
            inst.finished_by_time.insert((at, key.clone()));
            inst.finished.insert(key, (id, at));
        }
        inst
    }

    /// The instance-wide values.
    pub fn meta(&self) -> Meta {
        self.meta
    }

    /// A job held (not acked or purged).
    pub fn job(&self, id: u64) -> Option<&Job> {
        self.jobs.get(&id)
    }

    /// A finished job's key: its id, when it finished and its payload's fingerprint, while
    /// retained.
    pub fn finished_key(&self, key: &str) -> Option<(u64, Micros, Option<&str>)> {
        let &(id, at) = self.finished.get(key)?;
        let print = self.keys.get(key).and_then(|(_, p)| p.as_deref());
        Some((id, at, print))
    }

    /// What changed since the last call, in order (duplicates possible).
    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    /// Jobs held: waiting and in flight (dead letters not counted).
    pub fn held(&self) -> u64 {
        (self.jobs.len() - self.dead.len()) as u64
    }

    fn index(&mut self, id: u64, state: JobState) {
        match state {
            JobState::Ready => self.ready.insert(id),
            JobState::Delayed(t) => self.delayed.insert((t, id)),
            JobState::InFlight(t) => self.in_flight.insert((t, id)),
            JobState::Dead(t) => self.dead.insert((t, id)),
        };
    }

    fn unindex(&mut self, id: u64, state: JobState) {
        match state {
            JobState::Ready => self.ready.remove(&id),
            JobState::Delayed(t) => self.delayed.remove(&(t, id)),
            JobState::InFlight(t) => self.in_flight.remove(&(t, id)),
            JobState::Dead(t) => self.dead.remove(&(t, id)),
        };
    }

    /// Moves a job to `state` (no-op for an unknown id).
    fn set_state(&mut self, id: u64, state: JobState) {
        let Some(old) = self.jobs.get(&id).map(|j| j.state) else {
            return;
        };
        self.unindex(id, old);
        self.index(id, state);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = state;
        }
        self.changes.push(Change::Job(id));
    }

    /// Removes a finished job. An acked job's key is retained from `now` (a resubmission is
    /// answered as a duplicate); a purged job's key is forgotten (it may be submitted again).
    fn finish(&mut self, id: u64, now: Micros, keep_key: bool) {
        let Some(job) = self.jobs.remove(&id) else {
            return;
        };
        self.unindex(id, job.state);
        self.changes.push(Change::Job(id));
        if let Some(k) = job.key {
            if keep_key {
                self.finished.insert(k.clone(), (id, now));
                self.finished_by_time.insert((now, k.clone()));
            } else {
                self.keys.remove(&k);
            }
            self.changes.push(Change::Key(k));
        }
    }

    /// Applies what time has done by `now`: expired leases give their job back (or, after its
    /// last attempt, to the dead letters), due delayed jobs become ready, and finished jobs' keys
    /// older than the retention are forgotten.
    pub fn sweep(&mut self, spec: &QueueSpec, now: Micros) {
        for _ in 0..SWEEP_LIMIT {
            let Some(&(deadline, id)) = self.in_flight.first() else {
                break;
            };
            if deadline > now {
                break;
            }
            let attempts = self.jobs.get(&id).map_or(0, |j| j.attempts);
            if attempts >= spec.max_attempts() {
                self.set_state(id, JobState::Dead(deadline));
                self.meta.totals.dead += 1;
                self.changes.push(Change::Meta);
            } else {
                self.set_state(id, JobState::Ready);
            }
        }
        for _ in 0..SWEEP_LIMIT {
            let Some(&(due, id)) = self.delayed.first() else {
                break;
            };
            if due > now {
                break;
            }
            self.set_state(id, JobState::Ready);
        }
        let horizon = now.saturating_sub(spec.key_retention());
        for _ in 0..SWEEP_LIMIT {
            let Some((at, key)) = self.finished_by_time.first().cloned() else {
                break;
            };
            if at > horizon {
                break;
            }
            self.finished_by_time.remove(&(at, key.clone()));
            self.finished.remove(&key);
            self.keys.remove(&key);
            self.changes.push(Change::Key(key));
        }
    }

    /// Submits a batch, all or nothing: an error stores nothing. Job `i` of the batch gets id
    /// `seq + 1 + i` (a batch of duplicates only takes no id). A job whose key is known (a live job's, a retained finished job's, or an
    /// earlier job's of this batch) with the same payload is answered with that job (its id,
    /// state and position) and not stored again.
    ///
    /// # Errors
    /// [`QueueError::KeyConflict`] when a known key comes with another payload (checked first);
    /// [`QueueError::QueueFull`] when the new jobs would hold more than `max_depth`.
    pub fn submit(
        &mut self,
        spec: &QueueSpec,
        now: Micros,
        jobs: &[NewJob],
    ) -> Result<Vec<Submitted>, QueueError> {
        self.sweep(spec, now);
        let prints: Vec<Option<String>> = jobs
            .iter()
            .map(|j| j.key().map(|_| fingerprint(&j.payload)))
            .collect();
        // Per job: the id of the job its key names (None: a new job).
        let mut dup_of: Vec<Option<u64>> = Vec::with_capacity(jobs.len());
        let mut in_batch: HashMap<&str, (u64, Option<&str>)> = HashMap::new();
        for (i, j) in jobs.iter().enumerate() {
            let id = self.meta.seq + 1 + i as u64;
            let print = prints[i].as_deref();
            let known = j.key().and_then(|k| {
                let (id, p) = self
                    .keys
                    .get(k)
                    .map(|(id, p)| (*id, p.as_deref()))
                    .or_else(|| in_batch.get(k).copied())?;
                Some((k, id, p))
            });
            match known {
                Some((key, existing, Some(p))) if Some(p) != print => {
                    return Err(QueueError::KeyConflict {
                        index: i,
                        key: key.to_owned(),
                        id: existing,
                    });
                }
                Some((_, existing, _)) => dup_of.push(Some(existing)),
                None => {
                    if let Some(k) = j.key() {
                        in_batch.insert(k, (id, print));
                    }
                    dup_of.push(None);
                }
            }
        }
        let fresh = dup_of.iter().filter(|d| d.is_none()).count() as u64;
        let held = self.held();
        if held + fresh > spec.max_depth() {
            return Err(QueueError::QueueFull {
                held,
                asked: fresh,
                max: spec.max_depth(),
            });
        }
        let first_slot = first_slot(self.meta.tat, now, spec.spacing(), spec.tau());
        let seq = self.meta.seq;
        if fresh > 0 {
            self.meta.seq += jobs.len() as u64;
        }
        // New jobs have the highest ids: a ready one is behind every ready job before the batch
        // and the batch's earlier ready jobs.
        let mut position = self.ready.len() as u64;
        let mut out = Vec::with_capacity(jobs.len());
        let mut older = Vec::new();
        for (i, (j, print)) in jobs.iter().zip(prints).enumerate() {
            if let Some(existing) = dup_of[i] {
                let earlier = existing
                    .checked_sub(seq + 1)
                    .and_then(|k| out.get(usize::try_from(k).ok()?));
                match earlier {
                    Some(e) => out.push(Submitted {
                        duplicate: true,
                        ..Submitted::clone(e)
                    }),
                    None => {
                        older.push(i);
                        out.push(Submitted::duplicate_of(existing));
                    }
                }
                continue;
            }
            let id = seq + 1 + i as u64;
            let state = match j.not_before {
                Some(t) if t > now => JobState::Delayed(t),
                _ => JobState::Ready,
            };
            if let Some(k) = j.key() {
                self.keys.insert(k.to_owned(), (id, print));
            }
            self.jobs.insert(
                id,
                Job {
                    id,
                    payload: j.payload.as_slice().into(),
                    submitted: now,
                    attempts: 0,
                    nonce: 0,
                    key: j.key().map(str::to_owned),
                    state,
                },
            );
            self.index(id, state);
            self.changes.push(Change::New(id));
            out.push(match state {
                JobState::Delayed(t) => Submitted::delayed(id, t),
                _ => {
                    position += 1;
                    Submitted::ready(id, position - 1, first_slot, spec.spacing())
                }
            });
        }
        self.describe(spec, first_slot, &mut out, &older);
        self.meta.totals.submitted += fresh;
        self.changes.push(Change::Meta);
        Ok(out)
    }

    /// Fills in the answers at `which` (duplicates of jobs of earlier batches) from their jobs
    /// as they are now (anywhere; a finished one is `Done`). Positions are counted in one walk
    /// of the ready jobs.
    fn describe(
        &self,
        spec: &QueueSpec,
        first_slot: Micros,
        out: &mut [Submitted],
        which: &[usize],
    ) {
        let mut ready: Vec<u64> = Vec::new();
        for &i in which {
            let Some(s) = out.get_mut(i) else {
                continue;
            };
            let (state, release_at) = match self.jobs.get(&s.id).map(|j| j.state) {
                None => (JobStatus::Done, None),
                Some(JobState::Ready) => {
                    ready.push(s.id);
                    (JobStatus::Ready, None)
                }
                Some(JobState::Delayed(t)) => (JobStatus::Delayed, Some(t)),
                Some(JobState::InFlight(_)) => (JobStatus::InFlight, None),
                Some(JobState::Dead(_)) => (JobStatus::Dead, None),
            };
            s.state = state;
            s.release_at = release_at;
        }
        ready.sort_unstable();
        ready.dedup();
        let Some(&lowest) = ready.first() else {
            return;
        };
        let mut ranks: HashMap<u64, u64> = HashMap::with_capacity(ready.len());
        let mut rank = self.ready.range(..lowest).count() as u64;
        let mut walk = self.ready.range(lowest..).peekable();
        for id in ready {
            while walk.next_if(|&&r| r < id).is_some() {
                rank += 1;
            }
            ranks.insert(id, rank);
        }
        for &i in which {
            let Some(s) = out.get_mut(i) else {
                continue;
            };
            if let Some(&p) = ranks.get(&s.id) {
                s.position = Some(p);
                s.release_at = Some(first_slot.saturating_add(p.saturating_mul(spec.spacing())));
            }
        }
    }

    /// Leases the next ready job at its release slot, if that slot is at most `horizon` µs away;
    /// the delivery gets `nonce`.
    pub fn lease(
        &mut self,
        spec: &QueueSpec,
        now: Micros,
        horizon: Micros,
        nonce: u64,
    ) -> LeaseOutcome {
        self.sweep(spec, now);
        let Some(&id) = self.ready.first() else {
            let next = [self.delayed.first(), self.in_flight.first()]
                .into_iter()
                .flatten()
                .map(|&(t, _)| t.saturating_sub(now))
                .min();
            return LeaseOutcome::Empty { next };
        };
        let at = match self.take_slot(spec, now, horizon) {
            Ok(at) => at,
            Err(after) => return LeaseOutcome::Later(after),
        };
        self.meta.totals.released += 1;
        self.changes.push(Change::Meta);
        if self.releases.len() >= RELEASE_LOG {
            self.releases.pop_front();
        }
        self.releases.push_back(at);
        let deadline = at + spec.lease();
        self.set_state(id, JobState::InFlight(deadline));
        let Some(job) = self.jobs.get_mut(&id) else {
            return LeaseOutcome::Empty { next: None };
        };
        job.attempts += 1;
        job.nonce = nonce;
        LeaseOutcome::Leased(Leased {
            id,
            payload: job.payload.to_vec(),
            attempt: job.attempts,
            nonce,
            submitted_at: job.submitted,
            released_at: at,
            lease_deadline: deadline,
            now,
        })
    }

    /// The slot of the next release within `horizon` µs of `now`, taken: the earliest slot given
    /// back that has not passed (a slot given back was in the schedule, so using it again keeps
    /// every guarantee of the schedule's, and it comes before the schedule's next one), else the
    /// schedule's next one (the TAT moves). `Err`: how long until a slot comes within the
    /// horizon.
    fn take_slot(
        &mut self,
        spec: &QueueSpec,
        now: Micros,
        horizon: Micros,
    ) -> Result<Micros, Micros> {
        self.free = self.free.split_off(&(now, 0));
        if let Some(&(at, id)) = self.free.first()
            && at - now <= horizon
        {
            self.free.remove(&(at, id));
            return Ok(at);
        }
        match next_slot(self.meta.tat, now, spec.spacing(), spec.tau(), horizon) {
            Slot::Reserved { at, tat } => {
                self.meta.tat = tat;
                Ok(at)
            }
            Slot::Later(after) => Err(self.free.first().map_or(after, |&(at, _)| {
                after.min((at - now).saturating_sub(horizon))
            })),
        }
    }

    /// Acks a delivery: the job is finished and never delivered again. A late ack (the lease
    /// expired, but the job was not delivered again) is accepted: its work is done.
    ///
    /// # Errors
    /// [`QueueError::NotHeld`] when no job `id` holds delivery `nonce`.
    pub fn ack(
        &mut self,
        spec: &QueueSpec,
        now: Micros,
        id: u64,
        nonce: u64,
    ) -> Result<(), QueueError> {
        self.sweep(spec, now);
        match self.jobs.get(&id) {
            Some(j) if j.nonce == nonce && nonce != 0 => {
                self.finish(id, now, true);
                self.meta.totals.acked += 1;
                self.changes.push(Change::Meta);
                Ok(())
            }
            _ => Err(QueueError::NotHeld { id }),
        }
    }

    /// Gives a leased job back: ready again after `retry_after` µs (default: the queue's
    /// backoff for this attempt), or to the dead letters after its last attempt.
    ///
    /// # Errors
    /// [`QueueError::NotHeld`] when job `id` is not in flight with delivery `nonce`.
    pub fn nack(
        &mut self,
        spec: &QueueSpec,
        now: Micros,
        id: u64,
        nonce: u64,
        retry_after: Option<Micros>,
    ) -> Result<Nacked, QueueError> {
        self.sweep(spec, now);
        let attempts = match self.jobs.get(&id) {
            Some(j) if j.nonce == nonce && matches!(j.state, JobState::InFlight(_)) => j.attempts,
            _ => return Err(QueueError::NotHeld { id }),
        };
        // The delivery ends here: a later ack or nack of it is not held.
        if let Some(j) = self.jobs.get_mut(&id) {
            j.nonce = 0;
        }
        if attempts >= spec.max_attempts() {
            self.set_state(id, JobState::Dead(now));
            self.meta.totals.dead += 1;
            self.changes.push(Change::Meta);
            return Ok(Nacked::Dead);
        }
        let at = now.saturating_add(retry_after.unwrap_or_else(|| spec.backoff_after(attempts)));
        let state = if at > now {
            JobState::Delayed(at)
        } else {
            JobState::Ready
        };
        self.set_state(id, state);
        Ok(Nacked::Retry { at })
    }

    /// The dead letters, oldest death first, from `offset`, at most `limit`.
    pub fn dead(&self, offset: usize, limit: usize) -> Vec<DeadJob> {
        self.dead
            .iter()
            .skip(offset)
            .take(limit)
            .filter_map(|&(at, id)| {
                self.jobs.get(&id).map(|j| DeadJob {
                    id,
                    payload: j.payload.to_vec(),
                    attempts: j.attempts,
                    submitted_at: j.submitted,
                    died_at: at,
                    key: j.key.clone(),
                })
            })
            .collect()
    }

    fn dead_ids(&self, ids: Option<&[u64]>) -> Result<Vec<u64>, QueueError> {
        match ids {
            None => Ok(self.dead.iter().map(|&(_, id)| id).collect()),
            Some(ids) => {
                for &id in ids {
                    if !matches!(self.jobs.get(&id).map(|j| j.state), Some(JobState::Dead(_))) {
                        return Err(QueueError::NotDead { id });
                    }
                }
                Ok(ids.to_vec())
            }
        }
    }

    /// Puts dead letters (`ids`, or all) back as ready, with their attempts reset; answers how
    /// many.
    ///
    /// # Errors
    /// [`QueueError::NotDead`] when an id is not a dead letter (then nothing changes).
    pub fn requeue_dead(
        &mut self,
        spec: &QueueSpec,
        now: Micros,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        self.sweep(spec, now);
        let ids = self.dead_ids(ids)?;
        for &id in &ids {
            if let Some(j) = self.jobs.get_mut(&id) {
                j.attempts = 0;
            }
            self.set_state(id, JobState::Ready);
        }
        Ok(ids.len() as u64)
    }

    /// Deletes dead letters (`ids`, or all); answers how many.
    ///
    /// # Errors
    /// [`QueueError::NotDead`] when an id is not a dead letter (then nothing changes).
    pub fn purge_dead(
        &mut self,
        spec: &QueueSpec,
        now: Micros,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        self.sweep(spec, now);
        let ids = self.dead_ids(ids)?;
        for &id in &ids {
            self.finish(id, now, false);
        }
        Ok(ids.len() as u64)
    }

    /// Deletes every job (waiting, in flight and dead) and forgets their keys; answers how
    /// many.
    pub fn purge(&mut self, spec: &QueueSpec, now: Micros) -> u64 {
        self.sweep(spec, now);
        let ids: Vec<u64> = self.jobs.keys().copied().collect();
        for &id in &ids {
            self.finish(id, now, false);
        }
        ids.len() as u64
    }

    /// Gives back a delivery that never reached its worker (the client went away, or the answer
    /// came too late for its slot): the job is ready again at once, first in line (its id is
    /// the lowest ready), with this attempt not counted and its release not counted. Its slot
    /// is freed: if no release was reserved after it, the schedule goes back to it; else, if
    /// it has not passed, the next lease takes it.
    ///
    /// # Errors
    /// [`QueueError::NotHeld`] when job `id` is not in flight with delivery `nonce`.
    pub fn give_back(
        &mut self,
        spec: &QueueSpec,
        now: Micros,
        id: u64,
        nonce: u64,
        slot: Micros,
    ) -> Result<(), QueueError> {
        self.sweep(spec, now);
        match self.jobs.get_mut(&id) {
            Some(j)
                if j.nonce == nonce && nonce != 0 && matches!(j.state, JobState::InFlight(_)) =>
            {
                j.attempts = j.attempts.saturating_sub(1);
                j.nonce = 0;
            }
            _ => return Err(QueueError::NotHeld { id }),
        }
        self.set_state(id, JobState::Ready);
        self.meta.totals.released = self.meta.totals.released.saturating_sub(1);
        if self.meta.tat == slot.saturating_add(spec.spacing()) {
            self.meta.tat = slot;
        } else if slot >= now {
            self.free.insert((slot, id));
        }
        self.changes.push(Change::Meta);
        if let Some(i) = self.releases.iter().rposition(|&t| t == slot) {
            self.releases.remove(i);
        }
        Ok(())
    }

    /// Whether the instance may be forgotten: no job in any state, no idempotency key
    /// retained, and no release for `key_retention`.
    pub fn forgettable(&self, spec: &QueueSpec, now: Micros) -> bool {
        self.jobs.is_empty()
            && self.keys.is_empty()
            && now.saturating_sub(self.meta.tat) >= spec.key_retention()
            && self.meta.tat <= now
    }

    /// The instance's state at `now` (after applying what time has done).
    pub fn stats(&mut self, spec: &QueueSpec, now: Micros) -> InstanceStats {
        self.sweep(spec, now);
        let first_ready = self.ready.first().and_then(|id| self.jobs.get(id));
        let first_delayed = self.delayed.first().and_then(|(_, id)| self.jobs.get(id));
        let t = self.meta.totals;
        // A reserved job's lease ends one lease after its slot, which is ahead.
        let reserved = self
            .in_flight
            .range((now.saturating_add(spec.lease()).saturating_add(1), 0)..)
            .count() as u64;
        // The current run of releases: back from the newest delivered one, until a gap of
        // `release_gap` or the window's start.
        let gap = release_gap(spec.spacing());
        let (mut count, mut first, mut prev) = (0u64, None, now);
        for &t in self.releases.iter().rev().filter(|&&t| t <= now) {
            // (a slot given back and used again is logged after later ones)
            if prev.saturating_sub(t) > gap || now - t > RELEASE_WINDOW {
                break;
            }
            count += 1;
            first = Some(first.map_or(t, |f: Micros| f.min(t)));
            prev = prev.min(t);
        }
        InstanceStats {
            ready: self.ready.len() as u64,
            delayed: self.delayed.len() as u64,
            in_flight: self.in_flight.len() as u64 - reserved,
            reserved,
            dead: self.dead.len() as u64,
            oldest_submitted: [first_ready, first_delayed]
                .into_iter()
                .flatten()
                .map(|j| j.submitted)
                .min(),
            submitted_total: t.submitted,
            released_total: t.released,
            acked_total: t.acked,
            dead_total: t.dead,
            next_slot: first_slot(self.meta.tat, now, spec.spacing(), spec.tau()),
            last_due: self.delayed.last().map(|&(t, _)| t),
            recent_releases: count,
            first_recent_release: first,
            now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Matcher;

    const S: Micros = 1_000_000;

    fn spec(rate: &str) -> QueueSpec {
        QueueSpec::new(
            "d",
            "q",
            vec![Matcher::parse("c")],
            rate.parse().unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn jobs(n: usize) -> Vec<NewJob> {
        (0..n).map(|i| NewJob::new(format!("{i}"))).collect()
    }

    /// Leases every slot from `from` for `secs` seconds, acking each; answers the instant after.
    fn drain(q: &mut Instance, spec: &QueueSpec, from: Micros, secs: u64) -> Micros {
        let mut now = from;
        let mut nonce = from;
        while now < from + secs * S {
            nonce += 1;
            if let LeaseOutcome::Leased(j) = q.lease(spec, now, 0, nonce) {
                q.ack(spec, now, j.id, nonce)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            now += spec.spacing();
        }
        now
    }

    #[test]
    fn the_release_rate_counts_deliveries_and_starts_fresh() {
        let spec = spec("20/s");
        let mut q = Instance::new();
        q.submit(&spec, 0, &jobs(1_000))
            .unwrap_or_else(|e| panic!("{e}"));
        let now = drain(&mut q, &spec, 0, 5);
        let rate = q.stats(&spec, now).release_rate(spec.spacing());
        assert!((rate - 20.0).abs() < 0.5, "{rate}");
        // A slot reserved ahead is not a delivery yet.
        assert!(matches!(q.lease(&spec, now, 0, 1), LeaseOutcome::Leased(_)));
        assert!(matches!(q.lease(&spec, now, S, 2), LeaseOutcome::Leased(_)));
        let ahead = q.stats(&spec, now);
        assert_eq!(ahead.reserved, 1);
        assert!((ahead.release_rate(spec.spacing()) - rate).abs() < 0.5);
        // Idle for 70 s: nothing recent.
        let later = now + 70 * S;
        assert_eq!(q.stats(&spec, later).release_rate(spec.spacing()), 0.0);
        // A drain that starts 30 s after the last one reads its own rate after a second.
        let mut q = Instance::new();
        q.submit(&spec, 0, &jobs(1_000))
            .unwrap_or_else(|e| panic!("{e}"));
        let end = drain(&mut q, &spec, 0, 5);
        let restart = end + 30 * S;
        let now = drain(&mut q, &spec, restart, 1);
        let rate = q.stats(&spec, now).release_rate(spec.spacing());
        assert!(rate > 19.0, "diluted by the idle time: {rate}");
    }

    #[test]
    fn time_to_drain_counts_delayed_jobs_and_idle_instances_are_forgotten() {
        let spec = spec("1/s");
        let t0 = 100 * 24 * 3_600 * S;
        let mut q = Instance::new();
        q.submit(
            &spec,
            t0,
            &[NewJob::new("later").not_before(t0 + 3_600 * S)],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let s = q.stats(&spec, t0);
        assert_eq!((s.waiting(), s.depth()), (1, 1));
        assert_eq!(s.time_to_drain(spec.spacing()), 3_600 * S);
        assert!(!q.forgettable(&spec, t0));
        q.purge(&spec, t0 + 10 * S);
        // Empty, no key, no release for key_retention (24 h): forgettable.
        assert!(q.forgettable(&spec, t0 + 10 * S));
        q.submit(&spec, t0 + 10 * S, &jobs(1))
            .unwrap_or_else(|e| panic!("{e}"));
        let LeaseOutcome::Leased(j) = q.lease(&spec, t0 + 10 * S, 0, 7) else {
            panic!("no lease");
        };
        q.ack(&spec, t0 + 10 * S, j.id, 7)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!q.forgettable(&spec, t0 + 11 * S));
        assert!(q.forgettable(&spec, t0 + 12 * S + 24 * 3_600 * S));
    }
}
