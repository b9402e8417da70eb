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
adaptive = { min = 2, max = 50, max_latency = "100ms" }
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
    let r = post_json(
        s.http(),
        "/v1/report",
        json!({"reports": vec![one; n]}),
    )
    .await;
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

    // Five calls over max_latency: 10 × 0.9⁵ = 5.9, the limit is 5.
    report(&s, "WPG", 5, "ok", 450.0).await;
    release(&s, "WPG", held).await;
    let held = fill(&s, "WPG").await;
    assert_eq!(held.len(), 5, "slow calls shrink the limit");
    let wpg = stats(&s).await;
    assert_eq!(wpg.len(), 1, "{wpg:?}");
    assert_eq!(wpg[0].1, 5, "{wpg:?}");

    // With the limit in use (5 out, one more refused), fast calls add one each while at least
    // half the limit is out: 5.9 → 8.9, then with 8 out, 8.9 → 15.9.
    report(&s, "WPG", 3, "ok", 20.0).await;
    let mut more = fill(&s, "WPG").await;
    assert_eq!(held.len() + more.len(), 8, "fast calls grow the limit");
    report(&s, "WPG", 7, "ok", 20.0).await;
    more.extend(fill(&s, "WPG").await);
    assert_eq!(held.len() + more.len(), 15, "fast calls grow the limit");

    // A failure backs off as a slow call does: 15.9 × 0.9 = 14.3.
    report(&s, "WPG", 1, "error", 1.0).await;
    release(&s, "WPG", more).await;
    release(&s, "WPG", held).await;
    let held = fill(&s, "WPG").await;
    assert_eq!(held.len(), 14);

    // Another descriptor has its own limit, at the start.
    let sms = fill(&s, "SMS").await;
    assert_eq!(sms.len(), 10);

    // Every lease released: fast reports of a caller not using its limit leave it.
    release(&s, "WPG", held).await;
    report(&s, "WPG", 10, "ok", 20.0).await;
    let limits = stats(&s).await;
    assert_eq!(
        limits.iter().map(|(_, l)| *l).collect::<Vec<_>>(),
        [10, 14],
        "{limits:?}"
    );
    assert!(limits[1].0.contains("WPG"), "{limits:?}");
    s.server.shutdown().await.unwrap();
}
