//! Circuit breakers around the limiter, per process: the tower layer opens a breaker by itself
//! when its handler fails; an open breaker refuses before the store; probes; reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::{Router, routing::get};
use flowgate::breakers::{BreakerDef, BreakerSet, BreakerSpec, Opened, Outcome, Phase, Strategy};
use flowgate::clock::{ManualClock, Micros};
use flowgate::layer::RateLimitLayer;
use flowgate::{
    Algorithm, Descriptor, Limit, Limiter, Matcher, MemoryStore, Quota, Request, Rule, RuleSet,
};
use http_body_util::BodyExt;
use tower::ServiceExt;

type L = Limiter<MemoryStore<ManualClock>>;

const S: Micros = 1_000_000;
const T0: Micros = 1_800_000_000_000_000;

/// A breaker on `channel`: error ratio 0.5 over 10 s, at least 4 calls, open 30 s, `probes`
/// probes with 5 s leases.
fn breakers(probes: u32) -> BreakerSet {
    let spec = BreakerSpec::new(Strategy::ErrorRatio, 0.5, 10 * S, 4, 30 * S, probes, 5 * S)
        .expect("valid");
    BreakerSet::new(vec![BreakerDef::new(
        "pay",
        "channel",
        vec![Matcher::parse("channel")],
        spec,
    )])
    .expect("valid set")
}

/// A limiter with a counting rule (100/s per channel) and the breakers, on a manual clock.
fn limiter(probes: u32) -> (Arc<L>, ManualClock) {
    let clock = ManualClock::new(T0);
    let limit = Limit::new(Algorithm::FixedWindow, "100/s".parse::<Quota>().unwrap()).unwrap();
    let once = Limit::new(Algorithm::FixedWindow, "1/m".parse::<Quota>().unwrap()).unwrap();
    let rules = RuleSet::new(vec![
        Rule::new(
            "pay",
            "per-channel",
            vec![Matcher::parse("channel")],
            Some(limit),
        ),
        Rule::new("pay", "per-user", vec![Matcher::parse("user")], Some(once)),
    ])
    .unwrap();
    let limiter = Limiter::new(rules, MemoryStore::with_clock(clock.clone()));
    limiter.breakers().set(breakers(probes));
    (Arc::new(limiter), clock)
}

fn wpg() -> Request {
    Request::new("pay", vec![Descriptor::new([("channel", "WPG")])])
}

fn report(l: &L, outcome: Outcome, probe: Option<u64>) -> usize {
    l.report(
        "pay",
        &wpg().descriptors,
        outcome,
        Duration::from_millis(5),
        probe,
    )
    .counted
}

#[tokio::test]
async fn an_open_breaker_refuses_before_the_store_with_the_time_to_half_open() {
    let (l, clock) = limiter(1);
    for _ in 0..4 {
        assert!(l.check(&wpg()).await.allowed);
        assert_eq!(report(&l, Outcome::Error, None), 1);
    }
    clock.advance(Duration::from_secs(1));
    let v = l.check(&wpg()).await;
    assert!(!v.allowed);
    let b = v.circuit_open().expect("refused by the breaker");
    assert_eq!(
        (b.name.as_str(), b.key.as_str()),
        ("channel", "pay:channel:channel=WPG")
    );
    assert_eq!(v.retry_after(), Some(Duration::from_secs(29)));
    assert!(v.headers().contains(&("retry-after", "29".to_owned())));
    assert!(
        v.headers().iter().all(|(k, _)| !k.starts_with("ratelimit")),
        "no limit was asked: {:?}",
        v.headers()
    );
    assert!(v.statuses[0].rule.is_none());
    // The store was not asked: a refused request consumed nothing of its other descriptor's
    // limit (one per minute).
    let both = Request::new(
        "pay",
        vec![
            Descriptor::new([("channel", "WPG")]),
            Descriptor::new([("user", "u")]),
        ],
    );
    assert!(l.check(&both).await.circuit_open().is_some());
    let user = Request::new("pay", vec![Descriptor::new([("user", "u")])]);
    assert!(l.check(&user).await.allowed, "the user's one call is left");
    assert!(!l.check(&user).await.allowed);
    // Another channel has its own instance, closed.
    let other = Request::new("pay", vec![Descriptor::new([("channel", "ALI")])]);
    assert!(l.check(&other).await.allowed);
    let (views, counts) = l.breakers().views();
    assert_eq!(counts[0].1, 1, "one instance open");
    assert_eq!(views[0].phase, Phase::Open);
    assert_eq!(
        views[0].opened,
        Some(Opened { calls: 4, bad: 4 }),
        "why it opened: 4 bad calls of 4"
    );
}

