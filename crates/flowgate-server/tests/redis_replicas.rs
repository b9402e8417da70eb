//! `--redis-wait-replicas`: a queue submit, ack and nack and a rules change are answered only
//! once a real replica (`redis-server --replicaof`) holds them; with the replica gone they are
//! answered 503 after `--redis-wait-timeout`, while limit decisions go on at once (the waits
//! have a connection of their own).

mod common;

use std::time::Duration;

use common::{http, post_json, spawn_server};
use flowgate_testkit::redis::{RedisServer, raw_command};
use serde_json::json;
use tokio::time::Instant;

const CONFIG: &str = r#"
[[rule]]
domain = "api"
name = "per-user"
match = "user"
limit = "5/s"

[[queue]]
domain = "payments"
name = "refunds"
match = ["channel"]
rate = "100/s"
"#;

const TOKEN: &str = "s3cret-admin-token-0123456789abcdef0123456789abcdef";

async fn put_rules(addr: std::net::SocketAddr, limit: &str) -> common::HttpResponse {
    let auth = format!("Bearer {TOKEN}");
    http(
        addr,
        "PUT",
        "/v1/rules",
        &[
            ("content-type", "application/toml"),
            ("authorization", &auth),
        ],
        &CONFIG.replace("5/s", limit),
    )
    .await
}

fn submit_body() -> serde_json::Value {
    json!({"domain": "payments", "descriptor": "channel=c1", "jobs": [{"payload": "refund"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_for_the_replica_and_fail_without_it() {
    let primary = RedisServer::start();
    let mut replica = RedisServer::start_replica_of(&primary);
    let (_dir, cfg) = common::config(CONFIG);
    let p = spawn_server(
        &cfg,
        &[
            "--redis-url",
            &primary.url(),
            "--rules-source",
            "redis",
            "--admin-token",
            TOKEN,
            "--redis-wait-replicas",
            "1",
            "--redis-wait-timeout",
            "700ms",
        ],
    );

    // With the replica: answered, and the replica holds the job when the answer comes.
    let r = post_json(p.http, "/v1/queues/submit", submit_body()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let keys = raw_command(replica.port(), "DBSIZE").unwrap();
    assert_ne!(keys.trim(), ":0", "the replica holds the job");
    let lease = post_json(
        p.http,
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": "channel=c1", "wait_ms": 1000}),
    )
    .await;
    assert_eq!(lease.status, 200, "{}", lease.body);
    let token = lease.json()["token"].clone();
    let ack = post_json(p.http, "/v1/queues/ack", json!({ "token": token })).await;
    assert_eq!(ack.status, 200, "{}", ack.body);
    assert_eq!(put_rules(p.http, "6/s").await.status, 200);

    // Without it: each write waits its timeout and is answered 503, saying what happened.
    replica.stop();
    let addr = p.http;
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        let r = post_json(addr, "/v1/queues/submit", submit_body()).await;
        (r, started.elapsed())
    });
    // Decisions meanwhile are not held behind the WAIT: the check goes once Redis shows a client
    // blocked in it.
    let port = primary.port();
    let in_wait = common::wait_until(Duration::from_secs(10), || async {
        raw_command(port, "CLIENT LIST").is_ok_and(|l| l.contains("cmd=wait"))
    })
    .await;
    assert!(in_wait, "the submit never reached its WAIT on Redis");
    let check_started = Instant::now();
    let check = post_json(
        p.http,
        "/v1/check",
        json!({"domain": "api", "descriptors": ["user=u1"]}),
    )
    .await;
    let check_took = check_started.elapsed();
    assert_eq!(check.status, 200, "{}", check.body);
    let (r, took) = waiting.await.unwrap();
    assert!(
        check_took < Duration::from_millis(300),
        "a decision waited {check_took:?} behind the WAIT"
    );
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("0 of the 1 replicas"), "{}", r.body);
    assert!(
        took >= Duration::from_millis(650),
        "answered after {took:?}"
    );
    let rules = put_rules(p.http, "7/s").await;
    assert_eq!(rules.status, 503, "{}", rules.body);

    // The replica back: writes are answered again.
    replica.restart();
    let mut ok = false;
    for _ in 0..50 {
        if post_json(p.http, "/v1/queues/submit", submit_body())
            .await
            .status
            == 200
        {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "submits answered again once the replica is back");
}
