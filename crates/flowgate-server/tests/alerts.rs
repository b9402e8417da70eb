//! Alerts end to end: two server processes on one Redis announce each transition once to a
//! webhook receiver on loopback, in Alertmanager's format, across a leader's death; a webhook
//! that never answers leaves decisions' latency as it was and its outbox bounded; alerts follow
//! file reloads and shared versions; an invalid alert is refused with its file, line and field.

mod common;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::Router;
use axum::routing::post;
use common::{TestServer, config, http, metric, post_json, spawn_server, wait_until, write};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// A webhook receiver on loopback: the messages it got; `/hook` answers, `/hang` never does.
struct Receiver {
    got: Arc<Mutex<Vec<Value>>>,
    base: String,
}

async fn receiver() -> Receiver {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = Arc::clone(&got);
    let app = Router::new()
        .route(
            "/hook",
            post(move |body: String| {
                let g = Arc::clone(&g);
                async move {
                    g.lock()
                        .push(serde_json::from_str(&body).unwrap_or(Value::Null));
                    "ok"
                }
            }),
        )
        .route(
            "/hang",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "late"
            }),
        );
    Receiver {
        got,
        base: common::serve_app(app).await,
    }
}

async fn check(addr: std::net::SocketAddr, client: &str) -> u16 {
    post_json(
        addr,
        "/v1/check",
        json!({"domain": "api", "descriptors": [format!("client={client}")]}),
    )
    .await
    .status
}

