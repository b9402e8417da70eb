//! Circuit breakers shared by two nodes (two limiters, each with its own connection) on one
//! real Redis: failures seen through one node's tower layer open the breaker on both; one probe
//! through either node closes it everywhere; with Redis stopped each node keeps a local breaker
//! on its own reports and decides fast; when Redis is back they share again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::{Router, routing::get};
use flowgate::breakers::{BreakerDef, BreakerSet, BreakerSpec, Opened, Outcome, Phase, Strategy};
use flowgate::layer::RateLimitLayer;
use flowgate::{
    Algorithm, Descriptor, FailurePolicy, Limit, Limiter, Matcher, Quota, RedisOptions, RedisStore,
    Request, Rule, RuleSet, Verdict,
};
use flowgate_testkit::redis::RedisServer;
use tokio::time::Instant;
use tower::ServiceExt;

type L = Limiter<RedisStore>;

const OPEN_FOR: Duration = Duration::from_secs(1);

/// Error ratio 0.5 over 10 s with at least 4 calls, open 1 s, one probe with a 2 s lease.
fn breakers() -> BreakerSet {
    let s = 1_000_000;
    let spec = BreakerSpec::new(Strategy::ErrorRatio, 0.5, 10 * s, 4, s, 1, 2 * s).expect("valid");
    BreakerSet::new(vec![BreakerDef::new(
        "pay",
        "channel",
        vec![Matcher::parse("channel")],
        spec,
    )])
    .expect("valid set")
}

/// A node: its own store (connection) on `url`, a generous limit, the breakers shared.
async fn node(url: &str, name: &str) -> Arc<L> {
    let options = RedisOptions::default().deadline(Duration::from_millis(300));
    let store = RedisStore::connect_lazy_with(url, options).expect("store");
    let limit = Limit::new(Algorithm::FixedWindow, "10000/s".parse::<Quota>().unwrap()).unwrap();
    let mut rule = Rule::new(
        "pay",
        "per-channel",
        vec![Matcher::parse("channel")],
        Some(limit),
    );
    rule.failure = FailurePolicy::Open;
    let limiter = Limiter::new(RuleSet::new(vec![rule]).unwrap(), store.clone());
    limiter.breakers().set(breakers());
    limiter.breakers().share(&store, name);
    Arc::new(limiter)
}

fn wpg() -> Request {
    Request::new("pay", vec![Descriptor::new([("channel", "WPG")])])
}

fn is_open(v: &Verdict) -> bool {
    !v.allowed && v.statuses[0].breaker.as_ref().is_some_and(|b| b.open)
}

