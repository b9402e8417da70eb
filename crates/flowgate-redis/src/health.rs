//! Whether Redis is known down, and the probe that finds it back.
//!
//! A store call that fails at the connection level (refused, lost, or past its deadline: a
//! [`StoreError::Unavailable`] or [`StoreError::Timeout`]) counts one consecutive failure; any
//! answer from Redis, an error reply included, starts the count again. At
//! [`RedisOptions::down_after`](crate::RedisOptions::down_after) consecutive failures (3 by
//! default) the store is **known down**: decisions and releases answer
//! [`StoreError::Unavailable`] at once, without a round trip or a deadline, so each rule's
//! failure policy decides in microseconds instead of after the deadline; and a probe sends
//! `PING` at once, then every [`RedisOptions::probe_every`](crate::RedisOptions::probe_every)
//! (100 ms); on a Redis Cluster it asks a node for `CLUSTER INFO` instead, and a cluster whose
//! state is `fail` (every slot refused while a failed primary is replaced) is still down. The
//! first probe answered within its timeout brings the store back: from then on every decision
//! goes to Redis again, so the first decision after the recovery is exact.
//!
//! Going down is logged at `warn`, coming back at `info` with how long it was down (target
//! `flowgate_redis`), once each.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use flowgate_core::{Micros, StoreError};
use parking_lot::Mutex;

/// The store's health, as [`crate::RedisStore::health`] reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreHealth {
    /// Known down: decisions go straight to the failure policies while a probe retries.
    pub down: bool,
    /// Since when it is known down (Unix microseconds, this node's clock).
    pub down_since: Option<Micros>,
    /// Failed calls in a row now (0 once Redis answers).
    pub consecutive_failures: u32,
    /// The last connection-level error met, while it is failing.
    pub last_error: Option<StoreError>,
}

/// The message of a decision answered at once while Redis is known down.
pub(crate) const DOWN: &str = "Redis is known down (a probe is retrying it)";

/// The timeout of one probe: the decisions' deadline, but at least this (a probe that waits a
/// little longer costs nothing, and a deadline of a few milliseconds would keep a slow but live
/// Redis down).
pub(crate) const MIN_PROBE_TIMEOUT: Duration = Duration::from_millis(100);

pub(crate) struct Health {
    /// Consecutive failures after which the store is known down; 0: never.
    down_after: u32,
    failures: AtomicU32,
    down: AtomicBool,
    down_since: AtomicU64,
    last_error: Mutex<Option<StoreError>>,
}

/// What recording an outcome changed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing to do.
    None,
    /// The store is known down now: start the probe.
    WentDown,
}

impl Health {
    pub(crate) fn new(down_after: u32) -> Self {
        Self {
            down_after,
            failures: AtomicU32::new(0),
            down: AtomicBool::new(false),
            down_since: AtomicU64::new(0),
            last_error: Mutex::new(None),
        }
    }

    /// Whether the store is known down (one relaxed load: the request path reads it).
    #[inline]
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Records a call's outcome at `now` (Unix microseconds).
    pub(crate) fn record<T>(&self, r: &Result<T, StoreError>, now: Micros) -> Change {
        match r {
            Err(e @ (StoreError::Unavailable(_) | StoreError::Timeout)) => {
                let n = self
                    .failures
                    .fetch_add(1, Ordering::Relaxed)
                    .saturating_add(1);
                *self.last_error.lock() = Some(e.clone());
                if self.down_after == 0 || n < self.down_after {
                    return Change::None;
                }
                if self.down.swap(true, Ordering::AcqRel) {
                    return Change::None;
                }
                self.down_since.store(now, Ordering::Relaxed);
                tracing::warn!(
                    target: "flowgate_redis",
                    consecutive_failures = n,
                    error = %e,
                    "Redis is down: decisions go straight to the rules' failure policies while a probe retries it"
                );
                Change::WentDown
            }
            // Redis answered (an error reply is an answer).
            _ => {
                if self.failures.load(Ordering::Relaxed) != 0 {
                    self.failures.store(0, Ordering::Relaxed);
                    *self.last_error.lock() = None;
                }
                Change::None
            }
        }
    }

    /// A probe was answered at `now`: the store is back.
    pub(crate) fn recovered(&self, now: Micros) {
        self.failures.store(0, Ordering::Relaxed);
        *self.last_error.lock() = None;
        if self.down.swap(false, Ordering::AcqRel) {
            let since = self.down_since.swap(0, Ordering::Relaxed);
            let down_for = Duration::from_micros(now.saturating_sub(since));
            tracing::info!(
                target: "flowgate_redis",
                down_for_ms = down_for.as_millis() as u64,
                "Redis answers again: decisions go to Redis"
            );
        }
    }

    /// A probe failed with `e`.
    pub(crate) fn probe_failed(&self, e: &StoreError) {
        *self.last_error.lock() = Some(e.clone());
    }

    pub(crate) fn snapshot(&self) -> StoreHealth {
        let down = self.is_down();
        let since = self.down_since.load(Ordering::Relaxed);
        StoreHealth {
            down,
            down_since: (down && since != 0).then_some(since),
            consecutive_failures: self.failures.load(Ordering::Relaxed),
            last_error: self.last_error.lock().clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> Result<(), StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }

    #[test]
    fn down_after_consecutive_failures_and_back_on_recovery() {
        let h = Health::new(3);
        assert_eq!(h.record(&refused(), 10), Change::None);
        assert_eq!(
            h.record(&Err::<(), _>(StoreError::Timeout), 11),
            Change::None
        );
        assert!(!h.is_down());
        assert_eq!(h.record(&refused(), 12), Change::WentDown);
        assert!(h.is_down());
        // Only the first failure past the threshold starts a probe.
        assert_eq!(h.record(&refused(), 13), Change::None);
        let s = h.snapshot();
        assert_eq!(s.down_since, Some(12));
        assert_eq!(s.consecutive_failures, 4);
        assert!(matches!(s.last_error, Some(StoreError::Unavailable(_))));
        h.recovered(20);
        assert!(!h.is_down());
        assert_eq!(h.snapshot(), StoreHealth::default());
    }

    #[test]
    fn an_answer_starts_the_count_again() {
        let h = Health::new(3);
        h.record(&refused(), 1);
        h.record(&refused(), 2);
        // A script error is Redis answering.
        h.record(&Err::<(), _>(StoreError::Internal("ERR".into())), 3);
        h.record(&refused(), 4);
        h.record(&refused(), 5);
        assert!(!h.is_down());
        h.record(&Ok(()), 6);
        h.record(&refused(), 7);
        h.record(&refused(), 8);
        assert!(!h.is_down());
    }

    #[test]
    fn zero_never_goes_down() {
        let h = Health::new(0);
        for t in 0..10 {
            assert_eq!(h.record(&refused(), t), Change::None);
        }
        assert!(!h.is_down());
    }
}
