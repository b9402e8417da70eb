//! The sliding log's stored entries are exactly the Rust transition's state after every decision,
//! and the entries the script leaves dead in place stay few.
//!
//! The script records an admission on a key of one request by rewriting only the log's end
//! (the new or merged entry and the trailer) and leaves the entries that left the window in place,
//! counted as dead in the trailer, until they outweigh a rewrite (`sliding_log.lua`). A wrong
//! offset, dead count or total would only show in a decision much later, so this test compares
//! the stored bytes themselves with `flowgate_core::algorithm::transition` on random schedules:
//! single requests (the in-place write) and batches of requests on the one key (a key the call's
//! requests share: the log made whole in the script); and that the entries it leaves dead stay
//! absent when the clock steps back behind them, also across a rule change between two requests
//! of one call (decided in two calls).

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
    let (kept, dropped) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0u64));
    let result = runner.run(&strategy, |(limit, window, steps)| {
        let case = cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let l = Limit::new(
            Algorithm::SlidingLog,
            Quota::from_micros(limit, window).map_err(|e| TestCaseError::reject(e.to_string()))?,
        )
        .map_err(|e| TestCaseError::reject(e.to_string()))?;
        let key = format!("log:{case}");
        let rk = redis_key(&key, &l);
        clock.set(1_700_000_000_000_000 + case * 7_919);
        let mut state = State::Empty;
        let mut dead_before = 0;
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
                    prop_assert!(dead <= all.len(), "dead {} of {:?}", dead, all);
                    prop_assert_eq!(
                        &all[dead..],
                        &entries.iter().copied().collect::<Vec<_>>()[..]
                    );
                    prop_assert_eq!(total, entries.iter().map(|e| e.1).sum::<u64>());
                    // Dead entries stay within what a rewrite costs (sliding_log.lua).
                    let live = all.len() - dead;
                    prop_assert!(
                        dead * dead <= 4 * live + 150,
                        "{} dead entries beside {} live",
                        dead,
                        live
                    );
                    if dead > dead_before {
                        kept.set(kept.get() + 1);
                    } else if dead < dead_before {
                        dropped.set(dropped.get() + 1);
                    }
                    dead_before = dead;
                }
                (s, v) => prop_assert!(false, "state {s:?}, stored {v:?}"),
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Both paths ran: a test that never took them would assert nothing about them.
    let (kept, dropped) = (kept.get(), dropped.get());
    assert!(kept > 0 && dropped > 0, "kept {kept}, dropped {dropped}");
}

/// A log written in place grows as Redis grows a string (with spare room up to its length); one
/// that reaches its limit is written at its size, so a full log costs its 12 bytes per entry.
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
        let rk = redis_key("full", &l);
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
        // (and the log below its limit did grow in place, with room to spare: else this test
        // would not tell the write at the limit from any other)
        assert!(
            grown > full,
            "90 entries took {grown} bytes, 100 took {full}"
        );
    })
    .await;
}

/// Entries the script left dead count as absent for every reader, across a rule change too,
/// even once Redis's clock steps back behind them (so that they would be inside the window
/// again): the Rust log dropped them, and the scripts must decide as it does.
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
    // 10 s, 10.8 s, then 11.5 s: the first entry has left the window and is left in place,
    // dead, beside a live one; then the clock steps back to 10.2 s, where the dead one would be
    // live again (and the request under 3/s rejected). Two requests of one call under
    // different limits for the key: two calls.
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
            let v = stored_value(&rt, &store, &redis_key("back", &three))
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("no log"));
            assert_eq!(stored(&v).1, 1, "the first entry is not left dead");
        }
    }
}
