//! Counters of a Redis store, and its degraded flag.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use flowgate_core::StoreError;

/// A snapshot of a [`crate::RedisStore`]'s counters, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Batches decided (calls to `decide`), including those answered from the blocked cache.
    pub decisions: u64,
    /// Decide script calls sent to Redis (several requests may share one when coalesced, and a
    /// cross-slot request takes one per slot).
    pub script_calls: u64,
    /// Calls that failed (timeouts included).
    pub errors: u64,
    /// Calls that missed the deadline.
    pub timeouts: u64,
    /// Batches rejected from the blocked-keys cache without a round trip.
    pub blocked_hits: u64,
    /// Keys in the blocked-keys cache now.
    pub blocked_keys: u64,
    /// Rejections not cached because the cache was full of live entries.
    pub blocked_full: u64,
    /// Cross-slot refunds sent (Redis Cluster compensation).
    pub refunds: u64,
    /// Cross-slot refunds that failed (the units stay taken until their keys expire).
    pub refund_failures: u64,
    /// Calls answered at once as unavailable because Redis was known down (see
    /// [`crate::StoreHealth`]): no round trip, no deadline waited.
    pub fast_failures: u64,
    /// Whether the store is failing now: its last call failed, or it is known down.
    pub degraded: bool,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) decisions: AtomicU64,
    pub(crate) script_calls: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) blocked_hits: AtomicU64,
    pub(crate) blocked_full: AtomicU64,
    pub(crate) refunds: AtomicU64,
    pub(crate) refund_failures: AtomicU64,
    pub(crate) fast_failures: AtomicU64,
    pub(crate) degraded: AtomicBool,
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Records the outcome of a call to Redis; logs when the store becomes degraded or recovers.
    pub(crate) fn outcome<T>(&self, r: &Result<T, StoreError>) {
        match r {
            Ok(_) => {
                if self.degraded.load(Ordering::Relaxed)
                    && self.degraded.swap(false, Ordering::Relaxed)
                {
                    tracing::info!(target: "flowgate_redis", "redis store recovered");
                }
            }
            Err(e) => {
                Self::add(&self.errors, 1);
                if e.is_timeout() {
                    Self::add(&self.timeouts, 1);
                }
                if !self.degraded.swap(true, Ordering::Relaxed) {
                    tracing::warn!(target: "flowgate_redis", error = %e, "redis store degraded");
                } else {
                    tracing::debug!(target: "flowgate_redis", error = %e, "redis store call failed");
                }
            }
        }
    }

    pub(crate) fn snapshot(&self, blocked_keys: u64) -> RedisStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RedisStats {
            decisions: l(&self.decisions),
            script_calls: l(&self.script_calls),
            errors: l(&self.errors),
            timeouts: l(&self.timeouts),
            blocked_hits: l(&self.blocked_hits),
            blocked_keys,
            blocked_full: l(&self.blocked_full),
            refunds: l(&self.refunds),
            refund_failures: l(&self.refund_failures),
            fast_failures: l(&self.fast_failures),
            degraded: self.degraded.load(Ordering::Relaxed),
        }
    }
}
