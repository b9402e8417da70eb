//! A lease's long-poll: the instance's leasers of this process take turns asking the store,
//! hold a leased job until its slot comes on this node, and give back a job they cannot
//! deliver. See the [queue module](super).

use std::sync::Arc;
use std::time::Duration;

use flowgate_core::queue::{LeaseOutcome, Leased, QueueError, QueueSpec, QueueStore, Token};
use flowgate_core::{Descriptor, Micros};
use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::time::Instant;

use super::health::{Health, LastFailure};
use super::offset::wall;
use super::{Delivery, MAX_HORIZON, POLL, Queue, micros, tolerance};

/// The first pause of a lease whose store failed, doubled per failure up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between two tries of a lease whose store fails.
const RETRY_MAX: Duration = Duration::from_secs(1);
/// How long another lease's store call may go unanswered before a lease whose wait ends
/// meanwhile says the store fails rather than "nothing released": far above a live store's
/// round trip, so that a busy one is not called down.
const SILENT: Duration = Duration::from_millis(250);

/// A delivery's nonce: 52 random bits (exact in the Redis scripts' doubles), never 0 (0 means
/// never delivered). Without the operating system's randomness the lease fails: a fixed nonce
/// would let a worker whose lease expired ack the job's next delivery.
fn nonce() -> Result<u64, QueueError> {
    flowgate_core::random::seed()
        .map(|r| (r >> 12).max(1))
        .map_err(|e| QueueError::Store(flowgate_core::StoreError::Internal(e.to_string())))
}

/// The leasers of one instance in this process.
#[derive(Default)]
pub(super) struct Local {
    /// Leasers take turns asking the store.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// Woken by a submit, nack, requeue or give-back through this process.
    pub(super) wake: Notify,
    /// What the last lease's call to the store met.
    failure: LastFailure,
    /// Since when a lease's call to the store is unanswered (`None`: none is in flight).
    asking: parking_lot::Mutex<Option<Instant>>,
}

impl Local {
    /// Runs `call`, a lease's call to the store, noting it in flight meanwhile.
    async fn asking<T>(&self, call: impl std::future::Future<Output = T>) -> T {
        *self.asking.lock() = Some(Instant::now());
        let r = call.await;
        *self.asking.lock() = None;
        r
    }

    /// What a lease whose wait ended while another asked the store answers: the failure known,
    /// or one if that call has gone unanswered for [`SILENT`] (a store that hangs: "nothing
    /// released" would be a guess), else nothing released.
    fn told(&self) -> Result<Option<Delivery>, QueueError> {
        if let Some(e) = self.failure.get() {
            return Err(QueueError::Store(e));
        }
        match *self.asking.lock() {
            Some(since) if since.elapsed() >= SILENT => {
                Err(QueueError::Store(flowgate_core::StoreError::Timeout))
            }
            _ => Ok(None),
        }
    }
}

