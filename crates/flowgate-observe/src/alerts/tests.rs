//! The evaluator end to end on an injected clock: a webhook receiver on loopback, one node
//! alone, two evaluators on one real Redis, and a webhook that never answers.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use parking_lot::Mutex;
use serde_json::Value;

use super::cluster::{Cluster, LEADER_KEY};
use super::delivery::Delivery;
use super::*;
use crate::view::RuleStats;
use flowgate_config::alert::{AlertKind, AlertSet};

/// A webhook receiver and an Alertmanager's API on loopback: the messages each got, and their
/// addresses.
struct Receiver {
    got: Arc<Mutex<Vec<Value>>>,
    url: String,
    hang_url: String,
    /// The bodies posted to `base`'s `/api/v2/alerts`.
    posted: Arc<Mutex<Vec<Value>>>,
    base: String,
}

/// A route that keeps each JSON body posted to it in `into`.
fn recording(into: &Arc<Mutex<Vec<Value>>>) -> axum::routing::MethodRouter {
    let into = Arc::clone(into);
    post(move |body: String| {
        let into = Arc::clone(&into);
        async move {
            into.lock()
                .push(serde_json::from_str(&body).unwrap_or(Value::Null));
            "ok"
        }
    })
}

async fn receiver() -> Receiver {
    let got = Arc::new(Mutex::new(Vec::new()));
    let posted = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/hook", recording(&got))
        .route("/api/v2/alerts", recording(&posted))
        .route(
            "/hang",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Receiver {
        got,
        url: format!("http://{addr}/hook"),
        hang_url: format!("http://{addr}/hang"),
        posted,
        base: format!("http://{addr}"),
    }
}

fn alert(webhooks: Vec<String>) -> AlertSpec {
    AlertSpec {
        name: "per-client-rejecting".into(),
        kind: AlertKind::Rule {
            domain: "api".into(),
            rule: "per-client".into(),
            ratio: 0.5,
            min_rate: 2.0,
        },
        for_ms: 2_000,
        webhooks,
        alertmanagers: vec![],
        severity: Some("page".into()),
        summary: None,
        description: None,
    }
}

/// A view where the rule admits `admitted` and rejects `rejected` per second.
fn view(admitted: f64, rejected: f64) -> StatsView {
    let total = admitted + rejected;
    StatsView {
        rules: vec![RuleStats {
            domain: "api".into(),
            name: "per-client".into(),
            admitted_rate: admitted,
            rejected_rate: rejected,
            rejection_ratio: if total > 0.0 { rejected / total } else { 0.0 },
            ..RuleStats::default()
        }],
        ..StatsView::default()
    }
}

fn alerts(set: Vec<AlertSpec>, delivery: Delivery) -> (Arc<Alerts>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let a = Arc::new(Alerts::new(
        AlertSet::new(set),
        delivery,
        Arc::clone(&metrics),
    ));
    a.set_external_url("http://127.0.0.1:8080".into());
    (a, metrics)
}

/// Waits until `got` holds `n` messages (at most 10 s).
async fn wait_for(got: &Mutex<Vec<Value>>, n: usize) {
    for _ in 0..200 {
        if got.lock().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const T0: i64 = 1_700_000_000_000;

#[tokio::test]
async fn one_node_fires_after_its_duration_and_resolves_once_each() {
    let r = receiver().await;
    let (a, metrics) = alerts(vec![alert(vec![r.url.clone()])], Delivery::default());
    let hot = view(1.0, 3.0); // ratio 0.75 at 4/s
    let quiet = view(4.0, 0.0);
    // t = 0: pending; t = 1: still; t = 2: firing; t = 3, 4: firing; t = 5: resolved.
    let mut states = Vec::new();
    for (t, v) in [
        (0, &hot),
        (1, &hot),
        (2, &hot),
        (3, &hot),
        (4, &hot),
        (5, &quiet),
        (6, &quiet),
    ] {
        a.tick(v, T0 + t * 1000, None).await;
        states.push(a.views()[0].state.clone());
        if t == 3 {
            assert!(
                metrics
                    .encode()
                    .contains("flowgate_alerts_firing{alert=\"per-client-rejecting\"} 1")
            );
        }
    }
    assert_eq!(
        states,
        [
            "pending", "pending", "firing", "firing", "firing", "inactive", "inactive"
        ]
    );
    assert!(
        metrics
            .encode()
            .contains("flowgate_alerts_firing{alert=\"per-client-rejecting\"} 0")
    );
    wait_for(&r.got, 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let got = r.got.lock().clone();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_eq!(got[0]["status"], "firing");
    assert_eq!(got[0]["alerts"][0]["startsAt"], webhook::rfc3339(T0 + 2000));
    assert_eq!(got[0]["alerts"][0]["endsAt"], webhook::ZERO_TIME);
    assert_eq!(
        got[0]["alerts"][0]["labels"]["alertname"],
        "per-client-rejecting"
    );
    assert_eq!(got[1]["status"], "resolved");
    assert_eq!(got[1]["alerts"][0]["endsAt"], webhook::rfc3339(T0 + 5000));
    assert_eq!(
        got[0]["alerts"][0]["fingerprint"],
        got[1]["alerts"][0]["fingerprint"]
    );
    assert!(
        metrics
            .encode()
            .contains("flowgate_alert_notifications_total{result=\"sent\"} 2")
    );
}

#[tokio::test]
async fn an_alert_dropped_from_the_rules_while_firing_is_resolved() {
    let r = receiver().await;
    let (a, metrics) = alerts(vec![alert(vec![r.url.clone()])], Delivery::default());
    let hot = view(0.0, 10.0);
    for t in 0..3 {
        a.tick(&hot, T0 + t * 1000, None).await;
    }
    assert_eq!(a.views()[0].state, "firing");
    a.set_alerts(AlertSet::default());
    a.tick(&hot, T0 + 3000, None).await;
    assert!(a.views().is_empty());
    wait_for(&r.got, 2).await;
    let got = r.got.lock().clone();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_eq!(got[1]["status"], "resolved");
    assert!(!metrics.encode().contains("flowgate_alerts_firing{"));
}

#[tokio::test]
async fn two_evaluators_on_one_redis_announce_each_transition_once() {
    let redis = flowgate_testkit::redis::RedisServer::start();
    let r = receiver().await;
    let conn = || {
        flowgate_redis::RedisConnection::connect_lazy(
            &redis.url(),
            flowgate_redis::ConnectionOptions::default(),
        )
        .unwrap()
    };
    let (a, _) = alerts(vec![alert(vec![r.url.clone()])], Delivery::default());
    let (b, metrics_b) = alerts(vec![alert(vec![r.url.clone()])], Delivery::default());
    let ca = Cluster::new(conn(), "node-a".into());
    let cb = Cluster::new(conn(), "node-b".into());
    let hot = view(1.0, 3.0);
    let quiet = view(4.0, 0.0);
    // Both evaluate every second; a leads (it asked first).
    for t in 0..4 {
        a.tick(&hot, T0 + t * 1000, Some(&ca)).await;
        b.tick(&hot, T0 + t * 1000, Some(&cb)).await;
    }
    assert_eq!(redis.cli(&["GET", LEADER_KEY]).unwrap().trim(), "node-a");
    assert_eq!(a.views()[0].state, "firing");
    assert_eq!(
        b.views()[0].state,
        "firing",
        "the follower shows the leader's states"
    );
    assert!(
        metrics_b
            .encode()
            .contains("flowgate_alerts_firing{alert=\"per-client-rejecting\"} 1")
    );
    // a stops; b takes over once a's lease lapsed, from the stored states: firing, not
    // announced again.
    tokio::time::sleep(cluster::LEASE + Duration::from_millis(200)).await;
    for t in 4..6 {
        b.tick(&hot, T0 + t * 1000, Some(&cb)).await;
    }
    assert_eq!(redis.cli(&["GET", LEADER_KEY]).unwrap().trim(), "node-b");
    b.tick(&quiet, T0 + 6000, Some(&cb)).await;
    assert_eq!(b.views()[0].state, "inactive");
    wait_for(&r.got, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = r.got.lock().clone();
    let statuses: Vec<&str> = got.iter().filter_map(|m| m["status"].as_str()).collect();
    assert_eq!(statuses, ["firing", "resolved"], "{got:#?}");
    // The resolved message keeps the start a announced.
    assert_eq!(got[1]["alerts"][0]["startsAt"], webhook::rfc3339(T0 + 2000));
    assert_eq!(got[1]["alerts"][0]["endsAt"], webhook::rfc3339(T0 + 6000));
}

#[tokio::test]
async fn a_webhook_that_never_answers_keeps_the_outbox_bounded_and_the_evaluation_quick() {
    let r = receiver().await;
    let delivery = Delivery {
        timeout: Duration::from_millis(200),
        attempts: 2,
        backoff: Duration::from_millis(50),
        capacity: 4,
    };
    let mut spec = alert(vec![r.hang_url.clone()]);
    spec.for_ms = 0;
    let (a, metrics) = alerts(vec![spec], delivery);
    let (hot, quiet) = (view(0.0, 10.0), view(10.0, 0.0));
    let mut slowest = Duration::ZERO;
    for t in 0..100 {
        let v = if t % 2 == 0 { &hot } else { &quiet };
        let start = quanta::Instant::now();
        a.tick(v, T0 + t * 1000, None).await;
        slowest = slowest.max(start.elapsed());
        assert!(
            a.outbox().waiting() <= 4,
            "the outbox holds at most its capacity"
        );
    }
    // 100 transitions queued in far less than one POST's timeout: pushing never waits.
    assert!(slowest < Duration::from_millis(100), "{slowest:?}");
    let text = metrics.encode();
    let dropped: u64 = text
        .lines()
        .find(|l| l.starts_with("flowgate_alert_notifications_total{result=\"dropped\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(dropped >= 90, "{text}");
    // The ones delivered are given up after the timeout and the retries.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        metrics
            .encode()
            .contains("flowgate_alert_notifications_total{result=\"failed\"}")
    );
}

/// Ticks `node` at `now_ms` on `view` until it is no longer alone (Redis back and reconnected),
/// at most 10 s.
async fn tick_until_back(node: &Alerts, view: &StatsView, now_ms: i64, cluster: &Cluster) {
    for _ in 0..100 {
        node.tick(view, now_ms, Some(cluster)).await;
        if !node.evaluates_alone() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("still alone 10 s after Redis came back");
}

fn evaluator(redis: &flowgate_testkit::redis::RedisServer, id: &str) -> Cluster {
    let conn = flowgate_redis::RedisConnection::connect_lazy(
        &redis.url(),
        flowgate_redis::ConnectionOptions::default().timeout(cluster::CALL_TIMEOUT),
    )
    .unwrap();
    Cluster::new(conn, id.into())
}

#[tokio::test]
async fn while_redis_is_down_each_node_evaluates_alone_and_the_cluster_resolves_after() {
    let mut redis = flowgate_testkit::redis::RedisServer::start();
    let r = receiver().await;
    let (a, metrics_a) = alerts(vec![alert(vec![r.url.clone()])], Delivery::default());
    let (b, _) = alerts(vec![alert(vec![r.url.clone()])], Delivery::default());
    let (ca, cb) = (evaluator(&redis, "node-a"), evaluator(&redis, "node-b"));
    let (hot, quiet) = (view(1.0, 3.0), view(4.0, 0.0));
    a.tick(&quiet, T0, Some(&ca)).await;
    b.tick(&quiet, T0, Some(&cb)).await;
    assert!(!a.evaluates_alone());

    redis.stop();
    for t in 1..=3 {
        a.tick(&hot, T0 + t * 1000, Some(&ca)).await;
        b.tick(&hot, T0 + t * 1000, Some(&cb)).await;
    }
    assert!(a.evaluates_alone() && b.evaluates_alone());
    assert!(
        metrics_a
            .encode()
            .contains("flowgate_alerts_local_evaluation 1")
    );
    assert_eq!(a.views()[0].state, "firing");
    assert_eq!(b.views()[0].state, "firing");
    wait_for(&r.got, 2).await;
    {
        let got = r.got.lock();
        assert_eq!(
            statuses_of(&got),
            ["firing", "firing"],
            "each node announces alone"
        );
        assert_eq!(
            got[0]["alerts"][0]["fingerprint"], got[1]["alerts"][0]["fingerprint"],
            "the same alert: Alertmanager merges them"
        );
    }

    // Back, empty: a takes the lease from its own states (firing), b follows; nothing is
    // announced again while it fires, and its resolution is announced once.
    redis.restart();
    tick_until_back(&a, &hot, T0 + 4000, &ca).await;
    tick_until_back(&b, &hot, T0 + 4000, &cb).await;
    assert!(
        metrics_a
            .encode()
            .contains("flowgate_alerts_local_evaluation 0")
    );
    assert_eq!(b.views()[0].state, "firing", "b shows the cluster's state");
    for t in 5..=7 {
        a.tick(&quiet, T0 + t * 1000, Some(&ca)).await;
        b.tick(&quiet, T0 + t * 1000, Some(&cb)).await;
    }
    wait_for(&r.got, 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = r.got.lock().clone();
    assert_eq!(
        statuses_of(&got),
        ["firing", "firing", "resolved"],
        "{got:#?}"
    );
    assert_eq!(got[2]["alerts"][0]["startsAt"], webhook::rfc3339(T0 + 3000));
}

#[tokio::test]
async fn an_alert_only_one_node_fired_alone_is_resolved_by_that_node_when_the_cluster_is_back() {
    let mut redis = flowgate_testkit::redis::RedisServer::start();
    let r = receiver().await;
    let (a, _) = alerts(vec![alert(vec![r.url.clone()])], Delivery::default());
    let (b, _) = alerts(vec![alert(vec![r.url.clone()])], Delivery::default());
    let (ca, cb) = (evaluator(&redis, "node-a"), evaluator(&redis, "node-b"));
    let (hot, quiet) = (view(1.0, 3.0), view(4.0, 0.0));
    a.tick(&quiet, T0, Some(&ca)).await;
    b.tick(&quiet, T0, Some(&cb)).await;
    redis.stop();
    // Only b's own figures hold the condition.
    for t in 1..=3 {
        a.tick(&quiet, T0 + t * 1000, Some(&ca)).await;
        b.tick(&hot, T0 + t * 1000, Some(&cb)).await;
    }
    wait_for(&r.got, 1).await;
    redis.restart();
    tick_until_back(&a, &quiet, T0 + 4000, &ca).await;
    tick_until_back(&b, &quiet, T0 + 4000, &cb).await;
    // a evaluates for the cluster (inactive); b resolves its own after two reads.
    for t in 5..=6 {
        a.tick(&quiet, T0 + t * 1000, Some(&ca)).await;
        b.tick(&quiet, T0 + t * 1000, Some(&cb)).await;
    }
    wait_for(&r.got, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = r.got.lock().clone();
    assert_eq!(statuses_of(&got), ["firing", "resolved"], "{got:#?}");
    assert_eq!(
        got[0]["alerts"][0]["fingerprint"],
        got[1]["alerts"][0]["fingerprint"]
    );
}

fn statuses_of(got: &[Value]) -> Vec<&str> {
    got.iter().filter_map(|m| m["status"].as_str()).collect()
}

/// An Alertmanager's API on loopback: the bodies posted to it, and its address.
async fn alertmanager_api() -> (Arc<Mutex<Vec<Value>>>, String) {
    let r = receiver().await;
    (r.posted, r.base)
}

/// Ticks `a` on `v` at `t` seconds after [`T0`], then waits until the Alertmanager got a body
/// posted for it (each tick posts one; only the latest is kept while one is in flight).
async fn tick_and_post(a: &Alerts, v: &StatsView, t: i64, got: &Mutex<Vec<Value>>) -> Value {
    a.tick(v, T0 + t * 1000, None).await;
    let mut last = Value::Null;
    for _ in 0..200 {
        if let Some(b) = got.lock().last().cloned() {
            let at = |x: &Value| x["startsAt"] == webhook::rfc3339(T0 + t * 1000);
            let this_tick = b.as_array().is_some_and(|xs| {
                xs.iter()
                    .any(|x| at(x) || x["endsAt"] == webhook::rfc3339(T0 + t * 1000))
            });
            last = b;
            if this_tick {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    last
}

/// Alertmanager keeps one alert per label set, the last posted: an alert that fires again
/// within the minute its resolution is re-sent is posted once, firing; resolved again, once,
/// with its latest end.
#[tokio::test]
async fn an_alert_flapping_is_posted_once_per_label_set_as_it_is_now() {
    let (got, url) = alertmanager_api().await;
    let mut spec = alert(vec![]);
    spec.alertmanagers = vec![url];
    let (a, _) = alerts(vec![spec], Delivery::default());
    let hot = view(1.0, 3.0);
    let quiet = view(4.0, 0.0);
    for t in 0..2 {
        a.tick(&hot, T0 + t * 1000, None).await;
    }
    let fired = tick_and_post(&a, &hot, 2, &got).await;
    assert_eq!(fired.as_array().map(Vec::len), Some(1), "{fired:#}");
    let resolved = tick_and_post(&a, &quiet, 3, &got).await;
    assert_eq!(
        resolved[0]["endsAt"],
        webhook::rfc3339(T0 + 3000),
        "{resolved:#}"
    );
    // Pending again (another node alone may fire it first): its resolution is not re-sent.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = got.lock().len();
    for t in 4..6 {
        a.tick(&hot, T0 + t * 1000, None).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let old_end = webhook::rfc3339(T0 + 3000);
    let pending: Vec<Value> = got.lock()[before..].to_vec();
    assert!(
        pending.iter().all(|p| !p.to_string().contains(&old_end)),
        "its resolution re-sent while pending: {pending:#?}"
    );
    let again = tick_and_post(&a, &hot, 6, &got).await;
    let alerts = again.as_array().cloned().unwrap_or_default();
    assert_eq!(
        alerts.len(),
        1,
        "firing and resolved in one post: {again:#}"
    );
    assert_eq!(alerts[0]["startsAt"], webhook::rfc3339(T0 + 6000));
    assert_ne!(
        alerts[0]["endsAt"],
        webhook::rfc3339(T0 + 3000),
        "{again:#}"
    );
    let twice = tick_and_post(&a, &quiet, 7, &got).await;
    let alerts = twice.as_array().cloned().unwrap_or_default();
    assert_eq!(alerts.len(), 1, "two resolutions in one post: {twice:#}");
    assert_eq!(alerts[0]["endsAt"], webhook::rfc3339(T0 + 7000));
}

/// A follower that fired and resolved an alert alone during an outage re-sends its resolution
/// for a minute; once the cluster's evaluator fires that alert again, the follower stops, so
/// that Alertmanager (the last post per label set wins) keeps it firing.
#[tokio::test]
async fn a_followers_old_resolution_does_not_contradict_the_evaluators_firing() {
    let mut redis = flowgate_testkit::redis::RedisServer::start();
    let (got_a, url_a) = alertmanager_api().await;
    let (got_b, url_b) = alertmanager_api().await;
    let with = |url: &str| {
        let mut spec = alert(vec![]);
        spec.alertmanagers = vec![url.to_owned()];
        spec
    };
    let (a, _) = alerts(vec![with(&url_a)], Delivery::default());
    let (b, _) = alerts(vec![with(&url_b)], Delivery::default());
    let (ca, cb) = (evaluator(&redis, "node-a"), evaluator(&redis, "node-b"));
    let (hot, quiet) = (view(1.0, 3.0), view(4.0, 0.0));
    a.tick(&quiet, T0, Some(&ca)).await;
    b.tick(&quiet, T0, Some(&cb)).await;
    redis.stop();
    // b alone fires, then resolves at T0 + 4 s.
    for (t, v) in [(1, &hot), (2, &hot), (3, &hot), (4, &quiet)] {
        a.tick(&quiet, T0 + t * 1000, Some(&ca)).await;
        b.tick(v, T0 + t * 1000, Some(&cb)).await;
    }
    let old_end = webhook::rfc3339(T0 + 4000);
    redis.restart();
    tick_until_back(&a, &quiet, T0 + 5000, &ca).await;
    tick_until_back(&b, &quiet, T0 + 5000, &cb).await;
    // a evaluates for the cluster: pending at 6 s, firing at 8 s; b follows.
    for (t, v) in [(6, &hot), (7, &hot)] {
        a.tick(v, T0 + t * 1000, Some(&ca)).await;
        b.tick(&quiet, T0 + t * 1000, Some(&cb)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = got_b.lock().len();
    assert!(
        got_b
            .lock()
            .iter()
            .any(|p| p.to_string().contains(&old_end)),
        "b re-sends its resolution while the alert is not firing: {:?}",
        got_b.lock()
    );
    for t in 8..=9 {
        a.tick(&hot, T0 + t * 1000, Some(&ca)).await;
        b.tick(&quiet, T0 + t * 1000, Some(&cb)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(a.views()[0].state, "firing");
    assert!(
        got_a
            .lock()
            .last()
            .is_some_and(|p| p[0]["startsAt"] == webhook::rfc3339(T0 + 8000))
    );
    let after: Vec<Value> = got_b.lock()[before..].to_vec();
    assert!(
        after.iter().all(|p| !p.to_string().contains(&old_end)),
        "b's old resolution posted while the evaluator fires the alert: {after:#?}"
    );
}
