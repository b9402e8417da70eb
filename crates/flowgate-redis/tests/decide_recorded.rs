//! A reservation's record written with the decision that takes its units
//! (`Store::decide_recorded`, `decide.lua` with `records.lua`): on a single Redis, one script
//! call decides and writes the record; a refused request writes none; decisions in flight at
//! once share calls, each record written only with its own request's admission; a record that
//! cannot be written fails alone and says so.

mod common;

use common::{bounded, hold_writes, live_options, reservation, script_calls, single};
use flowgate_core::reservation::{Claim, Reservation, Reservations};
use flowgate_core::store::{Item, Store};
use flowgate_core::{Algorithm, Limit};
use flowgate_redis::RedisStore;
use flowgate_testkit::redis::RedisServer;
use tokio::time::Duration;

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

const KEY: &str = "llm:tokens:api_key=k1";
/// Units per reservation: the limit (100 a day) holds ten.
const ESTIMATE: u64 = 10;

fn limit() -> Limit {
    ok(Limit::new(Algorithm::FixedWindow, ok("100/d".parse())))
}

/// Decides one reservation of `KEY` with its record; answers whether it was written.
async fn reserve(store: &RedisStore, limit: &Limit, r: &Reservation) -> (bool, bool) {
    let items = [Item {
        key: KEY,
        limit,
        cost: ESTIMATE,
        enforce: true,
    }];
    let (d, written) = ok(store
        .decide_recorded(&items, r, r.expires + 60_000_000)
        .await);
    (d[0].allowed, written)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_decides_and_writes_the_record_only_when_admitted() {
    let server = RedisServer::start();
    bounded(50, async {
        let store = single(&server, live_options().deadline(Duration::from_secs(5))).await;
        let records = store.reservations();
        let limit = limit();
        let now = store.now();
        // The script loaded first (a fresh Redis answers the first EVALSHA with NOSCRIPT).
        let warm = [Item {
            key: "llm:tokens:api_key=other",
            limit: &limit,
            cost: 0,
            enforce: true,
        }];
        ok(store.decide(&warm).await);
        let first = reservation(KEY, ESTIMATE, now);
        let before = script_calls(&store).await;
        assert_eq!(reserve(&store, &limit, &first).await, (true, true));
        assert_eq!(script_calls(&store).await - before, 1, "one call");
        let out = ok(records.outstanding().await);
        assert_eq!((out[0].count, out[0].units), (1, ESTIMATE));
        match ok(records.peek(&first.id, now).await) {
            Claim::Open { reservation, .. } => assert_eq!(reservation, first),
            other => panic!("{other:?}"),
        }
        // Nine more fill the limit; the eleventh is refused and leaves no record.
        for _ in 0..9 {
            assert_eq!(
                reserve(&store, &limit, &reservation(KEY, ESTIMATE, now)).await,
                (true, true)
            );
        }
        let refused = reservation(KEY, ESTIMATE, now);
        assert_eq!(reserve(&store, &limit, &refused).await, (false, false));
        assert_eq!(ok(records.peek(&refused.id, now).await), Claim::Unknown);
        let out = ok(records.outstanding().await);
        assert_eq!((out[0].count, out[0].units), (10, 10 * ESTIMATE));
    })
    .await;
}

/// 48 reservations decided at once against a limit that holds ten: exactly the ten admitted
/// have records, in fewer calls than requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_decisions_write_exactly_the_admitted_records() {
    const TASKS: usize = 48;
    let server = RedisServer::start();
    bounded(50, async {
        let store = single(&server, live_options().deadline(Duration::from_secs(5))).await;
        let records = store.reservations();
        let now = store.now();
        let before = script_calls(&store).await;
        // Redis holds writes meanwhile, so the decisions wait behind those in flight and share
        // calls.
        hold_writes(&server, 300);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..TASKS {
            let store = store.clone();
            tasks.spawn(async move {
                let r = reservation(KEY, ESTIMATE, now);
                let (admitted, written) = reserve(&store, &limit(), &r).await;
                (r.id, admitted, written)
            });
        }
        let mut admitted_ids = Vec::new();
        let mut refused_ids = Vec::new();
        while let Some(t) = tasks.join_next().await {
            let (id, admitted, written) = ok(t);
            assert_eq!(
                admitted, written,
                "a record is written exactly with its admission"
            );
            if admitted {
                admitted_ids.push(id);
            } else {
                refused_ids.push(id);
            }
        }
        let calls = script_calls(&store).await - before;
        assert!(calls < TASKS as u64 / 2, "{TASKS} took {calls} calls");
        assert_eq!(admitted_ids.len(), 10);
        for id in &admitted_ids {
            assert!(matches!(
                ok(records.peek(id, now).await),
                Claim::Open { .. }
            ));
        }
        for id in &refused_ids {
            assert_eq!(ok(records.peek(id, now).await), Claim::Unknown);
        }
        let out = ok(records.outstanding().await);
        assert_eq!((out[0].count, out[0].units), (10, 10 * ESTIMATE));
    })
    .await;
}

/// A record whose key holds something already (another program's key: the write refuses it) is
/// not written and says so; the decision stands, and a record decided in the same call is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_cannot_be_written_fails_alone() {
    let server = RedisServer::start();
    bounded(50, async {
        let store = single(&server, live_options().deadline(Duration::from_secs(5))).await;
        let records = store.reservations();
        let now = store.now();
        let bad = reservation(KEY, ESTIMATE, now);
        ok(store
            .query(
                redis::cmd("SET")
                    .arg(format!("{{flowgate:res}}:r:{}", bad.id))
                    .arg("not a record"),
            )
            .await);
        let good = reservation(KEY, ESTIMATE, now);
        hold_writes(&server, 200);
        let limit = limit();
        let (a, b) = tokio::join!(
            reserve(&store, &limit, &bad),
            reserve(&store, &limit, &good)
        );
        assert_eq!(a, (true, false), "admitted, not recorded");
        assert_eq!(b, (true, true));
        assert!(matches!(
            ok(records.peek(&good.id, now).await),
            Claim::Open { .. }
        ));
        let out = ok(records.outstanding().await);
        assert_eq!((out[0].count, out[0].units), (1, ESTIMATE));
    })
    .await;
}
