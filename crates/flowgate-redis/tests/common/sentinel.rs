//! Helpers of the Redis Sentinel tests: decisions on a store, counted, and waited for.

use std::time::Duration;

use flowgate_core::{Algorithm, Item, Limit, Quota, Store, StoreError};
use flowgate_redis::{RedisOptions, RedisStore};
use tokio::time::Instant;

/// A deadline that a busy 2-core machine meets.
pub const DEADLINE: Duration = Duration::from_millis(300);

pub fn options() -> RedisOptions {
    RedisOptions::default()
        .deadline(DEADLINE)
        .blocked_capacity(0)
}

/// `n` per minute: a window that outlasts each test, so admissions count exactly.
pub fn per_minute(n: u64) -> Limit {
    Limit::new(
        Algorithm::FixedWindow,
        Quota::new(n, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

pub async fn decide(store: &RedisStore, key: &str, limit: &Limit) -> Result<bool, StoreError> {
    let d = store
        .decide(&[Item {
            key,
            limit,
            cost: 1,
            enforce: true,
        }])
        .await?;
    Ok(d[0].allowed)
}

/// How many of `n` decisions on `key` are admitted (each must be answered).
pub async fn admitted(store: &RedisStore, key: &str, limit: &Limit, n: usize) -> usize {
    let mut yes = 0;
    for _ in 0..n {
        if decide(store, key, limit)
            .await
            .unwrap_or_else(|e| panic!("decision on {key}: {e}"))
        {
            yes += 1;
        }
    }
    yes
}

/// Decides on `key` every 20 ms until a decision is answered, each call bounded; the time it
/// took.
pub async fn until_answered(store: &RedisStore, key: &str, limit: &Limit) -> Duration {
    let started = Instant::now();
    loop {
        let call = Instant::now();
        let r = decide(store, key, limit).await;
        assert!(
            call.elapsed() < DEADLINE + Duration::from_secs(1),
            "a decision took {:?}",
            call.elapsed()
        );
        if r.is_ok() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "no decision answered within 40 s: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
