//! The link to Redis of the state a cluster shares: circuit breakers ([`crate::breakers`]) and
//! adaptive concurrency limits ([`crate::adaptive`]) alike.
//!
//! Both keep the same shape, written once here:
//!
//! - **local state**, moved by every report this node receives, in force per process and while
//!   Redis is unreachable, and a **cached copy** of the cluster's state, read by decisions (no
//!   round trip is added to a decision);
//! - a **queue of reports**, sent every [`FLUSH_EVERY`] by one task, whose answers refresh the
//!   cached copy;
//! - a **read** of the cluster's state every [`READ_EVERY`], and when something asks for one
//!   ([`Link::wake`]: a breaker's transition published by another node);
//! - a **fallback**: when a flush or a read fails, the node decides on its local state, says so
//!   once (a warning), and tries a read every [`READ_EVERY`]; the first that succeeds puts the
//!   cluster's state back in force (an info line);
//! - an **unsent count**: reports that never reached Redis (queued while fallen back, or in a
//!   flush that failed) are dropped, not sent later (they have moved the local state, the one in
//!   force then; sent late they would act a second time on a cluster state that has moved since),
//!   and counted;
//! - a **flush on demand** ([`Link::flush`]): a turn now, answered once a turn that took every
//!   report queued before the call is over (a server shutting down sends its last reports).
//!
//! What differs is a `Side`: what a report is, how a batch is sent and what a read reads.
//!
//! Without the `redis` feature nothing is shared: a link only answers that (not shared, nothing
//! unsent).
#![cfg_attr(not(feature = "redis"), allow(dead_code))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use flowgate_core::StoreError;
use tokio::sync::Notify;

/// How often a node sends the reports it queued.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(20);

/// How often a node reads the cluster's state (and, fallen back, tries Redis again).
pub(crate) const READ_EVERY: Duration = Duration::from_secs(1);

/// What a link shares, which names its log lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Subject {
    /// Circuit breakers (log target `flowgate::breakers`).
    Breakers,
    /// Adaptive concurrency limits (log target `flowgate::adaptive`).
    Adaptive,
}

/// Whether the state is shared and Redis answers, the unsent count, and what wakes a read.
/// Held by the limiter's side and read by the task through it.
#[derive(Debug)]
pub(crate) struct Link {
    subject: Subject,
    /// The current task's number: 0 while per process; each [`Link::begin`] a new one, and an
    /// older task ends.
    generation: AtomicU64,
    /// Whether the cluster's state is in force: shared, and Redis answered last.
    answering: AtomicBool,
    /// Reports that never reached Redis, so far.
    unsent: AtomicU64,
    /// Asks the task for a read now.
    wake: Arc<Notify>,
    /// Flushes asked for, and how far the task has answered them.
    flushes: Arc<Flushes>,
}

/// The flushes asked of a link's task: each caller takes a ticket, the task answers every ticket
/// it had seen before a turn took the queue, once that turn is over.
#[derive(Debug)]
struct Flushes {
    /// Tickets handed out.
    asked: AtomicU64,
    /// The highest ticket answered.
    done: tokio::sync::watch::Sender<u64>,
    /// Asks the task for a turn now.
    wake: Notify,
}

impl Link {
    /// A link not shared yet.
    pub(crate) fn new(subject: Subject) -> Self {
        Self {
            subject,
            generation: AtomicU64::new(0),
            answering: AtomicBool::new(false),
            unsent: AtomicU64::new(0),
            wake: Arc::new(Notify::new()),
            flushes: Arc::new(Flushes {
                asked: AtomicU64::new(0),
                done: tokio::sync::watch::channel(0).0,
                wake: Notify::new(),
            }),
        }
    }

