//! `Limiter::check_recorded` on a real redis-server: an admitted reservation's record is
//! written with its decision, holding exactly what the decision took; a refused one writes
//! none; a request the store's one decision cannot answer for whole (a shadow rule that may
//! refuse while the request goes ahead, circuit breakers that may refuse after the store
//! admitted) is decided as `check` does and leaves the record to the caller.

use std::time::Duration;

use flowgate::breakers::{BreakerDef, BreakerSet, BreakerSpec, Strategy};
use flowgate::records::{Claim, ReservationId, Reservations, Reserved};
use flowgate::{
    Algorithm, Descriptor, Limit, Limiter, Matcher, PendingRecord, Quota, RedisOptions, RedisStore,
    Request, Rule, RuleSet,
};
use flowgate_testkit::redis::RedisServer;

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// `tokens` (100 a minute per key) and a shadow rule on `user`.
fn rules() -> RuleSet {
    let limit = |q: &str| ok(Limit::new(Algorithm::FixedWindow, ok(q.parse::<Quota>())));
    let mut shadow = Rule::new(
        "llm",
        "users",
        vec![Matcher::parse("user")],
        Some(limit("1/m")),
    );
    shadow.shadow = true;
    ok(RuleSet::new(vec![
        Rule::new(
            "llm",
            "tokens",
            vec![Matcher::parse("key")],
            Some(limit("100/m")),
        ),
        shadow,
    ]))
}

fn request(pairs: &[(&str, &str)], cost: u64) -> Request {
    Request::new(
        "llm",
        pairs
            .iter()
            .map(|&(k, v)| Descriptor::new([(k, v)]))
            .collect(),
    )
    .with_cost(cost)
}

fn pending(now: u64) -> PendingRecord {
    PendingRecord {
        id: ok(ReservationId::random()),
        expires: now + 60_000_000,
        forget_at: now + 120_000_000,
        taken: now,
    }
}

/// A Redis, a store on it, and a limiter of [`rules`] on that store.
async fn setup() -> (RedisServer, RedisStore, Limiter<RedisStore>) {
    let server = RedisServer::start();
    let options = RedisOptions::default().deadline(Duration::from_secs(5));
    let store = ok(RedisStore::connect_with(&server.url(), options).await);
    let limiter = Limiter::new(rules(), store.clone());
    (server, store, limiter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admitted_reservation_is_recorded_with_its_decision_and_a_refused_one_is_not() {
    let (_server, store, limiter) = setup().await;
    let records = store.reservations();
    let now = store.now();

    let p = pending(now);
    let (verdict, record) = limiter
        .check_recorded(&request(&[("key", "k1")], 60), &p)
        .await;
    assert!(verdict.allowed);
    let record = record.expect("recorded with the decision");
    assert_eq!(
        record.items,
        vec![Reserved {
            key: verdict.statuses[0].key.clone(),
            domain: "llm".into(),
            rule: "tokens".into(),
            estimate: 60,
            taken: now,
        }]
    );
    match ok(records.claim(&p.id, now).await) {
        Claim::Open { reservation, .. } => assert_eq!(reservation, record),
        other => panic!("{other:?}"),
    }

    // 40 left: a reservation of 60 is refused and leaves no record.
    let p = pending(now);
    let (verdict, record) = limiter
        .check_recorded(&request(&[("key", "k1")], 60), &p)
        .await;
    assert!(!verdict.allowed);
    assert!(record.is_none());
    assert_eq!(ok(records.claim(&p.id, now).await), Claim::Unknown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_rules_and_breakers_leave_the_record_to_the_caller() {
    let (_server, store, limiter) = setup().await;
    let records = store.reservations();
    let now = store.now();

    // The shadow rule refuses (1 a minute, 5 asked) while the request goes ahead.
    let p = pending(now);
    let (verdict, record) = limiter
        .check_recorded(&request(&[("key", "k2"), ("user", "u")], 5), &p)
        .await;
    assert!(verdict.allowed);
    assert!(
        !verdict.statuses[1].decision.allowed,
        "the shadow rule refused"
    );
    assert!(record.is_none(), "not recorded with the decision");
    assert_eq!(ok(records.claim(&p.id, now).await), Claim::Unknown);

    let spec = ok(BreakerSpec::new(
        Strategy::ErrorRatio,
        0.5,
        10_000_000,
        4,
        1_000_000,
        1,
        2_000_000,
    ));
    let breakers = BreakerSet::new(vec![BreakerDef::new(
        "llm",
        "keys",
        vec![Matcher::parse("key")],
        spec,
    )]);
    limiter.breakers().set(ok(breakers));
    let p = pending(now);
    let (verdict, record) = limiter
        .check_recorded(&request(&[("key", "k3")], 5), &p)
        .await;
    assert!(verdict.allowed);
    assert!(record.is_none(), "breakers: recorded apart");
    assert_eq!(ok(records.claim(&p.id, now).await), Claim::Unknown);
}
