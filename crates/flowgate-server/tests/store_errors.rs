//! Store errors are answered without the store's own message: with Flowgate on a real Redis
//! that refuses its password, then on a Redis stopped, the answers of the queue routes, of a
//! check on a `closed` rule over HTTP and over gRPC say that the store could not answer (code
//! and status as ever) and never Redis's `WRONGPASS`, an address or an OS error; the check's
//! refusal by the `closed` policy says so (`store_unavailable`), not "over limit".

mod common;

use common::{TestServer, descriptor, http, metric, post_json, should};
use flowgate_testkit::redis::RedisServer;
use serde_json::json;

const CONFIG: &str = r#"
domain = "api"

[[rule]]
name = "closed"
match = "user"
limit = "5/s"
failure = "closed"

[[queue]]
name = "jobs"
match = ["channel=Q"]
rate = "10/s"
"#;

/// Panics if `answer` holds any of the store's own words.
fn no_store_message(what: &str, answer: &str, port: u16) {
    let lower = answer.to_lowercase();
    for word in [
        "wrongpass",
        "password",
        "auth",
        "refused",
        "os error",
        "wrong-pass",
        &port.to_string(),
    ] {
        assert!(!lower.contains(word), "{what} shows `{word}`: {answer}");
    }
}

/// The answers of the routes that need the store, each checked.
async fn ask(s: &TestServer, port: u16) {
    let submit = json!({"domain": "api", "descriptor": "channel=Q", "payload": 1});
    let r = post_json(s.http(), "/v1/queues/submit", submit).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.json()["error"], "store_unavailable");
    assert_eq!(
        r.json()["detail"],
        "the store could not answer; try again after Retry-After"
    );
    no_store_message("POST /v1/queues/submit", &r.body, port);
    let r = http(s.http(), "GET", "/v1/queues", &[], "").await;
    assert_eq!(r.status, 503, "{}", r.body);
    no_store_message("GET /v1/queues", &r.body, port);
    let check = json!({"domain": "api", "descriptors": ["user=7"]});
    let r = post_json(s.http(), "/v1/check", check).await;
    assert_eq!(r.status, 429, "{}", r.body);
    let error = r.json()["statuses"][0]["error"].clone();
    assert!(
        error.as_str().is_some_and(|e| e.starts_with("the store")),
        "{}",
        r.body
    );
    no_store_message("POST /v1/check", &r.body, port);
    // Refused by the rule's `closed` policy, not by its limit: said so, and counted apart.
    assert_eq!(r.json()["reason"], "store_unavailable", "{}", r.body);
    let refused = r#"outcome="failure_policy""#;
    assert!(metric(s.http(), "flowgate_decisions_total", &[refused]).await >= 1.0);
    // In the figures too: the failure policy's, not the rule's rejections (its alerts).
    let totals = || async {
        let stats = http(s.http(), "GET", "/v1/stats?scope=node", &[], "")
            .await
            .json();
        stats["rules"][0]["totals"].clone()
    };
    let counted = common::wait_until(std::time::Duration::from_secs(10), || async {
        totals().await["failure_policy"].as_u64() >= Some(1)
    })
    .await;
    let t = totals().await;
    assert!(counted, "{t}");
    assert_eq!(t["rejected"], 0, "{t}");
    let mut grpc = s.grpc().await;
    let answer = should(&mut grpc, "api", vec![descriptor(&[("user", "7")])], 1).await;
    no_store_message("gRPC ShouldRateLimit", &format!("{answer:?}"), port);
    let reason: Vec<&str> = answer
        .response_headers_to_add
        .iter()
        .filter(|h| h.key == "x-flowgate-reason")
        .map(|h| h.value.as_str())
        .collect();
    assert_eq!(reason, ["store_unavailable"], "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_never_show_the_stores_own_message() {
    let mut redis = RedisServer::start();
    let port = redis.port();
    redis
        .cli(&["CONFIG", "SET", "requirepass", "the-right-pass"])
        .unwrap();
    let url = format!("redis://:wrong-pass@127.0.0.1:{port}/");
    let s = TestServer::start_with(&[("flowgate.toml", CONFIG)], |mut c| {
        c.redis_url = Some(url);
        c
    })
    .await;
    ask(&s, port).await;
    redis.stop();
    ask(&s, port).await;
    s.server.shutdown().await.unwrap();
}
