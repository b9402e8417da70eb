//! Circuit breakers on the dashboard, in a real headless Chromium: refusals on the rule cards
//! and the breaker's row, why it opened, the probes out (see `dashboard.rs` for the harness).

mod common;
#[path = "dashboard/kit.rs"]
mod kit;

use std::net::SocketAddr;
use std::time::Duration;

use common::TestServer;
use flowgate_testkit::redis::RedisServer;
use kit::*;
use serde_json::json;

/// Payments through channel WPG (two rules match them, a breaker per channel: 3 bad calls of 6
/// open it), for the breaker checks below.
const BREAKER_RULES: &str = r#"
domain = "pay"

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

/// Three calls of WPG succeed, then three fail: its breaker opens at the sixth, 3 bad of 6.
async fn open_wpg(addr: SocketAddr) {
    let report = |outcome: &str| json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": outcome, "latency_ms": 4});
    let reports = json!({"reports": [report("ok"), report("ok"), report("ok"),
        report("error"), report("error"), report("error")]});
    let r = common::post_json(addr, "/v1/report", reports).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Payments through WPG at 20 per second, until dropped.
fn payments(addr: SocketAddr) -> Load {
    Load(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let body = json!({"domain": "pay", "descriptors": ["channel=WPG", "merchant=m1"]});
            let two = [body.clone(), body].map(|b| common::post_json(addr, "/v1/check", b));
            futures::future::join_all(two).await;
        }
    }))
}

/// What a rule's card shows of breaker refusals: [rate shown, shown, highlighted, charted].
fn card_refusals(rule: &str) -> String {
    format!(
        "const card = document.querySelector('[data-rule=\"{rule}\"]');
         if (!card) return null;
         const fig = card.querySelector('[data-fig=\"circuit-open\"]');
         const labels = [...card.querySelectorAll('.u-legend .u-label')].map(e => e.textContent);
         return [Number(fig.querySelector('.value').dataset.value), !fig.hidden,
                 fig.classList.contains('high'), labels.includes('refused by breaker/s')];"
    )
}

/// What WPG's breaker row shows: [phase, opened by, refused/s, refusing highlighted, probes
/// out, decided by].
const WPG_ROW: &str = "const r = document.querySelector('#breakers tr[data-breaker=\"pay:channel:channel=WPG\"]');
     if (!r) return null;
     const f = n => r.querySelector('[data-f=' + n + ']');
     return [f('phase').textContent, f('opened').textContent, Number(f('refused').dataset.value),
             f('refused').classList.contains('refusing'), f('probes').textContent, f('scope').textContent];";

/// Breakers seen truthfully in the browser: requests an open breaker refuses are on the cards of
/// the rules they would have been decided by (highlighted, charted, not in the rejection ratio),
/// and on the breaker's row with why it opened and the probes out; on the embedded store, then
/// on two nodes sharing their breakers through a real Redis, where the page of the node that
/// sees none of the traffic and none of the reports shows the cluster's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_refusals_reasons_and_probes_in_a_real_browser() {
    let driver = start_driver().await;
    let c = browser(&driver).await;

    // Embedded store, on a manual clock: open until the clock moves.
    let ts = TestServer::start(&[("rules.toml", BREAKER_RULES)]).await;
    let addr = ts.http();
    c.goto(&format!("http://{addr}/dashboard"))
        .await
        .expect("the page");
    open_wpg(addr).await;
    let load = payments(addr);
    for rule in ["pay/per-channel", "pay/per-merchant"] {
        let (shown, card) = poll(&c, Duration::from_secs(10), &card_refusals(rule), |v| {
            v[0].as_f64().is_some_and(|r| r >= 10.0) && v[1] == true && v[2] == true && v[3] == true
        })
        .await;
        assert!(shown, "{rule}'s card: {card}");
        let ratio = js(&c, &rule_fig(rule, "ratio")).await;
        assert_eq!(
            ratio.as_f64(),
            Some(0.0),
            "{rule}: the limit rejected nothing"
        );
    }
    let (shown, row) = poll(&c, Duration::from_secs(5), WPG_ROW, |v| {
        v[0] == "open"
            && v[1] == "3 bad of 6"
            && v[2].as_f64().is_some_and(|r| r >= 10.0)
            && v[3] == true
    })
    .await;
    assert!(shown, "the breaker's row: {row}");
    // Half-open: the next payment is the probe, out for 30 s; the others are refused.
    ts.clock.advance(Duration::from_secs(2));
    let (shown, row) = poll(&c, Duration::from_secs(5), WPG_ROW, |v| {
        v[0] == "half-open" && v[4] == "1"
    })
    .await;
    assert!(shown, "the breaker's row: {row}");
    assert_eq!((&row[1], &row[5]), (&json!("3 bad of 6"), &json!("node")));
    drop(load);
    assert_eq!(page_errors(&c).await, Vec::<String>::new());
    // Away from the page before its server stops (its reconnections would log errors).
    c.goto("about:blank").await.expect("a blank page");
    ts.server.shutdown().await.unwrap();

    // Two nodes on one Redis: the payments and the reports go through a; b's page shows them.
    let redis = RedisServer::start();
    let start = |node: &'static str| {
        let url = redis.url();
        TestServer::start_with(&[("rules.toml", BREAKER_RULES)], move |mut cfg| {
            cfg.clock = None;
            cfg.redis_url = Some(url);
            cfg.node_id = Some(node.to_owned());
            cfg
        })
    };
    let (a, b) = (start("node-a").await, start("node-b").await);
    c.goto(&format!("http://{}/dashboard", b.http()))
        .await
        .expect("b's page");
    let two_live = "return [...document.querySelectorAll('#nodes [data-node]')].length;";
    let (both, nodes) = poll(&c, Duration::from_secs(6), two_live, |v| v == 2).await;
    assert!(both, "b's page lists {nodes} nodes");
    open_wpg(a.http()).await;
    let load = payments(a.http());
    let (shown, card) = poll(
        &c,
        Duration::from_secs(10),
        &card_refusals("pay/per-channel"),
        |v| v[0].as_f64().is_some_and(|r| r >= 10.0) && v[2] == true,
    )
    .await;
    assert!(shown, "b's card of the cluster's refusals: {card}");
    // Past open_for the load takes the probe, through a: b shows it out.
    let (shown, row) = poll(&c, Duration::from_secs(10), WPG_ROW, |v| {
        v[0] == "half-open" && v[4] == "1" && v[2].as_f64().is_some_and(|r| r > 0.0)
    })
    .await;
    assert!(shown, "b's breaker row: {row}");
    assert_eq!(
        (&row[1], &row[5]),
        (&json!("3 bad of 6"), &json!("cluster"))
    );
    drop(load);
    assert_eq!(page_errors(&c).await, Vec::<String>::new());
    assert_eq!(console_errors(&c).await, Vec::<String>::new());
    c.goto("about:blank").await.expect("a blank page");
    c.close().await.expect("closing the browser");
    a.server.shutdown().await.unwrap();
    b.server.shutdown().await.unwrap();
}
