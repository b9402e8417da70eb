//! The limits the charge and release property tests run on: every algorithm that takes
//! charges, small quotas, short windows and small debts, so that a few steps reach every edge.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use flowgate_core::{Algorithm, Limit, Quota};
use proptest::prelude::*;

/// A time well past 0, aligned to nothing in particular.
pub const EPOCH: u64 = 1_700_000_000_000_000;

/// The algorithms where a debt means something (concurrency and warm-up buckets refuse charges).
pub const CHARGEABLE: [Algorithm; 5] = [
    Algorithm::FixedWindow,
    Algorithm::SlidingWindow,
    Algorithm::SlidingLog,
    Algorithm::TokenBucket,
    Algorithm::LeakyBucket,
];

/// A limit of `a`: `lim` per `window_ms`, 4 sliding-window buckets, a bucket's `burst`, and
/// `max_debt`.
pub fn limit(a: Algorithm, lim: u64, window_ms: u64, burst: u64, max_debt: u64) -> Limit {
    let mut b = Limit::builder(
        a,
        Quota::new(lim, Duration::from_millis(window_ms)).unwrap(),
    )
    .buckets(4)
    .max_debt(max_debt);
    if matches!(a, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
        b = b.burst(burst);
    }
    b.build().unwrap()
}

/// Any chargeable limit: 1 to 19 per 1 ms to 2 s, a burst of 1 to 4, a debt of 0 to 39.
pub fn arb_limit() -> impl Strategy<Value = Limit> {
    (
        prop::sample::select(CHARGEABLE.to_vec()),
        1u64..20,
        1u64..2000,
        1u64..5,
        0u64..40,
    )
        .prop_map(|(a, lim, w, burst, debt)| limit(a, lim, w, burst, debt))
}

/// The most a full key holds, in units: the most one request can take.
pub fn full(l: &Limit) -> u64 {
    match l.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => l.burst(),
        _ => l.limit(),
    }
}