impl<S: QueueStore> Queue<S> {
    /// Leases the next job of the instance of `descriptor`, waiting up to `wait` for one; the
    /// answer comes at the job's release slot (see this module's documentation). `None`
    /// when no job was released within `wait`.
    ///
    /// # Errors
    /// [`QueueError::UnknownQueue`], or the store's error if it still fails when `wait` ends:
    /// the error this lease met, or, when another lease of the instance is asking the store as
    /// `wait` ends, the error that one met last (a timeout when its call has gone unanswered
    /// for 250 ms).
    pub async fn lease(
        &self,
        domain: &str,
        descriptor: &Descriptor,
        wait: Duration,
    ) -> Result<Option<Delivery>, QueueError> {
        let (spec, instance) = self.find(domain, descriptor, false)?;
        let deadline = Instant::now() + wait;
        let local = self.local(&instance);
        let mut retry = RETRY_FIRST;
        loop {
            if *self.closing.borrow() {
                return Ok(None);
            }
            let turn = tokio::select! {
                t = tokio::time::timeout_at(deadline, Arc::clone(&local.turn).lock_owned()) => t,
                () = self.closed() => return Ok(None),
            };
            let Ok(turn) = turn else {
                // The wait ended while another lease asked: its answer is this one's.
                return local.told();
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let horizon = micros(left.min(MAX_HORIZON));
            let sent = wall();
            let (turn, asked) = self
                .ask(&spec, &instance, &local, turn, horizon, deadline)
                .await;
            let outcome = match asked {
                Ok(o) => {
                    retry = RETRY_FIRST;
                    o
                }
                Err(QueueError::Store(e)) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(QueueError::Store(e));
                    }
                    tracing::debug!(error = %e, %instance, "lease: the store failed; trying again");
                    // (the turn held: the instance's other leases wait, and are told this)
                    tokio::select! {
                        () = tokio::time::sleep(retry.min(left)) => {}
                        () = self.closed() => return Ok(None),
                    }
                    retry = (retry * 2).min(RETRY_MAX);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let pause = match outcome {
                LeaseOutcome::Leased(job) => {
                    drop(turn);
                    if let Some(d) = self.deliver(&spec, &instance, job, sent).await? {
                        return Ok(Some(d));
                    }
                    // Too late for its slot: given back; ask again for the next one.
                    continue;
                }
                LeaseOutcome::Later(after) => Duration::from_micros(after),
                LeaseOutcome::Empty { next } => {
                    next.map_or(POLL, |n| Duration::from_micros(n).min(POLL))
                }
            };
            if left.is_zero() {
                return Ok(None);
            }
            let pause = pause.min(left).max(Duration::from_micros(100));
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = local.wake.notified() => {}
                () = self.closed() => return Ok(None),
            }
        }
    }

