//! Reserve and commit against the real `flowgate` binary: on the embedded store (expiry, the
//! commit paths, bad input), and on one real Redis shared by two servers (a reservation made on
//! one node committed on the other, expiry across the cluster, and issue 40's load test).

mod common;
#[path = "reserve/load.rs"]
mod load;
#[path = "common/reservations.rs"]
mod reservations;

use std::net::SocketAddr;
use std::time::Duration;

use common::{HttpResponse, config, post_json, spawn_server, wait_until};
use flowgate_testkit::redis::RedisServer;
use reservations::{commit, id_of};
use serde_json::json;

const RULES: &str = r#"
domain = "llm"

# (an hour's window: a test that crossed a minute's end would see its counts start again)
[[rule]]
name = "tokens"
match = "api_key"
limit = "1000/h"
algorithm = "fixed_window"

[[rule]]
name = "inflight"
match = "slot"
limit = "5/1m"
algorithm = "concurrency"
"#;

/// A reservation of `estimate` units under `api_key=<key>`, held `ttl`.
async fn reserve(addr: SocketAddr, key: &str, estimate: u64, ttl: &str) -> HttpResponse {
    let descriptor = format!("api_key={key}");
    reservations::reserve(addr, "llm", &[&descriptor], estimate, Some(ttl)).await
}

/// The units left under `key`, as a cost-0 check sees them.
async fn remaining(addr: SocketAddr, key: &str) -> u64 {
    let r = post_json(
        addr,
        "/v1/check",
        json!({"domain": "llm", "descriptors": [format!("api_key={key}")], "cost": 0}),
    )
    .await;
    r.json()["statuses"][0]["remaining"]
        .as_u64()
        .unwrap_or_else(|| panic!("no remaining in {}", r.body))
}

/// Waits until `/v1/stats` and `/metrics` show `count` reservations holding `units` under rule
/// `tokens`.
async fn seen(addr: SocketAddr, count: u64, units: u64) {
    let want = json!([{"domain": "llm", "rule": "tokens", "count": count, "units": units}]);
    let ok = wait_until(Duration::from_secs(10), || async {
        let stats = common::http(addr, "GET", "/v1/stats", &[], "").await.json();
        stats["reservations"] == want
            && common::metric(
                addr,
                "flowgate_reservation_units_outstanding",
                &["rule=\"tokens\""],
            )
            .await
                == units as f64
            && common::metric(
                addr,
                "flowgate_reservations_outstanding",
                &["domain=\"llm\""],
            )
            .await
                == count as f64
    })
    .await;
    let stats = common::http(addr, "GET", "/v1/stats", &[], "").await.json();
    assert!(ok, "not seen: {want} in {}", stats["reservations"]);
}

