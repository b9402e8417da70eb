//! The blocked-keys cache: a key that rejected with a retry_after is rejected in-process until
//! then, without a round trip; bounded, counted, clearable, and never used for concurrency or
//! shadow items.

mod common;

use std::time::Duration;

use common::TEST_DEADLINE;
use flowgate_core::{Algorithm, Item, Limit, ManualClock, Quota, Store};
use flowgate_redis::{RedisOptions, RedisStore};
use flowgate_testkit::redis::RedisServer;

fn item<'a>(key: &'a str, limit: &'a Limit, cost: u64) -> Item<'a> {
    Item {
        key,
        limit,
        cost,
        enforce: true,
    }
}

async fn store(server: &RedisServer, clock: &ManualClock, capacity: usize) -> RedisStore {
    RedisStore::connect_with(
        &server.url(),
        RedisOptions::default()
            .deadline(TEST_DEADLINE)
            .clock_override(clock.clone())
            .blocked_capacity(capacity),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejects_without_a_round_trip_until_retry_after() {
    let server = RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_250_000);
    let s = store(&server, &clock, 100).await;
    let l = Limit::new(
        Algorithm::SlidingLog,
        Quota::per_second(2).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let other = Limit::new(
        Algorithm::FixedWindow,
        Quota::per_second(100).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..2 {
        assert!(
            s.decide(&[item("k", &l, 1)])
                .await
                .unwrap_or_else(|e| panic!("{e}"))[0]
                .allowed
        );
    }
    let d = s
        .decide(&[item("k", &l, 1)])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d[0].retry_after, Some(Duration::from_secs(1)));
    let calls = s.stats().script_calls;

    clock.advance(Duration::from_millis(400));
    let d = s
        .decide(&[item("other", &other, 1), item("k", &l, 1)])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!d[1].allowed);
    assert_eq!(d[1].retry_after, Some(Duration::from_millis(600)));
    assert!(
        d[0].allowed && d[0].remaining == 100,
        "not evaluated: {:?}",
        d[0]
    );
    assert_eq!(s.stats().script_calls, calls, "no round trip");
    assert_eq!(s.stats().blocked_hits, 1);
    // Peeks are never short-circuited, and the other item was not charged.
    let peek = s
        .decide(&[item("other", &other, 0)])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(peek[0].remaining, 100);

    clock.advance(Duration::from_millis(600));
    assert!(
        s.decide(&[item("k", &l, 1)])
            .await
            .unwrap_or_else(|e| panic!("{e}"))[0]
            .allowed
    );

    // clear_blocked forgets everything.
    let _ = s.decide(&[item("k", &l, 1)]).await;
    let _ = s.decide(&[item("k", &l, 1)]).await;
    assert_eq!(s.stats().blocked_keys, 1);
    s.clear_blocked();
    assert_eq!(s.stats().blocked_keys, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_and_off_for_concurrency_and_shadow() {
    let server = RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let s = store(&server, &clock, 2).await;
    let l = Limit::new(
        Algorithm::FixedWindow,
        Quota::per_second(0).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let one = Limit::new(
        Algorithm::TokenBucket,
        Quota::per_second(1).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // An impossible rejection (no retry_after) is not cached.
    let _ = s.decide(&[item("zero", &l, 1)]).await;
    assert_eq!(s.stats().blocked_keys, 0);
    for k in ["a", "b", "c"] {
        let _ = s.decide(&[item(k, &one, 1)]).await;
        let _ = s.decide(&[item(k, &one, 1)]).await;
    }
    let st = s.stats();
    assert_eq!(st.blocked_keys, 2, "{st:?}");
    assert_eq!(st.blocked_full, 1, "{st:?}");

    let c = Limit::new(
        Algorithm::Concurrency,
        Quota::per_second(1).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let d = s
        .decide(&[item("conc", &c, 1)])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let lease = d[0].lease.unwrap_or_else(|| panic!("a lease"));
    assert!(
        !s.decide(&[item("conc", &c, 1)])
            .await
            .unwrap_or_else(|e| panic!("{e}"))[0]
            .allowed
    );
    assert!(
        s.release("conc", &c, lease)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    assert!(
        s.decide(&[item("conc", &c, 1)])
            .await
            .unwrap_or_else(|e| panic!("{e}"))[0]
            .allowed,
        "a released lease frees the key at once: concurrency is never cached"
    );
}

/// With the cache off, nothing is short-circuited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_be_turned_off() {
    let server = RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let s = store(&server, &clock, 0).await;
    let one = Limit::new(
        Algorithm::TokenBucket,
        Quota::per_second(1).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..3 {
        let _ = s.decide(&[item("a", &one, 1)]).await;
    }
    assert_eq!(s.stats().blocked_hits, 0);
    assert_eq!(s.stats().script_calls, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_reported_here_unblocks_its_key() {
    use flowgate_core::ChargeItem;
    use flowgate_core::algorithm::Amount;
    let server = RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let s = store(&server, &clock, 100).await;
    let l = Limit::new(
        Algorithm::FixedWindow,
        Quota::per_second(2).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let decide = async |cost| {
        s.decide(&[item("k", &l, cost)])
            .await
            .unwrap_or_else(|e| panic!("{e}"))[0]
            .allowed
    };
    assert!(decide(2).await);
    assert!(!decide(1).await);
    assert_eq!(s.stats().blocked_keys, 1);
    let refund = ChargeItem {
        key: "k",
        limit: &l,
        amount: Amount::Refund(1),
    };
    let r = s.charge(&[refund]).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r[0].applied, 1);
    assert_eq!(s.stats().blocked_keys, 0);
    assert!(
        decide(1).await,
        "admitted at once, not at the cached instant"
    );
}
