//! Real `flowgate serve` processes on Redis Sentinel (`--redis-url redis+sentinel://…`; one
//! primary, one replica, three sentinels, the data nodes' password in the URL and the sentinels'
//! own from a file or a flag, neither ever logged): decisions shared by two nodes, the primary killed
//! with SIGKILL (decisions closed for a bounded window, then exact again on the promoted
//! replica), a circuit breaker opened before the kill still open on both nodes, a job acknowledged with `--redis-wait-replicas 1` before the kill leased after the
//! promotion, and a rules change made after the failover on one node reaching the other through
//! its subscription (the periodic check is a minute: only the subscription can bring it).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Proc, http, post_json, spawn_server, wait_until};
use flowgate_testkit::sentinel::{RedisSentinels, SentinelsConfig};
use serde_json::{Value, json};
use tokio::time::Instant;

const TOKEN: &str = "sentinel-admin-token-0123456789abcdef0123456789";
/// The data nodes' password (in the URL) and the sentinels' own (a flag or a file).
const DATA_PASSWORD: &str = "data-pass-6a1f";
const SENTINEL_PASSWORD: &str = "sentinel-pass-93c2";

fn rules(limit: &str) -> String {
    format!(
        r#"
[[rule]]
domain = "pay"
name = "channel"
match = ["channel"]
algorithm = "fixed_window"
limit = "{limit}"
failure = "closed"

[[breaker]]
domain = "pay"
name = "channel"
match = ["channel"]
strategy = "error_ratio"
threshold = 0.5
window = "60s"
min_calls = 4
open_for = "120s"
probes = 1
probe_timeout = "5s"

[[queue]]
domain = "payments"
name = "refunds"
match = ["channel"]
rate = "100/s"
lease = "10s"
"#
    )
}

