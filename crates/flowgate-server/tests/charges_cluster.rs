//! The debt of a rule is the cluster's on Redis: two real `flowgate serve` on one real Redis,
//! charges through either node, the same debt read on both (each key once, as its latest charge
//! found it), and the debt alert fires from the cluster's figures.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{config, post_json, spawn_server, wait_until};
use flowgate_testkit::redis::RedisServer;
use serde_json::json;

// A fixed window of an hour: the debt stays as charged for the test's length.
const RULES: &str = r#"
domain = "llm"

[[rule]]
name = "tokens"
match = "api_key"
limit = "1000/h"
algorithm = "fixed_window"

[[alert]]
name = "tokens-owed"
rule = "tokens"
debt = 600
"#;

async fn charge(addr: SocketAddr, key: &str, cost: u64) {
    let r = post_json(
        addr,
        "/v1/report",
        json!({"domain": "llm", "descriptors": [format!("api_key={key}")], "cost": cost}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

async fn debt(addr: SocketAddr) -> Option<u64> {
    let stats = common::http(addr, "GET", "/v1/stats", &[], "").await.json();
    stats["rules"]
        .as_array()?
        .iter()
        .find(|r| r["name"] == "tokens")?["debt"]
        .as_u64()
}

/// Whether both nodes read `want` as the rule's debt within 15 s (figures are shared every
/// second).
async fn both_read(a: SocketAddr, b: SocketAddr, want: u64) -> bool {
    wait_until(Duration::from_secs(15), || async {
        debt(a).await == Some(want) && debt(b).await == Some(want)
    })
    .await
}

async fn alert_is(http: SocketAddr, state: &str) -> bool {
    wait_until(Duration::from_secs(15), || async {
        let stats = common::http(http, "GET", "/v1/stats", &[], "").await.json();
        stats["alerts"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["name"] == "tokens-owed" && x["state"] == state)
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_debt_is_the_clusters_on_redis() {
    let redis = RedisServer::start();
    let (_dir, path) = config(RULES);
    let url = redis.url();
    let args = ["--redis-url", &url, "--redis-deadline", "2s"];
    let (a, b) = (spawn_server(&path, &args), spawn_server(&path, &args));

    // Charged through a: both nodes read it.
    charge(a.http, "k1", 1400).await;
    assert!(
        both_read(a.http, b.http, 400).await,
        "a's charge read on b: {:?} {:?}",
        debt(a.http).await,
        debt(b.http).await
    );
    // The same key charged again through b: counted once, as b's charge found it.
    charge(b.http, "k1", 100).await;
    assert!(both_read(a.http, b.http, 500).await, "k1 counted once");
    // Another key through b: the sum over keys.
    charge(b.http, "k2", 1200).await;
    assert!(both_read(a.http, b.http, 700).await, "k1 and k2");
    for node in [a.http, b.http] {
        assert!(
            alert_is(node, "firing").await,
            "the debt alert fires from the cluster's figures"
        );
    }
    // A refund through a pays k2's debt back: read on both.
    let r = post_json(
        a.http,
        "/v1/report",
        json!({"domain": "llm", "descriptors": ["api_key=k2"], "cost": 200, "refund": true}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        both_read(a.http, b.http, 500).await,
        "k2 refunded out of debt"
    );
}
