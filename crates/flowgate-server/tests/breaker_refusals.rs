//! Circuit breakers as `GET /v1/stats` shows them, on the embedded store (a server in process, on
//! a manual clock) and on a real Redis with the breakers shared by two nodes: requests an open
//! breaker refused are counted under every rule their descriptors match (`circuit_open`, apart
//! from the rules' own rejections) and under the breaker instance (`refused_rate`, the
//! cluster's on Redis); an open instance says why it opened (`opened_calls`, `opened_bad`, on the
//! node that saw none of the reports too); a half-open one counts its probes out, across the
//! cluster on Redis.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{TestServer, http, post_json, wait_until};
use flowgate_testkit::redis::RedisServer;
use serde_json::{Value, json};
use tokio::time::Instant;

/// Two rules a payment's descriptors match, and a breaker per channel: 3 bad calls of 6 open it.
const CONFIG: &str = r#"domain = "pay"

[[rule]]
name = "per-channel"
match = "channel"
limit = "10000/s"

[[rule]]
name = "per-merchant"
match = "merchant"
limit = "10000/s"

[[breaker]]
name = "channel"
match = ["channel"]
strategy = "error_ratio"
threshold = 0.5
window = "10s"
min_calls = 4
open_for = "2s"
probes = 1
probe_timeout = "30s"
"#;

/// A payment through WPG: its channel's breaker and both rules match; `region` matches nothing.
fn payment() -> Value {
    json!({"domain": "pay", "descriptors": ["channel=WPG", "merchant=m1", "region=eu"]})
}

async fn check(addr: SocketAddr) -> common::HttpResponse {
    post_json(addr, "/v1/check", payment()).await
}

fn refused(r: &common::HttpResponse) -> bool {
    r.status == 429 && r.json()["reason"] == "circuit_open"
}

/// Three calls succeed, then three fail: the breaker opens at the sixth, 3 bad of 6 (however
/// the node batches them: no earlier prefix trips it).
async fn open(addr: SocketAddr) {
    let report = |outcome: &str| json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": outcome, "latency_ms": 4});
    let reports = json!({"reports": [report("ok"), report("ok"), report("ok"),
        report("error"), report("error"), report("error")]});
    let r = post_json(addr, "/v1/report", reports).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

async fn stats(addr: SocketAddr, query: &str) -> Value {
    http(addr, "GET", &format!("/v1/stats{query}"), &[], "")
        .await
        .json()
}

fn rule<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["rules"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("no rule {name} in {v}"))
}

fn breaker(v: &Value) -> &Value {
    &v["breakers"][0]
}

