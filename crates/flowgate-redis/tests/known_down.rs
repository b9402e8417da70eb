//! Failing fast while Redis is known down: after `down_after` consecutive failed calls (a
//! stopped `redis-server`, or one paused with `CLIENT PAUSE` so that calls time out), decisions
//! and releases answer at once as unavailable without a round trip; a probe finds Redis back
//! without any decision, and the first decision after that is Redis's (exact).

mod common;

use std::time::Duration;

use common::{bounded, single};
use flowgate_core::{Algorithm, Item, Limit, Quota, Store, StoreError};
use flowgate_redis::{RedisOptions, RedisStore};
use flowgate_testkit::redis::RedisServer;
use tokio::time::Instant;

fn limit(per_minute: u64) -> Limit {
    Limit::new(
        Algorithm::FixedWindow,
        format!("{per_minute}/1m")
            .parse::<Quota>()
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn decide(store: &RedisStore, key: &str, limit: &Limit) -> Result<bool, StoreError> {
    store
        .decide(&[Item {
            key,
            limit,
            cost: 1,
            enforce: true,
        }])
        .await
        .map(|d| d[0].allowed)
}

/// Waits until `f` holds, polling every 10 ms, for at most 10 s.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what}: not within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn options(deadline: Duration) -> RedisOptions {
    RedisOptions::default()
        .deadline(deadline)
        .blocked_capacity(0)
        .coalesce(false)
        .down_after(3)
        .probe_every(Duration::from_millis(20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_redis_is_known_down_after_three_failures_and_found_back_by_the_probe() {
    bounded(60, async {
        let mut server = RedisServer::start();
        let store = single(&server, options(Duration::from_secs(2))).await;
        let l = limit(2);
        assert_eq!(decide(&store, "before", &l).await, Ok(true));

        server.stop();
        // (The count of three is health.rs's unit test: a clock read in the background may
        // count as one of them here.)
        for _ in 1..=3 {
            assert!(decide(&store, "k", &l).await.is_err());
        }
        assert!(store.health().down);
        let h = store.health();
        assert!(h.down_since.is_some(), "{h:?}");
        assert!(h.last_error.is_some(), "{h:?}");
        assert!(store.is_degraded());
        let calls = store.stats().script_calls;
        for _ in 0..50 {
            match decide(&store, "k", &l).await {
                Err(StoreError::Unavailable(why)) => assert!(why.contains("known down"), "{why}"),
                other => panic!("while known down: {other:?}"),
            }
        }
        let s = store.stats();
        assert_eq!(s.fast_failures, 50, "{s:?}");
        assert_eq!(s.script_calls, calls, "no call was sent while known down");

        // Back on the same port, empty: the probe finds it with no decision made.
        server.restart();
        until("the probe finds Redis back", || !store.health().down).await;
        assert!(!store.is_degraded());
        assert_eq!(store.health().consecutive_failures, 0);
        let calls = store.stats().script_calls;
        // The first decision after the recovery is Redis's: 2 per minute, exactly.
        assert_eq!(decide(&store, "after", &l).await, Ok(true));
        assert_eq!(store.stats().script_calls, calls + 1, "decided in Redis");
        assert_eq!(decide(&store, "after", &l).await, Ok(true));
        assert_eq!(decide(&store, "after", &l).await, Ok(false));
        assert_eq!(store.stats().fast_failures, 50);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_stops_answering_is_known_down_after_three_timeouts() {
    bounded(60, async {
        let server = RedisServer::start();
        let deadline = Duration::from_millis(100);
        let store = single(&server, options(deadline)).await;
        let l = limit(1000);
        assert_eq!(decide(&store, "k", &l).await, Ok(true));
        // Redis holds every client's commands (its own included) for 3 s: calls time out.
        server
            .cli(&["CLIENT", "PAUSE", "3000", "ALL"])
            .unwrap_or_else(|e| panic!("CLIENT PAUSE: {e}"));
        // Timeouts (or, once a background clock read counted too, answered at once).
        for _ in 0..3 {
            assert!(matches!(
                decide(&store, "k", &l).await,
                Err(StoreError::Timeout | StoreError::Unavailable(_))
            ));
        }
        assert_eq!(store.health().last_error, Some(StoreError::Timeout));
        assert!(store.health().down);
        let calls = store.stats().script_calls;
        for _ in 0..20 {
            assert!(matches!(
                decide(&store, "k", &l).await,
                Err(StoreError::Unavailable(_))
            ));
        }
        assert_eq!(store.stats().script_calls, calls, "none waited for Redis");
        assert_eq!(store.stats().fast_failures, 20);
        // The pause ends; the probe's PING is answered.
        until("the probe finds Redis back", || !store.health().down).await;
        assert_eq!(decide(&store, "k", &l).await, Ok(true));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_after_zero_never_fails_fast() {
    bounded(60, async {
        let mut server = RedisServer::start();
        let store = single(&server, options(Duration::from_secs(2)).down_after(0)).await;
        let l = limit(10);
        server.stop();
        for _ in 0..10 {
            assert!(decide(&store, "k", &l).await.is_err());
        }
        assert!(!store.health().down);
        assert_eq!(store.stats().fast_failures, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_store_notices_an_outage_and_its_end_by_itself() {
    bounded(60, async {
        let mut server = RedisServer::start();
        let store = single(&server, options(Duration::from_secs(1))).await;
        server.stop();
        // No decision: its clock reads (one a second) fail, three make Redis known down.
        until("degraded with no decision", || store.is_degraded()).await;
        until("known down with no decision", || store.health().down).await;
        assert_eq!(store.stats().decisions, 0);
        server.restart();
        until("found back with no decision", || !store.health().down).await;
        assert!(!store.is_degraded());
    })
    .await;
}