    /// Sends the reports queued so far now: completes once a turn that took every report
    /// queued before this call is over (sent, or counted unsent: Redis unreachable); at once
    /// when nothing is shared. Waits as long as that turn's calls to Redis (their deadline):
    /// bound it with a timeout where that matters.
    pub(crate) async fn flush(&self) {
        if self.generation.load(Ordering::Relaxed) == 0 {
            return;
        }
        let f = &self.flushes;
        let mut done = f.done.subscribe();
        // After the reports were queued (program order), before the task reads the tickets.
        let ticket = f.asked.fetch_add(1, Ordering::SeqCst) + 1;
        f.wake.notify_one();
        let _ = done.wait_for(|d| *d >= ticket).await;
    }

    /// Shares from now on, with the cluster's state in force: answers the number of the task
    /// to start (an older one ends at its next turn).
    pub(crate) fn begin(&self) -> u64 {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.answering.store(true, Ordering::Relaxed);
        generation
    }

    /// Whether the state is shared at all (`None`: per process), and if so whether the cluster's
    /// is in force now (`Some(false)`: fallen back on this node's own).
    pub(crate) fn shared(&self) -> Option<bool> {
        (self.generation.load(Ordering::Relaxed) != 0).then(|| self.sharing())
    }

    /// Whether the cluster's state is in force now.
    #[inline]
    pub(crate) fn sharing(&self) -> bool {
        self.answering.load(Ordering::Relaxed)
    }

    /// Reports that never reached Redis since sharing began (0 per process).
    pub(crate) fn unsent(&self) -> u64 {
        self.unsent.load(Ordering::Relaxed)
    }

    /// Counts `n` reports that will never reach Redis.
    pub(crate) fn count_unsent(&self, n: u64) {
        if n > 0 {
            self.unsent.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Asks the task for a read of the cluster's state now.
    #[cfg(feature = "redis")]
    pub(crate) fn wake(&self) -> &Arc<Notify> {
        &self.wake
    }

    /// Falls back on this node's own state, saying so when it is new.
    pub(crate) fn fall_back(&self, error: &StoreError) {
        if !self.answering.swap(false, Ordering::Relaxed) {
            return;
        }
        match self.subject {
            Subject::Breakers => tracing::warn!(
                target: "flowgate::breakers",
                %error,
                "circuit breakers: Redis unreachable; this node decides on its own reports until \
                 it answers again"
            ),
            Subject::Adaptive => tracing::warn!(
                target: "flowgate::adaptive",
                %error,
                "adaptive limits: Redis unreachable; this node moves its limits on its own \
                 reports until it is back"
            ),
        }
    }

    /// Puts the cluster's state back in force, saying so when it is new.
    fn answered(&self) {
        if self.answering.swap(true, Ordering::Relaxed) {
            return;
        }
        match self.subject {
            Subject::Breakers => tracing::info!(
                target: "flowgate::breakers",
                "circuit breakers: shared through Redis again"
            ),
            Subject::Adaptive => tracing::info!(
                target: "flowgate::adaptive",
                "adaptive limits: Redis answers again; the cluster's limits are in force"
            ),
        }
    }
}

/// The Tokio runtime a shared state's task runs on: the current one, or `None` (and a warning:
/// the state stays per process) outside a runtime.
#[cfg(feature = "redis")]
pub(crate) fn runtime(subject: Subject) -> Option<tokio::runtime::Handle> {
    let rt = tokio::runtime::Handle::try_current().ok();
    if rt.is_none() {
        match subject {
            Subject::Breakers => tracing::warn!(
                target: "flowgate::breakers",
                "circuit breakers shared outside a Tokio runtime: they stay per process"
            ),
            Subject::Adaptive => tracing::warn!(
                target: "flowgate::adaptive",
                "adaptive limits shared outside a Tokio runtime: they stay per process"
            ),
        }
    }
    rt
}

/// What a read reads.
#[cfg(feature = "redis")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// The cluster's state of everything this node uses.
    All,
    /// Only what this node started using since the last read, if anything (at every flush, so
    /// that a new key does not wait a second for the cluster's state).
    New,
}

/// A report that failed to reach Redis: why, and how many reports it dropped.
#[cfg(feature = "redis")]
#[derive(Debug)]
pub(crate) struct Unsent {
    pub(crate) error: StoreError,
    pub(crate) reports: u64,
}

/// A future the task runs beside its turns.
#[cfg(feature = "redis")]
pub(crate) type Follower = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// What is shared: its queue of reports, how a batch is sent and how its state is read. The
/// [`run`] loop drives it.
#[cfg(feature = "redis")]
pub(crate) trait Side: Send + Sync + 'static {
    /// The calls to Redis.
    type Redis: Send + Sync + 'static;
    /// The reports taken from the queue at a turn.
    type Batch: Send;

