//! A Redis that hangs (paused with SIGSTOP: connections open, no answers), as an operator meets
//! it: the node still closes every second on time, so its figures show each second of the
//! outage as it was (not a second of nothing, then one of twice the rate), and the store alert
//! fires while Redis hangs, then resolves once it answers; `/v1/store` says it times out.

mod common;

use std::time::Duration;

use common::{config, http, metric, post_json, spawn_server, wait_until};
use flowgate_testkit::redis::RedisServer;
use serde_json::{Value, json};

const RULES: &str = r#"domain = "api"

[[rule]]
name = "per-client"
match = "client"
limit = "1000/s"

[[alert]]
name = "store-degraded"
store = "degraded"
for = "2s"
"#;

/// The store's per-second series over the last 30 seconds: 1 while degraded.
async fn degraded_series(addr: std::net::SocketAddr) -> Vec<u64> {
    let stats = http(addr, "GET", "/v1/stats?window=30", &[], "")
        .await
        .json();
    stats["store"]["degraded_series"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

async fn firing(addr: std::net::SocketAddr) -> bool {
    metric(
        addr,
        "flowgate_alerts_firing",
        &["alert=\"store-degraded\""],
    )
    .await
        == 1.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_redis_delays_no_second_and_its_alert_fires_while_it_hangs() {
    let redis = RedisServer::start();
    let (_dir, path) = config(RULES);
    let node = spawn_server(&path, &["--redis-url", &redis.url()]);
    let addr = node.http;
    let cluster = wait_until(Duration::from_secs(10), || async {
        http(addr, "GET", "/v1/stats", &[], "").await.json()["scope"] == "cluster"
    })
    .await;
    assert!(cluster, "the node shares its figures through Redis");
    let load = tokio::spawn(async move {
        loop {
            post_json(
                addr,
                "/v1/check",
                json!({"domain": "api", "descriptors": ["client=1"]}),
            )
            .await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    redis.pause();
    // Six seconds of the hang closed (each second's exchange with the cluster gives up before
    // the next second is due, instead of waiting out its connection's timeout).
    let six = wait_until(Duration::from_secs(30), || async {
        degraded_series(addr).await.iter().sum::<u64>() >= 6
    })
    .await;
    let fired = wait_until(Duration::from_secs(20), || firing(addr)).await;
    let series = degraded_series(addr).await;
    // The store's probe says what it meets: a Redis that hangs times out.
    let store = http(addr, "GET", "/v1/store", &[], "").await;
    redis.resume();
    assert_eq!(store.status, 503, "{}", store.body);
    assert_eq!(
        (&store.json()["down"], &store.json()["failure"]),
        (&json!(true), &json!("timeout")),
        "{}",
        store.body
    );
    assert!(six, "the hang is not in the store's series: {series:?}");
    assert!(fired, "the store alert did not fire while Redis hung");
    let first = series.iter().position(|&d| d == 1).unwrap_or(0);
    let last = series.iter().rposition(|&d| d == 1).unwrap_or(0);
    assert!(
        series[first..=last].iter().all(|&d| d == 1),
        "a second of the hang is missing from the store's series (closed late, merged with the \
         next): {series:?}"
    );
    let resolved = wait_until(Duration::from_secs(20), || async { !firing(addr).await }).await;
    load.abort();
    assert!(
        resolved,
        "the store alert did not resolve once Redis answered"
    );
}
