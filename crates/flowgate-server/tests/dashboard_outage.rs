//! The dashboard through a Redis outage, in a real headless Chromium: two nodes sharing their
//! rules through Redis under load, Redis killed and started again (see `dashboard.rs` for the
//! harness).

mod common;
#[path = "dashboard/kit.rs"]
mod kit;

use std::time::Duration;

use common::TestServer;
use flowgate_server::rules::RulesSource;
use flowgate_testkit::redis::RedisServer;
use kit::*;
use serde_json::{Value, json};

/// A queue instance's descriptor whose key is long enough to wrap on a phone.
const CHANNEL: &str = "biz=REFUND, channel=WORLDPAYGATEWAYEUROPE";

/// Whether `t` is a time on the page's one clock: `14:03:07`, or `2026-11-27 14:03:07`.
fn is_clock(t: &str) -> bool {
    let time = |s: &str| {
        let b = s.as_bytes();
        b.len() == 8
            && b[2] == b':'
            && b[5] == b':'
            && [0, 1, 3, 4, 6, 7].iter().all(|&i| b[i].is_ascii_digit())
            && s[..2] < *"24"
    };
    match t.split_once(' ') {
        Some((date, hms)) => {
            date.len() == 10
                && date.as_bytes()[4] == b'-'
                && date.as_bytes()[7] == b'-'
                && time(hms)
        }
        None => time(t),
    }
}

/// The per-second counts (admitted and rejected added up) that rule `api/per-client`'s chart
/// draws, and the failure-policy decisions that the store's chart draws: `[[second, n], ...]`
/// each.
const CHARTS: &str = "const rule = document.querySelector('[data-rule=\"api/per-client\"] .chart');
    const store = document.getElementById('store-chart');
    if (!rule || !rule.chart || !store.chart) return null;
    const r = rule.chart.data, s = store.chart.data;
    return [r[0].map((t, i) => [t, r[1][i] + r[2][i]]), s[0].map((t, i) => [t, s[1][i]])];";

/// For every key cell shown (descriptors, queue instances, breaker keys, alert and node names):
/// those not wholly on screen, those broken across lines other than after a separator (or a
/// hyphen, where browsers break words), and how many span more than one line; then the cells of
/// the wide tables (alerts, breakers, queues, nodes) not wholly on screen.
const KEYS: &str = "const off = [], broken = []; let wrapped = 0;
    for (const td of document.querySelectorAll('td.key')) {
      if (td.offsetParent === null) continue;
      const box = td.getBoundingClientRect();
      if (box.left < -0.5 || box.right > window.innerWidth + 0.5) off.push([td.dataset.key, box.left, box.right]);
      let top = null, before = '', lines = 1;
      const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        for (let i = 0; i < n.length; i++) {
          const r = document.createRange();
          r.setStart(n, i);
          r.setEnd(n, i + 1);
          const rects = r.getClientRects();
          if (!rects.length) continue;
          if (top !== null && rects[0].top > top + 2) {
            lines++;
            if (!/[,:;\\/&|\\s-]/.test(before)) broken.push([td.dataset.key, before + n.data[i]]);
          }
          top = rects[0].top;
          before = n.data[i];
        }
      }
      if (lines > 1) wrapped++;
    }
    const cells = [...document.querySelectorAll('table.stack td')]
      .filter(td => td.offsetParent !== null)
      .filter(td => { const b = td.getBoundingClientRect(); return b.left < -0.5 || b.right > window.innerWidth + 0.5; })
      .map(td => td.dataset.label + ': ' + td.textContent);
    return [off, broken, wrapped, cells];";

/// Rule `api/per-client`'s chart redrawn with figures in the hundreds of thousands: the labels of
/// its y axis, the width of the widest in the axis's font, and the axis's width less its ticks
/// and gap.
const AXIS: &str = "const done = arguments[arguments.length - 1];
    const u = document.querySelector('[data-rule=\"api/per-client\"] .chart').chart;
    u.setData(u.data.map((c, k) => k === 0 ? c : c.map((_, i) => 123456 + 1000 * i)));
    requestAnimationFrame(() => requestAnimationFrame(() => {
      const ax = u.axes[1];
      const ctx = document.createElement('canvas').getContext('2d');
      ctx.font = ax.font[0];
      const widest = Math.max(...ax._values.map(v => ctx.measureText(v).width)) / devicePixelRatio;
      done([ax._values, widest, ax._size - ax.ticks.size - ax.gap, u.axes[0]._values]);
    }));";

