//! Circuit breakers shared by two server processes on one real Redis: errors reported through
//! one node open the breaker on both; after `open_for`, one probe through either node, and its
//! success closes it everywhere; with Redis stopped each node keeps a local breaker on its own
//! reports and answers fast. An adaptive concurrency limit moved by reports through one node is
//! the limit the other enforces.

mod common;

use std::time::Duration;

use common::{Proc, post_json, spawn_server};
use flowgate_testkit::redis::RedisServer;
use serde_json::{Value, json};
use tokio::time::Instant;

const CONFIG: &str = r#"domain = "pay"

[[rule]]
name = "per-channel"
match = "channel"
limit = "10000/s"
failure = "open"

[[breaker]]
name = "channel"
match = ["channel"]
strategy = "error_ratio"
threshold = 0.5
window = "10s"
min_calls = 4
open_for = "1s"
probes = 1
probe_timeout = "2s"

[[rule]]
name = "calls"
match = "dep"
algorithm = "concurrency"
limit = "10/30s"
adaptive = { min = 2, max = 50, max_latency = "100ms", backoff = 0.5 }
"#;

fn node(config: &std::path::Path, url: &str, id: &str) -> Proc {
    // A deadline for a loaded machine: past 25 ms the failure policy would decide (and leases
    // would not be Redis's); this test is about the state the nodes share.
    spawn_server(
        config,
        &[
            "--redis-url",
            url,
            "--node-id",
            id,
            "--redis-deadline",
            "2s",
        ],
    )
}

async fn check(p: &Proc) -> common::HttpResponse {
    post_json(
        p.http,
        "/v1/check",
        json!({"domain": "pay", "descriptors": ["channel=WPG"]}),
    )
    .await
}

