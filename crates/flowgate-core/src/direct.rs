//! A single-key token or leaky bucket in one `AtomicU64`: the GCRA transition applied in a
//! compare-and-swap loop, for callers who need one limit and no map (governor's "direct"
//! limiter).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::algorithm::gcra::{self, GcraState};
use crate::clock::{Clock, SystemClock};
use crate::decision::Decision;
use crate::limit::{Algorithm, Limit};

/// One token or leaky bucket, lock-free.
///
/// # Examples
/// ```
/// use flowgate_core::{Algorithm, DirectBucket, Limit, ManualClock, Quota};
/// let limit = Limit::builder(Algorithm::TokenBucket, Quota::per_second(20).unwrap())
///     .burst(2)
///     .build()
///     .unwrap();
/// let bucket = DirectBucket::with_clock(limit, ManualClock::new(0)).unwrap();
/// assert!(bucket.check(1).allowed);
/// assert!(bucket.check(1).allowed);
/// assert!(!bucket.check(1).allowed);
/// ```
#[derive(Debug)]
pub struct DirectBucket<C: Clock = SystemClock> {
    limit: Limit,
    tat: AtomicU64,
    clock: C,
}

impl DirectBucket<SystemClock> {
    /// A bucket on the real clock; `None` unless `limit` is a token or leaky bucket without
    /// warm-up.
    pub fn new(limit: Limit) -> Option<Self> {
        Self::with_clock(limit, SystemClock::new())
    }
}

impl<C: Clock> DirectBucket<C> {
    /// A bucket reading `clock`; `None` unless `limit` is a token or leaky bucket without
    /// warm-up (whose state is more than one TAT).
    pub fn with_clock(limit: Limit, clock: C) -> Option<Self> {
        (matches!(
            limit.algorithm(),
            Algorithm::TokenBucket | Algorithm::LeakyBucket
        ) && limit.warmup().is_none())
        .then_some(Self {
            limit,
            tat: AtomicU64::new(0),
            clock,
        })
    }

    /// Decides a request of `cost` units now, and reserves it when admitted.
    #[inline]
    pub fn check(&self, cost: u64) -> Decision {
        let now = self.clock.now();
        let mut current = self.tat.load(Ordering::Acquire);
        loop {
            let state = GcraState { tat: current };
            let d = gcra::check(&self.limit, &state, now, cost);
            if !d.allowed || cost == 0 {
                return d;
            }
            let mut next = state;
            gcra::apply(&self.limit, &mut next, now, cost);
            match self.tat.compare_exchange_weak(
                current,
                next.tat,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return d,
                Err(actual) => current = actual,
            }
        }
    }
}
