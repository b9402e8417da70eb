//! Redis killed under load: every call returns by the deadline (plus a small slack) with an
//! error (most at once, Redis being known down), the store says it is degraded, and once
//! `redis-server` is back on the same port the same store decides again without being
//! recreated.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{bounded, wait_for};
use flowgate_core::{Algorithm, Item, Limit, Quota, Store, StoreError};
use flowgate_redis::{RedisOptions, RedisStore};
use flowgate_testkit::redis::RedisServer;
use tokio::time::Instant;

const DEADLINE: Duration = Duration::from_millis(50);
/// Scheduling slack on a shared 2-core machine.
const SLACK: Duration = Duration::from_millis(250);

async fn outage(coalesce: bool) {
    let mut server = RedisServer::start();
    let store = Arc::new(
        RedisStore::connect_with(
            &server.url(),
            RedisOptions::default()
                .deadline(DEADLINE)
                .coalesce(coalesce)
                .blocked_capacity(0),
        )
        .await
        .unwrap_or_else(|e| panic!("connect: {e}")),
    );
    let limit = Arc::new(
        Limit::new(
            Algorithm::TokenBucket,
            Quota::per_second(1_000_000).unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}")),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let oks = Arc::new(AtomicU64::new(0));
    let worst = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (store, limit, stop) = (store.clone(), limit.clone(), stop.clone());
        let (errors, oks, worst) = (errors.clone(), oks.clone(), worst.clone());
        tasks.push(tokio::spawn(async move {
            let key = format!("outage:{t}");
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let r = store
                    .decide(&[Item {
                        key: &key,
                        limit: &limit,
                        cost: 1,
                        enforce: true,
                    }])
                    .await;
                let took = started.elapsed();
                worst.fetch_max(took.as_micros() as u64, Ordering::Relaxed);
                match r {
                    Ok(_) => oks.fetch_add(1, Ordering::Relaxed),
                    Err(StoreError::Timeout | StoreError::Unavailable(_)) => {
                        errors.fetch_add(1, Ordering::Relaxed)
                    }
                    Err(e) => panic!("unexpected error kind: {e}"),
                };
                if r_is_err_pause(&took) {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    wait_for(
        "decisions before the outage",
        Duration::from_secs(10),
        || oks.load(Ordering::Relaxed) > 0,
    )
    .await;
    assert!(!store.is_degraded());
    assert_eq!(store.topology().reconnects, 0, "{:?}", store.topology());

    server.stop();
    // Until Redis is known down: calls then fail at once (asserted below).
    wait_for(
        "failed calls, the store degraded and known down after Redis stopped",
        Duration::from_secs(10),
        || {
            errors.load(Ordering::Relaxed) > 0
                && store.is_degraded()
                && store.stats().fast_failures > 0
        },
    )
    .await;
    let errors_during = errors.load(Ordering::Relaxed);
    assert!(errors_during > 0, "calls fail while Redis is down");
    assert!(store.is_degraded(), "the store says it is degraded");
    let worst_during = Duration::from_micros(worst.load(Ordering::Relaxed));
    assert!(
        worst_during <= DEADLINE + SLACK,
        "a call took {worst_during:?}, deadline {DEADLINE:?}"
    );

    // Same port, same store: decisions resume.
    server.restart();
    let oks_before = oks.load(Ordering::Relaxed);
    let resumed = Instant::now();
    while oks.load(Ordering::Relaxed) == oks_before {
        assert!(
            resumed.elapsed() < Duration::from_secs(10),
            "decisions did not resume within 10 s of the restart"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The load goes on for 200 ms after the first decision, timed as the others.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap_or_else(|e| panic!("task: {e}"));
    }
    let worst_all = Duration::from_micros(worst.load(Ordering::Relaxed));
    assert!(worst_all <= DEADLINE + SLACK, "a call took {worst_all:?}");
    let d = store
        .decide(&[Item {
            key: "outage:after",
            limit: &limit,
            cost: 1,
            enforce: true,
        }])
        .await
        .unwrap_or_else(|e| panic!("after restart: {e}"));
    assert!(d[0].allowed);
    assert!(!store.is_degraded(), "recovered");
    assert!(
        store.topology().reconnects >= 1,
        "the connection made again after the restart is counted: {:?}",
        store.topology()
    );
    let s = store.stats();
    // Every failed decision is a failed call, or one answered at once while Redis was known
    // down.
    assert!(
        s.errors + s.fast_failures >= errors_during && s.errors > 0 && s.fast_failures > 0,
        "{s:?}"
    );
    eprintln!(
        "coalesce={coalesce}: {} ok, {} errors, worst call {worst_all:?}, resumed {:?} after restart",
        oks.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        resumed.elapsed()
    );
}

/// Failing calls return fast (connection refused): let other tasks run.
fn r_is_err_pause(took: &Duration) -> bool {
    *took < Duration::from_millis(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_returns_by_the_deadline_and_decisions_resume() {
    bounded(60, outage(true)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_coalescing_too() {
    bounded(60, outage(false)).await;
}
