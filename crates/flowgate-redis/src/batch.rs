//! Coalescing: the calls in flight at the same moment share one script call — the decisions'
//! (`decide.lua`), the reservation records' writes (`reservations.lua`'s `put`) and the
//! commits (`commit.lua`), each kind its own [`Batch`] with its own [`Lanes`].
//!
//! Script calls in flight are bounded by a semaphore (`batches_in_flight`, default 2) per lane:
//! the only lane on a single server, one per hash slot on a Redis Cluster for decisions
//! (`Lanes`). A caller that finds a free slot sends its request itself, at once (no added
//! latency at 1 in flight); otherwise it hands the request to the lane's batching workers
//! through a channel, and while calls are in flight requests accumulate there: the next call
//! carries all of them (up to `max_batch`). A worker builds a call, sends it, awaits its reply,
//! hands the answers out, and once the callers it answered have had a turn to ask again, sends
//! the requests waiting by then in its next call, still holding its slot. The script handles each
//! request of the call in order, independently, exactly as if they had arrived one after another
//! (a decision all-or-nothing, a commit whole or not at all) — so coalescing changes the
//! per-call overhead (one EVALSHA, one `TIME`, one parameter block per distinct limit, one read
//! and one write of a key that several requests share), never the answers. A request whose
//! caller has given up (deadline passed) is dropped before it is sent: it is not applied.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use flowgate_core::StoreError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

/// One kind of coalesced call: what a request is, what it gets back, and how several are sent
/// in one call.
pub(crate) trait Batch: Clone + Send + Sync + 'static {
    /// One caller's request, encoded.
    type Request: Send + Sync + 'static;
    /// What one request gets back.
    type Answer: Send + 'static;
    /// Sends `requests` (in as few calls as they fit in: one, unless a bound splits them),
    /// each handled independently, in order; answers one per request, in order. An error fails
    /// them all (what one request alone can fail of is in its answer).
    fn call(
        &self,
        requests: &[&Self::Request],
    ) -> impl Future<Output = Result<Vec<Self::Answer>, StoreError>> + Send;
}

/// The answer of a call of one request.
fn only<A>(answers: Result<Vec<A>, StoreError>) -> Result<A, StoreError> {
    answers?
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::Internal("a script call answered no request".into()))
}

/// `request` sent in a call of its own (coalescing off, or a request no lane takes).
pub(crate) async fn alone<B: Batch>(
    batch: &B,
    request: B::Request,
) -> Result<B::Answer, StoreError> {
    only(batch.call(&[&request]).await)
}

type Reply<A> = Result<A, StoreError>;

struct Job<B: Batch> {
    request: B::Request,
    reply: oneshot::Sender<Reply<B::Answer>>,
}

/// Where coalesced requests go: one lane on a single server; for decisions on a Redis Cluster
/// one lane per hash slot (a script call's keys must share a slot there, so only requests of
/// one slot can share a call: a hot limit's). Each lane has its own bound on calls in flight,
/// made on first use, and its batching workers, one per call in flight, started the first time
/// a request finds all its calls in flight (on a cluster with keys spread over many slots, few
/// lanes ever need them).
pub(crate) struct Lanes<B: Batch> {
    lanes: Box<[Lane<B>]>,
    in_flight: usize,
    batching: Batching<B>,
}

/// What a batching worker needs.
#[derive(Clone)]
pub(crate) struct Batching<B> {
    pub(crate) batch: B,
    pub(crate) max_batch: usize,
}

struct Lane<B: Batch> {
    slots: OnceLock<Arc<Semaphore>>,
    tx: OnceLock<mpsc::UnboundedSender<Job<B>>>,
}

impl<B: Batch> Lanes<B> {
    /// `lanes` lanes (1, or 16384 on a cluster), each with `in_flight` calls in flight at most.
    pub(crate) fn new(lanes: usize, in_flight: usize, batching: Batching<B>) -> Self {
        Self {
            lanes: (0..lanes)
                .map(|_| Lane {
                    slots: OnceLock::new(),
                    tx: OnceLock::new(),
                })
                .collect(),
            in_flight: in_flight.max(1),
            batching,
        }
    }

    /// Lane `i`'s calls in flight.
    fn slots(&self, i: usize) -> &Arc<Semaphore> {
        self.lanes[i]
            .slots
            .get_or_init(|| Arc::new(Semaphore::new(self.in_flight)))
    }

    /// Lane `i`'s channel to its batching workers (started on first use, within the caller's
    /// runtime).
    fn sender(&self, i: usize) -> &mpsc::UnboundedSender<Job<B>> {
        self.lanes[i]
            .tx
            .get_or_init(|| spawn(self.slots(i).clone(), self.in_flight, self.batching.clone()))
    }

    /// Sends `request` through lane `lane`: itself at once when a call slot is free, else in
    /// the next call of the lane's workers, with the requests waiting beside it.
    pub(crate) async fn submit(
        &self,
        lane: usize,
        request: B::Request,
    ) -> Result<B::Answer, StoreError> {
        if let Ok(_permit) = self.slots(lane).try_acquire() {
            // (the call's slot is held until Redis has answered)
            return alone(&self.batching.batch, request).await;
        }
        let (reply, rx) = oneshot::channel();
        let stopped = || StoreError::Unavailable("the batching workers have stopped".into());
        self.sender(lane)
            .send(Job { request, reply })
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }
}

/// Starts the lane's batching workers, one per call it may have in flight; they end when the
/// returned sender is dropped.
fn spawn<B: Batch>(
    slots: Arc<Semaphore>,
    in_flight: usize,
    batching: Batching<B>,
) -> mpsc::UnboundedSender<Job<B>> {
    let (tx, rx) = mpsc::unbounded_channel::<Job<B>>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    for _ in 0..in_flight {
        tokio::spawn(worker(rx.clone(), slots.clone(), batching.clone()));
    }
    tx
}

/// One batching worker: takes the requests waiting, sends them in one call, hands out the
/// answers, and carries on with the requests that arrived meanwhile while it still holds the
/// call's slot (no other task to wake: a worker that had to hand its slot over to a waiting one
/// cost a wake-up between calls, which Redis spent idle).
async fn worker<B: Batch>(
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Job<B>>>>,
    slots: Arc<Semaphore>,
    batching: Batching<B>,
) {
    let Batching { batch, max_batch } = batching;
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
        // (no deadline here: each caller waits within its own; a call to a Redis that stopped
        // answering ends at the connection's response timeout)
        let answers = {
            let requests: Vec<&B::Request> = jobs.iter().map(|j| &j.request).collect();
            batch.call(&requests).await
        };
        match answers {
            Ok(answers) if answers.len() == jobs.len() => {
                for (j, a) in jobs.into_iter().zip(answers) {
                    let _ = j.reply.send(Ok(a));
                }
            }
            Ok(_) => {
                let e = StoreError::Internal(
                    "a script call answered another number of requests".into(),
                );
                for j in jobs {
                    let _ = j.reply.send(Err(e.clone()));
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
fn drain<B: Batch>(rx: &mut mpsc::UnboundedReceiver<Job<B>>, jobs: &mut Vec<Job<B>>, max: usize) {
    while jobs.len() < max {
        match rx.try_recv() {
            Ok(j) => jobs.push(j),
            Err(_) => break,
        }
    }
}