    /// Its link.
    fn link(&self) -> &Link;

    /// Takes the reports queued since the last turn, and how many reports they are.
    fn take(&self) -> (Self::Batch, u64);

    /// Sends `batch`; Redis's answers refresh the cached copy.
    fn flush(
        &self,
        redis: &Self::Redis,
        batch: Self::Batch,
    ) -> impl Future<Output = Result<(), Unsent>> + Send;

    /// Reads the cluster's state into the cached copy: `Ok(true)` when Redis answered, `Ok(false)`
    /// when there was nothing to read.
    fn read(
        &self,
        redis: &Self::Redis,
        what: Read,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// What else asks for reads (it calls [`Link::wake`]), started once it is needed; asked at
    /// every turn until it is.
    fn follow(&self, _redis: &Self::Redis) -> Option<Follower> {
        None
    }
}

/// The task of a shared side: a turn every [`FLUSH_EVERY`], a read every [`READ_EVERY`] and at
/// each wake. Ends when the side is dropped (it holds a weak reference) or when another
/// [`Link::begin`] takes over.
#[cfg(feature = "redis")]
pub(crate) async fn run<S: Side>(side: std::sync::Weak<S>, redis: S::Redis, generation: u64) {
    use tokio::time::{MissedTickBehavior, interval};
    let Some((wake, flushes)) = side
        .upgrade()
        .map(|s| (Arc::clone(s.link().wake()), Arc::clone(&s.link().flushes)))
    else {
        return;
    };
    let mut flush = interval(FLUSH_EVERY);
    flush.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut read = interval(READ_EVERY);
    read.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut follower: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let what = tokio::select! {
            _ = flush.tick() => Read::New,
            _ = read.tick() => Read::All,
            () = wake.notified() => Read::All,
            () = flushes.wake.notified() => Read::New,
        };
        let Some(side) = side.upgrade() else {
            break;
        };
        if side.link().generation.load(Ordering::Relaxed) != generation {
            break;
        }
        if follower.is_none() {
            follower = side.follow(&redis).map(tokio::spawn);
        }
        // Every ticket handed out so far is answered by this turn: its reports are queued.
        let ticket = flushes.asked.load(Ordering::SeqCst);
        turn(&*side, &redis, what).await;
        flushes.done.send_if_modified(|done| {
            let newer = ticket > *done;
            if newer {
                *done = ticket;
            }
            newer
        });
    }
    if let Some(f) = follower {
        f.abort();
    }
}

/// One turn: the queue is sent, then what is due is read; fallen back, the queue is dropped
/// and a due read tries Redis again.
#[cfg(feature = "redis")]
async fn turn<S: Side>(side: &S, redis: &S::Redis, what: Read) {
    let link = side.link();
    let (batch, reports) = side.take();
    if !link.sharing() {
        // Dropped: it has moved this node's own state, the one in force.
        link.count_unsent(reports);
        if what == Read::All && matches!(side.read(redis, Read::All).await, Ok(true)) {
            link.answered();
        }
        return;
    }
    if reports > 0
        && let Err(e) = side.flush(redis, batch).await
    {
        link.count_unsent(e.reports);
        link.fall_back(&e.error);
        return;
    }
    if let Err(e) = side.read(redis, what).await {
        link.fall_back(&e);
    }
}
