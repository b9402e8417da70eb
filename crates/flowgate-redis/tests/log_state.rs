//! The sliding log's stored entries are exactly the Rust transition's state after every decision.
//!
//! A wrong entry, merge or total would only show in a decision much later, so this test compares
//! the stored bytes themselves with `flowgate_core::algorithm::transition` on random schedules:
//! single requests and batches of requests on the one key (requests of one call that share it);
//! and that entries that left the window stay gone when the clock steps back behind them, also
//! across a rule change between two requests of one call (decided in two calls).

mod common;

use std::time::Duration;

use common::{bounded, runner, runtime, single, stored_value, test_options};
use flowgate_core::algorithm::{self, SlidingLogState};
use flowgate_core::{Algorithm, Clock, Item, Limit, ManualClock, Quota, State, Store};
use flowgate_redis::keys::redis_key;
use flowgate_testkit::redis::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// The stored log: its entries (time, cost; oldest first), the dead count and the total.
fn stored(v: &[u8]) -> (Vec<(u64, u64)>, usize, u64) {
    let (log, trailer) = v.split_at(v.len() - 8);
    let u32le = |b: &[u8]| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let entries = log
        .chunks_exact(12)
        .map(|e| {
            let ts = f64::from_le_bytes(e[..8].try_into().unwrap_or([0; 8]));
            (ts as u64, u32le(&e[8..]))
        })
        .collect();
    (entries, u32le(trailer) as usize, u32le(&trailer[4..]))
}

