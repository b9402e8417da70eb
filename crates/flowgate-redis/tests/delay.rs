//! Delay mode across app servers: the reservation lives in Redis, so callers on different store
//! instances are spaced at the rule's rate in reservation order.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TEST_DEADLINE, bounded, test_options};
use flowgate_core::{Algorithm, Item, Limit, ManualClock, Mode, Quota, Store};
use flowgate_redis::{RedisOptions, RedisStore};
use flowgate_testkit::redis::{RedisCluster, RedisServer};

fn refund_rule() -> Limit {
    // The refund channel: 1/s across the cluster, callers queue up to a minute.
    Limit::builder(
        Algorithm::LeakyBucket,
        Quota::per_second(1).unwrap_or_else(|e| panic!("{e}")),
    )
    .mode(Mode::Delay)
    .max_wait(Duration::from_secs(60))
    .build()
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn take(store: &RedisStore, key: &str, limit: &Limit) -> Option<Duration> {
    let d = store
        .decide(&[Item {
            key,
            limit,
            cost: 1,
            enforce: true,
        }])
        .await
        .unwrap_or_else(|e| panic!("decide: {e}"));
    d[0].allowed.then_some(d[0].wait)
}

/// With one explicit clock: 1/s spaces every caller of every instance exactly one second apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_per_second_spaces_callers_of_two_instances_one_second_apart() {
    let server = RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let a = RedisStore::connect_with(&server.url(), test_options(&clock))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let b = RedisStore::connect_with(&server.url(), test_options(&clock))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let l = refund_rule();
    bounded(30, async {
        for i in 0..10u64 {
            let store = if i % 2 == 0 { &a } else { &b };
            let wait = take(store, "refunds:WPG", &l).await;
            assert_eq!(wait, Some(Duration::from_secs(i)), "caller {i}");
        }
        clock.advance(Duration::from_millis(2_500));
        // Slots 0..9 s were reserved at t0; at t0 + 2.5 s the next slot is at t0 + 10 s.
        assert_eq!(
            take(&b, "refunds:WPG", &l).await,
            Some(Duration::from_millis(7_500))
        );
    })
    .await;
}

/// On Redis's own clock, 32 concurrent callers over two instances (single server and cluster):
/// each is told a distinct wait, and in reservation order the waits are spaced by T minus the
/// time that passed between their reservations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_on_redis_time_get_distinct_slots() {
    let server = RedisServer::start();
    let cluster = RedisCluster::start(3);
    let opts = || RedisOptions::default().deadline(TEST_DEADLINE);
    let stores = [
        Arc::new(
            RedisStore::connect_with(&server.url(), opts())
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        ),
        Arc::new(
            RedisStore::connect_with(&server.url(), opts())
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        ),
        Arc::new(
            RedisStore::connect_cluster_with(&cluster.urls(), opts())
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        ),
        Arc::new(
            RedisStore::connect_cluster_with(&cluster.urls(), opts())
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        ),
    ];
    // 10/s: T = 100 ms.
    let l = Arc::new(
        Limit::builder(
            Algorithm::LeakyBucket,
            Quota::per_second(10).unwrap_or_else(|e| panic!("{e}")),
        )
        .mode(Mode::Delay)
        .max_wait(Duration::from_secs(60))
        .build()
        .unwrap_or_else(|e| panic!("{e}")),
    );
    bounded(30, async {
        for pair in [&stores[0..2], &stores[2..4]] {
            let mut tasks = Vec::new();
            for i in 0..32 {
                let store = pair[i % 2].clone();
                let l = l.clone();
                tasks.push(tokio::spawn(
                    async move { take(&store, "shaped:SMS", &l).await },
                ));
            }
            let mut waits = Vec::new();
            for t in tasks {
                waits.push(
                    t.await
                        .unwrap_or_else(|e| panic!("{e}"))
                        .unwrap_or_else(|| panic!("rejected")),
                );
            }
            waits.sort();
            // The k-th reservation's slot is k * T after the first one's; its wait is that minus
            // the (small) time between the two reservations.
            for (k, w) in waits.iter().enumerate() {
                let slot = Duration::from_millis(100 * k as u64);
                assert!(*w <= slot, "wait {k} = {w:?} beyond its slot {slot:?}");
                assert!(
                    *w + Duration::from_millis(500) >= slot,
                    "wait {k} = {w:?} far before its slot {slot:?}"
                );
            }
            for pair in waits.windows(2) {
                assert!(pair[1] > pair[0], "distinct slots: {waits:?}");
            }
        }
    })
    .await;
}