    /// Asks the store for the instance's next job within `horizon`, holding the turn. While the
    /// instance's store is known to fail, the call is bounded by the lease's own `deadline`
    /// rather than the store's (a store that hangs would hold every worker past its `wait`):
    /// past it the lease answers the failure, and the call goes on in the background with the
    /// turn (so that only one call at a time waits on a hung store); a job it leases then is
    /// given back. A queue closing stops the wait as the deadline does. Answers the turn (unless
    /// left to that call) and the store's answer.
    async fn ask(
        &self,
        spec: &Arc<QueueSpec>,
        instance: &str,
        local: &Arc<Local>,
        turn: OwnedMutexGuard<()>,
        horizon: Micros,
        deadline: Instant,
    ) -> (
        Option<OwnedMutexGuard<()>>,
        Result<LeaseOutcome, QueueError>,
    ) {
        let nonce = match nonce() {
            Ok(n) => n,
            Err(e) => return (Some(turn), Err(e)),
        };
        let Some(known) = local.failure.get() else {
            let r = local
                .asking(self.store.lease(spec, instance, horizon, nonce))
                .await;
            self.health.record(&r);
            local.failure.record(&r);
            return (Some(turn), r);
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (store, spec, instance, local, health) = (
            self.store.clone(),
            Arc::clone(spec),
            instance.to_owned(),
            Arc::clone(local),
            Arc::clone(&self.health),
        );
        let failure = Arc::clone(&local);
        tokio::spawn(async move {
            let r = local
                .asking(store.lease(&spec, &instance, horizon, nonce))
                .await;
            health.record(&r);
            local.failure.record(&r);
            if let Err((_turn, Ok(LeaseOutcome::Leased(job)))) = tx.send((turn, r)) {
                give_back(
                    &store,
                    &health,
                    &spec,
                    &instance,
                    job.id,
                    job.nonce,
                    job.released_at,
                )
                .await;
                local.wake.notify_waiters();
            }
        });
        let answer = tokio::select! {
            a = tokio::time::timeout_at(deadline, rx) => a.ok().and_then(Result::ok),
            () = self.closed() => None,
        };
        match answer {
            Some((turn, r)) => (Some(turn), r),
            None => {
                let e = failure.failure.get().unwrap_or(known);
                (None, Err(QueueError::Store(e)))
            }
        }
    }

    /// Holds a leased job until its slot comes on this node, and delivers it; gives it back
    /// (answering `None`) if the answer came too late for its slot, or at once if this future
    /// is dropped first.
    async fn deliver(
        &self,
        spec: &Arc<QueueSpec>,
        instance: &str,
        job: Leased,
        sent: Micros,
    ) -> Result<Option<Delivery>, QueueError> {
        let (hold, late, slack) = {
            let mut o = self.offset.lock();
            let received = wall();
            o.sample(job.now, sent, received);
            (
                o.until(job.released_at, received).unwrap_or_default(),
                o.since(job.released_at, received),
                tolerance(spec) + o.uncertainty(),
            )
        };
        let mut back = GiveBack {
            store: self.store.clone(),
            health: Arc::clone(&self.health),
            spec: Arc::clone(spec),
            instance: instance.to_owned(),
            local: self.local(instance),
            job: Some((job.id, job.nonce, job.released_at)),
        };
        if !hold.is_zero() && late <= slack {
            tokio::select! {
                () = tokio::time::sleep(hold) => {}
                () = self.closed() => {
                    back.now().await;
                    return Ok(None);
                }
            }
        }
        // Checked last, after the hold: this node may have been held up too (a pause, a
        // starved runtime), and what counts is when the answer leaves.
        let late = late.max(self.offset.lock().since(job.released_at, wall()));
        if late > slack {
            tracing::debug!(%instance, id = job.id, late_ms = late.as_millis() as u64, "lease answer too late for its slot: re-slotted");
            back.now().await;
            return Ok(None);
        }
        back.job = None;
        Ok(Some(Delivery {
            token: Token {
                instance: instance.to_owned(),
                id: job.id,
                nonce: job.nonce,
            }
            .to_string(),
            id: job.id,
            payload: job.payload,
            attempt: job.attempt,
            instance: instance.to_owned(),
            submitted_at: job.submitted_at,
            released_at: job.released_at,
            lease_deadline: job.lease_deadline,
        }))
    }
}

/// A job leased for a delivery not made yet: given back to the store if dropped armed.
struct GiveBack<S: QueueStore> {
    store: S,
    health: Arc<Health>,
    spec: Arc<QueueSpec>,
    instance: String,
    /// Its instance's leasers, woken once the job (and its slot) is back.
    local: Arc<Local>,
    /// (id, nonce, slot); `None` once delivered.
    job: Option<(u64, u64, Micros)>,
}

impl<S: QueueStore> GiveBack<S> {
    /// Gives the job back now (a job no longer held, its lease expired meanwhile, is left).
    async fn now(&mut self) {
        if let Some((id, nonce, slot)) = self.job.take() {
            give_back(
                &self.store,
                &self.health,
                &self.spec,
                &self.instance,
                id,
                nonce,
                slot,
            )
            .await;
            self.local.wake.notify_waiters();
        }
    }
}

impl<S: QueueStore> Drop for GiveBack<S> {
    fn drop(&mut self) {
        let Some((id, nonce, slot)) = self.job.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return; // the runtime is going: the lease expires by itself
        };
        let (store, health, spec, instance, local) = (
            self.store.clone(),
            Arc::clone(&self.health),
            Arc::clone(&self.spec),
            self.instance.clone(),
            Arc::clone(&self.local),
        );
        rt.spawn(async move {
            give_back(&store, &health, &spec, &instance, id, nonce, slot).await;
            local.wake.notify_waiters();
        });
    }
}

async fn give_back<S: QueueStore>(
    store: &S,
    health: &Health,
    spec: &QueueSpec,
    instance: &str,
    id: u64,
    nonce: u64,
    slot: Micros,
) {
    let r = store.give_back(spec, instance, id, nonce, slot).await;
    health.record(&r);
    match r {
        Ok(()) => {
            tracing::debug!(%instance, id, "lease given back: the job is first in line again")
        }
        Err(QueueError::NotHeld { .. }) => {}
        Err(e) => {
            tracing::warn!(%instance, id, error = %e, "cannot give a lease back: it will expire by itself")
        }
    }
}