#[tokio::test]
async fn half_open_admits_its_probes_then_closes_when_they_succeed() {
    let (l, clock) = limiter(1);
    for _ in 0..4 {
        report(&l, Outcome::Error, None);
    }
    clock.advance(Duration::from_secs(30));
    let first = l.check(&wpg()).await;
    assert!(first.allowed, "a probe goes ahead");
    let probe = first.statuses[0]
        .breaker
        .as_ref()
        .and_then(|b| b.probe)
        .expect("a probe lease");
    let second = l.check(&wpg()).await;
    assert!(
        second.circuit_open().is_some(),
        "exactly one probe while half-open"
    );
    let (views, _) = l.breakers().views();
    assert_eq!(
        (views[0].phase, views[0].probes_out, views[0].opened),
        (Phase::HalfOpen, 1, Some(Opened { calls: 4, bad: 4 }))
    );
    // A report without the lease is not the probe's: ignored while half-open.
    report(&l, Outcome::Ok, None);
    assert!(l.check(&wpg()).await.circuit_open().is_some());
    // A lease of another instance is not this one's.
    assert_eq!(report(&l, Outcome::Ok, Some(probe ^ (1 << 40))), 1);
    assert!(l.check(&wpg()).await.circuit_open().is_some());
    report(&l, Outcome::Ok, Some(probe));
    let after = l.check(&wpg()).await;
    assert!(after.allowed, "closed");
    assert!(after.statuses[0].breaker.as_ref().unwrap().probe.is_none());
}

/// The observer is told every change of phase, typed, as it happens: opened by the reports,
/// half-open at the first check past `open_for`, closed by the probe's success.
#[tokio::test]
async fn the_observer_is_told_each_change_of_phase() {
    let (l, clock) = limiter(1);
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    l.breakers().on_transition(move |e| {
        log.lock().push((e.key.clone(), e.from, e.to));
    });
    for _ in 0..4 {
        report(&l, Outcome::Error, None);
    }
    clock.advance(Duration::from_secs(30));
    let probe = l.check(&wpg()).await.statuses[0]
        .breaker
        .as_ref()
        .and_then(|b| b.probe);
    report(&l, Outcome::Ok, probe);
    let key = "pay:channel:channel=WPG".to_owned();
    assert_eq!(
        *seen.lock(),
        [
            (key.clone(), Phase::Closed, Phase::Open),
            (key.clone(), Phase::Open, Phase::HalfOpen),
            (key, Phase::HalfOpen, Phase::Closed),
        ]
    );
    assert_eq!(
        Phase::ALL.map(|p| p.to_string()),
        ["closed", "open", "half_open"],
        "the names shown wherever a phase is"
    );
}

#[tokio::test]
async fn a_probe_that_never_reports_frees_its_place_when_its_lease_expires() {
    let (l, clock) = limiter(1);
    for _ in 0..4 {
        report(&l, Outcome::Error, None);
    }
    clock.advance(Duration::from_secs(30));
    assert!(l.check(&wpg()).await.allowed, "the probe, never reported");
    let refused = l.check(&wpg()).await;
    assert_eq!(refused.retry_after(), Some(Duration::from_secs(5)));
    clock.advance(Duration::from_secs(5));
    let again = l.check(&wpg()).await;
    assert!(again.allowed, "the expired lease freed its place");
    // A failed probe opens it again for open_for.
    let p = again.statuses[0].breaker.as_ref().unwrap().probe;
    report(&l, Outcome::Error, p);
    let v = l.check(&wpg()).await;
    assert_eq!(v.retry_after(), Some(Duration::from_secs(30)));
}

#[tokio::test]
async fn a_request_over_its_limit_takes_no_probe() {
    let (l, clock) = limiter(1);
    for _ in 0..4 {
        report(&l, Outcome::Error, None);
    }
    clock.advance(Duration::from_secs(30));
    // A descriptor whose rule rejects (cost above the limit) takes no probe.
    let mut big = wpg();
    big.cost = 1000;
    let v = l.check(&big).await;
    assert!(!v.allowed && v.circuit_open().is_none());
    assert!(l.check(&wpg()).await.allowed, "the probe is still free");
}

#[tokio::test]
async fn unchanged_breakers_keep_their_state_across_a_change_of_set() {
    let (l, _clock) = limiter(1);
    for _ in 0..4 {
        report(&l, Outcome::Error, None);
    }
    l.breakers().set(breakers(1));
    assert!(l.check(&wpg()).await.circuit_open().is_some(), "kept open");
    l.breakers().set(breakers(2));
    assert!(
        l.check(&wpg()).await.allowed,
        "a changed breaker starts closed"
    );
}

