//! Shared helpers of the Redis store's tests.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use flowgate_core::ManualClock;
use flowgate_redis::{RedisOptions, RedisStore};
use flowgate_testkit::redis::{RedisCluster, RedisServer};

/// A generous deadline for tests on a shared, noisy machine (outage tests set their own).
pub const TEST_DEADLINE: Duration = Duration::from_secs(5);

/// Options for decision-comparing tests: explicit clock, no blocked cache.
pub fn test_options(clock: &ManualClock) -> RedisOptions {
    RedisOptions::default()
        .deadline(TEST_DEADLINE)
        .blocked_capacity(0)
        .clock_override(clock.clone())
}

/// A store on a single server.
pub async fn single(server: &RedisServer, options: RedisOptions) -> RedisStore {
    RedisStore::connect_with(&server.url(), options)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

/// A store on a cluster.
pub async fn cluster(cluster: &RedisCluster, options: RedisOptions) -> RedisStore {
    RedisStore::connect_cluster_with(&cluster.urls(), options)
        .await
        .unwrap_or_else(|e| panic!("connect cluster: {e}"))
}

/// Bounds a whole test.
pub async fn bounded<F: Future>(secs: u64, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .unwrap_or_else(|_| panic!("test did not finish within {secs} s"))
}