/// Checks `l` every 5 ms until `want` holds of its verdict; answers how long it took.
async fn until(l: &L, want: impl Fn(&Verdict) -> bool, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let v = l.check(&wpg()).await;
        if want(&v) {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "not within {within:?}: {v:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An axum service whose handler answers 500 while `fail` is set, behind the layer.
fn app(l: Arc<L>, fail: Arc<AtomicBool>, calls: Arc<AtomicU64>) -> Router {
    Router::new()
        .route(
            "/pay",
            get(move || {
                let (fail, calls) = (Arc::clone(&fail), Arc::clone(&calls));
                async move {
                    calls.fetch_add(1, Ordering::Relaxed);
                    if fail.load(Ordering::Relaxed) {
                        (http::StatusCode::INTERNAL_SERVER_ERROR, "down")
                    } else {
                        (http::StatusCode::OK, "paid")
                    }
                }
            }),
        )
        .layer(RateLimitLayer::new(l, |req: &http::Request<Body>| {
            let channel = req.headers().get("x-channel")?.to_str().ok()?;
            Some(Request::new(
                "pay",
                vec![Descriptor::new([("channel", channel)])],
            ))
        }))
}

fn pay() -> http::Request<Body> {
    http::Request::get("/pay")
        .header("x-channel", "WPG")
        .body(Body::empty())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_through_one_node_open_the_breaker_on_both_and_a_probe_closes_it() {
    let server = RedisServer::start();
    let (a, b) = (
        node(&server.url(), "a").await,
        node(&server.url(), "b").await,
    );
    assert_eq!(a.breakers().shared(), Some(true));
    let fail = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicU64::new(0));
    let service_a = app(Arc::clone(&a), Arc::clone(&fail), Arc::clone(&calls));
    let service_b = app(
        Arc::clone(&b),
        Arc::clone(&fail),
        Arc::new(AtomicU64::new(0)),
    );

    // Node b has seen nothing; node a's handler fails 4 times: 4 of 4 bad.
    assert!(b.check(&wpg()).await.allowed);
    for _ in 0..4 {
        let status = service_a.clone().oneshot(pay()).await.unwrap().status();
        assert_eq!(status, 500);
    }
    let took = until(&b, is_open, Duration::from_secs(2)).await;
    println!("node b refused {took:?} after node a's last failure");
    assert!(
        took < Duration::from_millis(500),
        "b followed a's opening in {took:?}"
    );
    // Through b's layer too: refused before its handler, with the breaker's reason.
    let res = service_b.clone().oneshot(pay()).await.unwrap();
    assert_eq!(res.status(), 429);
    assert!(is_open(&a.check(&wpg()).await));
    assert_eq!(calls.load(Ordering::Relaxed), 4);
    // Why it opened, on the node that saw none of the failures too.
    for node in [&a, &b] {
        let opened = node.breakers().views().0[0].opened;
        assert_eq!(opened, Some(Opened { calls: 4, bad: 4 }));
    }

    // After open_for: one probe across the cluster, through b.
    tokio::time::sleep(OPEN_FOR).await;
    let probe = until(&b, |v| v.allowed, Duration::from_secs(2)).await;
    assert!(probe < Duration::from_secs(1));
    let v = b.check(&wpg()).await;
    assert!(is_open(&v), "the one probe is out: b refuses a second");
    let v = a.check(&wpg()).await;
    assert!(is_open(&v), "the one probe is out: a refuses too");
    assert_eq!(b.breakers().views().0[0].phase, Phase::HalfOpen);
    // The probe out is the cluster's: b took it, a reads it (every second at the latest).
    assert_eq!(b.breakers().views().0[0].probes_out, 1);
    let started = Instant::now();
    while a.breakers().views().0[0].probes_out != 1 {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "a never read the probe out: {:?}",
            a.breakers().views().0
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The probe's success (through the layer on b) closes it on both.
    fail.store(false, Ordering::Relaxed);
    // The probe taken above was never reported: its lease (2 s) holds its place. A probe the
    // layer takes and reports itself closes the breaker once that lease expires.
    let started = Instant::now();
    loop {
        let status = service_b.clone().oneshot(pay()).await.unwrap().status();
        if status == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "no probe admitted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = until(&a, |v| v.allowed, Duration::from_secs(2)).await;
    println!("node a admitted {took:?} after the probe's success on node b");
    assert!(took < Duration::from_millis(500));
    assert_eq!(a.breakers().views().1[0].1, 0, "closed on a");
    assert_eq!(b.breakers().views().1[0].1, 0, "closed on b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_stopped_each_node_keeps_a_local_breaker() {
    let mut server = RedisServer::start();
    let (a, b) = (
        node(&server.url(), "a").await,
        node(&server.url(), "b").await,
    );
    assert!(a.check(&wpg()).await.allowed);
    assert_eq!(a.breakers().unsent(), 0);
    server.stop();
    // A failed read or flush says so (reads come every second).
    let started = Instant::now();
    while a.breakers().shared() != Some(false) || b.breakers().shared() != Some(false) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never fell back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Node a's own failures open its local breaker; b, which saw none, stays closed.
    for _ in 0..8 {
        a.report(
            "pay",
            &wpg().descriptors,
            Outcome::Error,
            Duration::from_millis(1),
            None,
        );
    }
    for _ in 0..20 {
        let started = Instant::now();
        let v = a.check(&wpg()).await;
        let took = started.elapsed();
        assert!(is_open(&v), "{v:?}");
        assert!(took < Duration::from_millis(50), "a refusal took {took:?}");
    }
    let v = b.check(&wpg()).await;
    assert!(!is_open(&v), "b's local breaker saw no failure");
    assert!(!a.breakers().views().0[0].shared);
    // The reports made while Redis is unreachable are never sent, and counted (at a's next
    // turn, within 20 ms).
    let started = Instant::now();
    while a.breakers().unsent() < 8 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a's reports never counted unsent: {}",
            a.breakers().unsent()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(b.breakers().unsent(), 0, "b reported nothing");

    // Redis back: shared again, and the cluster's state (closed) decides.
    server.restart();
    let started = Instant::now();
    while a.breakers().shared() != Some(true) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never shared again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = until(&a, |v| v.allowed, Duration::from_secs(3)).await;
    assert!(took < Duration::from_secs(3));
}

/// The subscriptions to the breakers' channel that `redis` holds.
async fn subscribers(redis: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (_, n): (String, u64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(flowgate_redis::breakers::CHANNEL)
        .query_async(redis)
        .await
        .expect("PUBSUB NUMSUB");
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharing_task_and_its_subscription_end_with_the_limiter() {
    let server = RedisServer::start();
    let mut redis = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let metrics = &tokio::runtime::Handle::current().metrics();
    let store = RedisStore::connect_lazy_with(&server.url(), RedisOptions::default()).unwrap();
    store.ping().await.expect("redis answers");
    let before = metrics.num_alive_tasks();
    let l = Limiter::new(RuleSet::default(), store.clone());
    l.breakers().set(breakers());
    l.breakers().share(&store, "a");
    // The engine's task subscribes to the transitions once a breaker is in force.
    let started = Instant::now();
    while subscribers(&mut redis).await != 1 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never subscribed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(metrics.num_alive_tasks() > before);
    drop(l);
    let started = Instant::now();
    while subscribers(&mut redis).await != 0 || metrics.num_alive_tasks() > before {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{} subscriptions, {} tasks still alive, {before} before",
            subscribers(&mut redis).await,
            metrics.num_alive_tasks()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn shared_outside_a_runtime_the_states_stay_per_process() {
    // A store is made within a runtime; the states are shared outside of it.
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let store = {
        let _within = rt.enter();
        RedisStore::connect_lazy_with("redis://127.0.0.1:1/", RedisOptions::default())
            .expect("a lazy store")
    };
    let l = Limiter::new(RuleSet::default(), store.clone());
    l.breakers().set(breakers());
    l.breakers().share(&store, "a");
    l.adaptive().share(&store);
    assert_eq!(l.breakers().shared(), None);
    assert_eq!(l.adaptive().shared(), None);
}
