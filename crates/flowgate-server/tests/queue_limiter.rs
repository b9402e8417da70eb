//! The limiter stays exact while the largest queue batch is submitted on the same Redis, through
//! the same server process. In a file of its own, so that no other test's processes compete for
//! the 2 cores: the test is about Redis never being held, not about CPU scheduling.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{http, post_json, spawn_server};
use flowgate_testkit::redis::RedisServer;
use serde_json::{Value, json};
use tokio::time::Instant;

const CONFIG: &str = r#"
[[rule]]
domain = "api"
name = "per-user"
match = "user"
limit = 5
window = "1h"
algorithm = "fixed_window"

[[rule]]
domain = "api"
name = "probe"
match = "probe"
limit = "1000000/s"
failure = "closed"

[[queue]]
domain = "payments"
name = "bulk"
match = ["channel=BULK"]
rate = "1000/s"
max_payload = 4096
max_depth = 100000
"#;

/// The largest batch the API takes, near its 32 MiB: 10,000 jobs of 3 KB.
fn largest_batch() -> String {
    let memo = "x".repeat(3_000);
    let jobs: Vec<Value> = (0..10_000)
        .map(|i| json!({"payload": {"refund": i, "memo": memo}}))
        .collect();
    json!({"domain": "payments", "descriptor": "channel=BULK", "jobs": jobs}).to_string()
}

async fn check(addr: std::net::SocketAddr, descriptor: &str) -> u16 {
    post_json(
        addr,
        "/v1/check",
        json!({"domain": "api", "descriptors": [descriptor]}),
    )
    .await
    .status
}

/// 40 keys of 5 each (200 admissions exactly) hammered while a batch of 10,000 jobs of 3 KB
/// (30 MB) goes to a queue on the same Redis, through the same server: exactly 200 admitted, no
/// store error, a `closed` limit never reached refuses nothing, and Redis itself ran no command
/// for 100 ms or more, timed on its own clock (its slow log): the batch is stored in calls of a
/// few ms (`flowgate-redis`'s `queue_bounds` test bounds each), where one submit once held Redis
/// for 300-700 ms; 100 ms leaves room for the scheduler on 2 busy cores. The decisions' deadline
/// is 2 s here, not the default 25 ms, so that a server starved of CPU by other processes (the
/// debug build parses the 30 MB on the same 2 cores) is not mistaken for a held Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_batch_submit_leaves_the_limiter_exact() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("flowgate.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let p = spawn_server(
        &cfg,
        &["--redis-url", &redis.url(), "--redis-deadline", "2s"],
    );
    redis
        .cli(&["CONFIG", "SET", "slowlog-log-slower-than", "100000"])
        .unwrap();
    redis.cli(&["SLOWLOG", "RESET"]).unwrap();
    let addr = p.http;
    let body = largest_batch();
    assert!(body.len() > 30_000_000 && body.len() < 32 << 20);
    let done = Arc::new(AtomicBool::new(false));
    let submit = {
        let done = done.clone();
        tokio::spawn(async move {
            let r = http(
                addr,
                "POST",
                "/v1/queues/submit",
                &[("content-type", "application/json")],
                &body,
            )
            .await;
            done.store(true, Ordering::SeqCst);
            r
        })
    };
    let admitted = Arc::new(AtomicU64::new(0));
    let refused_probes = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut burst = Vec::new();
    for w in 0..8u64 {
        let (done, admitted, refused, sent) = (
            done.clone(),
            admitted.clone(),
            refused_probes.clone(),
            sent.clone(),
        );
        burst.push(tokio::spawn(async move {
            let mut n = w;
            // Until the submit is answered, and for at least a second.
            while !done.load(Ordering::SeqCst) || started.elapsed() < Duration::from_secs(1) {
                let key = format!("user=k{}", n % 40);
                n += 8;
                match check(addr, &key).await {
                    200 => admitted.fetch_add(1, Ordering::SeqCst),
                    429 => 0,
                    other => panic!("check answered {other}"),
                };
                if check(addr, "probe=p").await != 200 {
                    refused.fetch_add(1, Ordering::SeqCst);
                }
                sent.fetch_add(2, Ordering::SeqCst);
            }
        }));
    }
    for b in burst {
        b.await.unwrap();
    }
    let r = submit.await.unwrap();
    assert_eq!(r.status, 200, "{}", &r.body[..r.body.len().min(300)]);
    assert_eq!(r.json()["jobs"].as_array().map(Vec::len), Some(10_000));
    let sent = sent.load(Ordering::SeqCst);
    assert!(sent > 400, "only {sent} decisions were asked");
    assert_eq!(admitted.load(Ordering::SeqCst), 200, "of {sent} decisions");
    assert_eq!(refused_probes.load(Ordering::SeqCst), 0);
    let slow = redis.cli(&["SLOWLOG", "LEN"]).unwrap();
    assert_eq!(
        slow.trim(),
        "0",
        "Redis ran commands for 100 ms or more: {}",
        redis.cli(&["SLOWLOG", "GET", "5"]).unwrap_or_default()
    );
    let metrics = http(addr, "GET", "/metrics", &[], "").await.body;
    let errors: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("flowgate_store_errors_total{") && !l.ends_with(" 0"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
