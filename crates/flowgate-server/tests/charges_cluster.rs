//! The debt of a rule is the cluster's on Redis: two real `flowgate serve` on one real Redis,
//! charges through either node, the same debt read on both (each key once, as its latest charge
//! found it), and the debt alert fires from the cluster's figures.

#[path = "common/charges.rs"]
mod charges;
mod common;
#[path = "common/stats.rs"]
mod stats;

use std::net::SocketAddr;
use std::time::Duration;

use charges::report_cost;
use common::{config, spawn_server, wait_until};
use flowgate_testkit::redis::RedisServer;
use serde_json::json;
use stats::{alert_reaches, rule_debt};

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
    let descriptor = format!("api_key={key}");
    let (status, body) = report_cost(addr, "llm", &[&descriptor], json!(cost), false).await;
    assert_eq!(status, 200, "{body}");
}

async fn debt(addr: SocketAddr) -> Option<u64> {
    rule_debt(addr, "tokens").await
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
    alert_reaches(http, "tokens-owed", state, Duration::from_secs(15)).await
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
    let (status, body) = report_cost(a.http, "llm", &["api_key=k2"], json!(200), true).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        both_read(a.http, b.http, 500).await,
        "k2 refunded out of debt"
    );
}
