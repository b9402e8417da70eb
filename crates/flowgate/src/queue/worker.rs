//! [`Worker`]: runs an async closure per job of one queue instance; acks on `Ok`, nacks on `Err`
//! (the job is retried after the queue's backoff, or goes to the dead letters after its last
//! attempt).

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use flowgate_core::Descriptor;
use flowgate_core::queue::{QueueError, QueueStore};

use super::{Delivery, Queue};

/// How long one lease waits for a job before asking again.
const WAIT: Duration = Duration::from_secs(30);
/// The pause after a store error before the next lease.
const ERROR_PAUSE: Duration = Duration::from_secs(1);

/// A worker for one queue instance. Build it with [`Queue::worker`].
///
/// ```no_run
/// # async fn demo(queue: std::sync::Arc<flowgate::queue::Queue<flowgate::queue::DiskQueueStore>>) {
/// use flowgate::Descriptor;
/// let wpg = Descriptor::new([("biz", "REFUND"), ("channel", "WPG")]);
/// queue
///     .worker("payments", wpg)
///     .run(|job| async move {
///         println!("refund {} (attempt {})", job.id, job.attempt);
///         Ok::<(), std::io::Error>(())
///     })
///     .await;
/// # }
/// ```
pub struct Worker<S: QueueStore> {
    queue: Arc<Queue<S>>,
    domain: String,
    descriptor: Descriptor,
}

impl<S: QueueStore> Worker<S> {
    pub(super) fn new(queue: Arc<Queue<S>>, domain: &str, descriptor: Descriptor) -> Self {
        Self {
            queue,
            domain: domain.to_owned(),
            descriptor,
        }
    }

    /// Runs `handle` on each job, one at a time, forever.
    pub async fn run<F, Fut, E>(self, handle: F)
    where
        F: FnMut(Delivery) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        self.run_until(handle, std::future::pending()).await;
    }

    /// Runs `handle` on each job until `stop` completes; a job in hand is finished (acked or
    /// nacked) first.
    pub async fn run_until<F, Fut, E>(self, mut handle: F, stop: impl Future<Output = ()>)
    where
        F: FnMut(Delivery) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        tokio::pin!(stop);
        loop {
            let leased = tokio::select! {
                () = &mut stop => return,
                r = self.queue.lease(&self.domain, &self.descriptor, WAIT) => r,
            };
            let job = match leased {
                Ok(Some(job)) => job,
                Ok(None) => continue,
                Err(e @ QueueError::Store(_)) => {
                    // (the queue logs the store's failure once, and its return)
                    tracing::debug!(error = %e, domain = %self.domain, "queue worker: lease failed");
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(ERROR_PAUSE) => continue,
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, domain = %self.domain, "queue worker: lease failed");
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(ERROR_PAUSE) => continue,
                    }
                }
            };
            let token = job.token.clone();
            let (id, attempt) = (job.id, job.attempt);
            let done = match handle(job).await {
                Ok(()) => self.queue.ack(&token).await.map(|()| None),
                Err(e) => {
                    tracing::info!(id, attempt, error = %e, "queue worker: job failed");
                    self.queue.nack(&token, None).await.map(Some)
                }
            };
            if let Err(e) = done {
                tracing::warn!(id, error = %e, "queue worker: cannot finish the job (its lease will expire)");
            }
        }
    }
}
