//! Coalescing: the decisions in flight at the same moment share one script call.
//!
//! Script calls in flight are bounded by a semaphore (`batches_in_flight`, default 2) per lane:
//! the only lane on a single server, one per hash slot on a Redis Cluster (`Lanes`). A caller
//! that finds a free slot sends its request itself, at once (no added latency at 1 in flight);
//! otherwise it hands the request to the lane's batching workers through a channel, and while
//! calls are in flight requests accumulate there: the next call carries all of them (up to
//! `max_batch`). A worker builds a call, sends it, awaits its reply, hands the decisions out, and
//! once the callers it answered have had a turn to ask again, sends the requests waiting by
//! then in its next call, still holding its slot. The script decides each request of the call
//! in order, independently and all-or-nothing, exactly as if they had arrived one after another
//! — so coalescing changes the per-call overhead (one EVALSHA, one `TIME`, one parameter block
//! per distinct limit, one read and one write of a key that several requests share), never the
//! decisions. A request whose caller has given up (deadline passed) is dropped before it is
//! sent.

use std::sync::{Arc, OnceLock};

use flowgate_core::{Decision, StoreError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use crate::call::{Caller, Encoded};

pub(crate) type Reply = Result<Vec<Decision>, StoreError>;

pub(crate) struct Job {
    pub(crate) request: Encoded,
    pub(crate) reply: oneshot::Sender<Reply>,
}

/// Where coalesced requests go: one lane on a single server; on a Redis Cluster one lane per
/// hash slot (a script call's keys must share a slot there, so only requests of one slot can
/// share a call: a hot limit's). Each lane has its own bound on calls in flight, made on first
/// use, and its batching workers, one per call in flight, started the first time a request
/// finds all its calls in flight (on a cluster with keys spread over many slots, few lanes ever
/// need them).
pub(crate) struct Lanes {
    lanes: Box<[Lane]>,
    in_flight: usize,
    batching: Batching,
}

/// What a batching worker needs.
#[derive(Clone)]
pub(crate) struct Batching {
    pub(crate) caller: Caller,
    pub(crate) max_batch: usize,
}

#[derive(Default)]
struct Lane {
    slots: OnceLock<Arc<Semaphore>>,
    tx: OnceLock<mpsc::UnboundedSender<Job>>,
}

impl Lanes {
    /// `lanes` lanes (1, or 16384 on a cluster), each with `in_flight` calls in flight at most.
    pub(crate) fn new(lanes: usize, in_flight: usize, batching: Batching) -> Self {
        Self {
            lanes: (0..lanes).map(|_| Lane::default()).collect(),
            in_flight: in_flight.max(1),
            batching,
        }
    }

    /// Lane `i`'s calls in flight.
    pub(crate) fn slots(&self, i: usize) -> &Arc<Semaphore> {
        self.lanes[i]
            .slots
            .get_or_init(|| Arc::new(Semaphore::new(self.in_flight)))
    }

    /// Lane `i`'s channel to its batching workers (started on first use, within the caller's
    /// runtime).
    pub(crate) fn sender(&self, i: usize) -> &mpsc::UnboundedSender<Job> {
        self.lanes[i]
            .tx
            .get_or_init(|| spawn(self.slots(i).clone(), self.in_flight, self.batching.clone()))
    }
}

/// Starts the lane's batching workers, one per call it may have in flight; they end when the
/// returned sender is dropped.
fn spawn(
    slots: Arc<Semaphore>,
    in_flight: usize,
    batching: Batching,
) -> mpsc::UnboundedSender<Job> {
    let (tx, rx) = mpsc::unbounded_channel::<Job>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    for _ in 0..in_flight {
        tokio::spawn(worker(rx.clone(), slots.clone(), batching.clone()));
    }
    tx
}

/// One batching worker: takes the requests waiting, sends them in one call, hands out the
/// decisions, and carries on with the requests that arrived meanwhile while it still holds the
/// call's slot (no other task to wake: a worker that had to hand its slot over to a waiting one
/// cost a wake-up between calls, which Redis spent idle).
async fn worker(
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Job>>>,
    slots: Arc<Semaphore>,
    batching: Batching,
) {
    let Batching { caller, max_batch } = batching;
    let mut held: Option<OwnedSemaphorePermit> = None;
    loop {
        let mut jobs = Vec::new();
        let permit = match held.take() {
            // Just answered: carry on with what is waiting, unless another worker is already
            // waiting for work (it holds the receiver), which then takes this slot.
            Some(permit) => match rx.try_lock() {
                Ok(mut rx) => {
                    drain(&mut rx, &mut jobs, max_batch);
                    permit
                }
                // (`permit` is dropped: the slot goes to the waiting worker)
                Err(_) => continue,
            },
            None => {
                // Wait for work first, then for a free call slot: an idle lane holds no slot,
                // so a caller that finds one free sends its request itself (no hop, no added
                // latency).
                let mut rx = rx.lock().await;
                let Some(first) = rx.recv().await else {
                    return;
                };
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                jobs.push(first);
                drain(&mut rx, &mut jobs, max_batch);
                permit
            }
        };
        jobs.retain(|j| !j.reply.is_closed());
        if jobs.is_empty() {
            continue; // (the slot is freed: `permit` is dropped)
        }
        let requests: Vec<&Encoded> = jobs.iter().map(|j| &j.request).collect();
        // (no deadline here: each caller waits within its own; a call to a Redis that stopped
        // answering ends at the connection's response timeout)
        match caller.decide(&requests).await {
            Ok(decided) => {
                let mut rest = decided.decisions.into_iter();
                for j in jobs {
                    let mine = rest.by_ref().take(j.request.len()).collect();
                    let _ = j.reply.send(Ok(mine));
                }
            }
            Err(e) => {
                for j in jobs {
                    let _ = j.reply.send(Err(e.clone()));
                }
            }
        }
        // The next call waits until the callers just answered have had a turn to ask again
        // (one yield: the tasks woken above run first), so that it carries their requests
        // rather than the first of them alone: more requests per call, fewer calls.
        tokio::task::yield_now().await;
        held = Some(permit);
    }
}

/// Moves the jobs waiting in `rx` into `jobs`, up to `max` in all.
fn drain(rx: &mut mpsc::UnboundedReceiver<Job>, jobs: &mut Vec<Job>, max: usize) {
    while jobs.len() < max {
        match rx.try_recv() {
            Ok(j) => jobs.push(j),
            Err(_) => break,
        }
    }
}