async fn report(p: &Proc, outcome: &str, n: usize, probe: Option<&Value>) {
    let mut one = json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": outcome, "latency_ms": 3});
    if let Some(p) = probe {
        one["probe"] = p.clone();
    }
    let r = post_json(p.http, "/v1/report", json!({ "reports": vec![one; n] })).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

fn refused(r: &common::HttpResponse) -> bool {
    r.status == 429 && r.json()["reason"] == "circuit_open"
}

/// Checks `p` every 5 ms until `want` holds of the answer; answers how long it took.
async fn until(
    p: &Proc,
    want: impl Fn(&common::HttpResponse) -> bool,
    within: Duration,
) -> (Duration, common::HttpResponse) {
    let started = Instant::now();
    loop {
        let r = check(p).await;
        if want(&r) {
            return (started.elapsed(), r);
        }
        assert!(
            started.elapsed() < within,
            "not within {within:?}: {} {}",
            r.status,
            r.body
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn metric(p: &Proc, name: &str) -> Option<String> {
    let m = common::http(p.http, "GET", "/metrics", &[], "").await.body;
    m.lines()
        .find(|l| l.starts_with(name))
        .map(|l| l.rsplit(' ').next().unwrap_or_default().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_their_breakers_through_redis() {
    let mut redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("flowgate.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let a = node(&config, &redis.url(), "a");
    let b = node(&config, &redis.url(), "b");
    assert_eq!(check(&b).await.status, 200);
    assert_eq!(
        metric(&a, "flowgate_breakers_shared").await.as_deref(),
        Some("1")
    );

    // Errors reported through a open the breaker on b.
    report(&a, "error", 4, None).await;
    let (took, r) = until(&b, refused, Duration::from_secs(3)).await;
    println!("node b refused {took:?} after the errors reported through node a");
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert_eq!(r.json()["breaker"]["key"], "pay:channel:channel=WPG");
    assert!(refused(&check(&a).await));
    let stats = common::http(b.http, "GET", "/v1/stats?window=1", &[], "")
        .await
        .json();
    assert_eq!(stats["breakers"][0]["phase"], "open", "{stats}");
    assert_eq!(stats["breakers"][0]["shared"], true, "{stats}");

    // After open_for (1 s), one probe across the cluster: through a, checked until it lets one
    // through; b refuses meanwhile.
    let (_, probe) = until(&a, |r| r.status == 200, Duration::from_secs(10)).await;
    let lease = probe.json()["probes"][0]["probe"].clone();
    assert!(lease.is_u64(), "{}", probe.body);
    assert!(refused(&check(&b).await), "the one probe is out");
    assert!(refused(&check(&a).await), "the one probe is out");
    // Its success, reported through b, closes it on both.
    report(&b, "ok", 1, Some(&lease)).await;
    let (took, _) = until(&a, |r| r.status == 200, Duration::from_secs(3)).await;
    println!("node a admitted {took:?} after the probe's success reported through node b");
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert_eq!(check(&b).await.status, 200);

    // Redis stopped: each node decides on its own reports, and answers fast.
    redis.stop();
    let started = Instant::now();
    while metric(&a, "flowgate_breakers_shared").await.as_deref() != Some("0") {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a never fell back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    report(&a, "error", 4, None).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        let r = check(&a).await;
        slowest = slowest.max(started.elapsed());
        assert!(refused(&r), "{} {}", r.status, r.body);
    }
    println!("with Redis stopped, node a's slowest refusal of 20 took {slowest:?}");
    assert!(slowest < Duration::from_millis(200), "{slowest:?}");
    // The four errors could not be sent: counted as unsent.
    let started = Instant::now();
    loop {
        let unsent = metric(&a, "flowgate_breaker_reports_total{result=\"unsent\"}").await;
        if unsent.as_deref().and_then(|v| v.parse::<u64>().ok()) >= Some(4) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "unsent reports: {unsent:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = check(&b).await;
    assert_eq!(r.status, 200, "b saw no failure: {}", r.body);
    let stats = common::http(a.http, "GET", "/v1/stats?window=1", &[], "")
        .await
        .json();
    assert_eq!(stats["breakers"][0]["shared"], false, "{stats}");
}

/// Acquires leases of `dep=X` until one is refused; answers how many, and gives them back.
async fn fill(p: &Proc) -> usize {
    let mut leases = Vec::new();
    for _ in 0..60 {
        let r = post_json(
            p.http,
            "/v1/acquire",
            json!({"domain": "pay", "descriptors": ["dep=X"]}),
        )
        .await;
        if r.status == 429 {
            break;
        }
        assert_eq!(r.status, 200, "{}", r.body);
        leases.push(r.json()["leases"][0]["lease"].as_u64().unwrap());
    }
    let n = leases.len();
    for lease in leases {
        let r = post_json(
            p.http,
            "/v1/release",
            json!({"domain": "pay", "descriptor": "dep=X", "lease": lease}),
        )
        .await;
        assert_eq!(r.json()["released"], true, "{}", r.body);
    }
    n
}

/// Node `p`'s view of the adaptive limit of `dep=X`: (limit, shared).
async fn adaptive(p: &Proc) -> Option<(u64, bool)> {
    let v = common::http(p.http, "GET", "/v1/stats?window=1", &[], "")
        .await
        .json();
    let rule = v["rules"]
        .as_array()?
        .iter()
        .find(|r| r["name"] == "calls")?
        .clone();
    let k = rule["adaptive"].as_array()?.first()?.clone();
    Some((k["limit"].as_u64()?, k["shared"].as_bool()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adaptive_limit_moved_through_one_node_is_enforced_by_the_other() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("flowgate.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let a = node(&config, &redis.url(), "a");
    let b = node(&config, &redis.url(), "b");
    assert_eq!(fill(&a).await, 10);
    assert_eq!(fill(&b).await, 10);
    // A slow call reported through a: the cluster's limit 10 × 0.5.
    let slow =
        json!({"domain": "pay", "descriptors": ["dep=X"], "outcome": "ok", "latency_ms": 450});
    let r = post_json(a.http, "/v1/report", slow).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let started = Instant::now();
    while adaptive(&b).await != Some((5, true)) {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "b: {:?}",
            adaptive(&b).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "node b held the limit moved through node a after {:?}",
        started.elapsed()
    );
    assert_eq!(fill(&b).await, 5);
    assert_eq!(adaptive(&a).await, Some((5, true)));
}
