//! Shaped queues: [`Queue`] over a [`QueueStore`] (the embedded [`DiskQueueStore`], or Redis's
//! `RedisQueueStore`), and the [`Worker`] helper.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use flowgate::queue::{DiskQueueStore, NewJob, Queue, QueueSet, QueueSpec};
//! use flowgate::clock::SystemClock;
//! use flowgate::{Descriptor, Matcher};
//!
//! let refunds = QueueSpec::new("payments", "refunds",
//!     vec![Matcher::parse("biz=REFUND"), Matcher::parse("channel")], "1/s".parse()?)?;
//! let store = DiskQueueStore::open("flowgate-data", SystemClock::new())?;
//! let queue = Queue::new(QueueSet::new(vec![refunds])?, store);
//! let wpg = Descriptor::new([("biz", "REFUND"), ("channel", "WPG")]);
//! queue.submit("payments", &wpg, vec![NewJob::new(br#"{"refund":1}"#.to_vec()).with_key("r-1")]).await?;
//! if let Some(job) = queue.lease("payments", &wpg, Duration::from_secs(5)).await? {
//!     // ... call the channel ...
//!     queue.ack(&job.token).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! A lease long-polls: it waits up to `wait` for a job, and answers it at its release slot. Within
//! one process the leasers of an instance take turns asking the store (so one request per slot
//! reaches Redis, not one per worker), and a submit, nack, requeue or give-back through this
//! process wakes them at once; jobs submitted through other processes are seen within [`POLL`].
//!
//! The rate is held where the channel sees it: the store answers a lease with its slot (on the
//! store's clock), and the lease returns when that slot comes on this node's clock
//! (`offset.rs`). An answer that arrives later than its slot plus [`tolerance`] (a store that
//! stalled) is not delivered late: the job is given back, first in line, and the lease asks for
//! the next slot. A lease dropped while it holds a job (its client went away) gives the job back
//! at once, with no attempt counted, and its slot with it: the next lease takes that slot if it
//! has not passed, so the queue keeps its rate.
//!
//! While the store cannot answer, a lease retries until its `wait` ends, then fails with the
//! store's error, and so does every lease of the instance whose wait ends meanwhile (they wait
//! for their turn while one lease asks). Once the store is known to fail for an instance, a
//! lease no longer waits for the store's own deadline past its `wait`. The store's failure and
//! its return are logged once each ([`Queue::store_failing`]).

mod disk;
mod health;
mod lease;
mod offset;
mod worker;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
pub use flowgate_core::queue::{
    DeadJob, InstanceStats, JobStatus, LeaseOutcome, Leased, MAX_DELAY, Nacked, NewJob, QueueError,
    QueueSet, QueueSpec, QueueSpecError, QueueStore, Submitted, Token, instance_descriptor,
    instance_names,
};
use flowgate_core::{Descriptor, Micros};
use parking_lot::Mutex;

pub use self::disk::{DiskQueueStore, FILE_NAME};
use self::health::Health;
use self::lease::Local;
use self::offset::Offset;
pub use self::worker::Worker;

/// How often a long-polling lease asks the store while its instance is empty.
pub const POLL: Duration = Duration::from_millis(50);
/// The furthest ahead a lease reserves a release slot: a worker holds a reserved job at most
/// this long before it is released to it.
pub const MAX_HORIZON: Duration = Duration::from_secs(1);
/// How late after its slot a lease answer may still be delivered: a quarter of the queue's
/// spacing, at least 2 ms (the timer's and the scheduler's grain) and at most 25 ms; plus how
/// uncertain the store's clock is on this node (about half the fastest round trip). Two
/// answers are then never closer than the spacing less this (half the spacing or more for any
/// queue of up to 125 releases a second).
pub fn tolerance(spec: &QueueSpec) -> Duration {
    Duration::from_micros(spec.spacing() / 4)
        .clamp(Duration::from_millis(2), Duration::from_millis(25))
}

