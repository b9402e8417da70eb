//! Shared helpers of the Redis store's tests.
#![allow(dead_code, unreachable_pub)]

pub mod sentinel;

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

/// Options for tests on Redis's own clock: the test deadline, no blocked-keys cache.
pub fn live_options() -> RedisOptions {
    RedisOptions::default()
        .deadline(TEST_DEADLINE)
        .blocked_capacity(0)
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

/// The runtime of a test that drives the store from a proptest runner (2 workers).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

/// A proptest runner of `cases` cases that writes no regression files.
pub fn runner(cases: u32) -> proptest::test_runner::TestRunner {
    proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    })
}

/// The value stored at Redis key `key` (none when it is missing), as bytes.
pub fn stored_value(
    rt: &tokio::runtime::Runtime,
    store: &RedisStore,
    key: &str,
) -> Result<Option<Vec<u8>>, proptest::test_runner::TestCaseError> {
    match rt.block_on(store.query(redis::cmd("GET").arg(key))) {
        Ok(redis::Value::BulkString(b)) => Ok(Some(b)),
        Ok(redis::Value::Nil) => Ok(None),
        other => Err(proptest::test_runner::TestCaseError::fail(format!(
            "GET {key}: {other:?}"
        ))),
    }
}

/// Bounds a whole test.
pub async fn bounded<F: Future>(secs: u64, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .unwrap_or_else(|_| panic!("test did not finish within {secs} s"))
}

/// Polls `cond` every 20 ms until it holds; panics naming `what` if it does not within
/// `within`.
pub async fn wait_for(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + within;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < end,
            "{what}: not within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Script calls Redis has run so far (`EVALSHA` and `EVAL`), from `INFO commandstats`.
pub async fn script_calls(store: &RedisStore) -> u64 {
    let info = store
        .query(redis::cmd("INFO").arg("commandstats"))
        .await
        .unwrap_or_else(|e| panic!("INFO commandstats: {e}"));
    let redis::Value::BulkString(info) = info else {
        panic!("INFO answered no text");
    };
    String::from_utf8_lossy(&info)
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Holds Redis's writes for `ms` (`CLIENT PAUSE ... WRITE` from another connection), so that
/// the requests sent meanwhile wait behind the calls in flight and coalesce.
pub fn hold_writes(server: &RedisServer, ms: u64) {
    let answer =
        flowgate_testkit::redis::raw_command(server.port(), &format!("CLIENT PAUSE {ms} WRITE"))
            .unwrap_or_else(|e| panic!("CLIENT PAUSE: {e}"));
    assert!(answer.starts_with("+OK"), "{answer}");
}

/// A reservation of `estimate` units of `key` under rule `llm/tokens`, taken at `now`, expiring
/// a minute later.
pub fn reservation(key: &str, estimate: u64, now: u64) -> flowgate_core::reservation::Reservation {
    use flowgate_core::reservation::{Reservation, ReservationId, Reserved};
    Reservation {
        id: ReservationId::random().unwrap_or_else(|e| panic!("{e}")),
        items: vec![Reserved {
            key: key.into(),
            domain: "llm".into(),
            rule: "tokens".into(),
            estimate,
            taken: now,
        }],
        expires: now + 60_000_000,
    }
}
