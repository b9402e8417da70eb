//! A limit: an algorithm, a quota and its parameters (burst, buckets, mode, `max_wait`,
//! `max_debt`).
//!
//! The limit itself is here; what its algorithm is ([`Algorithm`], [`Mode`]), its builder and
//! the validation of its parameters ([`LimitBuilder`]), its warm-up ([`Warmup`]) and what its
//! state means ([`StateTag`]) each have a file of their own.

mod algorithm;
mod builder;
mod state_tag;
mod warmup;

use std::time::Duration;

use crate::clock::Micros;
use crate::quota::Quota;

pub use self::algorithm::{Algorithm, Mode, UnknownAlgorithm};
pub use self::builder::{DEFAULT_BUCKETS, LimitBuilder};
pub use self::state_tag::StateTag;
pub use self::warmup::{
    DEFAULT_COLD_FACTOR, MAX_COLD_FACTOR, MAX_WARMUP, MAX_WARMUP_LEVELS, Warmup,
};

/// An algorithm with its quota and parameters, validated, with derived values precomputed.
///
/// # Examples
/// "20/s with burst 5": at most 5 requests at once from a full bucket, and one more every 50 ms.
/// ```
/// use flowgate_core::{Algorithm, Limit, Quota};
/// let limit = Limit::builder(Algorithm::TokenBucket, Quota::per_second(20).unwrap())
///     .burst(5)
///     .build()
///     .unwrap();
/// assert_eq!(limit.burst(), 5);
/// assert_eq!(limit.emission_interval(), 50_000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Limit {
    algorithm: Algorithm,
    quota: Quota,
    burst: u64,
    buckets: u32,
    mode: Mode,
    max_wait: Micros,
    max_debt: u64,
    warmup: Option<Warmup>,
    // Derived.
    emission: Micros,
    bucket_width: Micros,
    emission_div: Divisor,
    max_cost: u64,
    tag: StateTag,
}

/// A divisor with its reciprocal precomputed, so that the hot path divides by multiplying.
/// Compared and hashed by its value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Divisor(strength_reduce::StrengthReducedU64);

impl Divisor {
    fn new(d: u64) -> Self {
        Self(strength_reduce::StrengthReducedU64::new(d.max(1)))
    }

    /// `n / self`.
    #[inline]
    pub(crate) fn div(self, n: u64) -> u64 {
        n / self.0
    }
}

impl PartialEq for Divisor {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Eq for Divisor {}

impl std::hash::Hash for Divisor {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.get().hash(state);
    }
}

impl Limit {
    /// The algorithm.
    #[inline]
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The quota.
    #[inline]
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The quota's limit.
    #[inline]
    pub fn limit(&self) -> u64 {
        self.quota.limit()
    }

    /// The window in microseconds (for `concurrency`, the lease TTL).
    #[inline]
    pub fn window(&self) -> Micros {
        self.quota.window_micros()
    }

    /// `max_debt`: the units a charge may count beyond the limit.
    #[inline]
    pub fn max_debt(&self) -> u64 {
        self.max_debt
    }

    /// The `max_debt` this limit has when none is asked for: its limit, within what its state
    /// holds.
    pub fn default_max_debt(&self) -> u64 {
        builder::max_debt(self.algorithm, self.quota, self.emission, None).unwrap_or(self.max_debt)
    }

    /// The burst: for token and leaky buckets the bucket's size in units; otherwise the limit.
    #[inline]
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The number of sliding-window buckets.
    #[inline]
    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// The mode.
    #[inline]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// `max_wait` in microseconds (0 in `reject` mode).
    #[inline]
    pub fn max_wait(&self) -> Micros {
        self.max_wait
    }

    /// A token bucket's warm-up, if it has one.
    #[inline]
    pub fn warmup(&self) -> Option<&Warmup> {
        self.warmup.as_ref()
    }