#[test]
fn stored_logs_are_the_rust_transitions_state() {
    let server = RedisServer::start();
    let rt = runtime();
    let clock = ManualClock::new(0);
    let store = rt.block_on(single(&server, test_options(&clock)));
    // Gaps mostly well inside the window, so that logs hold many entries and entries keep
    // leaving them; some of 0 (same-instant merges) and some of several windows. Requests per
    // step: 1 (the in-place write) or 2-3 in one call.
    let strategy = (
        2u64..60,
        prop::sample::select(vec![1_000u64, 7_777, 100_000]),
        prop::collection::vec(
            (
                prop_oneof![2 => Just(0u64), 12 => 1u64..800, 1 => 0u64..300_000],
                prop::collection::vec(0u64..4, 1..4),
            ),
            1..300,
        ),
    );
    let mut runner = runner(64);
    let cases = std::sync::atomic::AtomicU64::new(0);
    // Over all cases: writes that left dead entries in place, and rewrites that dropped them.
    let dropped = std::cell::Cell::new(0u64);
    let result = runner.run(&strategy, |(limit, window, steps)| {
        let case = cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let l = Limit::new(
            Algorithm::SlidingLog,
            Quota::from_micros(limit, window).map_err(|e| TestCaseError::reject(e.to_string()))?,
        )
        .map_err(|e| TestCaseError::reject(e.to_string()))?;
        let key = format!("log:{case}");
        let rk = redis_key(&key, Algorithm::SlidingLog);
        clock.set(1_700_000_000_000_000 + case * 7_919);
        let mut state = State::Empty;
        let mut entries_before = 0;
        for (dt, costs) in steps {
            clock.advance(Duration::from_micros(dt));
            let now = clock.now();
            let requests: Vec<[Item<'_>; 1]> = costs
                .iter()
                .map(|&cost| {
                    [Item {
                        key: &key,
                        limit: &l,
                        cost,
                        enforce: true,
                    }]
                })
                .collect();
            let refs: Vec<&[Item<'_>]> = requests.iter().map(|r| &r[..]).collect();
            let got = rt
                .block_on(bounded(10, store.decide_batch(&refs)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for (&cost, d) in costs.iter().zip(&got) {
                let want = algorithm::transition(&l, &mut state, now, cost, 0);
                prop_assert_eq!(d[0].allowed, want.allowed, "cost {} at {}", cost, now);
            }
            let v = stored_value(&rt, &store, &rk)?;
            match (&state, v) {
                (State::Empty, None) => {}
                (State::SlidingLog(s), Some(v)) => {
                    let SlidingLogState { entries, .. } = &**s;
                    let (all, dead, total) = stored(&v);
                    // (the script writes no dead entries: it drops them)
                    prop_assert_eq!(dead, 0);
                    prop_assert_eq!(&all[..], &entries.iter().copied().collect::<Vec<_>>()[..]);
                    prop_assert_eq!(total, entries.iter().map(|e| e.1).sum::<u64>());
                    if all.len() < entries_before {
                        dropped.set(dropped.get() + 1);
                    }
                    entries_before = all.len();
                }
                (s, v) => prop_assert!(false, "state {s:?}, stored {v:?}"),
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Entries did leave logs: a test where none did would assert nothing about it.
    assert!(dropped.get() > 0, "no entry ever left a log");
}

/// A log is written at its size: 12 bytes per entry and the trailer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_log_is_stored_at_its_size() {
    let server = RedisServer::start();
    bounded(60, async {
        let store = single(&server, common::live_options()).await;
        let l = Limit::new(
            Algorithm::SlidingLog,
            "100/1h".parse::<Quota>().unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let rk = redis_key("full", Algorithm::SlidingLog);
        let memory = || async {
            let v = store
                .query(
                    redis::cmd("MEMORY")
                        .arg("USAGE")
                        .arg(&rk)
                        .arg("SAMPLES")
                        .arg(0),
                )
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            redis::from_redis_value::<i64>(v).unwrap_or_else(|e| panic!("{e}"))
        };
        let mut grown = 0;
        for i in 1..=100 {
            let item = Item {
                key: "full",
                limit: &l,
                cost: 1,
                enforce: true,
            };
            let d = store
                .decide(&[item])
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(d[0].allowed, "request {i}");
            if i == 90 {
                grown = memory().await;
            }
        }
        let full = memory().await;
        // 100 entries and the trailer: 1,208 bytes, plus the key and Redis's headers.
        assert!(full < 1_500, "a full log of 100 entries takes {full} bytes");
        // (the allocator's size classes round both alike)
        assert!(
            grown <= full,
            "90 entries took {grown} bytes, 100 took {full}"
        );
    })
    .await;
}

/// Entries that left the window stay gone once Redis's clock steps back behind them (so that
/// they would be inside the window again): the Rust log dropped them, and the script must decide
/// as it does; also for two requests of one call under different limits for the key (decided in
/// two calls).
#[test]
fn dead_entries_stay_absent_when_the_clock_steps_back() {
    let server = RedisServer::start();
    let rt = runtime();
    let clock = ManualClock::new(10_000_000);
    let store = rt.block_on(single(&server, test_options(&clock)));
    let limit = |q: &str| {
        Limit::new(
            Algorithm::SlidingLog,
            q.parse::<Quota>().unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let (three, four) = (limit("3/s"), limit("4/s"));
    let item = |l| Item {
        key: "back",
        limit: l,
        cost: 1,
        enforce: true,
    };
    let mut state = State::Empty;
    // 10 s, 10.8 s, then 11.5 s: the first entry has left the window; then the clock steps back
    // to 10.2 s, where it would be live again (and the request under 3/s rejected).
    for (at, requests) in [
        (10_000_000, vec![vec![item(&three)]]),
        (10_800_000, vec![vec![item(&three)]]),
        (11_500_000, vec![vec![item(&three)]]),
        (10_200_000, vec![vec![item(&three)], vec![item(&four)]]),
    ] {
        clock.set(at);
        let refs: Vec<&[Item<'_>]> = requests.iter().map(|r| &r[..]).collect();
        let got = rt
            .block_on(bounded(10, store.decide_batch(&refs)))
            .unwrap_or_else(|e| panic!("{e}"));
        for (r, d) in requests.iter().zip(&got) {
            let want = algorithm::transition(r[0].limit, &mut state, at, 1, 0);
            assert_eq!(d[0].allowed, want.allowed, "at {at}");
            assert!(d[0].allowed, "at {at}");
        }
        if at == 11_500_000 {
            let v = stored_value(&rt, &store, &redis_key("back", Algorithm::SlidingLog))
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("no log"));
            let (entries, dead, _) = stored(&v);
            assert_eq!(
                (entries.len(), dead),
                (2, 0),
                "the first entry is kept: {entries:?}"
            );
        }
    }
}