fn node(url: &str, config: &std::path::Path, data: &std::path::Path, extra: &[&str]) -> Proc {
    let mut args = vec![
        "--redis-url",
        url,
        "--redis-deadline",
        "500ms",
        "--rules-source",
        "redis",
        "--rules-check",
        "60s",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    spawn_server(config, &args)
}

/// The status of one check of `channel` on `addr` (200 admitted, 429 refused or closed).
async fn check(addr: SocketAddr, channel: &str) -> u16 {
    post_json(
        addr,
        "/v1/check",
        json!({"domain": "pay", "descriptors": [format!("channel={channel}")]}),
    )
    .await
    .status
}

/// How many of `n` checks of `channel` on `addr` are admitted.
async fn admitted(addr: SocketAddr, channel: &str, n: usize) -> usize {
    let mut yes = 0;
    for _ in 0..n {
        if check(addr, channel).await == 200 {
            yes += 1;
        }
    }
    yes
}

async fn version(addr: SocketAddr) -> u64 {
    http(addr, "GET", "/v1/rules", &[], "").await.json()["version"]
        .as_u64()
        .unwrap_or(0)
}

async fn lease(addr: SocketAddr) -> Option<Value> {
    let r = post_json(
        addr,
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": "channel=c1", "wait_ms": 500}),
    )
    .await;
    (r.status == 200).then(|| r.json())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_follow_a_promotion() {
    let test = async {
        let mut s = RedisSentinels::start_with(SentinelsConfig {
            data_password: Some(DATA_PASSWORD.into()),
            sentinel_password: Some(SENTINEL_PASSWORD.into()),
            ..SentinelsConfig::default()
        });
        let url = s.url();
        assert!(url.contains(DATA_PASSWORD));
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("rules.toml");
        std::fs::write(&config, rules("3/m")).unwrap();
        let password_file = dir.path().join("sentinel-password");
        std::fs::write(&password_file, format!("{SENTINEL_PASSWORD}\n")).unwrap();
        // a: the sentinels' password from a file; b: on the command line (warned about).
        let a = node(
            &url,
            &config,
            &dir.path().join("a"),
            &[
                "--admin-token",
                TOKEN,
                "--redis-sentinel-password-file",
                password_file.to_str().unwrap(),
                "--redis-wait-replicas",
                "1",
                "--redis-wait-timeout",
                "2s",
            ],
        );
        let b = node(
            &url,
            &config,
            &dir.path().join("b"),
            &[
                "--admin-token",
                TOKEN,
                "--redis-sentinel-password",
                SENTINEL_PASSWORD,
            ],
        );
        assert!(
            b.logged("redis_sentinel_password") > 0,
            "no warning about the password on the command line"
        );

        // Shared decisions: 3 a minute across both nodes.
        assert_eq!(admitted(a.http, "shared", 2).await, 2);
        assert_eq!(admitted(b.http, "shared", 3).await, 1);

        // A breaker opened through a, open on b too.
        let error = json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": "error", "latency_ms": 3});
        let r = post_json(
            a.http,
            "/v1/report",
            json!({"reports": [error, error, error, error]}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let open_on = |addr: SocketAddr| async move {
            let r = post_json(
                addr,
                "/v1/check",
                json!({"domain": "pay", "descriptors": ["channel=WPG"], "cost": 0}),
            )
            .await;
            r.status == 429 && r.body.contains("circuit_open")
        };
        assert!(
            wait_until(Duration::from_secs(10), || open_on(b.http)).await,
            "the breaker opened on a is not open on b"
        );

        // A job acknowledged once the replica holds it.
        let r = post_json(
            a.http,
            "/v1/queues/submit",
            json!({"domain": "payments", "descriptor": "channel=c1", "jobs": [{"payload": "refund-1"}]}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);

        let killed = Instant::now();
        let old = s.kill_primary();
        let mut n = 0;
        let answered = wait_until(Duration::from_secs(40), || {
            n += 1;
            let channel = format!("probe{n}");
            async move { check(a.http, &channel).await == 200 }
        })
        .await;
        assert!(
            answered,
            "decisions never admitted again after the failover"
        );
        eprintln!(
            "flowgate serve on sentinel: decisions admitted again {:?} after the primary's SIGKILL",
            killed.elapsed()
        );
        let new = s.wait_promoted(old);
        assert_ne!(new, old);
        // Exact again, on both nodes.
        assert_eq!(admitted(a.http, "after", 2).await, 2);
        assert_eq!(admitted(b.http, "after", 3).await, 1);
        assert!(
            a.logged("Redis primary changed") > 0,
            "node a never logged the switch"
        );
        // Seen: the store's topology names the new primary and counts the failover followed.
        let primary = format!("127.0.0.1:{new}");
        for p in [&a, &b] {
            let seen = wait_until(Duration::from_secs(5), || async {
                let view: Value =
                    serde_json::from_str(&http(p.http, "GET", "/v1/store", &[], "").await.body)
                        .unwrap_or(Value::Null);
                view["topology"]["kind"] == "sentinel"
                    && view["topology"]["primaries"] == json!([primary])
                    && view["topology"]["failovers"].as_u64() >= Some(1)
            })
            .await;
            assert!(seen, "{}'s /v1/store does not show the new primary", p.http);
        }
        // The open breaker survived the primary's death.
        for p in [&a, &b] {
            assert!(
                wait_until(Duration::from_secs(5), || open_on(p.http)).await,
                "the breaker is no longer open on {} after the failover",
                p.http
            );
        }

        // The acknowledged job survived the primary's death.
        let until = Instant::now() + Duration::from_secs(20);
        let mut job = None;
        while job.is_none() && Instant::now() < until {
            job = lease(b.http).await;
        }
        assert!(
            job.is_some(),
            "the acknowledged job was lost with the primary"
        );
        let job = job.unwrap();
        assert_eq!(job["payload"], "refund-1", "{job}");
        let r = post_json(b.http, "/v1/queues/ack", json!({"token": job["token"]})).await;
        assert_eq!(r.status, 200, "{}", r.body);

        // A rules change made on b after the failover reaches a through its subscription.
        let before = version(a.http).await;
        let auth = format!("Bearer {TOKEN}");
        let r = http(
            b.http,
            "PUT",
            "/v1/rules",
            &[
                ("content-type", "application/toml"),
                ("authorization", &auth),
            ],
            &rules("7/m"),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let changed = wait_until(Duration::from_secs(10), || async {
            version(a.http).await > before
        })
        .await;
        assert!(
            changed,
            "node a did not follow the rules changed after the failover"
        );
        assert_eq!(admitted(a.http, "seven", 8).await, 7);
        for p in [&a, &b] {
            let log = p.log.lock().unwrap().join("\n");
            assert!(
                !log.contains(DATA_PASSWORD) && !log.contains(SENTINEL_PASSWORD),
                "a password in the log:\n{log}"
            );
        }
    };
    tokio::time::timeout(Duration::from_secs(150), test)
        .await
        .unwrap_or_else(|_| panic!("did not finish within 150 s"));
}