/// A job delivered to a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The job's id in its instance.
    pub id: u64,
    /// Its payload.
    pub payload: Vec<u8>,
    /// This delivery's number (1 for the first).
    pub attempt: u32,
    /// The lease token, for [`Queue::ack`] and [`Queue::nack`].
    pub token: String,
    /// The instance's key.
    pub instance: String,
    /// When it was submitted (µs since the epoch, the store's clock).
    pub submitted_at: Micros,
    /// Its release slot (µs since the epoch, the store's clock).
    pub released_at: Micros,
    /// When its lease ends (µs since the epoch, the store's clock).
    pub lease_deadline: Micros,
}

/// One queue instance as `GET /v1/queues` shows it.
#[derive(Clone, Debug)]
pub struct InstanceInfo {
    /// The instance's key.
    pub instance: String,
    /// Its queue, if declared (now, or before a reload removed it).
    pub spec: Option<Arc<QueueSpec>>,
    /// Whether its queue was removed from the configuration (it drains, takes no submissions).
    pub retired: bool,
    /// Its state (absent when its queue is not declared: the store needs the queue's bounds).
    pub stats: Option<InstanceStats>,
    /// Deliveries per second, measured over the recent releases of the whole cluster
    /// ([`InstanceStats::release_rate`]).
    pub release_rate: Option<f64>,
}

/// Shaped queues over a store. See the [module documentation](self).
pub struct Queue<S: QueueStore> {
    specs: ArcSwap<QueueSet>,
    /// Queues removed by a reload, kept so their jobs can drain.
    retired: ArcSwap<QueueSet>,
    store: S,
    locals: Mutex<HashMap<String, Arc<Local>>>,
    offset: Mutex<Offset>,
    /// Whether the store answers, from every call to it.
    health: Arc<Health>,
    /// Set by [`Queue::close`]: leases answer `None` at once.
    closing: tokio::sync::watch::Sender<bool>,
}

fn micros(d: Duration) -> Micros {
    flowgate_core::clock::micros(d)
}

