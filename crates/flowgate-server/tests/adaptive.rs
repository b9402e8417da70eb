//! Adaptive concurrency through a real server (in process, on a manual clock): reports of slow
//! calls shrink a `concurrency` rule's adaptive limit and fast ones grow it, seen through
//! `/v1/acquire` admitting fewer or more leases at once and in `GET /v1/stats`; each descriptor
//! has its own limit; a caller not using its limit does not grow it.

mod common;

use common::{TestServer, http, post_json};
use serde_json::{Value, json};

const CONFIG: &str = r#"domain = "pay"

[[rule]]
name = "calls"
match = "channel"
algorithm = "concurrency"
limit = "10/30s"
adaptive = { min = 2, max = 50, max_latency = "100ms", backoff = 0.5 }
"#;

/// Acquires leases for `channel` until one is refused; answers the leases.
async fn fill(s: &TestServer, channel: &str) -> Vec<u64> {
    let mut leases = Vec::new();
    for _ in 0..100 {
        let r = post_json(
            s.http(),
            "/v1/acquire",
            json!({"domain": "pay", "descriptors": [format!("channel={channel}")]}),
        )
        .await;
        if r.status == 429 {
            return leases;
        }
        assert_eq!(r.status, 200, "{}", r.body);
        leases.push(r.json()["leases"][0]["lease"].as_u64().unwrap());
    }
    panic!("{channel}: 100 leases at once, over the adaptive max of 50");
}

async fn release(s: &TestServer, channel: &str, leases: Vec<u64>) {
    for lease in leases {
        let r = post_json(
            s.http(),
            "/v1/release",
            json!({"domain": "pay", "descriptor": format!("channel={channel}"), "lease": lease}),
        )
        .await;
        assert_eq!(r.json()["released"], true, "{}", r.body);
    }
}

/// Reports `n` calls of `channel` that took `latency_ms`.
async fn report(s: &TestServer, channel: &str, n: usize, outcome: &str, latency_ms: f64) {
    let one = json!({"domain": "pay", "descriptors": [format!("channel={channel}")], "outcome": outcome, "latency_ms": latency_ms});
    let r = post_json(s.http(), "/v1/report", json!({"reports": vec![one; n]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"counted": n, "no_breaker": 0, "dropped": 0})
    );
}

/// The rule's adaptive limits in `GET /v1/stats`, as (key, limit).
async fn stats(s: &TestServer) -> Vec<(String, u64)> {
    let v: Value = http(s.http(), "GET", "/v1/stats?window=1", &[], "")
        .await
        .json();
    let rule = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "calls")
        .unwrap()
        .clone();
    rule["adaptive"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|k| {
                    (
                        k["key"].as_str().unwrap().to_owned(),
                        k["limit"].as_u64().unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn slow_reports_shrink_the_limit_and_fast_ones_grow_it() {
    let s = TestServer::start(&[("flowgate.toml", CONFIG)]).await;
    // Before any report: the rule's limit is the start.
    let held = fill(&s, "WPG").await;
    assert_eq!(held.len(), 10);

    // A call over max_latency: 10 × 0.5.
    report(&s, "WPG", 1, "ok", 450.0).await;
    release(&s, "WPG", held).await;
    let held = fill(&s, "WPG").await;
    assert_eq!(held.len(), 5, "a slow call shrinks the limit");
    assert_eq!(stats(&s).await[0].1, 5);

    // The other 10 calls that were out at the back-off: one sign of overload, acted on.
    report(&s, "WPG", 10, "ok", 450.0).await;
    assert_eq!(fill(&s, "WPG").await.len(), 0);
    // A later slow call: 5 × 0.5 = 2.5.
    report(&s, "WPG", 1, "ok", 450.0).await;
    release(&s, "WPG", held).await;
    let mut held = fill(&s, "WPG").await;
    assert_eq!(held.len(), 2, "slow calls shrink the limit");

    // Fast calls with the limit in use: about one more call per round trip (as many reports
    // as calls out).
    let mut admitted = Vec::new();
    for _ in 0..6 {
        report(&s, "WPG", held.len(), "ok", 20.0).await;
        held.extend(fill(&s, "WPG").await);
        admitted.push(held.len());
    }
    assert_eq!(admitted, [3, 4, 4, 5, 6, 7], "fast calls grow the limit");

    // A failure backs off as a slow call does.
    report(&s, "WPG", 1, "error", 1.0).await;
    release(&s, "WPG", std::mem::take(&mut held)).await;
    let held = fill(&s, "WPG").await;
    assert_eq!(held.len(), 3, "7.x × 0.5");

    // Another descriptor has its own limit, at the start.
    assert_eq!(fill(&s, "SMS").await.len(), 10);

    // Every lease released: fast reports of a caller not using its limit leave it.
    release(&s, "WPG", held).await;
    report(&s, "WPG", 20, "ok", 20.0).await;
    let limits = stats(&s).await;
    assert_eq!(
        limits.iter().map(|(_, l)| *l).collect::<Vec<_>>(),
        [3, 10],
        "{limits:?}"
    );
    assert!(limits[0].0.contains("WPG"), "{limits:?}");
    s.server.shutdown().await.unwrap();
}