fn statuses(got: &[Value]) -> Vec<String> {
    got.iter()
        .map(|m| m["status"].as_str().unwrap_or("?").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_redis_announce_each_transition_once() {
    let redis = flowgate_testkit::redis::RedisServer::start();
    let r = receiver().await;
    let (_dir, path) = config(&format!(
        r#"domain = "api"
alert_webhooks = ["{}/hook"]

[[rule]]
name = "per-client"
match = "client"
limit = "2/s"

[[alert]]
name = "per-client-rejecting"
rule = "per-client"
rejection_ratio = 0.5
for = "2s"
min_rate = 2
severity = "page"
"#,
        r.base
    ));
    let url = redis.url();
    let mut nodes = [
        Some(spawn_server(
            &path,
            &["--redis-url", &url, "--node-id", "node-a"],
        )),
        Some(spawn_server(
            &path,
            &["--redis-url", &url, "--node-id", "node-b"],
        )),
    ];
    // Load on every live node: about 20 requests per second each for one client, far over the
    // cluster's 2 per second.
    let load = |nodes: Vec<std::net::SocketAddr>, until: Duration| async move {
        let end = Instant::now() + until;
        while Instant::now() < end {
            for a in &nodes {
                check(*a, "hot").await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let addrs: Vec<_> = nodes.iter().flatten().map(|p| p.http).collect();
    let started = Instant::now();
    while r.got.lock().is_empty() && started.elapsed() < Duration::from_secs(30) {
        load(addrs.clone(), Duration::from_millis(500)).await;
    }
    eprintln!("fired {:?} after the load began", started.elapsed());
    assert_eq!(statuses(&r.got.lock()), ["firing"]);
    // Every node shows it firing, in the view and the metric (a follower reads the stored
    // states each second, and its view is made each second: within a few).
    for a in &addrs {
        let shown = wait_until(Duration::from_secs(5), || async {
            // (the load goes on meanwhile, so the alert keeps firing)
            load(addrs.clone(), Duration::from_millis(200)).await;
            let v = http(*a, "GET", "/v1/stats?window=1", &[], "").await.json();
            v["alerts"][0]["state"] == "firing"
        })
        .await;
        let v = http(*a, "GET", "/v1/stats?window=1", &[], "").await.json();
        assert!(shown, "{v}");
        assert_eq!(v["alerts"][0]["name"], "per-client-rejecting", "{v}");
        let m = http(*a, "GET", "/metrics", &[], "").await.body;
        assert!(
            m.contains("flowgate_alerts_firing{alert=\"per-client-rejecting\"} 1"),
            "{m}"
        );
    }
    // The evaluator dies; the other node takes the lease over and goes on from the stored
    // states: the alert is not announced again.
    let leader = redis
        .cli(&["GET", "flowgate:{alerts}:leader"])
        .unwrap()
        .trim()
        .to_owned();
    let dead = usize::from(!leader.starts_with("node-a/"));
    nodes[dead] = None;
    let survivor = nodes[1 - dead].as_ref().unwrap().http;
    load(vec![survivor], Duration::from_secs(5)).await;
    let now_leader = redis.cli(&["GET", "flowgate:{alerts}:leader"]).unwrap();
    assert!(
        now_leader
            .trim()
            .starts_with(["node-a/", "node-b/"][1 - dead]),
        "{leader} -> {now_leader}"
    );
    assert_eq!(statuses(&r.got.lock()), ["firing"]);
    // The load stops: under the minimum rate, the alert resolves, once.
    assert!(
        wait_until(Duration::from_secs(20), || async {
            r.got.lock().len() >= 2
        })
        .await,
        "no resolved message"
    );
    // Nothing further comes: no event marks "would have sent a duplicate", so the receiver is
    // watched for 3 s more, three of the follower's one-second reads of the stored states.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let got = r.got.lock().clone();
    assert_eq!(statuses(&got), ["firing", "resolved"], "{got:#?}");
    for m in &got {
        assert_eq!(m["version"], "4");
        assert_eq!(m["receiver"], "flowgate");
        assert_eq!(m["groupKey"], "{}:{alertname=\"per-client-rejecting\"}");
        assert_eq!(
            m["groupLabels"],
            json!({"alertname": "per-client-rejecting"})
        );
        assert_eq!(m["truncatedAlerts"], 0);
        assert!(
            m["externalURL"]
                .as_str()
                .unwrap()
                .starts_with("http://127.0.0.1:")
        );
        let a = &m["alerts"][0];
        assert_eq!(
            a["labels"],
            json!({"alertname": "per-client-rejecting", "domain": "api", "rule": "per-client", "severity": "page"})
        );
        assert_eq!(m["commonLabels"], a["labels"]);
        assert!(a["annotations"]["summary"].is_string());
        assert_eq!(a["fingerprint"].as_str().unwrap().len(), 16);
    }
    let (f, res) = (&got[0]["alerts"][0], &got[1]["alerts"][0]);
    assert_eq!(f["endsAt"], "0001-01-01T00:00:00Z");
    assert_eq!(
        res["startsAt"], f["startsAt"],
        "the resolution keeps the start announced"
    );
    assert_ne!(res["endsAt"], "0001-01-01T00:00:00Z");
    assert_eq!(res["fingerprint"], f["fingerprint"]);
}

/// Percentile `p` (0..=100) of `v`, sorted in place.
fn percentile(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

fn counter(metrics: &str, line_start: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_never_answers_changes_neither_latency_nor_memory() {
    let r = receiver().await;
    // 300 alerts that fire on the first rejection: more messages than an outbox holds (256).
    let alerts = |webhooks: &str| {
        let mut t = String::from(
            "domain = \"api\"\n[[rule]]\nname = \"per-client\"\nmatch = \"client\"\nlimit = \"1/m\"\n",
        );
        for i in 0..300 {
            t.push_str(&format!(
                "[[alert]]\nname = \"a{i}\"\nrule = \"per-client\"\nrejection_ratio = 0\nmin_rate = 0\nwebhooks = [{webhooks}]\n"
            ));
        }
        t
    };
    let hanging = TestServer::start(&[("a.toml", &alerts(&format!("\"{}/hang\"", r.base)))]).await;
    let quiet = TestServer::start(&[("a.toml", &alerts(""))]).await;
    let (h, q) = (hanging.http(), quiet.http());
    // Both reject (one per minute on a manual clock that stands still) until their alerts fire.
    let firing = |addr| async move {
        check(addr, "hot").await;
        let m = http(addr, "GET", "/metrics", &[], "").await.body;
        m.lines()
            .filter(|l| l.starts_with("flowgate_alerts_firing{") && l.ends_with(" 1"))
            .count()
            == 300
    };
    assert!(
        wait_until(Duration::from_secs(15), || firing(h)).await,
        "the alerts did not fire"
    );
    assert!(
        wait_until(Duration::from_secs(15), || firing(q)).await,
        "the alerts did not fire"
    );
    // Decisions, paired: rounds alternate between the two servers.
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 0..40 {
        let order = if round % 2 == 0 { [h, q] } else { [q, h] };
        for addr in order {
            for _ in 0..25 {
                let t = Instant::now();
                check(addr, "hot").await;
                let took = t.elapsed();
                if addr == h {
                    with.push(took);
                } else {
                    without.push(took);
                }
            }
        }
    }
    let (p99_with, p99_without) = (percentile(&mut with, 99), percentile(&mut without, 99));
    let (p50_with, p50_without) = (percentile(&mut with, 50), percentile(&mut without, 50));
    eprintln!(
        "decisions over HTTP, 1000 each, paired: with a hanging webhook p50 {p50_with:?} p99 {p99_with:?}; without p50 {p50_without:?} p99 {p99_without:?}"
    );
    assert!(
        p99_with <= p99_without * 2 + Duration::from_millis(2),
        "p99 {p99_with:?} with a hanging webhook, {p99_without:?} without"
    );
    // The outbox kept its bound: the 44 messages beyond it were dropped and counted.
    let m = http(h, "GET", "/metrics", &[], "").await.body;
    let dropped = counter(&m, "flowgate_alert_notifications_total{result=\"dropped\"}");
    eprintln!("messages dropped at the outbox's bound: {dropped}");
    assert!(dropped >= 300 - 256, "{m}");
    assert_eq!(
        counter(&m, "flowgate_alert_notifications_total{result=\"sent\"}"),
        0
    );
}

const RULE: &str =
    "domain = \"api\"\n[[rule]]\nname = \"per-client\"\nmatch = \"client\"\nlimit = \"5/s\"\n";

async fn alert_names(addr: std::net::SocketAddr) -> Vec<String> {
    let v = http(addr, "GET", "/v1/stats?window=1", &[], "")
        .await
        .json();
    v["alerts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_follow_file_reloads_and_invalid_ones_are_refused_with_their_place() {
    let s = TestServer::start(&[(
        "a.toml",
        &format!("{RULE}[[alert]]\nname = \"one\"\nstore = \"degraded\"\n"),
    )])
    .await;
    assert_eq!(alert_names(s.http()).await, ["one"]);
    write(
        &s.path("a.toml"),
        &format!("{RULE}[[alert]]\nname = \"two\"\nrule = \"per-client\"\nrejection_ratio = 0.5\n"),
    );
    assert!(
        wait_until(Duration::from_secs(5), || async {
            alert_names(s.http()).await == ["two"]
        })
        .await
    );
    let v = http(s.http(), "GET", "/v1/stats?window=1", &[], "")
        .await
        .json();
    assert_eq!(
        v["alerts"][0]["watches"],
        "rule api/per-client rejection ratio > 0.5 at >= 1/s"
    );
    assert_eq!(v["alerts"][0]["state"], "inactive");
    // An alert naming no rule is refused; the last good alerts stay. The assertion runs once
    // the server counts the failed reload of the edited file.
    let failed = ["source=\"file\"", "result=\"failure\""];
    let failures = metric(s.http(), "flowgate_config_reloads_total", &failed).await;
    write(
        &s.path("a.toml"),
        &format!("{RULE}[[alert]]\nname = \"three\"\nrule = \"nope\"\nrejection_ratio = 0.5\n"),
    );
    assert!(
        wait_until(Duration::from_secs(20), || async {
            metric(s.http(), "flowgate_config_reloads_total", &failed).await > failures
        })
        .await,
        "the server never counted a failed reload of the edited file"
    );
    assert_eq!(alert_names(s.http()).await, ["two"]);

    // The binary names the file, the line and the field.
    let (dir, path) = config(&format!(
        "{RULE}[[alert]]\nname = \"three\"\nrule = \"nope\"\nrejection_ratio = 0.5\n"
    ));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flowgate"))
        .current_dir(dir.path())
        .args(["serve", "--config"])
        .arg(&path)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("flowgate.toml:8: field `alert[0].rule`: no rule `nope` in domain `api`"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_follow_the_shared_rules_and_a_put_of_what_get_shows_keeps_them() {
    let redis = flowgate_testkit::redis::RedisServer::start();
    let url = redis.url();
    let s = TestServer::start_with(&[("a.toml", RULE)], |mut c| {
        c.redis_url = Some(url.clone());
        c.rules_source = flowgate_server::rules::RulesSource::Redis;
        c.credentials
            .add_token(
                "admin",
                flowgate_server::auth::Scope::Admin,
                "secret-0123456789abcdef0123456789abcdef",
            )
            .unwrap();
        c
    })
    .await;
    let auth = [
        (
            "authorization",
            "Bearer secret-0123456789abcdef0123456789abcdef",
        ),
        ("content-type", "application/toml"),
    ];
    let with_alert = format!(
        "{RULE}[[alert]]\nname = \"shared\"\nrule = \"per-client\"\nrejection_ratio = 0.9\nfor = \"1m\"\n"
    );
    let r = http(s.http(), "PUT", "/v1/rules", &auth, &with_alert).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(alert_names(s.http()).await, ["shared"]);
    let got = http(s.http(), "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(got["alert"][0]["name"], "shared", "{got}");
    assert_eq!(got["alert"][0]["for"], "1m");
    // What GET shows, sent back, is the version in force: nothing stored, the alert kept.
    let r = http(
        s.http(),
        "PUT",
        "/v1/rules",
        &[
            (
                "authorization",
                "Bearer secret-0123456789abcdef0123456789abcdef",
            ),
            ("content-type", "application/json"),
        ],
        &got.to_string(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(alert_names(s.http()).await, ["shared"]);
    // An invalid alert is refused, naming its field.
    let r = http(
        s.http(),
        "PUT",
        "/v1/rules",
        &auth,
        &format!("{RULE}[[alert]]\nname = \"x\"\nrule = \"per-client\"\nrejection_ratio = 1\n"),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("alert[0].rejection_ratio"), "{}", r.body);
    assert_eq!(alert_names(s.http()).await, ["shared"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_alert_fires_while_the_breaker_is_open_and_resolves_when_a_probe_closes_it() {
    let rx = receiver().await;
    let text = format!(
        r#"domain = "pay"
alert_webhooks = ["{}/hook"]

[[rule]]
name = "per-channel"
match = "channel"
limit = "1000/s"

[[breaker]]
name = "channel"
match = ["channel"]
strategy = "error_count"
threshold = 2
window = "10s"
min_calls = 2
open_for = "30s"

[[alert]]
name = "channel-open"
breaker = "channel"
"#,
        rx.base
    );
    let s = TestServer::start(&[("flowgate.toml", &text)]).await;
    let error = json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": "error", "latency_ms": 5});
    let r = post_json(s.http(), "/v1/report", json!({"reports": [error, error]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let got = Arc::clone(&rx.got);
    let fired = wait_until(Duration::from_secs(5), || {
        let got = Arc::clone(&got);
        async move { statuses(&got.lock()) == ["firing"] }
    })
    .await;
    assert!(fired, "{:?}", rx.got.lock());
    {
        let got = rx.got.lock();
        let labels = &got[0]["alerts"][0]["labels"];
        assert_eq!(labels["alertname"], "channel-open");
        assert_eq!(labels["breaker"], "channel");
        assert_eq!(labels["domain"], "pay");
    }
    // After open_for one probe passes; its success closes the breaker and resolves the alert.
    s.clock.advance(Duration::from_secs(31));
    let probe = post_json(
        s.http(),
        "/v1/check",
        json!({"domain": "pay", "descriptors": ["channel=WPG"]}),
    )
    .await;
    assert_eq!(probe.status, 200, "{}", probe.body);
    let lease = probe.json()["probes"][0]["probe"].clone();
    let ok = json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": "ok", "latency_ms": 3, "probe": lease});
    assert_eq!(post_json(s.http(), "/v1/report", ok).await.status, 200);
    let resolved = wait_until(Duration::from_secs(5), || {
        let got = Arc::clone(&got);
        async move { statuses(&got.lock()) == ["firing", "resolved"] }
    })
    .await;
    assert!(resolved, "{:?}", rx.got.lock());
    s.server.shutdown().await.unwrap();
}