impl<S: QueueStore> Queue<S> {
    /// Queues `specs` in `store`.
    pub fn new(specs: QueueSet, store: S) -> Self {
        Self {
            specs: ArcSwap::from_pointee(specs),
            retired: ArcSwap::from_pointee(QueueSet::default()),
            store,
            locals: Mutex::new(HashMap::new()),
            offset: Mutex::new(Offset::default()),
            health: Arc::new(Health::default()),
            closing: tokio::sync::watch::channel(false).0,
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Whether the store is failing, as this queue's calls to it found: from an error until
    /// it answers again after a second without one. The change is logged each way, once, at
    /// WARN then INFO under the target `flowgate::queue`.
    pub fn store_failing(&self) -> bool {
        self.health.failing()
    }

    /// `r`, the answer of a call to the store, recorded in its health.
    fn noted<T>(&self, r: Result<T, QueueError>) -> Result<T, QueueError> {
        self.health.record(&r);
        r
    }

    /// Closes the queue to leases, for a shutdown: every lease waiting, and every lease from now
    /// on, answers `None` at once; a job held for its slot goes back first in line, untouched.
    /// Submits, acks and nacks still work.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Completes once the queue is closed.
    async fn closed(&self) {
        let mut rx = self.closing.subscribe();
        let _ = rx.wait_for(|&c| c).await;
    }

    /// The declared queues.
    pub fn specs(&self) -> Arc<QueueSet> {
        self.specs.load_full()
    }

    /// Replaces the declared queues. A changed rate applies from the next release. A queue
    /// that is no longer declared takes no more submissions, but its jobs stay: workers drain it
    /// at its last rate (or it is purged); declared again, it carries on.
    pub fn set_specs(&self, specs: QueueSet) {
        let old = self.specs.load_full();
        let prev = self.retired.load_full();
        let mut retired: Vec<QueueSpec> = Vec::new();
        for s in prev.specs().iter().chain(old.specs()) {
            let gone = specs.get(&s.domain, &s.name).is_none();
            let seen = retired
                .iter()
                .any(|r| r.domain == s.domain && r.name == s.name);
            if gone && !seen {
                retired.push((**s).clone());
            }
        }
        // Two retired queues of one domain with the same pattern (declared at different times)
        // cannot be told apart: then none is kept.
        let retired = QueueSet::new(retired).unwrap_or_default();
        self.retired.store(Arc::new(retired));
        self.specs.store(Arc::new(specs));
    }

    /// The declared (or retired) queue of a descriptor, and the instance key.
    fn find(
        &self,
        domain: &str,
        descriptor: &Descriptor,
        declared_only: bool,
    ) -> Result<(Arc<QueueSpec>, String), QueueError> {
        let specs = self.specs.load();
        if let Some((s, i)) = specs.find(domain, descriptor) {
            return Ok((Arc::clone(s), i));
        }
        if !declared_only {
            let retired = self.retired.load();
            if let Some((s, i)) = retired.find(domain, descriptor) {
                return Ok((Arc::clone(s), i));
            }
        }
        Err(QueueError::UnknownQueue {
            domain: domain.to_owned(),
            descriptor: descriptor.to_string(),
        })
    }

    /// The queue of an instance key: declared, or retired.
    pub fn spec_of(&self, instance: &str) -> Option<(Arc<QueueSpec>, bool)> {
        if let Some(s) = self.specs.load().of_instance(instance) {
            return Some((Arc::clone(s), false));
        }
        self.retired
            .load()
            .of_instance(instance)
            .map(|s| (Arc::clone(s), true))
    }

    fn local(&self, instance: &str) -> Arc<Local> {
        let mut locals = self.locals.lock();
        if let Some(l) = locals.get(instance) {
            return Arc::clone(l);
        }
        if locals.len() >= 100_000 {
            locals.retain(|_, l| Arc::strong_count(l) > 1);
        }
        let l = Arc::new(Local::default());
        locals.insert(instance.to_owned(), Arc::clone(&l));
        l
    }

    fn wake(&self, instance: &str) {
        if let Some(l) = self.locals.lock().get(instance) {
            l.wake.notify_waiters();
        }
    }

    /// Submits jobs to the instance of `descriptor`, all or nothing; answers one [`Submitted`]
    /// per job, in order.
    ///
    /// # Errors
    /// [`QueueError::UnknownQueue`], [`QueueError::PayloadTooLarge`], [`QueueError::QueueFull`]
    /// or [`QueueError::KeyConflict`] (nothing stored), [`QueueError::Invalid`] for an empty
    /// batch or one with more than [`flowgate_core::queue::MAX_KEYED_BATCH`] keys, or the
    /// store's error.
    pub async fn submit(
        &self,
        domain: &str,
        descriptor: &Descriptor,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<Submitted>, QueueError> {
        let (spec, instance) = self.find(domain, descriptor, true)?;
        if jobs.is_empty() {
            return Err(QueueError::Invalid("the batch has no job".into()));
        }
        let keyed = jobs.iter().filter(|j| j.key.is_some()).count();
        if keyed > flowgate_core::queue::MAX_KEYED_BATCH {
            return Err(QueueError::Invalid(format!(
                "{keyed} jobs have a key: at most {} in one submit",
                flowgate_core::queue::MAX_KEYED_BATCH
            )));
        }
        if let Some((index, j)) = jobs
            .iter()
            .enumerate()
            .find(|(_, j)| j.payload.len() > spec.max_payload())
        {
            return Err(QueueError::PayloadTooLarge {
                index,
                bytes: j.payload.len(),
                max: spec.max_payload(),
            });
        }
        let out = self.noted(self.store.submit(&spec, &instance, &jobs).await)?;
        self.wake(&instance);
        Ok(out)
    }

    fn token(&self, token: &str) -> Result<(Token, Arc<QueueSpec>), QueueError> {
        let t: Token = token.parse()?;
        let (spec, _) = self
            .spec_of(&t.instance)
            .ok_or_else(|| QueueError::BadToken(token.chars().take(200).collect()))?;
        Ok((t, spec))
    }

    /// Acks a delivery: the job is done and never delivered again.
    ///
    /// # Errors
    /// [`QueueError::BadToken`], [`QueueError::NotHeld`] (acked already, or delivered again
    /// since), or the store's error.
    pub async fn ack(&self, token: &str) -> Result<(), QueueError> {
        let (t, spec) = self.token(token)?;
        self.noted(self.store.ack(&spec, &t.instance, t.id, t.nonce).await)
    }

    /// Gives a delivery back, to be released again after `retry_after` (default: the queue's
    /// backoff, doubling per attempt), or to the dead letters after its last attempt.
    ///
    /// # Errors
    /// As [`Queue::ack`]; [`QueueError::Invalid`] for a `retry_after` over
    /// [`flowgate_core::queue::MAX_DELAY`] (30 days), nothing changed.
    pub async fn nack(
        &self,
        token: &str,
        retry_after: Option<Duration>,
    ) -> Result<Nacked, QueueError> {
        if let Some(r) = retry_after.filter(|r| *r > flowgate_core::queue::MAX_DELAY) {
            return Err(QueueError::Invalid(format!(
                "retry_after {r:?} is over the longest delay, {:?}",
                flowgate_core::queue::MAX_DELAY
            )));
        }
        let (t, spec) = self.token(token)?;
        let out = self.noted(
            self.store
                .nack(&spec, &t.instance, t.id, t.nonce, retry_after.map(micros))
                .await,
        )?;
        self.wake(&t.instance);
        Ok(out)
    }

    /// The dead letters of the instance of `descriptor`, oldest first.
    ///
    /// # Errors
    /// [`QueueError::UnknownQueue`], or the store's error.
    pub async fn dead(
        &self,
        domain: &str,
        descriptor: &Descriptor,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<DeadJob>, QueueError> {
        let (spec, instance) = self.find(domain, descriptor, false)?;
        self.noted(self.store.dead(&spec, &instance, offset, limit).await)
    }

    /// Puts dead letters (`ids`, or all) back in the queue with fresh attempts.
    ///
    /// # Errors
    /// [`QueueError::UnknownQueue`], [`QueueError::NotDead`] (nothing changed), or the store's
    /// error.
    pub async fn requeue_dead(
        &self,
        domain: &str,
        descriptor: &Descriptor,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        let (spec, instance) = self.find(domain, descriptor, false)?;
        let n = self.noted(self.store.requeue_dead(&spec, &instance, ids).await)?;
        self.wake(&instance);
        Ok(n)
    }

    /// Deletes dead letters (`ids`, or all).
    ///
    /// # Errors
    /// As [`Queue::requeue_dead`].
    pub async fn purge_dead(
        &self,
        domain: &str,
        descriptor: &Descriptor,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        let (spec, instance) = self.find(domain, descriptor, false)?;
        self.noted(self.store.purge_dead(&spec, &instance, ids).await)
    }

    /// Deletes every job of the instance of `descriptor` (waiting, in flight, dead).
    ///
    /// # Errors
    /// [`QueueError::UnknownQueue`], or the store's error.
    pub async fn purge(&self, domain: &str, descriptor: &Descriptor) -> Result<u64, QueueError> {
        let (spec, instance) = self.find(domain, descriptor, false)?;
        self.noted(self.store.purge(&spec, &instance).await)
    }

    /// The state of every instance the store holds, sorted by key.
    ///
    /// # Errors
    /// The store's error.
    pub async fn instances(&self) -> Result<Vec<InstanceInfo>, QueueError> {
        let keys = self.noted(self.store.instances().await)?;
        let mut out = Vec::with_capacity(keys.len());
        for instance in keys {
            let Some((spec, retired)) = self.spec_of(&instance) else {
                out.push(InstanceInfo {
                    instance,
                    spec: None,
                    retired: false,
                    stats: None,
                    release_rate: None,
                });
                continue;
            };
            let Some(stats) = self.noted(self.store.stats(&spec, &instance).await)? else {
                continue; // idle and empty for its retention: forgotten
            };
            let release_rate = Some(stats.release_rate(spec.spacing()));
            out.push(InstanceInfo {
                instance,
                spec: Some(spec),
                retired,
                stats: Some(stats),
                release_rate,
            });
        }
        Ok(out)
    }

    /// A worker helper for the instance of `descriptor`: see [`Worker`].
    pub fn worker(self: &Arc<Self>, domain: &str, descriptor: Descriptor) -> Worker<S> {
        Worker::new(Arc::clone(self), domain, descriptor)
    }
}
