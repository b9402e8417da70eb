//! The sliding window's stored ring is exactly the Rust transition's state after every decision.
//!
//! The script reads a ring through its head and total and moves it on by keeping a prefix of the
//! old counts (newest first); a count written in the wrong place would only show in a decision
//! much later (when that bucket leaves the window), so this test compares the stored bytes
//! themselves with `flowgate_core::algorithm::transition` on random schedules (gaps of a
//! fraction of a bucket to several windows, costs 0 to 3, rings of 2 to 13 slots).

mod common;

use std::time::Duration;

use common::{bounded, runner, runtime, single, stored_value, test_options};
use flowgate_core::algorithm::{self, SlidingWindowState};
use flowgate_core::{Algorithm, Clock, Item, Limit, ManualClock, Quota, State, Store};
use flowgate_redis::keys::redis_key;
use flowgate_testkit::redis::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// The stored ring: head, total, and the counts in ring order (bucket `j` at `j % len`); stored
/// as the counts newest first (`I4` each: buckets head, head - 1, ...), then `<dd` head, total.
fn stored(v: &[u8]) -> (u64, u64, Vec<u64>) {
    let double = |b: &[u8]| f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])) as u64;
    let bytes = v.len() - 16;
    let (head, total) = (double(&v[bytes..]), double(&v[bytes + 8..]));
    let n = bytes / 4;
    let mut counts = vec![0; n];
    for (q, c) in v[..bytes].chunks_exact(4).enumerate() {
        counts[(head as usize % n + n - q) % n] =
            u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    (head, total, counts)
}

#[test]
fn stored_rings_are_the_rust_transitions_state() {
    let server = RedisServer::start();
    let rt = runtime();
    let clock = ManualClock::new(0);
    let store = rt.block_on(single(&server, test_options(&clock)));
    let strategy = (
        1u32..13,
        prop::sample::select(vec![1_000u64, 7_777, 100_000, 1_000_000]),
        2u64..30,
        prop::collection::vec(
            (
                prop_oneof![2 => 0u64..200, 3 => 0u64..300_000, 1 => 0u64..3_000_000],
                0u64..4,
            ),
            1..60,
        ),
    );
    let mut runner = runner(96);
    let cases = std::sync::atomic::AtomicU64::new(0);
    let result = runner.run(&strategy, |(buckets, window, limit, steps)| {
        let case = cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let l = Limit::builder(
            Algorithm::SlidingWindow,
            Quota::from_micros(limit, window).map_err(|e| TestCaseError::reject(e.to_string()))?,
        )
        .buckets(buckets)
        .build()
        .map_err(|e| TestCaseError::reject(e.to_string()))?;
        let key = format!("ring:{case}");
        let rk = redis_key(&key, &l);
        clock.set(1_700_000_000_000_000 + case * 7_919);
        let mut state = State::Empty;
        for (dt, cost) in steps {
            clock.advance(Duration::from_micros(dt));
            let now = clock.now();
            let d = rt.block_on(bounded(
                10,
                store.decide(&[Item {
                    key: &key,
                    limit: &l,
                    cost,
                    enforce: true,
                }]),
            ));
            let d = d.map_err(|e| TestCaseError::fail(e.to_string()))?;
            let want = algorithm::transition(&l, &mut state, now, cost, 0);
            prop_assert_eq!(d[0].allowed, want.allowed);
            let v = stored_value(&rt, &store, &rk)?;
            match (&state, v) {
                (State::Empty, None) => {}
                (State::SlidingWindow(s), Some(v)) => {
                    let SlidingWindowState { head, counts, .. } = &**s;
                    let (h, total, ring) = stored(&v);
                    prop_assert_eq!(h, *head);
                    prop_assert_eq!(&ring, counts);
                    prop_assert_eq!(total, counts.iter().sum::<u64>());
                }
                (s, v) => prop_assert!(false, "state {s:?}, stored {v:?}"),
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
