//! Reservation records: the same scenario on the memory records, on one Redis and on a Redis
//! Cluster (records and index in one slot); and on Redis, claims and expiries racing from many
//! callers each taken exactly once.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{bounded, live_options, single};
use flowgate_core::reservation::{
    Claim, MemoryReservations, Outstanding, Reservation, ReservationId, Reservations, Reserved,
};
use flowgate_testkit::redis::{RedisCluster, RedisServer};

fn reservation(expires: u64, estimate: u64, rule: &str) -> Reservation {
    Reservation {
        id: ReservationId::random().unwrap_or_else(|e| panic!("{e}")),
        items: vec![Reserved {
            key: format!("llm:{rule}:api_key=a"),
            domain: "llm".into(),
            rule: rule.into(),
            estimate,
            taken: expires - 10,
        }],
        expires,
    }
}

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// Every claim and expiry answer, on records that hold none of these ids yet. Instants far
/// ahead of any real clock: the Redis records expire (are forgotten) on Redis's own.
async fn scenario(r: &impl Reservations) {
    let base = flowgate_core::clock::system_now() + 3_600_000_000;
    let (a, b, c) = (
        reservation(base + 100, 3, "t1"),
        reservation(base + 300, 4, "t1"),
        reservation(base + 500, 5, "t2"),
    );
    for x in [&a, &b, &c] {
        ok(r.put(x, x.expires + 1_000_000).await);
    }
    let out = ok(r.outstanding().await);
    let of = |o: &[Outstanding], rule: &str| {
        o.iter()
            .find(|o| o.rule == rule)
            .map(|o| (o.count, o.units))
    };
    assert_eq!(of(&out, "t1"), Some((2, 7)));
    assert_eq!(of(&out, "t2"), Some((1, 5)));
    // Expiry releases each once, oldest first, up to `max`.
    assert!(
        ok(r.expire(base + 99, 10).await)
            .iter()
            .all(|x| x.id != a.id)
    );
    let expired = ok(r.expire(base + 300, 1).await);
    assert_eq!(expired, vec![a.clone()]);
    let expired = ok(r.expire(base + 300, 10).await);
    assert_eq!(expired, vec![b.clone()]);
    assert!(
        ok(r.expire(base + 300, 10).await)
            .iter()
            .all(|x| x.id != a.id && x.id != b.id)
    );
    assert_eq!(of(&ok(r.outstanding().await), "t1"), None);
    // A released one's commit only charges; an open one past its expiry is still open.
    assert_eq!(
        ok(r.claim(&a.id, base + 301).await),
        Claim::Released(a.clone())
    );
    assert_eq!(ok(r.claim(&a.id, base + 302).await), Claim::Committed);
    let open = ok(r.claim(&c.id, base + 600).await);
    assert_eq!(
        open,
        Claim::Open {
            reservation: c.clone(),
            expired: true
        }
    );
    assert_eq!(of(&ok(r.outstanding().await), "t2"), None);
    // A claim undone (its commit failed) holds the units again, and can be claimed again.
    ok(r.unclaim(&open).await);
    assert_eq!(of(&ok(r.outstanding().await), "t2"), Some((1, 5)));
    assert_eq!(ok(r.claim(&c.id, base + 600).await), open);
    let unknown = ok(ReservationId::random());
    assert_eq!(ok(r.claim(&unknown, base).await), Claim::Unknown);

    // A put that failed is cancelled: an open record is ended (its units the caller's to give
    // back, once), a missing one can no longer be written, a released one is left alone.
    let (d, e, f) = (
        reservation(base + 100, 6, "t3"),
        reservation(base + 100, 7, "t3"),
        reservation(base + 100, 8, "t3"),
    );
    ok(r.put(&d, base + 1_000_000).await);
    assert!(ok(r.cancel(&d, base + 1_000_000).await));
    assert_eq!(of(&ok(r.outstanding().await), "t3"), None);
    assert_eq!(ok(r.claim(&d.id, base + 50).await), Claim::Committed);
    assert!(ok(r.cancel(&e, base + 1_000_000).await));
    assert!(
        r.put(&e, base + 1_000_000).await.is_err(),
        "a late put fails"
    );
    assert_eq!(ok(r.claim(&e.id, base + 50).await), Claim::Committed);
    ok(r.put(&f, base + 1_000_000).await);
    assert_eq!(ok(r.expire(base + 100, 10).await), vec![f.clone()]);
    assert!(
        !ok(r.cancel(&f, base + 1_000_000).await),
        "released already"
    );
    assert_eq!(
        ok(r.claim(&f.id, base + 150).await),
        Claim::Released(f.clone())
    );
    assert!(
        ok(r.expire(base + 10_000, 10).await)
            .iter()
            .all(|x| x.id != d.id && x.id != e.id),
        "what a cancel ended is never released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_store_answers_alike() {
    scenario(&MemoryReservations::new()).await;
    let server = RedisServer::start();
    let cluster = RedisCluster::start(3);
    bounded(60, async {
        scenario(&single(&server, live_options()).await.reservations()).await;
        let on_cluster = common::cluster(&cluster, live_options())
            .await
            .reservations();
        // A cluster's records and state keys are in different slots: claim, then charge.
        assert!(!on_cluster.commits_atomically());
        scenario(&on_cluster).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_each_reservation_is_claimed_once_by_its_commit_or_one_sweeper() {
    let server = RedisServer::start();
    bounded(60, async {
        let nodes = [
            single(&server, live_options()).await.reservations(),
            single(&server, live_options()).await.reservations(),
        ];
        let now = flowgate_core::clock::system_now();
        let all: Vec<Reservation> = (0..200)
            .map(|i| reservation(now + 1000 + i, 1, "t"))
            .collect();
        for r in &all {
            ok(nodes[0].put(r, now + 60_000_000).await);
        }
        // Half are committed, by 8 callers each on both nodes, while both sweep the rest.
        let opened = Arc::new(AtomicUsize::new(0));
        let released = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for caller in 0..8 {
            let node = nodes[caller % 2].clone();
            let ids: Vec<ReservationId> = all.iter().step_by(2).map(|r| r.id.clone()).collect();
            let opened = Arc::clone(&opened);
            tasks.push(tokio::spawn(async move {
                for id in ids {
                    if let Claim::Open { .. } = ok(node.claim(&id, now).await) {
                        opened.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for node in &nodes {
            let node = node.clone();
            let released = Arc::clone(&released);
            tasks.push(tokio::spawn(async move {
                for _ in 0..20 {
                    let n = ok(node.expire(now + 10_000, 7).await).len();
                    released.fetch_add(n, Ordering::Relaxed);
                }
            }));
        }
        for t in tasks {
            ok(t.await);
        }
        let more = ok(nodes[1].expire(now + 10_000, 1000).await).len();
        let (opened, released) = (
            opened.load(Ordering::Relaxed),
            released.load(Ordering::Relaxed) + more,
        );
        assert_eq!(
            opened + released,
            200,
            "opened {opened}, released {released}"
        );
        assert!(ok(nodes[0].outstanding().await).is_empty());
    })
    .await;
}

/// Index entries an earlier version left (a member that is an id alone, over a record that is a
/// hash) or another program's key under a record's name leave the index when they expire, and
/// the sweep goes on: the reservations beside them are released, and nothing is read as a
/// record that is not one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_drops_what_is_no_record_and_goes_on() {
    let server = RedisServer::start();
    bounded(60, async {
        let store = single(&server, live_options()).await;
        let records = store.reservations();
        let now = flowgate_core::clock::system_now();
        let (old, foreign) = (ok(ReservationId::random()), ok(ReservationId::random()));
        let commands = [
            redis::cmd("HSET")
                .arg(format!("{{flowgate:res}}:r:{old}"))
                .arg("s")
                .arg("o")
                .clone(),
            redis::cmd("ZADD")
                .arg("{flowgate:res}:expiry")
                .arg(now + 100)
                .arg(old.as_str())
                .clone(),
            redis::cmd("ZADD")
                .arg("{flowgate:res}:expiry")
                .arg(now + 150)
                .arg(format!("{old}\u{1e}x"))
                .clone(),
            redis::cmd("SET")
                .arg(format!("{{flowgate:res}}:r:{foreign}"))
                .arg("ok")
                .clone(),
            redis::cmd("ZADD")
                .arg("{flowgate:res}:expiry")
                .arg(now + 200)
                .arg(format!("{foreign}\u{1e}x"))
                .clone(),
        ];
        for c in &commands {
            ok(store.query(c).await);
        }
        let good = reservation(now + 300, 2, "t");
        ok(records.put(&good, now + 60_000_000).await);
        assert_eq!(ok(records.expire(now + 1000, 10).await), vec![good.clone()]);
        assert!(ok(records.outstanding().await).is_empty());
        let foreign_value = ok(store
            .query(redis::cmd("GET").arg(format!("{{flowgate:res}}:r:{foreign}")))
            .await);
        assert_eq!(foreign_value, redis::Value::BulkString(b"ok".to_vec()));
    })
    .await;
}