    /// GCRA's emission interval `T = ceil(window / limit)` in microseconds: the spacing of units
    /// at the steady rate (rounded up, so the rate is never exceeded).
    #[inline]
    pub fn emission_interval(&self) -> Micros {
        self.emission
    }

    /// This limit shared evenly among `nodes` (the `local` failure policy): the limit and burst
    /// divided by `nodes`, rounded down but at least 1 (a limit of 0 stays 0), so that the nodes
    /// together admit no more than the whole limit unless it is below `nodes`.
    pub fn divided(&self, nodes: u32) -> Limit {
        let n = u64::from(nodes.max(1));
        let share = |x: u64| if x == 0 { 0 } else { (x / n).max(1) };
        let quota = self
            .quota
            .with_limit(share(self.limit()))
            .unwrap_or(self.quota);
        let mut b = Limit::builder(self.algorithm, quota)
            .buckets(self.buckets)
            .mode(self.mode)
            .max_wait(Duration::from_micros(self.max_wait))
            .max_debt(share(self.max_debt));
        if matches!(
            self.algorithm,
            Algorithm::TokenBucket | Algorithm::LeakyBucket
        ) {
            b = b.burst(share(self.burst).max(1));
        }
        if let Some(w) = self.warmup {
            b = b
                .warmup(Duration::from_micros(w.period()))
                .cold_factor(w.cold_factor());
        }
        b.build().unwrap_or_else(|_| self.clone())
    }

    /// What this limit's state means ([`StateTag`]): a rule's counter carries over a change of
    /// its limit exactly when the tag is unchanged. Fixed when the limit is built: the stores
    /// read it on every decision.
    #[inline]
    pub fn state_tag(&self) -> StateTag {
        self.tag
    }

    /// For token and leaky buckets, the largest cost that can ever be admitted: `burst`, plus in
    /// `delay` mode the units that fit in `max_wait`.
    #[inline]
    pub fn max_cost(&self) -> u64 {
        self.max_cost
    }

    /// `n / emission_interval`, by multiplication.
    #[inline]
    pub(crate) fn per_emission(&self, n: u64) -> u64 {
        self.emission_div.div(n)
    }

    /// The sliding window's bucket width `ceil(window / buckets)` in microseconds.
    #[inline]
    pub fn bucket_width(&self) -> Micros {
        self.bucket_width
    }
}

/// A quota from its text, for the tests of this module's files.
#[cfg(test)]
fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divided_among_nodes() {
        let l = Limit::builder(Algorithm::TokenBucket, q("20/s"))
            .burst(6)
            .build()
            .unwrap();
        let d = l.divided(3);
        assert_eq!((d.limit(), d.burst(), d.window()), (6, 2, 1_000_000));
        let day = Limit::new(Algorithm::FixedWindow, q("90/day")).unwrap();
        assert_eq!(day.divided(3).quota(), q("30/day"));
        assert_eq!(
            Limit::new(Algorithm::FixedWindow, q("1/s"))
                .unwrap()
                .divided(4)
                .limit(),
            1
        );
        assert_eq!(
            Limit::new(Algorithm::FixedWindow, q("0/s"))
                .unwrap()
                .divided(4)
                .limit(),
            0
        );
    }

    #[test]
    fn defaults() {
        assert_eq!(
            Limit::new(Algorithm::TokenBucket, q("20/s"))
                .unwrap()
                .burst(),
            20
        );
        assert_eq!(
            Limit::new(Algorithm::LeakyBucket, q("20/s"))
                .unwrap()
                .burst(),
            1
        );
        let sw = Limit::new(Algorithm::SlidingWindow, q("20/s")).unwrap();
        assert_eq!((sw.buckets(), sw.bucket_width()), (10, 100_000));
        // T rounds up: 3 per second is one unit every 333_334 us, never faster than asked.
        assert_eq!(
            Limit::new(Algorithm::TokenBucket, q("3/s"))
                .unwrap()
                .emission_interval(),
            333_334
        );
    }
}