/// Waits until `key` has `want` units left (an expired reservation given back by the sweeper).
async fn wait_remaining(addr: SocketAddr, key: &str, want: u64) {
    let ok = wait_until(Duration::from_secs(10), || async {
        remaining(addr, key).await == want
    })
    .await;
    assert!(
        ok,
        "{key} never had {want} left: {}",
        remaining(addr, key).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_memory_a_reservation_counts_until_its_commit_or_its_ttl() {
    let (_dir, path) = config(RULES);
    let s = spawn_server(&path, &["--openai-headers"]);
    let a = s.http;
    // Two reservations take the limit (each at most half of it): the third is refused.
    let first = reserve(a, "k1", 500, "400ms").await;
    assert_eq!(first.header("x-ratelimit-limit-tokens"), Some("1000"));
    assert_eq!(first.header("x-ratelimit-remaining-tokens"), Some("500"));
    assert!(
        first
            .header("x-ratelimit-reset-tokens")
            .is_some_and(|r| r.ends_with('s'))
    );
    let first = id_of(&first);
    let second = id_of(&reserve(a, "k1", 500, "60s").await);
    let refused = reserve(a, "k1", 1, "60s").await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.header("retry-after").is_some());
    assert!(refused.json()["id"].is_null());
    // The first, never committed, stops counting after its TTL.
    wait_remaining(a, "k1", 500).await;
    seen(a, 1, 500).await;
    // Its commit still counts its cost, and says it expired.
    let c = commit(a, json!({"id": first, "cost": 120})).await;
    assert_eq!(c.status, 200, "{}", c.body);
    assert_eq!(c.json()["expired"], true);
    assert_eq!(c.json()["rules"][0]["applied"], 120);
    assert_eq!(c.json()["rules"][0]["released"], 0);
    assert_eq!(remaining(a, "k1").await, 380);
    // The second's commit gives its 500 back and counts 300.
    let c = commit(a, json!({"id": second, "cost": 300})).await;
    assert_eq!(c.status, 200, "{}", c.body);
    assert_eq!(c.json()["expired"], false);
    assert_eq!(c.json()["rules"][0]["released"], 500);
    assert_eq!(
        (
            &c.json()["rules"][0]["remaining"],
            &c.json()["rules"][0]["retry_after_ms"]
        ),
        (&json!(580), &json!(null)),
        "{}",
        c.body
    );
    assert_eq!(remaining(a, "k1").await, 580);
    // Twice: refused naming the id, nothing changed.
    let again = commit(a, json!({"id": second, "cost": 300})).await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert_eq!(again.json()["error"], "already_committed");
    assert!(again.body.contains(&second));
    assert_eq!(remaining(a, "k1").await, 580);
    // A commit past the limit is counted (debt), and the next check is refused.
    let big = id_of(&reserve(a, "k2", 500, "60s").await);
    let c = commit(a, json!({"id": big, "cost": 1400})).await;
    assert_eq!(c.json()["rules"][0]["debt"], 400, "{}", c.body);
    assert_eq!(c.json()["rules"][0]["over"], true);
    assert_eq!(c.json()["rules"][0]["remaining"], 0);
    assert!(
        c.json()["rules"][0]["retry_after_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 0),
        "{}",
        c.body
    );
    let check = post_json(
        a,
        "/v1/check",
        json!({"domain": "llm", "descriptors": ["api_key=k2"], "cost": 0}),
    )
    .await;
    assert_eq!(check.status, 429, "{}", check.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reservations_and_commits_are_refused_naming_the_field_and_change_nothing() {
    let (_dir, path) = config(RULES);
    let s = spawn_server(&path, &["--reserve-max-ttl", "30s"]);
    let a = s.http;
    let id = id_of(&reserve(a, "k", 100, "10s").await);
    let before = remaining(a, "k").await;
    let refused = |r: &HttpResponse, status: u16, words: &[&str]| {
        assert_eq!(r.status, status, "{}", r.body);
        for w in words {
            assert!(r.body.contains(w), "{w:?} not in {}", r.body);
        }
    };
    refused(&reserve(a, "k", 0, "10s").await, 400, &["estimate"]);
    refused(
        &reserve(a, "k", 501, "10s").await,
        400,
        &["estimate", "500"],
    );
    refused(
        &reserve(a, "k", u64::MAX, "10s").await,
        400,
        &["field `estimate`", "at most 4294967295"],
    );
    refused(&reserve(a, "k", 10, "31s").await, 400, &["ttl", "30000"]);
    refused(&reserve(a, "k", 10, "soon").await, 400, &["ttl"]);
    let nothing = reservations::reserve(a, "llm", &["user=1"], 5, None).await;
    refused(&nothing, 400, &["descriptors", "no rule"]);
    let conc = reservations::reserve(a, "llm", &["slot=1"], 1, None).await;
    refused(&conc, 400, &["inflight", "concurrency"]);
    // One key twice would hold twice the clamp.
    let twice = reservations::reserve(a, "llm", &["api_key=k", "api_key=k"], 300, None).await;
    refused(
        &twice,
        400,
        &["descriptors[1]", "descriptors[0]", "once per key"],
    );
    refused(
        &commit(a, json!({"id": id, "cost": -1})).await,
        400,
        &["field `cost`: -1 is negative"],
    );
    refused(
        &commit(a, json!({"id": id, "cost": 1.5})).await,
        400,
        &["field `cost`: 1.5 is not a whole number"],
    );
    refused(
        &commit(a, json!({"id": id, "cost": u64::MAX})).await,
        400,
        &["field `cost`", "at most 4294967295"],
    );
    refused(&commit(a, json!({"id": id})).await, 400, &["cost"]);
    refused(
        &commit(a, json!({"id": "nope", "cost": 1})).await,
        400,
        &["id"],
    );
    refused(&commit(a, json!({"cost": 1})).await, 400, &["id"]);
    let unknown = "0123456789abcdef0123456789abcdef";
    let r = commit(a, json!({"id": unknown, "cost": 1})).await;
    refused(&r, 404, &[unknown, "unknown_reservation"]);
    assert_eq!(remaining(a, "k").await, before, "nothing changed");
    // The reservation is still open: its commit works after all of that.
    assert_eq!(commit(a, json!({"id": id, "cost": 7})).await.status, 200);
    // An unknown id with the descriptors counts its cost as a charge to their rules.
    let r = commit(
        a,
        json!({"id": unknown, "cost": 40, "domain": "llm", "descriptors": ["api_key=k"]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["id"].is_null());
    assert_eq!(remaining(a, "k").await, 1000 - 7 - 40);
}

/// Two servers on one real Redis, with a deadline wide enough for a debug build on a busy
/// machine (a decision past it would be the failure policy's, with no reservation).
fn two_on(redis: &RedisServer, path: &std::path::Path) -> (common::Proc, common::Proc) {
    let url = redis.url();
    let args = ["--redis-url", &url, "--redis-deadline", "2s"];
    (spawn_server(path, &args), spawn_server(path, &args))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_a_reservation_is_the_clusters() {
    let redis = RedisServer::start();
    let (_dir, path) = config(RULES);
    let (a, b) = two_on(&redis, &path);
    // Reserved on one node, refused on the other while it holds the units.
    let one = id_of(&reserve(a.http, "k", 500, "60s").await);
    let two = id_of(&reserve(b.http, "k", 500, "500ms").await);
    assert_eq!(reserve(b.http, "k", 1, "60s").await.status, 429);
    // The second, never committed, stops counting after its TTL, on both nodes.
    wait_remaining(a.http, "k", 500).await;
    assert_eq!(remaining(b.http, "k").await, 500);
    seen(b.http, 1, 500).await;
    // Committed on the other node; a second commit on either is refused.
    let c = commit(b.http, json!({"id": one, "cost": 200})).await;
    assert_eq!(c.status, 200, "{}", c.body);
    assert_eq!(c.json()["rules"][0]["released"], 500);
    assert_eq!(
        commit(a.http, json!({"id": one, "cost": 200})).await.status,
        409
    );
    assert_eq!(remaining(a.http, "k").await, 800);
    // The expired one's commit counts its cost once, whichever node takes it.
    let c = commit(a.http, json!({"id": two, "cost": 50})).await;
    assert_eq!(c.json()["expired"], true, "{}", c.body);
    assert_eq!(
        commit(b.http, json!({"id": two, "cost": 50})).await.status,
        409
    );
    assert_eq!(remaining(b.http, "k").await, 750);
}
