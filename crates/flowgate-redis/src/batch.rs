//! Coalescing: the decisions in flight at the same moment share one script call.
//!
//! Script calls in flight are bounded by a semaphore (`batches_in_flight`, default 2) per lane:
//! the only lane on a single server, one per hash slot on a Redis Cluster (`Lanes`). A caller
//! that finds a free slot sends its request itself, at once (no added latency at 1 in flight);
//! otherwise it hands the request to a batching task through a channel, and while calls are in
//! flight requests accumulate there: the next call carries all of them (up to `max_batch`).
//! The batching task builds the call and queues it on the connection itself; a task of the
//! call's own awaits the reply, hands the decisions out, and frees the slot once the callers it
//! answered have had a turn to ask again (so that the next call carries them). The script
//! decides each request of the call in order, independently and all-or-nothing, exactly as if
//! they had arrived one after another — so coalescing changes the per-call overhead (one
//! EVALSHA, one `TIME`, one parameter block per distinct limit, one read and one write of a key
//! that several requests share), never the decisions. A request whose caller has given up
//! (deadline passed) is dropped before it is sent.

use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Duration;

use flowgate_core::{Micros, StoreError};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::call::{self, Encoded, Prepared, TimeSource};
use crate::conn::Conn;
use crate::scripts::Raw;
use crate::stats::Counters;

pub(crate) type Reply = Result<(Micros, Vec<Raw>), StoreError>;

pub(crate) struct Job {
    pub(crate) request: Encoded,
    pub(crate) reply: oneshot::Sender<Reply>,
}

/// Where coalesced requests go: one lane on a single server; on a Redis Cluster one lane per
/// hash slot (a script call's keys must share a slot there, so only requests of one slot can
/// share a call: a hot limit's). Each lane has its own bound on calls in flight, made on first
/// use, and a batching task, started the first time a request finds all its calls in flight (on
/// a cluster with keys spread over many slots, few lanes ever need one).
pub(crate) struct Lanes {
    lanes: Box<[Lane]>,
    in_flight: usize,
    batching: Batching,
}

/// What a batching task needs.
#[derive(Clone)]
pub(crate) struct Batching {
    pub(crate) conn: Conn,
    pub(crate) time: TimeSource,
    pub(crate) counters: Arc<Counters>,
    pub(crate) max_batch: usize,
    pub(crate) deadline: Duration,
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

    /// Lane `i`'s batching task (started on first use, within the caller's runtime).
    pub(crate) fn sender(&self, i: usize) -> &mpsc::UnboundedSender<Job> {
        self.lanes[i]
            .tx
            .get_or_init(|| spawn(self.slots(i).clone(), self.batching.clone()))
    }
}

/// Starts the batching task; it ends when the returned sender is dropped.
fn spawn(slots: Arc<Semaphore>, batching: Batching) -> mpsc::UnboundedSender<Job> {
    let Batching {
        conn,
        time,
        counters,
        max_batch,
        deadline,
    } = batching;
    let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
    tokio::spawn(async move {
        loop {
            // Wait for work first, then for a free call slot: an idle batcher holds no slot, so
            // a caller that finds one free sends its request itself (no hop, no added latency).
            let Some(first) = rx.recv().await else {
                break;
            };
            let Ok(permit) = slots.clone().acquire_owned().await else {
                break;
            };
            let mut jobs = vec![first];
            while jobs.len() < max_batch {
                match rx.try_recv() {
                    Ok(j) => jobs.push(j),
                    Err(_) => break,
                }
            }
            jobs.retain(|j| !j.reply.is_closed());
            if jobs.is_empty() {
                continue;
            }
            // Build the call and hand it to the connection now (one poll queues it on the
            // multiplexed connection), so that Redis gets it without waiting for a task to be
            // scheduled; its reply is awaited and handed out in a task of its own.
            let Prepared { script, cmd, reply } = {
                let requests: Vec<&Encoded> = jobs.iter().map(|j| &j.request).collect();
                call::prepare(&time, &requests)
            };
            let conn = conn.clone();
            let mut sent = Box::pin(async move { conn.eval(script, &cmd).await });
            let first = futures::poll!(sent.as_mut());
            let counters = counters.clone();
            tokio::spawn(async move {
                Counters::add(&counters.script_calls, 1);
                let value = match first {
                    Poll::Ready(r) => r,
                    Poll::Pending => tokio::time::timeout(deadline, sent)
                        .await
                        .unwrap_or(Err(StoreError::Timeout)),
                };
                let r = value.and_then(|v| {
                    let requests: Vec<&Encoded> = jobs.iter().map(|j| &j.request).collect();
                    reply.parse(v, &requests)
                });
                match r {
                    Ok((now, raws)) => {
                        let mut rest = &raws[..];
                        for j in jobs {
                            let (mine, tail) = rest.split_at(j.request.items().min(rest.len()));
                            rest = tail;
                            let _ = j.reply.send(Ok((now, mine.to_vec())));
                        }
                    }
                    Err(e) => {
                        for j in jobs {
                            let _ = j.reply.send(Err(e.clone()));
                        }
                    }
                }
                // The slot is held until the callers just answered have had a turn to ask
                // again (one yield: the tasks woken above run first), so that the next call
                // carries their requests rather than the first of them alone. Freed as soon as
                // Redis answered, the slot went to a call of one or two requests while the
                // others waited a whole call for the next: Redis idled between calls (session
                // 6, BENCHMARKS.md: 19 -> 27 requests per call, a median of about 15 % more
                // decisions per second at 64 in flight on 10,000 keys).
                tokio::task::yield_now().await;
                drop(permit);
            });
        }
    });
    tx
}
