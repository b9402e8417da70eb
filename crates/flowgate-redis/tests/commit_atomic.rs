//! Commits on one Redis in one script call (`commit.lua`): a reservation's claim and its
//! release and charge are applied together or not at all, even when the call's answer is lost; a
//! record changed since it was read (released by a sweeper, committed) is left as it is.

mod common;

use common::{bounded, live_options, reservation, single};
use flowgate_core::algorithm::Amount;
use flowgate_core::reservation::{Claim, ReservationId, Reservations, Reserved};
use flowgate_core::store::ChargeItem;
use flowgate_core::{Algorithm, Limit};
use flowgate_redis::keys::redis_key;
use flowgate_redis::{AtomicCommit, RedisReservations, RedisStore};
use flowgate_testkit::redis::RedisServer;
use tokio::time::{Duration, Instant};

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn limit() -> Limit {
    ok(Limit::new(Algorithm::TokenBucket, ok("100/m".parse())))
}

/// Whether `key`'s state exists under `limit` (a charge on a fresh key writes one).
async fn has_state(store: &RedisStore, key: &str, limit: &Limit) -> bool {
    let v = ok(store
        .query(redis::cmd("EXISTS").arg(redis_key(key, limit)))
        .await);
    v == redis::Value::Int(1)
}

/// Polls the record until it is no longer open, or 10 s pass.
async fn settled(records: &RedisReservations, id: &ReservationId, now: u64) -> Claim {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let c = ok(records.peek(id, now).await);
        if !matches!(c, Claim::Open { .. }) || Instant::now() > until {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_answer_is_lost_is_applied_whole() {
    let server = RedisServer::start();
    bounded(50, async {
        let options = live_options().deadline(Duration::from_millis(500));
        let store = single(&server, options).await;
        let records = store.reservations();
        assert!(records.commits_atomically());
        let (key, limit) = ("llm:tokens:api_key=lost", limit());
        let now = store.now();
        // One commit first, so that Redis holds the script: the lost call is then the script
        // itself (`EVALSHA`), run when Redis thaws, not a load it would have to retry.
        let warm = reservation("llm:tokens:api_key=warm", 10, now);
        ok(records.put(&warm, warm.expires + 60_000_000).await);
        let read = ok(records.peek(&warm.id, now).await);
        let done = ok(records.commit(&read, now, &[]).await);
        assert!(matches!(done, AtomicCommit::Done { .. }), "{done:?}");
        let r = reservation(key, 10, now);
        ok(records.put(&r, r.expires + 60_000_000).await);
        let read = ok(records.peek(&r.id, now).await);
        let items = [
            ChargeItem {
                key,
                limit: &limit,
                amount: Amount::release(10, now),
            },
            ChargeItem {
                key,
                limit: &limit,
                amount: Amount::Charge(30),
            },
        ];
        // Redis frozen: the call is sent, the answer never comes in time; Redis runs it
        // when it thaws.
        server.pause();
        let lost = records.commit(&read, now, &items).await;
        server.resume();
        assert!(lost.is_err(), "a frozen Redis answered: {lost:?}");
        let after = settled(&records, &r.id, now).await;
        // Redis ran the call when it thawed: the record is committed, and so are its charges.
        assert_eq!(after, Claim::Committed, "the lost call never ran");
        assert!(
            has_state(&store, key, &limit).await,
            "claimed, but its charges were lost"
        );
        assert!(ok(records.outstanding().await).is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_of_a_record_changed_since_read_does_nothing_then_commits_as_it_is() {
    let server = RedisServer::start();
    bounded(50, async {
        let store = single(&server, live_options()).await;
        let records = store.reservations();
        let (key, limit) = ("llm:tokens:api_key=swept", limit());
        let now = store.now();
        let r = reservation(key, 10, now);
        ok(records.put(&r, r.expires + 60_000_000).await);
        let stale = ok(records.peek(&r.id, now).await);
        // A sweeper releases it after the read.
        let late = r.expires + 1;
        assert_eq!(ok(records.expire(late, 10).await), vec![r.clone()]);
        let release_and_charge = [
            ChargeItem {
                key,
                limit: &limit,
                amount: Amount::release(10, now),
            },
            ChargeItem {
                key,
                limit: &limit,
                amount: Amount::Charge(30),
            },
        ];
        let answer = ok(records.commit(&stale, late, &release_and_charge).await);
        let AtomicCommit::Changed(read) = answer else {
            panic!("a stale read committed: {answer:?}");
        };
        assert_eq!(read, Claim::Released(r.clone()));
        assert!(!has_state(&store, key, &limit).await, "nothing applied");
        let charge = [ChargeItem {
            key,
            limit: &limit,
            amount: Amount::Charge(30),
        }];
        match ok(records.commit(&read, late, &charge).await) {
            AtomicCommit::Done { expired, charges } => {
                assert!(expired);
                assert_eq!(charges[0].applied, 30);
            }
            other => panic!("not committed: {other:?}"),
        }
        assert!(has_state(&store, key, &limit).await);
        assert!(matches!(
            ok(records.commit(&read, late, &charge).await),
            AtomicCommit::Changed(Claim::Committed)
        ));
    })
    .await;
}

/// A reservation under three rules (three labels: the commit reads the first with the record's
/// phase, the others apart): its commit takes each out of the outstanding counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_of_a_reservation_under_several_rules_ends_each_outstanding_count() {
    let server = RedisServer::start();
    bounded(50, async {
        let store = single(&server, live_options().deadline(Duration::from_secs(5))).await;
        let records = store.reservations();
        let now = store.now();
        let mut r = reservation("llm:tokens:api_key=a", 10, now);
        for (i, rule) in ["per-user", "per-org"].into_iter().enumerate() {
            r.items.push(Reserved {
                key: format!("llm:{rule}:id={i}"),
                domain: "llm".into(),
                rule: rule.into(),
                estimate: 10 + i as u64,
                taken: now,
            });
        }
        // A second, open, under one of them: its count stays.
        let other = reservation("llm:tokens:api_key=b", 10, now);
        ok(records.put(&r, r.expires + 60_000_000).await);
        ok(records.put(&other, other.expires + 60_000_000).await);
        let mut out = ok(records.outstanding().await);
        out.sort_by(|a, b| a.rule.cmp(&b.rule));
        let counts: Vec<_> = out
            .iter()
            .map(|o| (o.rule.as_str(), o.count, o.units))
            .collect();
        assert_eq!(
            counts,
            [("per-org", 1, 11), ("per-user", 1, 10), ("tokens", 2, 20)]
        );
        let read = ok(records.peek(&r.id, now).await);
        let done = ok(records.commit(&read, now, &[]).await);
        assert!(matches!(done, AtomicCommit::Done { .. }), "{done:?}");
        let out = ok(records.outstanding().await);
        let counts: Vec<_> = out
            .iter()
            .map(|o| (o.rule.as_str(), o.count, o.units))
            .collect();
        assert_eq!(counts, [("tokens", 1, 10)]);
    })
    .await;
}
