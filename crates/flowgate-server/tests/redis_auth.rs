//! A Redis whose password is changed and then restored: Flowgate's connections, refused at their
//! handshake meanwhile, are made again with the URL's password once Redis takes it, without a
//! restart (redis's own reconnection keeps a refused `AUTH` for ever).

mod common;

use std::time::Duration;

use common::{TestServer, post_json, wait_until};
use flowgate_testkit::redis::RedisServer;
use serde_json::json;

const CONFIG: &str = r#"
domain = "api"

[[rule]]
name = "per-user"
match = "user"
limit = "1000/s"
failure = "closed"
"#;

async fn check(s: &TestServer) -> u16 {
    post_json(
        s.http(),
        "/v1/check",
        json!({"domain": "api", "descriptors": ["user=7"]}),
    )
    .await
    .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_changed_and_restored_is_taken_again() {
    let redis = RedisServer::start();
    let port = redis.port();
    redis
        .cli(&["CONFIG", "SET", "requirepass", "pass-one"])
        .unwrap();
    let url = format!("redis://:pass-one@127.0.0.1:{port}/");
    let s = TestServer::start_with(&[("flowgate.toml", CONFIG)], |mut c| {
        c.redis_url = Some(url);
        c
    })
    .await;
    assert_eq!(check(&s).await, 200);

    // Another password, and Flowgate's connections dropped: each reconnection is refused, and
    // the rule's policy (closed) decides.
    redis
        .cli(&["-a", "pass-one", "CONFIG", "SET", "requirepass", "pass-two"])
        .unwrap();
    redis
        .cli(&["-a", "pass-two", "CLIENT", "KILL", "TYPE", "normal"])
        .unwrap();
    let refused = wait_until(Duration::from_secs(10), || async { check(&s).await == 429 }).await;
    assert!(
        refused,
        "decisions were never refused while Redis refused the password"
    );
    // Long enough for every reconnection of redis's own to have been refused: 20 decisions
    // failed on the store, over a second or more.
    let start = tokio::time::Instant::now();
    let failed = wait_until(Duration::from_secs(20), || async {
        check(&s).await;
        common::metric(s.http(), "flowgate_store_errors_total", &[]).await >= 20.0
            && start.elapsed() >= Duration::from_secs(1)
    })
    .await;
    assert!(failed, "decisions did not keep failing on the store");
    // A refused password is an outage: the store is known down, and decisions go straight to
    // the policy while the probe retries.
    let down = wait_until(Duration::from_secs(10), || async {
        check(&s).await;
        common::metric(s.http(), "flowgate_store_down", &[]).await == 1.0
    })
    .await;
    assert!(down, "Redis refusing the password was never known down");

    // The password back: decisions reach Redis again.
    redis
        .cli(&["-a", "pass-two", "CONFIG", "SET", "requirepass", "pass-one"])
        .unwrap();
    let back = wait_until(Duration::from_secs(10), || async { check(&s).await == 200 }).await;
    assert!(
        back,
        "decisions never reached Redis again after its password came back"
    );

    // Seen: the connections made again are counted, and the primary is the URL's server.
    let store = common::http(s.http(), "GET", "/v1/store", &[], "").await;
    let view: serde_json::Value = serde_json::from_str(&store.body).unwrap();
    assert_eq!(view["topology"]["kind"], "single", "{view}");
    assert_eq!(
        view["topology"]["primaries"],
        json!([format!("127.0.0.1:{port}")]),
        "{view}"
    );
    assert!(
        view["topology"]["reconnects"].as_u64() >= Some(1),
        "no reconnection counted: {view}"
    );
    let address = format!("address=\"127.0.0.1:{port}\"");
    let shown = wait_until(Duration::from_secs(5), || async {
        common::metric(s.http(), "flowgate_store_primary", &[&address]).await == 1.0
            && common::metric(s.http(), "flowgate_store_reconnects_total", &[]).await >= 1.0
    })
    .await;
    assert!(
        shown,
        "the primary or the reconnections are not in /metrics"
    );
    s.server.shutdown().await.unwrap();
}
