//! Flowgate's memory store versus governor, interleaved: the two sides alternate in short
//! rounds and each side keeps its quietest round, so load from other processes on a shared
//! machine biases neither side. Prints ns per decision and the ratio.
//!
//! ```text
//! cargo run --release -p flowgate-core --example versus_governor
//! ```

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use flowgate_core::{Algorithm, DirectBucket, Item, Limit, MemoryStore, Quota};
use governor::{Quota as GQuota, RateLimiter};

const ROUNDS: usize = 15;
const OPS: usize = 2_000_000;

#[path = "../benches/support/mod.rs"]
mod support;
use support::keys;

fn order(n: usize) -> Vec<u32> {
    support::random_indices(n, OPS)
}

/// Best ns/op of each side over interleaved rounds.
fn duel(name: &str, mut ours: impl FnMut(), mut theirs: impl FnMut()) {
    let (mut a, mut b) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        #[allow(clippy::disallowed_methods)] // wall time of a round
        let t = Instant::now();
        ours();
        a = a.min(t.elapsed().as_nanos() as f64 / OPS as f64);
        #[allow(clippy::disallowed_methods)]
        let t = Instant::now();
        theirs();
        b = b.min(t.elapsed().as_nanos() as f64 / OPS as f64);
    }
    println!(
        "{name:<40} flowgate {a:>7.1} ns   governor {b:>7.1} ns   ratio {:.2}",
        a / b
    );
}

fn main() {
    let big = Limit::builder(
        Algorithm::TokenBucket,
        Quota::per_second(1_000_000).unwrap(),
    )
    .burst(1_000_000_000)
    .build()
    .unwrap();
    let direct = DirectBucket::new(big).unwrap();
    let gov_direct = RateLimiter::direct(
        GQuota::per_second(NonZeroU32::new(1_000_000).unwrap())
            .allow_burst(NonZeroU32::new(1_000_000_000).unwrap()),
    );
    duel(
        "direct token bucket, one key",
        || (0..OPS).for_each(|_| _ = black_box(direct.check(1).allowed)),
        || (0..OPS).for_each(|_| _ = black_box(gov_direct.check().is_ok())),
    );

    // 1/h with burst 1000: every key stays live for the run.
    let limit = Limit::builder(Algorithm::TokenBucket, "1/1h".parse::<Quota>().unwrap())
        .burst(1_000)
        .build()
        .unwrap();
    let gq = GQuota::with_period(Duration::from_secs(3600))
        .unwrap()
        .allow_burst(NonZeroU32::new(1_000).unwrap());
    for n in [1usize, 1_000_000] {
        let ks = keys(n);
        let idx = order(n);
        let store = MemoryStore::new().with_max_keys(4_000_000);
        let gov = RateLimiter::<String, _, _>::keyed(gq);
        for k in &ks {
            let item = Item {
                key: k,
                limit: &limit,
                cost: 1,
                enforce: true,
            };
            store.decide_one_now(&item).unwrap();
            let _ = gov.check_key(k);
        }
        duel(
            &format!("keyed token bucket, {n} key(s) at random"),
            || {
                for &i in &idx {
                    let item = Item {
                        key: &ks[i as usize],
                        limit: &limit,
                        cost: 1,
                        enforce: true,
                    };
                    black_box(store.decide_one_now(&item).map(|d| d.allowed)).ok();
                }
            },
            || {
                for &i in &idx {
                    black_box(gov.check_key(&ks[i as usize]).is_ok());
                }
            },
        );
    }
}
