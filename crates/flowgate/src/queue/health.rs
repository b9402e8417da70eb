//! Whether the queues' store answers, as this process last found it.
//!
//! [`Health`] is the whole store's, from every call a [`super::Queue`] makes: it turns failing at
//! the first store error, and answering again at the first answer after a [`QUIET`] second with
//! no error (so that a store failing for some instances only, one master of a Redis Cluster,
//! does not flap). Each change is logged once, at WARN then INFO, under the target
//! `flowgate::queue`. [`LastFailure`] is one instance's, from its leases' calls: a lease whose
//! wait ends while another lease of its instance is asking answers the failure that one met.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flowgate_core::StoreError;
use flowgate_core::queue::QueueError;
use parking_lot::Mutex;
use tokio::time::Instant;

/// How long after its last error the store must keep answering to be answering again.
pub(super) const QUIET: Duration = Duration::from_secs(1);

/// The whole store's health. See the [module documentation](self).
#[derive(Debug, Default)]
pub(super) struct Health {
    /// Read without the lock.
    failing: AtomicBool,
    /// When the last error was met (`None`: never).
    last_error: Mutex<Option<Instant>>,
}

impl Health {
    /// Whether the store is failing.
    pub(super) fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    /// Records the outcome of one call to the store: any answer (a refusal such as
    /// [`QueueError::NotHeld`] included) but a [`QueueError::Store`] error says it answers.
    pub(super) fn record<T>(&self, r: &Result<T, QueueError>) {
        match r {
            Err(QueueError::Store(e)) => self.failed(e),
            _ => self.answered(),
        }
    }

    fn failed(&self, e: &StoreError) {
        *self.last_error.lock() = Some(Instant::now());
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "flowgate::queue", error = %e, "queues: the store fails; queue calls answer 503 once it fails them (at once when it refuses, after its timeout when it hangs; a lease when its wait ends), until it answers again");
        }
    }

    fn answered(&self) {
        if !self.failing() {
            return;
        }
        let quiet = self
            .last_error
            .lock()
            .is_none_or(|at| at.elapsed() >= QUIET);
        if quiet && self.failing.swap(false, Ordering::Relaxed) {
            tracing::info!(target: "flowgate::queue", "queues: the store answers again");
        }
    }
}

/// The error the last store call of an instance's leases met, cleared by its next answer.
#[derive(Debug, Default)]
pub(super) struct LastFailure(Mutex<Option<StoreError>>);

impl LastFailure {
    /// The error, while the instance's store fails.
    pub(super) fn get(&self) -> Option<StoreError> {
        self.0.lock().clone()
    }

    /// Records the outcome of a lease's call to the store.
    pub(super) fn record<T>(&self, r: &Result<T, QueueError>) {
        *self.0.lock() = match r {
            Err(QueueError::Store(e)) => Some(e.clone()),
            _ => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn down() -> Result<(), QueueError> {
        Err(QueueError::Store(StoreError::Timeout))
    }

    /// Failing from the first error; answering again only after a quiet second, so that errors
    /// among answers (one master of a cluster down) do not flap; a refusal is an answer.
    #[tokio::test(start_paused = true)]
    async fn fails_at_once_and_answers_again_after_a_quiet_second() {
        let h = Health::default();
        h.record(&Err::<(), _>(QueueError::NotHeld { id: 1 }));
        assert!(!h.failing());
        h.record(&down());
        assert!(h.failing());
        tokio::time::advance(QUIET / 2).await;
        h.record(&Ok(()));
        assert!(h.failing(), "answered half a second after an error");
        h.record(&down());
        tokio::time::advance(QUIET / 2).await;
        h.record(&Ok(()));
        assert!(h.failing(), "answered half a second after the last error");
        tokio::time::advance(QUIET / 2).await;
        h.record(&Err::<(), _>(QueueError::NotHeld { id: 1 }));
        assert!(!h.failing());
    }

    #[test]
    fn an_instance_keeps_its_last_failure_until_an_answer() {
        let f = LastFailure::default();
        f.record(&down());
        assert_eq!(f.get(), Some(StoreError::Timeout));
        f.record(&Ok(()));
        assert_eq!(f.get(), None);
    }
}
