//! A permit: proof that a request was admitted, holding its `concurrency` leases until dropped,
//! and the circuit breakers it passed, to report the call's outcome to.

use std::sync::Arc;
use std::time::Duration;

use flowgate_core::{Limit, Store};

use crate::breakers::{Outcome, Reported};

use crate::limiter::Limiter;
use crate::verdict::Verdict;

#[derive(Debug)]
pub(crate) struct LeaseRef {
    pub(crate) key: String,
    pub(crate) limit: Limit,
    pub(crate) lease: u64,
}

/// An admitted request. Dropping it releases the `concurrency` leases it holds (on the tokio
/// runtime when there is one, else at once); [`Permit::release`] does it and waits.
///
/// When the request matched circuit breakers, [`Permit::report`] tells them how the call went.
/// A permit dropped without a report reports nothing: a call whose outcome is unknown is no
/// evidence either way (and a probe's lease then frees its place when it expires).
#[must_use = "dropping the permit releases its concurrency leases at once"]
pub struct Permit<S: Store> {
    limiter: Arc<Limiter<S>>,
    verdict: Verdict,
    leases: Vec<LeaseRef>,
    reported: bool,
}

impl<S: Store> Permit<S> {
    pub(crate) fn new(limiter: Arc<Limiter<S>>, verdict: Verdict, leases: Vec<LeaseRef>) -> Self {
        Self {
            limiter,
            verdict,
            leases,
            reported: false,
        }
    }

    /// Reports the call's outcome (`ok`: it succeeded) and latency to the circuit breakers the
    /// request matched, once (a second report is ignored). Never waits.
    pub fn report(&mut self, ok: bool, latency: Duration) -> Reported {
        if std::mem::replace(&mut self.reported, true) {
            return Reported::default();
        }
        let outcome = if ok { Outcome::Ok } else { Outcome::Error };
        self.limiter.report_verdict(&self.verdict, outcome, latency)
    }

    /// The verdict that admitted the request.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    /// Releases the leases now and waits for the store.
    pub async fn release(mut self) {
        let leases = std::mem::take(&mut self.leases);
        for l in leases {
            if let Err(e) = self.limiter.release_key(&l.key, &l.limit, l.lease).await {
                tracing::warn!(error = %e, key = %l.key, "lease release failed; it expires by its TTL");
            }
        }
    }
}

impl<S: Store> Drop for Permit<S> {
    fn drop(&mut self) {
        if self.leases.is_empty() {
            return;
        }
        let leases = std::mem::take(&mut self.leases);
        let limiter = Arc::clone(&self.limiter);
        let work = async move {
            for l in leases {
                if let Err(e) = limiter.release_key(&l.key, &l.limit, l.lease).await {
                    tracing::warn!(error = %e, key = %l.key, "lease release failed; it expires by its TTL");
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(work);
            }
            Err(_) => futures::executor::block_on(work),
        }
    }
}
