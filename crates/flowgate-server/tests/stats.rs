//! `GET /v1/stats` and its stream: per-rule counts per second, the heaviest keys, and the
//! cluster's figures summed over the nodes of one Redis (requests counted from outside).

mod common;

use std::time::Duration;

use common::{TestServer, http, post_json};
use flowgate_server::stats::{Scope, StatsView};
use flowgate_testkit::redis::RedisServer;
use serde_json::json;

const RULES: &str = r#"
[[rule]]
domain = "api"
name = "per-user"
match = ["user"]
limit = 5
window = "1m"
algorithm = "fixed_window"

[[rule]]
domain = "api"
name = "shadow-path"
match = ["path"]
limit = 1
window = "1m"
shadow = true
"#;

async fn check(addr: std::net::SocketAddr, key: &str, value: &str) -> u16 {
    post_json(
        addr,
        "/v1/check",
        json!({"domain": "api", "descriptors": [format!("{key}={value}")]}),
    )
    .await
    .status
}

async fn stats(addr: std::net::SocketAddr, query: &str) -> StatsView {
    let r = http(addr, "GET", &format!("/v1/stats{query}"), &[], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.body))
}

/// Reads `/v1/stats{query}` every 100 ms until `cond` holds or `deadline` passes: the last view,
/// and whether it held.
async fn poll(
    addr: std::net::SocketAddr,
    query: &str,
    deadline: Duration,
    cond: impl Fn(&StatsView) -> bool,
) -> (StatsView, bool) {
    let end = tokio::time::Instant::now() + deadline;
    loop {
        let v = stats(addr, query).await;
        if cond(&v) {
            return (v, true);
        }
        if tokio::time::Instant::now() >= end {
            return (v, false);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn rule<'a>(v: &'a StatsView, name: &str) -> &'a flowgate_server::stats::RuleStats {
    v.rules
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no rule {name} in {v:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_counts_each_rule_per_second_and_names_its_heaviest_keys() {
    let s = TestServer::start(&[("rules.toml", RULES)]).await;
    let addr = s.http();
    // 20 for a hot user (5 admitted, 15 rejected), 3 for a quiet one, 4 on a shadow rule.
    for _ in 0..20 {
        check(addr, "user", "hot").await;
    }
    for _ in 0..3 {
        assert_eq!(check(addr, "user", "quiet").await, 200);
    }
    for _ in 0..4 {
        assert_eq!(check(addr, "path", "/a").await, 200);
    }
    // The seconds they fell in (the shadow rule's may be the next one) are closed within about
    // a second.
    let (v, closed) = poll(addr, "?window=60", Duration::from_secs(4), |v| {
        let sh = &rule(v, "shadow-path").series;
        rule(v, "per-user").series.admitted.iter().sum::<u64>() == 8
            && sh.shadow_rejected.iter().sum::<u64>() == 3
            && sh.admitted.iter().sum::<u64>() == 1
    })
    .await;
    assert!(closed, "{v:?}");
    assert_eq!(v.scope, Scope::Node);
    assert_eq!(v.nodes.len(), 1);
    let r = rule(&v, "per-user");
    assert_eq!((r.totals.admitted, r.totals.rejected), (8, 15));
    assert_eq!(r.series.rejected.iter().sum::<u64>(), 15);
    assert_eq!(r.series.admitted.len(), 60);
    assert_eq!(r.series.start + 59, v.at);
    assert!(
        (r.rejection_ratio - 15.0 / 23.0).abs() < 1e-9,
        "{}",
        r.rejection_ratio
    );
    assert_eq!(r.top_rejected[0].descriptor, "user=hot");
    assert!((r.top_rejected[0].rate - 15.0 / 5.0).abs() < 1e-9);
    assert_eq!(r.top_admitted[0].descriptor, "user=hot");
    assert_eq!(r.top_admitted[1].descriptor, "user=quiet");
    assert_eq!(r.limit.as_deref(), Some("5/m, fixed_window"));
    let sh = rule(&v, "shadow-path");
    assert!(sh.shadow);
    assert_eq!((sh.totals.admitted, sh.totals.shadow_rejected), (1, 3));
    assert_eq!(sh.top_rejected[0].descriptor, "path=/a");
    assert!(v.store.p99_ms.is_some_and(|p| p > 0.0), "{:?}", v.store);
    assert_eq!(v.store.kind, flowgate_server::stats::StoreKind::Memory);

    // Bad queries name their field.
    let r = http(addr, "GET", "/v1/stats?window=0", &[], "").await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("window"), "{}", r.body);
    let r = http(addr, "GET", "/v1/stats?sope=node", &[], "").await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("sope"), "{}", r.body);
    s.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_sends_a_view_each_second_and_ends_at_shutdown() {
    let s = TestServer::start(&[("rules.toml", RULES)]).await;
    let addr = s.http();
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get("/v1/stats/stream")
        .header("host", addr.to_string())
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut body = resp.into_body();
    let mut text = String::new();
    let mut views = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        use http_body_util::BodyExt as _;
        while views.len() < 2 {
            let Some(frame) = body.frame().await else {
                break;
            };
            if let Ok(data) = frame.unwrap().into_data() {
                text.push_str(&String::from_utf8_lossy(&data));
            }
            while let Some(end) = text.find("\n\n") {
                let event: String = text.drain(..end + 2).collect();
                if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                    assert!(event.starts_with("event: stats"), "{event}");
                    views.push(serde_json::from_str::<StatsView>(data).unwrap());
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "two events within 5 s: {views:?}");
    assert_eq!(views[0].rules[0].series.admitted.len(), 1);
    assert_eq!(views[1].at, views[0].at + 1);
    // The open stream does not hold the shutdown for its grace period.
    let started = tokio::time::Instant::now();
    s.server.shutdown().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_view_sums_the_nodes_exactly_and_drops_a_stopped_one() {
    let redis = RedisServer::start();
    let start = |node: &'static str| {
        let url = redis.url();
        TestServer::start_with(&[("rules.toml", RULES)], move |mut c| {
            c.redis_url = Some(url);
            c.node_id = Some(node.to_owned());
            c
        })
    };
    let a = start("node-a").await;
    let b = start("node-b").await;
    let mut v;
    for addr in [a.http(), b.http()] {
        let (view, both) = poll(addr, "", Duration::from_secs(4), |v| {
            v.scope == Scope::Cluster && v.nodes.iter().filter(|n| n.live).count() == 2
        })
        .await;
        assert!(both, "{view:?}");
    }
    // Counted from outside: what each node answered.
    let (mut admitted, mut rejected) = (0u64, 0u64);
    for (i, addr) in [a.http(), b.http(), a.http()].into_iter().enumerate() {
        for n in 0..7 {
            match check(addr, "user", &format!("u{}", n % (i + 2))).await {
                200 => admitted += 1,
                429 => rejected += 1,
                other => panic!("status {other}"),
            }
        }
    }
    assert_eq!(admitted + rejected, 21);
    let (view, summed) = poll(a.http(), "", Duration::from_secs(6), |v| {
        let r = rule(v, "per-user");
        v.scope == Scope::Cluster
            && v.nodes.iter().filter(|n| n.live).count() == 2
            && (r.totals.admitted, r.totals.rejected) == (admitted, rejected)
    })
    .await;
    v = view;
    assert!(summed, "{admitted} admitted, {rejected} rejected: {v:?}");
    let r = rule(&v, "per-user");
    let mut nodes: Vec<&str> = r.by_node.iter().map(|n| n.node.as_str()).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["node-a", "node-b"]);
    // Both nodes were known before the requests: the cluster's series, read through either
    // node, adds up to the same totals.
    for addr in [a.http(), b.http()] {
        let (view, series) = poll(addr, "?window=60", Duration::from_secs(4), |v| {
            let r = rule(v, "per-user");
            (
                r.series.admitted.iter().sum::<u64>(),
                r.series.rejected.iter().sum::<u64>(),
            ) == (admitted, rejected)
        })
        .await;
        v = view;
        assert!(series, "{admitted} admitted, {rejected} rejected: {v:?}");
    }
    // The node's own figures, on request.
    let own = stats(b.http(), "?scope=node").await;
    assert_eq!(own.scope, Scope::Node);
    assert_eq!(
        rule(&own, "per-user").totals.admitted + rule(&own, "per-user").totals.rejected,
        7
    );

    // A stopped node leaves the live list within the figures' expiry (5 s).
    b.server.shutdown().await.unwrap();
    let (view, dropped) = poll(a.http(), "", Duration::from_secs(8), |v| {
        v.nodes.iter().any(|n| n.id == "node-b" && !n.live)
            && v.nodes.iter().any(|n| n.id == "node-a" && n.live)
    })
    .await;
    v = view;
    assert!(dropped, "{:?}", v.nodes);
    let r = rule(&v, "per-user");
    assert_eq!(
        r.totals.admitted + r.totals.rejected,
        14,
        "node-b's figures no longer summed"
    );
    a.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_rule_shows_its_schedule_and_next_change() {
    let rules = r#"
[[rule]]
domain = "api"
name = "weekend"
match = ["user"]
limit = "10/s"
time_zone = "UTC"

[[rule.schedule]]
limit = "50/s"
days = ["sat", "sun"]
"#;
    let s = TestServer::start(&[("rules.toml", rules)]).await;
    let v = stats(s.http(), "?window=5").await;
    let r = rule(&v, "weekend");
    assert_eq!(r.series.admitted.len(), 5);
    let schedule = r.schedule.as_deref().unwrap_or_default();
    assert!(
        schedule.contains("50/s") && schedule.contains("sat"),
        "{schedule}"
    );
    // The test server's clock: Friday 2027-01-15 08:00 UTC; the weekend starts at Saturday 00:00.
    let next = r.next_change.as_ref().expect("a next change");
    assert_eq!(next.at_ms, 1_800_000_000_000 + 16 * 3_600_000);
    assert_eq!(next.limit.as_deref(), Some("50/s, sliding_window"));
    s.server.shutdown().await.unwrap();
}

/// The rules as `GET /v1/rules` shows them, with `edit` applied to the rule named `name`, sent
/// back with `PUT /v1/rules` as JSON.
async fn edit_rule(
    addr: std::net::SocketAddr,
    name: &str,
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) -> common::HttpResponse {
    let mut doc = http(addr, "GET", "/v1/rules", &[], "").await.json();
    let rule = doc["rule"]
        .as_array_mut()
        .and_then(|rules| rules.iter_mut().find(|r| r["name"] == name))
        .and_then(|r| r.as_object_mut())
        .unwrap_or_else(|| panic!("no rule {name}"));
    edit(rule);
    http(
        addr,
        "PUT",
        "/v1/rules",
        &[
            ("content-type", "application/json"),
            (
                "authorization",
                "Bearer secret-0123456789abcdef0123456789abcdef",
            ),
        ],
        &doc.to_string(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_limit_counts_what_it_would_reject_then_is_promoted() {
    trial_then_promote(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_limit_on_redis() {
    let redis = RedisServer::start();
    trial_then_promote(Some(redis.url())).await;
}

async fn trial_then_promote(redis: Option<String>) {
    let s = TestServer::start_with(&[("rules.toml", RULES)], |mut c| {
        c.credentials
            .add_token(
                "admin",
                flowgate_server::auth::Scope::Admin,
                "secret-0123456789abcdef0123456789abcdef",
            )
            .unwrap();
        c.redis_url = redis;
        c
    })
    .await;
    let addr = s.http();
    // Try 2 per minute beside the 5 in force.
    let r = edit_rule(addr, "per-user", |r| {
        r.insert("trial".into(), json!({"limit": 2, "window": "1m"}));
    })
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let rules = http(addr, "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(rules["rule"][0]["trial"]["limit"], "2/m", "{rules}");
    for _ in 0..4 {
        assert_eq!(
            check(addr, "user", "t").await,
            200,
            "the trial never rejects"
        );
    }
    let (v, counted) = poll(addr, "?window=10", Duration::from_secs(4), |v| {
        rule(v, "per-user")
            .series
            .trial_rejected
            .iter()
            .sum::<u64>()
            == 2
    })
    .await;
    assert!(counted, "{v:?}");
    let r = rule(&v, "per-user");
    assert_eq!(r.trial.as_deref(), Some("2/m, fixed_window"));
    assert_eq!(
        (
            r.totals.admitted,
            r.totals.rejected,
            r.totals.trial_rejected
        ),
        (4, 0, 2)
    );

    // Promoted: the trial's fields become the rule's limit, in one change.
    let r = edit_rule(addr, "per-user", |r| {
        let trial = r.remove("trial").unwrap();
        r.insert("limit".into(), trial["limit"].clone());
    })
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(check(addr, "user", "u").await, 200);
    assert_eq!(check(addr, "user", "u").await, 200);
    assert_eq!(check(addr, "user", "u").await, 429);
    let v = stats(addr, "?window=1").await;
    assert_eq!(rule(&v, "per-user").trial, None);

    // A trial on a rule without a limit, or an unlimited trial, is refused, naming the field.
    let r = edit_rule(addr, "per-user", |r| {
        r.insert("trial".into(), json!({"limit": "unlimited"}));
    })
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("trial.limit"), "{}", r.body);
    s.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looser_trial_counts_its_rejections_whatever_the_rule_decided() {
    let s = TestServer::start_with(&[("rules.toml", RULES)], |mut c| {
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
    let addr = s.http();
    // 8 per minute tried beside the 5 in force: of 12 requests the rule admits 5 and rejects 7,
    // and the trial, decided on its own, would have rejected 4.
    let r = edit_rule(addr, "per-user", |r| {
        r.insert("trial".into(), json!({"limit": 8, "window": "1m"}));
    })
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut admitted = 0;
    for _ in 0..12 {
        if check(addr, "user", "loose").await == 200 {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 5);
    let (v, counted) = poll(addr, "?window=10", Duration::from_secs(4), |v| {
        rule(v, "per-user").totals.trial_rejected == 4
    })
    .await;
    assert!(counted, "{:?}", rule(&v, "per-user").totals);
    s.server.shutdown().await.unwrap();
}

/// Checks on `addr`, 20 a second (users `u0` to `u99` in turn), until dropped.
struct Load(tokio::task::JoinHandle<()>);

impl Drop for Load {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn load(addr: std::net::SocketAddr) -> Load {
    Load(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for n in 0u64.. {
            tick.tick().await;
            check(addr, "user", &format!("u{}", n % 100)).await;
        }
    }))
}

/// Two nodes under load on one Redis, which is killed for several seconds and started again:
/// the decisions of the outage (taken by the failure policy) reach the cluster's series at the
/// seconds they were made, and no second of the series holds more than the load sends in one
/// (before, a node's outage counts were drawn as one burst when Redis came back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_drawn_at_its_seconds_and_no_burst_when_redis_returns() {
    let mut redis = RedisServer::start();
    let start = |node: &'static str| {
        let url = redis.url();
        TestServer::start_with(&[("rules.toml", RULES)], move |mut c| {
            c.redis_url = Some(url);
            c.node_id = Some(node.to_owned());
            c
        })
    };
    let a = start("node-a").await;
    let b = start("node-b").await;
    let live =
        |v: &StatsView| v.scope == Scope::Cluster && v.nodes.iter().filter(|n| n.live).count() == 2;
    let (v, both) = poll(a.http(), "", Duration::from_secs(5), live).await;
    assert!(both, "{:?}", v.nodes);
    let _loads = (load(a.http()), load(b.http()));
    // Both nodes' decisions reach the cluster's series.
    let decided = |r: &flowgate_server::stats::RuleStats, i: usize| {
        r.series.admitted[i] + r.series.rejected[i]
    };
    let (v, flowing) = poll(a.http(), "?window=5", Duration::from_secs(10), |v| {
        let r = rule(v, "per-user");
        live(v) && decided(r, 3) >= 25
    })
    .await;
    assert!(flowing, "{:?}", rule(&v, "per-user").series);

    redis.stop();
    let fp_seconds = |v: &StatsView| {
        v.store
            .failure_policy_series
            .iter()
            .filter(|n| **n > 0)
            .count()
    };
    // Node a alone, saying so, with at least 5 seconds decided by the failure policy.
    let (v, outage) = poll(a.http(), "?window=60", Duration::from_secs(20), |v| {
        v.scope == Scope::Node && v.store.unreachable_since_ms.is_some() && fp_seconds(v) >= 5
    })
    .await;
    assert!(outage, "{:?} {:?}", v.scope, v.store);
    let stale_from = v.read.cluster_ms.expect("the cluster's figures were read");
    assert!(
        v.at * 1000 - stale_from >= 3000,
        "the cluster's figures were last read at {stale_from}, view at {}",
        v.at
    );
    redis.restart();

    // Back: both nodes' outage seconds, at their places.
    let window = 60;
    let (v, back) = poll(
        a.http(),
        &format!("?window={window}"),
        Duration::from_secs(20),
        |v| {
            live(v)
                && v.store.unreachable_since_ms.is_none()
                && v.revised_from.is_none()
                && fp_seconds(v) >= 5
        },
    )
    .await;
    let r = rule(&v, "per-user");
    assert!(back, "{:?} {:?} {:?}", v.nodes, v.store, r.series);
    let per_second: Vec<u64> = (0..window).map(|i| decided(r, i)).collect();
    // Two nodes at 20 a second: 40, with room for a busy machine's late ticks.
    let most = per_second.iter().max().copied().unwrap_or(0);
    assert!(most <= 70, "a burst of {most} in {per_second:?}");
    let fp = &v.store.failure_policy_series;
    let fp_most = fp.iter().max().copied().unwrap_or(0);
    assert!(fp_most <= 70, "a burst of {fp_most} in {fp:?}");
    // Every second of the outage decided by node a's policies is in the cluster's series, with
    // at least node a's own count (node b's are added).
    let own = stats(a.http(), &format!("?scope=node&window={window}")).await;
    let fp_at = |v: &StatsView, second: i64| {
        let i = second - (v.at - v.store.failure_policy_series.len() as i64 + 1);
        usize::try_from(i)
            .ok()
            .and_then(|i| v.store.failure_policy_series.get(i).copied())
    };
    let mine: Vec<(i64, u64)> = (own.at - window as i64 + 1..=own.at)
        .filter_map(|s| fp_at(&own, s).filter(|n| *n > 0).map(|n| (s, n)))
        .collect();
    assert!(mine.len() >= 5, "{:?}", own.store);
    for (second, n) in mine {
        let cluster = fp_at(&v, second);
        assert!(
            cluster.is_none_or(|c| c >= n),
            "second {second}: node a decided {n} by policy, the cluster shows {cluster:?}: {fp:?}"
        );
    }
}

/// A queue whose jobs nobody leases has no consumer, and no drain time: the time to release its
/// jobs at its rate would be a promise nobody keeps. Once a worker leases, it has one again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_nobody_leases_has_no_consumer_until_a_worker_leases() {
    let config = r#"
[[queue]]
domain = "pay"
name = "refunds"
match = ["biz=REFUND", "channel"]
rate = "1/s"
"#;
    let s = TestServer::start_with(&[("rules.toml", config)], |mut c| {
        c.clock = None;
        c
    })
    .await;
    let addr = s.http();
    let descriptor = "biz=REFUND, channel=WPG";
    let jobs = json!({"domain": "pay", "descriptor": descriptor,
                      "jobs": [{"payload": 1}, {"payload": 2}, {"payload": 3}]});
    let r = post_json(addr, "/v1/queues/submit", jobs).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let queue = |v: &StatsView| v.queues.first().cloned().unwrap_or_default();
    let (v, none) = poll(addr, "?window=5", Duration::from_secs(12), |v| {
        queue(v).no_consumer
    })
    .await;
    assert!(none, "{:?}", v.queues);
    assert_eq!(queue(&v).drain_s, None, "{:?}", v.queues);
    assert_eq!(queue(&v).depth, 3);
    // A worker takes a job: the queue has a consumer, and a drain time again.
    let lease = json!({"domain": "pay", "descriptor": descriptor, "wait_ms": 0});
    let r = post_json(addr, "/v1/queues/lease", lease).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (v, back) = poll(addr, "?window=5", Duration::from_secs(5), |v| {
        !queue(v).no_consumer && queue(v).drain_s.is_some()
    })
    .await;
    assert!(back, "{:?}", v.queues);
    s.server.shutdown().await.unwrap();
}

/// A worker that polls now and then (every 1.5 s, acking at once) is a consumer, although at
/// the reads (each second) of a queue released 10 a second a job is ready, due and not in
/// flight: each of its releases starts the count again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_polls_now_and_then_is_a_consumer() {
    let config = r#"
[[queue]]
domain = "pay"
name = "refunds"
match = ["biz=REFUND", "channel"]
rate = "10/s"
"#;
    let s = TestServer::start_with(&[("rules.toml", config)], |mut c| {
        c.clock = None;
        c
    })
    .await;
    let addr = s.http();
    let descriptor = "biz=REFUND, channel=WPG";
    let jobs: Vec<_> = (0..20).map(|n| json!({"payload": n})).collect();
    let r = post_json(
        addr,
        "/v1/queues/submit",
        json!({"domain": "pay", "descriptor": descriptor, "jobs": jobs}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut tick = tokio::time::interval(Duration::from_millis(1500));
    for _ in 0..6 {
        tick.tick().await;
        let lease = json!({"domain": "pay", "descriptor": descriptor, "wait_ms": 0});
        let r = post_json(addr, "/v1/queues/lease", lease).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let token = r.json()["token"].as_str().unwrap_or("").to_owned();
        let r = post_json(addr, "/v1/queues/ack", json!({"token": token})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = stats(addr, "?window=5").await;
        assert!(
            v.queues.iter().all(|q| !q.no_consumer),
            "a polling worker is taken for no consumer: {:?}",
            v.queues
        );
    }
    s.server.shutdown().await.unwrap();
}