/// Two nodes following rules shared through Redis (a queue with no consumer, a breaker, alerts),
/// both under load, the page on one of them: the queue reads "no consumer", highlighted, and its
/// row is highlighted while its age alert fires; times are on one 24-hour clock; the y axis fits
/// its labels; at 375 px every key is on screen and broken only after separators. Redis is then
/// killed: the page says so (banner, scope) and marks the queues stale; Redis starts again: the
/// outage's decisions (by the failure policies) are drawn at their seconds, with no burst; a node
/// leaves: the totals say so.
///
/// Two nodes, not one: what caused the burst is how a reader takes another node's seconds, and
/// a node's seconds reach the others only through Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_under_load_on_two_nodes() {
    let mut redis = RedisServer::start();
    let shared = cluster_rules();
    let start = |node: &'static str| {
        let url = redis.url();
        let shared = shared.clone();
        async move {
            TestServer::start_with(&[("rules.toml", &shared)], move |mut c| {
                c.clock = None;
                c.credentials
                    .add_token("admin", flowgate_server::auth::Scope::Admin, ADMIN)
                    .unwrap();
                c.redis_url = Some(url);
                c.rules_source = RulesSource::Redis;
                c.node_id = Some(node.to_owned());
                c
            })
            .await
        }
    };
    let a = start("node-a").await;
    let b = start("node-b").await;
    let _load_a = load(a.http());
    let load_b = load(b.http());
    let jobs = json!({"domain": "api", "descriptor": CHANNEL,
                      "jobs": [{"payload": 1}, {"payload": 2}, {"payload": 3}]});
    let r = common::post_json(a.http(), "/v1/queues/submit", jobs).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let driver = start_driver().await;
    let c = browser(&driver).await;
    c.goto(&format!("http://{}/dashboard?window=120", a.http()))
        .await
        .expect("the page");
    let cluster = "return [document.getElementById('scope').textContent,
                           [...document.querySelectorAll('#nodes tr[data-node] .badge')].map(e => e.textContent)];";
    let (summed, seen) = poll(&c, Duration::from_secs(10), cluster, |v| {
        v == &json!(["cluster", ["live", "live"]])
    })
    .await;
    assert!(summed, "the cluster's nodes: {seen}");

    // The Store section names the primary this node writes to.
    let primary = "return document.querySelector('#store [data-f=primary]').textContent;";
    let want = json!(format!("127.0.0.1:{} (single)", redis.port()));
    let (named, shown) = poll(&c, Duration::from_secs(5), primary, |v| v == &want).await;
    assert!(named, "the Store section's primary: {shown}");

    // Nobody leases the queue's jobs: "no consumer" instead of a drain time, highlighted, and the
    // row highlighted while the alert on the queue's waiting jobs fires.
    let queue = "const r = document.querySelector('#queues tr[data-queue]');
                 return r ? [r.querySelector('[data-f=drain]').textContent, r.className, r.dataset.alerting || null] : null;";
    let (unclaimed, shown) = poll(&c, Duration::from_secs(15), queue, |v| {
        v == &json!(["no consumer", "firing attention", "true"])
    })
    .await;
    assert!(unclaimed, "the queue's row: {shown}");

    // One clock: the times shown and the charts' ticks are 24-hour.
    let times = "return [document.getElementById('at').textContent.replace(/^at /, ''),
                   ...[...document.querySelectorAll('#alerts tr[data-alert] td:nth-child(4), #nodes tr[data-node] td:nth-child(3), #nodes tr[data-node] td:nth-child(4)')]
                      .map(e => e.textContent).filter(t => t !== '–')];";
    let shown = js(&c, times).await;
    let texts: Vec<&str> = shown
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(texts.len() >= 6, "{shown}");
    assert!(
        texts.iter().all(|t| is_clock(t)),
        "times not on the 24-hour clock: {shown}"
    );

    // The y axis is as wide as its widest label, however large the figures.
    let axis = c.execute_async(AXIS, vec![]).await.expect("the axis");
    let (widest, room) = (axis[1].as_f64(), axis[2].as_f64());
    assert!(
        widest.zip(room).is_some_and(|(w, r)| w > 20.0 && w <= r),
        "y labels clipped: {axis}"
    );
    let ticks: Vec<&str> = axis[3]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        !ticks.is_empty() && ticks.iter().all(|t| is_clock(&format!("{t}:00")[..8])),
        "the time axis: {axis}"
    );

    // A phone: no horizontal scroll, every key on screen, broken only after a separator (the
    // queue's instance over more than one line).
    c.set_window_size(375, 740).await.expect("resized");
    let phone = "return window.innerWidth;";
    let (narrow, _) = poll(&c, Duration::from_secs(5), phone, |v| {
        v.as_u64().is_some_and(|w| w <= 400)
    })
    .await;
    assert!(narrow, "the window is phone-sized");
    let (fits, keys) = poll(&c, Duration::from_secs(5), KEYS, |v| {
        v[0] == json!([])
            && v[1] == json!([])
            && v[2].as_u64().is_some_and(|n| n >= 1)
            && v[3] == json!([])
    })
    .await;
    assert!(
        fits,
        "keys off screen, broken mid-word, wrapped; cells off screen: {keys}"
    );
    let widths = js(
        &c,
        "return [document.documentElement.scrollWidth, window.innerWidth];",
    )
    .await;
    assert!(widths[0].as_u64() <= widths[1].as_u64(), "{widths}");
    // Wider, where the tables are tables again: a key column is never squeezed into breaking
    // a key mid-word (the table scrolls in its own box instead).
    c.set_window_size(720, 900).await.expect("resized");
    let (whole, keys) = poll(&c, Duration::from_secs(5), KEYS, |v| v[1] == json!([])).await;
    assert!(whole, "keys broken mid-word at 720 px: {keys}");
    c.set_window_size(1280, 1000).await.expect("resized back");

    // Redis killed: the page says so, the queues' figures are marked stale.
    // The Unix second now, by the clock the servers' figures are on.
    let unix = || (flowgate::clock::system_now() / 1_000_000) as i64;
    let stopped = unix();
    redis.stop();
    let outage = "const b = document.getElementById('outage');
                  return [b.hidden ? null : b.textContent, document.getElementById('scope').textContent,
                          !document.getElementById('queues-stale').hidden,
                          document.getElementById('queues-section').classList.contains('stale')];";
    let (told, shown) = poll(&c, Duration::from_secs(15), outage, |v| {
        v[0].as_str().is_some_and(|t| {
            t.ends_with(": node-only figures, limits decided by failure policies.")
        }) && v[1] == "this node · Redis unreachable"
            && v[2] == true
            && v[3] == true
    })
    .await;
    assert!(told, "during the outage: {shown}");
    assert!(
        shown[0]
            .as_str()
            .is_some_and(|t| t.starts_with("Redis unreachable since ")),
        "{shown}"
    );
    // Meanwhile the charts are node a's alone, before the outage too (not the cluster's figures
    // up to the outage, then half of them); long enough that a burst would show, and longer
    // than the 5 seconds a node always publishes.
    let before_outage = |v: &Value| {
        v[0].as_array().map_or(Vec::new(), |s| {
            s.iter()
                .filter(|p| p[0].as_i64().is_some_and(|t| t < stopped - 1))
                .filter_map(|p| p[1].as_u64())
                .collect::<Vec<u64>>()
        })
    };
    let (long, charts) = poll(&c, Duration::from_secs(20), CHARTS, |v| {
        let during = v[1].as_array().map_or(0, |s| {
            s.iter()
                .filter(|p| p[0].as_i64() >= Some(stopped) && p[1].as_u64() > Some(0))
                .count()
        });
        during >= 9 && before_outage(v).iter().rev().take(5).all(|n| *n <= 50)
    })
    .await;
    assert!(
        long,
        "nine seconds of node a's own failure-policy decisions, its own counts before: {charts}"
    );
    redis.restart();
    let restarted = unix();

    // Back: the cluster's figures, the outage's decisions at their seconds, no burst.
    let (from, to) = (stopped, restarted);
    let (back, scope) = poll(&c, Duration::from_secs(20), outage, |v| {
        v[0].is_null() && v[1] == "cluster"
    })
    .await;
    assert!(back, "after the outage: {scope}");
    // The outage's seconds are the cluster's: node b's decisions of those seconds reach node a
    // (node a alone decides 40 a second), at their seconds.
    let in_outage = |v: &Value| -> Vec<u64> {
        v[1].as_array().map_or(Vec::new(), |s| {
            s.iter()
                .filter(|p| p[0].as_i64().is_some_and(|t| t >= from && t <= to))
                .filter_map(|p| p[1].as_u64())
                .filter(|n| *n > 0)
                .collect()
        })
    };
    let (back, charts) = poll(&c, Duration::from_secs(20), CHARTS, |v| {
        let seconds = in_outage(v);
        seconds.len() >= 9 && seconds.iter().any(|n| *n > 50)
    })
    .await;
    assert!(
        back,
        "the outage's seconds ({from} to {to}): {:?}",
        charts[1].as_array().map(|s| s
            .iter()
            .filter(|p| p[1].as_u64() > Some(0))
            .collect::<Vec<_>>())
    );
    // Two nodes, each 40 decisions a second (30 + 2 × 5): 80, with room for a busy machine. (A
    // decision may be left to its policy outside the outage too: a store call that misses its
    // deadline of a few milliseconds on a busy machine.)
    for (i, what) in [(0, "decisions"), (1, "failure-policy decisions")] {
        let most = charts[i]
            .as_array()
            .and_then(|s| s.iter().filter_map(|p| p[1].as_u64()).max());
        assert!(
            most.is_some_and(|m| m <= 140),
            "a burst of {what}: {most:?} in {charts}"
        );
    }
    // Node b leaves: the totals say whose counts they no longer hold.
    drop(load_b);
    b.server.shutdown().await.expect("node b stopped");
    let note =
        "const n = document.querySelector('[data-rule=\"api/per-client\"] [data-f=totals-note]');
                return n && !n.hidden ? n.textContent : null;";
    let (said, shown) = poll(&c, Duration::from_secs(15), note, |v| {
        v.as_str()
            .is_some_and(|t| t.starts_with("live nodes only: node-b left at "))
    })
    .await;
    assert!(said, "the totals' note: {shown}");
    assert_eq!(page_errors(&c).await, Vec::<String>::new());
    c.close().await.expect("the session closed");
}
