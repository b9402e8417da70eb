//! Reservation records' writes and commits coalesced on one Redis (`batch.rs`): while calls are
//! in flight, the writes and commits waiting go together in the next call, each handled as if
//! sent alone — every record written once, every reservation claimed exactly once, the
//! outstanding counts back to nothing, and a commit that cannot be applied failing alone.

mod common;

use std::sync::Arc;

use common::{bounded, hold_writes, live_options, reservation, script_calls, single};
use flowgate_core::algorithm::Amount;
use flowgate_core::reservation::{Claim, Reservation, Reservations};
use flowgate_core::store::{ChargeItem, Store};
use flowgate_core::{Algorithm, Limit};
use flowgate_redis::AtomicCommit;
use flowgate_testkit::redis::RedisServer;
use tokio::time::Duration;

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// How many requests in flight at once: well over the calls in flight (2).
const TASKS: usize = 48;
const KEY: &str = "llm:tokens:api_key=shared";

fn limit() -> Limit {
    ok(Limit::new(Algorithm::FixedWindow, ok("1000000/d".parse())))
}

/// 48 reservations of one key written at once, then each committed twice at once (with its
/// estimate given back and 3 units charged): every write lands, each reservation is claimed
/// exactly once, the key is charged exactly 48 × 3 units, nothing stays outstanding, and the
/// requests shared calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_and_commits_share_calls_and_each_is_applied_once() {
    let server = RedisServer::start();
    bounded(50, async {
        let store = single(&server, live_options().deadline(Duration::from_secs(5))).await;
        let records = store.reservations();
        let limit = Arc::new(limit());
        let now = store.now();
        let all: Vec<Reservation> = (0..TASKS).map(|_| reservation(KEY, 10, now)).collect();
        // The estimates, taken as a decision would have.
        let took: Vec<ChargeItem<'_>> = all
            .iter()
            .map(|_| ChargeItem {
                key: KEY,
                limit: &limit,
                amount: Amount::Charge(10),
            })
            .collect();
        ok(store.charge(&took).await);

        let before = script_calls(&store).await;
        hold_writes(&server, 300);
        let mut puts = tokio::task::JoinSet::new();
        for r in all.clone() {
            let records = records.clone();
            puts.spawn(async move { records.put(&r, r.expires + 60_000_000).await });
        }
        while let Some(put) = puts.join_next().await {
            ok(ok(put));
        }
        let writes = script_calls(&store).await - before;
        assert!(
            writes < TASKS as u64 / 2,
            "{TASKS} writes took {writes} calls: not coalesced"
        );
        let out = ok(records.outstanding().await);
        assert_eq!(
            (out[0].count, out[0].units),
            (TASKS as u64, 10 * TASKS as u64)
        );

        let before = script_calls(&store).await;
        hold_writes(&server, 300);
        let mut commits = tokio::task::JoinSet::new();
        for r in all.iter().chain(all.iter()) {
            let (records, limit, r) = (records.clone(), limit.clone(), r.clone());
            commits.spawn(async move {
                let read = Claim::Open {
                    reservation: r,
                    expired: false,
                };
                let items = [
                    ChargeItem {
                        key: KEY,
                        limit: &limit,
                        amount: Amount::release(10, now),
                    },
                    ChargeItem {
                        key: KEY,
                        limit: &limit,
                        amount: Amount::Charge(3),
                    },
                ];
                records.commit(&read, now, &items).await
            });
        }
        let (mut done, mut refused) = (0, 0);
        while let Some(c) = commits.join_next().await {
            match ok(ok(c)) {
                AtomicCommit::Done { charges, .. } => {
                    assert_eq!((charges[0].applied, charges[1].applied), (10, 3));
                    done += 1;
                }
                AtomicCommit::Changed(Claim::Committed) => refused += 1,
                other => panic!("{other:?}"),
            }
        }
        let calls = script_calls(&store).await - before;
        assert_eq!((done, refused), (TASKS, TASKS), "each claimed exactly once");
        assert!(
            calls < TASKS as u64,
            "{} commits took {calls} calls: not coalesced",
            2 * TASKS
        );
        assert!(
            ok(records.outstanding().await).is_empty(),
            "outstanding left"
        );
        // The key holds exactly the charges: 3 units per reservation.
        let zero = [ChargeItem {
            key: KEY,
            limit: &limit,
            amount: Amount::Charge(0),
        }];
        let left = ok(store.charge(&zero).await)[0].decision.remaining;
        assert_eq!(left, 1_000_000 - 3 * TASKS as u64);
    })
    .await;
}

/// A commit whose record cannot be read (its key holds no record) fails alone: the commits
/// coalesced into the same call with it are applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coalesced_commit_that_cannot_be_applied_fails_alone() {
    let server = RedisServer::start();
    bounded(50, async {
        let store = single(&server, live_options().deadline(Duration::from_secs(5))).await;
        let records = store.reservations();
        let limit = Arc::new(limit());
        let now = store.now();
        let good: Vec<Reservation> = (0..TASKS).map(|_| reservation(KEY, 10, now)).collect();
        for r in &good {
            ok(records.put(r, r.expires + 60_000_000).await);
        }
        // Its record's key holds a string that is no record: reading it fails.
        let bad = reservation(KEY, 10, now);
        ok(store
            .query(
                redis::cmd("SET")
                    .arg(format!("{{flowgate:res}}:r:{}", bad.id))
                    .arg("x"),
            )
            .await);

        let before = script_calls(&store).await;
        hold_writes(&server, 300);
        let mut commits = tokio::task::JoinSet::new();
        for (i, r) in good.iter().chain([&bad]).enumerate() {
            let (records, limit, r) = (records.clone(), limit.clone(), r.clone());
            commits.spawn(async move {
                // The bad one in the middle of the others.
                if i == TASKS {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let read = Claim::Open {
                    reservation: r.clone(),
                    expired: false,
                };
                let items = [ChargeItem {
                    key: KEY,
                    limit: &limit,
                    amount: Amount::Charge(1),
                }];
                (r.id, records.commit(&read, now, &items).await)
            });
        }
        let mut done = 0;
        while let Some(c) = commits.join_next().await {
            let (id, answer) = ok(c);
            match answer {
                Ok(AtomicCommit::Done { .. }) => done += 1,
                Err(e) if id == bad.id => {
                    assert!(e.to_string().contains("not a reservation record"), "{e}");
                }
                other => panic!("{id}: {other:?}"),
            }
        }
        let calls = script_calls(&store).await - before;
        assert_eq!(done, TASKS, "a bad commit failed the others");
        assert!(calls < TASKS as u64 / 2, "not coalesced: {calls} calls");
        assert!(ok(records.outstanding().await).is_empty());
    })
    .await;
}