/// An axum service whose handler answers 500 while `fail` is set, behind the layer.
fn app(l: Arc<L>, fail: Arc<AtomicBool>, calls: Arc<AtomicU64>) -> Router {
    Router::new()
        .route(
            "/pay",
            get(move || {
                let fail = Arc::clone(&fail);
                let calls = Arc::clone(&calls);
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

#[tokio::test]
async fn the_tower_layer_opens_the_breaker_by_itself_when_its_handler_fails() {
    let (l, clock) = limiter(1);
    let fail = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let app = app(Arc::clone(&l), Arc::clone(&fail), Arc::clone(&calls));
    for _ in 0..6 {
        assert_eq!(app.clone().oneshot(pay()).await.unwrap().status(), 200);
    }
    fail.store(true, Ordering::Relaxed);
    // 6 ok, then failures: at 6 of 12 the ratio reaches 0.5.
    for _ in 0..6 {
        assert_eq!(app.clone().oneshot(pay()).await.unwrap().status(), 500);
    }
    let res = app.clone().oneshot(pay()).await.unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "30");
    let body = res.into_body().collect().await.unwrap().to_bytes();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["error"], "circuit_open");
    assert_eq!(json["breaker"], "channel");
    assert_eq!(
        calls.load(Ordering::Relaxed),
        12,
        "the handler was not called"
    );
    // After open_for the layer's probe succeeds and closes it.
    fail.store(false, Ordering::Relaxed);
    clock.advance(Duration::from_secs(30));
    assert_eq!(app.clone().oneshot(pay()).await.unwrap().status(), 200);
    assert_eq!(app.clone().oneshot(pay()).await.unwrap().status(), 200);
    assert_eq!(l.breakers().views().1[0].1, 0, "closed again");
}

#[tokio::test]
async fn a_permit_reports_once() {
    let (l, _clock) = limiter(1);
    let mut permit = l.acquire(&wpg()).await.expect("admitted");
    assert_eq!(permit.report(false, Duration::from_millis(3)).counted, 1);
    assert_eq!(
        permit.report(false, Duration::from_millis(3)).counted,
        0,
        "a second report is ignored"
    );
    drop(permit);
    // A permit dropped without a report reports nothing.
    for _ in 0..10 {
        let _ = l.acquire(&wpg()).await.expect("admitted");
    }
    let (views, _) = l.breakers().views();
    assert_eq!((views[0].calls, views[0].bad), (1, 1));
}

/// Past [`flowgate::breakers::MAX_VIEWS`] instances worth showing, the views keep those not
/// closed first, then the closed ones with the most bad calls in their window.
#[tokio::test]
async fn views_past_the_cap_keep_the_open_then_the_closest_to_tripping() {
    let (l, _clock) = limiter(1);
    let channel = |i: usize| vec![Descriptor::new([("channel", format!("c{i:04}").as_str())])];
    let cap = flowgate::breakers::MAX_VIEWS;
    // Channel c0000 opens (4 errors); the last ten have one error in two calls (and would be
    // cut by an order by key alone); the others one good call.
    for _ in 0..4 {
        l.report(
            "pay",
            &channel(0),
            Outcome::Error,
            Duration::from_millis(5),
            None,
        );
    }
    for i in 1..cap + 500 {
        l.report(
            "pay",
            &channel(i),
            Outcome::Ok,
            Duration::from_millis(5),
            None,
        );
        if i >= cap + 490 {
            l.report(
                "pay",
                &channel(i),
                Outcome::Error,
                Duration::from_millis(5),
                None,
            );
        }
    }
    let (views, counts) = l.breakers().views();
    assert_eq!(counts[0].1, 1);
    assert_eq!(views.len(), cap);
    assert_eq!(
        (views[0].key.as_str(), views[0].phase),
        ("pay:channel:channel=c0000", Phase::Open)
    );
    let bad: Vec<&str> = views[1..11].iter().map(|v| v.key.as_str()).collect();
    let want: Vec<String> = (cap + 490..cap + 500)
        .map(|i| format!("pay:channel:channel=c{i:04}"))
        .collect();
    assert_eq!(bad, want, "the closed instances with bad calls, by key");
    assert!(views[1..11].iter().all(|v| (v.calls, v.bad) == (2, 1)));
    assert!(views[11..].iter().all(|v| (v.calls, v.bad) == (1, 0)));
}

/// A reservation goes through the breakers as a check does: refused while open.
#[tokio::test]
async fn an_open_breaker_refuses_a_reservation_before_the_store() {
    let (l, _clock) = limiter(1);
    for _ in 0..4 {
        report(&l, Outcome::Error, None);
    }
    let refused = l.reserve(&wpg(), 10).await.unwrap_err();
    let flowgate::ReserveError::Refused(v) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(v.circuit_open().map(|b| b.name.as_str()), Some("channel"));
    assert!(v.retry_after().is_some(), "the time to half-open");
}