/// Polls `addr`'s stats (`query`) every 50 ms until `ok` holds, for up to `within`; the last
/// view either way.
async fn poll(
    addr: SocketAddr,
    query: &str,
    within: Duration,
    ok: impl Fn(&Value) -> bool,
) -> (bool, Value) {
    let end = Instant::now() + within;
    loop {
        let v = stats(addr, query).await;
        if ok(&v) {
            return (true, v);
        }
        if Instant::now() >= end {
            return (false, v);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A rule's refusals by breaker, and that its own figures know nothing of them.
fn refusals_of(v: &Value, name: &str) -> (u64, u64, f64) {
    let r = rule(v, name);
    let series: u64 = r["series"]["circuit_open"]
        .as_array()
        .map(|s| s.iter().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    (
        r["totals"]["circuit_open"].as_u64().unwrap_or(0),
        series,
        r["circuit_open_rate"].as_f64().unwrap_or(0.0),
    )
}

fn untouched_by_the_limit(v: &Value) {
    for name in ["per-channel", "per-merchant"] {
        let r = rule(v, name);
        assert_eq!(r["totals"]["rejected"], 0, "{name}: {r}");
        assert_eq!(r["rejection_ratio"], 0.0, "{name}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_reasons_and_probes_on_the_embedded_store() {
    let s = TestServer::start(&[("flowgate.toml", CONFIG)]).await;
    let addr = s.http();
    assert_eq!(check(addr).await.status, 200);
    open(addr).await;
    let refusals = 12u64;
    for _ in 0..refusals {
        let r = check(addr).await;
        assert!(refused(&r), "{} {}", r.status, r.body);
    }

    // Under both rules, since start and per second; per instance, per second over 5 s.
    let rate = refusals as f64 / 5.0;
    let (held, v) = poll(addr, "?window=60", Duration::from_secs(8), |v| {
        refusals_of(v, "per-channel") == (refusals, refusals, rate)
            && refusals_of(v, "per-merchant") == (refusals, refusals, rate)
            && breaker(v)["refused_rate"] == rate
    })
    .await;
    assert!(held, "{refusals} refusals at {rate}/s: {v}");
    untouched_by_the_limit(&v);
    let b = breaker(&v);
    assert_eq!(
        (&b["phase"], &b["opened_calls"], &b["opened_bad"]),
        (&json!("open"), &json!(6), &json!(3)),
        "{b}"
    );
    // No rule was asked: `region` counted as matching no rule for the admitted request alone.
    let m = http(addr, "GET", "/metrics", &[], "").await.body;
    assert!(
        m.contains("flowgate_decisions_total{domain=\"pay\",rule=\"\",outcome=\"no_rule\",descriptor=\"\"} 1\n"),
        "{m}"
    );
    assert!(m.contains(&format!(
        "flowgate_breaker_rejections_total{{domain=\"pay\",breaker=\"channel\"}} {refusals}"
    )));

    // Half-open: the probe out is counted, why it opened is kept.
    s.clock.advance(Duration::from_secs(2));
    let probe = check(addr).await;
    assert_eq!(probe.status, 200, "the probe: {}", probe.body);
    let b = breaker(&stats(addr, "?window=1").await).clone();
    assert_eq!(
        (
            &b["phase"],
            &b["probes_out"],
            &b["opened_calls"],
            &b["shared"]
        ),
        (&json!("half_open"), &json!(1), &json!(6), &json!(false)),
        "{b}"
    );
    s.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_reasons_and_probes_of_a_breaker_shared_by_two_nodes() {
    let redis = RedisServer::start();
    let start = |node: &'static str| {
        let url = redis.url();
        TestServer::start_with(&[("flowgate.toml", CONFIG)], move |mut c| {
            c.clock = None;
            c.redis_url = Some(url);
            c.node_id = Some(node.to_owned());
            c
        })
    };
    let (a, b) = (start("node-a").await, start("node-b").await);
    let (a, b) = ((a.http(), a), (b.http(), b));
    for addr in [a.0, b.0] {
        let (both, v) = poll(addr, "?window=1", Duration::from_secs(6), |v| {
            v["nodes"]
                .as_array()
                .is_some_and(|n| n.iter().filter(|n| n["live"] == true).count() == 2)
        })
        .await;
        assert!(both, "{v}");
    }

    // The failures reported through a open the breaker; both nodes refuse their own traffic.
    open(a.0).await;
    assert!(
        wait_until(Duration::from_secs(3), || async {
            refused(&check(b.0).await)
        })
        .await,
        "b never refused"
    );
    let (on_a, on_b) = (7u64, 5u64);
    for (addr, n) in [(a.0, on_a), (b.0, on_b - 1)] {
        for _ in 0..n {
            let r = check(addr).await;
            assert!(refused(&r), "{} {}", r.status, r.body);
        }
    }
    let all = on_a + on_b;

    // The cluster's figures, through either node: every refusal under both rules, the instance
    // refusing at the cluster's rate, and why it opened, on b too, which saw none of the
    // reports.
    let rate = all as f64 / 5.0;
    for addr in [b.0, a.0] {
        let (held, v) = poll(addr, "?window=60", Duration::from_secs(8), |v| {
            refusals_of(v, "per-channel").0 == all
                && refusals_of(v, "per-channel").1 == all
                && refusals_of(v, "per-merchant").0 == all
                && breaker(v)["refused_rate"] == rate
        })
        .await;
        assert!(held, "{all} refusals at {rate}/s: {v}");
        untouched_by_the_limit(&v);
        let br = breaker(&v);
        assert_eq!(
            (&br["opened_calls"], &br["opened_bad"], &br["shared"]),
            (&json!(6), &json!(3), &json!(true)),
            "{br}"
        );
    }
    // Each node's own, on request.
    let own = stats(b.0, "?window=60&scope=node").await;
    assert_eq!(refusals_of(&own, "per-channel").0, on_b, "{own}");

    // Half-open after open_for (2 s): the probe taken through a is out on b too.
    let end = Instant::now() + Duration::from_secs(5);
    let lease = loop {
        let r = check(a.0).await;
        if r.status == 200 {
            break r.json()["probes"][0]["probe"].clone();
        }
        assert!(Instant::now() < end, "no probe: {} {}", r.status, r.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(lease.is_u64(), "no probe lease: {lease}");
    let (held, v) = poll(b.0, "?window=1", Duration::from_secs(4), |v| {
        breaker(v)["phase"] == "half_open" && breaker(v)["probes_out"] == 1
    })
    .await;
    assert!(held, "b never showed the probe out: {v}");
    assert_eq!(breaker(&v)["opened_calls"], 6, "{v}");

    // Its failure opens it again: one probe of one, bad.
    let failed = json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": "error", "latency_ms": 4, "probe": lease});
    assert_eq!(post_json(b.0, "/v1/report", failed).await.status, 200);
    let (held, v) = poll(a.0, "?window=1", Duration::from_secs(4), |v| {
        breaker(v)["phase"] == "open" && breaker(v)["opened_calls"] == 1
    })
    .await;
    assert!(held, "{v}");
    assert_eq!(
        (&breaker(&v)["opened_bad"], &breaker(&v)["probes_out"]),
        (&json!(1), &json!(0))
    );
    a.1.server.shutdown().await.unwrap();
    b.1.server.shutdown().await.unwrap();
}
