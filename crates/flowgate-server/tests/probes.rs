//! The probes, as Kubernetes and an operator use them, on real processes: `/readyz` stays 200
//! through a Redis outage (the failure policies decide, at once) while `GET /v1/store`, the
//! `flowgate_store_*` gauges and `/readyz`'s `store` say the store is down; a probe finds Redis
//! back with no decision made; a node that drains answers `/readyz` 503 while it still serves.

mod common;

use std::time::Duration;

use common::{config, http, post_json, spawn_server, wait_until};
use flowgate_testkit::redis::RedisServer;
use serde_json::json;

const RULES: &str = r#"
domain = "api"

[[rule]]
name = "per-client"
match = "client"
limit = "2/1m"
algorithm = "fixed_window"
failure = "open"
"#;

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn check(addr: std::net::SocketAddr, client: &str) -> u16 {
    post_json(
        addr,
        "/v1/check",
        json!({"domain": "api", "descriptors": [format!("client={client}")]}),
    )
    .await
    .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_leaves_the_node_ready_and_the_store_endpoint_says_it_is_down() {
    let mut redis = RedisServer::start();
    let (_dir, path) = config(RULES);
    // A deadline long enough that a decision waiting for it could not pass for a fast one.
    let node = spawn_server(
        &path,
        &["--redis-url", &redis.url(), "--redis-deadline", "2s"],
    );
    let a = node.http;
    let ready = http(a, "GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.json()["store"]["kind"], "redis");
    assert_eq!(ready.json()["store"]["up"], true);
    let store = http(a, "GET", "/v1/store", &[], "").await;
    assert_eq!(store.status, 200, "{}", store.body);
    assert_eq!(check(a, "c1").await, 200);

    redis.stop();
    // Three failed decisions make Redis known down; each is answered by the policy (open).
    for _ in 0..3 {
        assert_eq!(check(a, "c1").await, 200);
    }
    let down = wait_until(Duration::from_secs(10), || async {
        http(a, "GET", "/v1/store", &[], "").await.json()["down"] == true
    })
    .await;
    let store = http(a, "GET", "/v1/store", &[], "").await;
    assert!(down, "{}", store.body);
    assert_eq!(store.status, 503, "{}", store.body);
    assert!(store.header("retry-after").is_some());
    let s = store.json();
    assert_eq!(s["up"], false);
    assert!(s["down_since_ms"].as_u64().is_some(), "{s}");
    assert_eq!(s["failure"], "unavailable", "{s}");
    assert!(
        !store.body.contains("refused"),
        "the client's error is not echoed: {}",
        store.body
    );
    // Ready all along: the node answers by the failure policies.
    let ready = http(a, "GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.json()["store"]["down"], true);
    assert_eq!(http(a, "GET", "/livez", &[], "").await.status, 200);
    // Answered at once, counted as fast failures.
    for i in 0..20 {
        assert_eq!(check(a, &format!("d{i}")).await, 200);
    }
    let s = http(a, "GET", "/v1/store", &[], "").await.json();
    assert!(s["fast_failures"].as_u64().unwrap_or(0) >= 20, "{s}");
    let m = http(a, "GET", "/metrics", &[], "").await.body;
    assert_eq!(metric(&m, "flowgate_store_down"), Some(1.0), "{m}");
    assert_eq!(metric(&m, "flowgate_store_degraded"), Some(1.0));

    // Back, empty: found by the probe, with no decision made meanwhile.
    redis.restart();
    let up = wait_until(Duration::from_secs(10), || async {
        http(a, "GET", "/v1/store", &[], "").await.status == 200
    })
    .await;
    assert!(up, "{}", http(a, "GET", "/v1/store", &[], "").await.body);
    let m = http(a, "GET", "/metrics", &[], "").await.body;
    assert_eq!(metric(&m, "flowgate_store_down"), Some(0.0));
    assert_eq!(metric(&m, "flowgate_store_degraded"), Some(0.0));
    // The first decisions after the recovery are Redis's: 2 per minute, exactly.
    assert_eq!(check(a, "after").await, 200);
    assert_eq!(check(a, "after").await, 200);
    assert_eq!(check(a, "after").await, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_node_is_not_ready_and_still_serves_until_its_delay_ends() {
    let (_dir, path) = config(RULES);
    let mut node = spawn_server(&path, &["--drain-delay", "3s"]);
    let a = node.http;
    assert_eq!(http(a, "GET", "/readyz", &[], "").await.status, 200);
    let pid = node.child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .map(|s| s.success());
    assert!(matches!(sent, Ok(true)), "kill -TERM {pid}: {sent:?}");
    let draining = wait_until(Duration::from_secs(3), || async {
        http(a, "GET", "/readyz", &[], "").await.status == 503
    })
    .await;
    let r = http(a, "GET", "/readyz", &[], "").await;
    assert!(draining, "{} {}", r.status, r.body);
    assert_eq!(r.json()["error"], "not_ready");
    assert!(
        r.json()["detail"]
            .as_str()
            .unwrap_or("")
            .contains("draining")
    );
    // Still deciding and alive while it drains.
    let r = post_json(
        a,
        "/v1/check",
        json!({"domain": "api", "descriptors": ["client=x"]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http(a, "GET", "/livez", &[], "").await.status, 200);
    // Then it stops by itself.
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = node.child.try_wait().unwrap_or(None) {
            break Some(s);
        }
        if tokio::time::Instant::now() > end {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}
