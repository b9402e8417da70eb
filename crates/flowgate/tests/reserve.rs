//! Reservations end to end, the same scenarios on the memory store and on a real redis-server,
//! each with an injected clock: commit over and under the estimate, cancel, commit on drop,
//! refusals once reserved estimates fill the limit, the clamp and the rules that take none.

use std::sync::Arc;
use std::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::store::Store;
use flowgate::{
    Algorithm, Descriptor, Limit, Limiter, Matcher, MemoryStore, Quota, Request, ReserveError,
    Rule, RuleSet,
};

const LIMIT: u64 = 1_000;
const MAX_DEBT: u64 = 200;

fn rules() -> RuleSet {
    let q = |s: &str| s.parse::<Quota>().unwrap();
    let tokens = Limit::builder(Algorithm::FixedWindow, q("1000/m"))
        .max_debt(MAX_DEBT)
        .build()
        .unwrap();
    let bucket = Limit::new(Algorithm::TokenBucket, q("1000/m")).unwrap();
    let conc = Limit::new(Algorithm::Concurrency, q("5/m")).unwrap();
    RuleSet::new(vec![
        Rule::new("llm", "tokens", vec![Matcher::parse("key")], Some(tokens)),
        Rule::new(
            "llm",
            "bucket",
            vec![Matcher::parse("bucket")],
            Some(bucket),
        ),
        Rule::new("llm", "inflight", vec![Matcher::parse("conc")], Some(conc)),
    ])
    .unwrap()
}

fn req(pairs: &[(&str, &str)]) -> Request {
    Request::new(
        "llm",
        pairs
            .iter()
            .map(|&(k, v)| Descriptor::new([(k, v)]))
            .collect(),
    )
}

/// Units left to the key of `request` (a check of cost 0 only looks).
async fn remaining<S: Store>(l: &Limiter<S>, request: &Request) -> u64 {
    let look = request.clone().with_cost(0);
    l.check(&look).await.statuses[0].decision.remaining
}

/// Polls until the key of `request` has `want` units left (a dropped reservation commits on a
/// task of its own).
async fn until_remaining<S: Store>(l: &Limiter<S>, request: &Request, want: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = remaining(l, request).await;
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{got} left, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn over_estimate_counts_up_to_max_debt<S: Store>(l: &Arc<Limiter<S>>) {
    let r = req(&[("key", "over")]);
    let res = l.reserve(&r, 400).await.unwrap();
    assert_eq!(remaining(l, &r).await, 600, "the estimate is taken");
    let c = res.commit(1_500).await.unwrap();
    let t = &c.rules[0];
    assert_eq!(t.rule.name, "tokens");
    assert_eq!(t.given_back, 400);
    assert_eq!((t.applied, t.dropped), (LIMIT + MAX_DEBT, 300));
    assert_eq!(t.debt, MAX_DEBT);
    assert!(t.over());
    let refused = l.reserve(&r, 0).await.unwrap_err();
    let ReserveError::Refused(v) = refused else {
        panic!("{refused:?}")
    };
    assert!(v.retry_after().is_some(), "in debt until the window ends");
}

async fn under_estimate_gives_back_the_difference<S: Store>(l: &Arc<Limiter<S>>) {
    let r = req(&[("key", "under")]);
    let c = l.reserve(&r, 400).await.unwrap().commit(100).await.unwrap();
    let t = &c.rules[0];
    assert_eq!((t.given_back, t.applied, t.debt), (400, 100, 0));
    assert!(!t.over());
    assert_eq!(t.decision.remaining, 900);
    assert_eq!(remaining(l, &r).await, 900);
}

async fn reserved_estimates_fill_the_limit<S: Store>(l: &Arc<Limiter<S>>) {
    let r = req(&[("key", "fill")]);
    let a = l.reserve(&r, 500).await.unwrap();
    let b = l.reserve(&r, 500).await.unwrap();
    assert_eq!(a.verdict().statuses[0].decision.remaining, 500);
    let refused = l.reserve(&r, 1).await.unwrap_err();
    let ReserveError::Refused(v) = refused else {
        panic!("{refused:?}")
    };
    assert!(!v.allowed);
    assert!(v.retry_after().is_some());
    let headers = v.headers();
    assert!(headers.contains(&("ratelimit-remaining", "0".to_owned())));
    let c = a.cancel().await.unwrap();
    assert_eq!((c.rules[0].given_back, c.rules[0].applied), (500, 0));
    assert_eq!(remaining(l, &r).await, 500, "cancel gives all back");
    let c = b.commit(500).await.unwrap();
    assert_eq!(c.rules[0].decision.remaining, 500);
}

/// Dropped, a reservation commits its estimate: across a window's end, the new window counts it.
async fn drop_commits_the_estimate<S: Store>(l: &Arc<Limiter<S>>, clock: &ManualClock) {
    let r = req(&[("key", "drop")]);
    let res = l.reserve(&r, 300).await.unwrap();
    clock.advance(Duration::from_secs(60));
    assert_eq!(remaining(l, &r).await, LIMIT, "a new window");
    drop(res);
    until_remaining(l, &r, LIMIT - 300).await;
}

async fn clamp_and_rules_that_take_no_reservations<S: Store>(l: &Arc<Limiter<S>>) {
    let r = req(&[("key", "clamp")]);
    match l.reserve(&r, 501).await {
        Err(ReserveError::OverClamp {
            rule,
            estimate,
            max,
        }) => assert_eq!((rule.as_str(), estimate, max), ("llm/tokens", 501, 500)),
        other => panic!("{:?}", other.err()),
    }
    // One key named twice takes the estimate twice: the clamp counts both.
    let twice = req(&[("key", "clamp"), ("key", "clamp")]);
    match l.reserve(&twice, 300).await {
        Err(ReserveError::OverClamp { estimate, max, .. }) => {
            assert_eq!((estimate, max), (600, 500))
        }
        other => panic!("{:?}", other.err()),
    }
    l.set_reserve_share(0.8).unwrap();
    l.reserve(&r, 800).await.unwrap().cancel().await.unwrap();
    assert!(l.set_reserve_share(1.5).is_err());
    assert!(l.set_reserve_share(0.0).is_err());
    assert_eq!(l.reserve_share(), 0.8);
    l.set_reserve_share(0.5).unwrap();
    // A request matching a concurrency rule beside the token rule takes nothing from either.
    let both = req(&[("key", "clamp"), ("conc", "x")]);
    let e = l.reserve(&both, 10).await.unwrap_err();
    assert!(
        matches!(&e, ReserveError::NotChargeable { rule, .. } if rule == "llm/inflight"),
        "{e}"
    );
    assert!(e.to_string().contains("concurrency"), "{e}");
    assert_eq!(remaining(l, &r).await, LIMIT);
    // Matching no rule: admitted, unlimited, nothing to commit.
    let none = l.reserve(&req(&[("other", "x")]), 10).await.unwrap();
    assert!(none.commit(10).await.unwrap().rules.is_empty());
}

/// The token bucket: a commit over the estimate leaves debt that time pays back.
async fn token_bucket_debt_is_paid_back_by_time<S: Store>(
    l: &Arc<Limiter<S>>,
    clock: &ManualClock,
) {
    let r = req(&[("bucket", "b")]);
    let c = l
        .reserve(&r, 500)
        .await
        .unwrap()
        .commit(1_400)
        .await
        .unwrap();
    let t = &c.rules[0];
    assert_eq!((t.applied, t.dropped, t.debt), (1_400, 0, 400));
    assert!(t.over());
    assert!(l.reserve(&r, 1).await.is_err());
    // 1000/m pays back 400 units in 24 s.
    clock.advance(Duration::from_secs(25));
    l.reserve(&r, 1).await.unwrap().commit(1).await.unwrap();
}

async fn all<S: Store>(l: Arc<Limiter<S>>, clock: ManualClock) {
    over_estimate_counts_up_to_max_debt(&l).await;
    under_estimate_gives_back_the_difference(&l).await;
    reserved_estimates_fill_the_limit(&l).await;
    clamp_and_rules_that_take_no_reservations(&l).await;
    token_bucket_debt_is_paid_back_by_time(&l, &clock).await;
    drop_commits_the_estimate(&l, &clock).await;
}

#[tokio::test]
async fn reservations_on_the_memory_store() {
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = MemoryStore::with_clock(clock.clone());
    all(Arc::new(Limiter::new(rules(), store)), clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_on_redis() {
    let server = flowgate_testkit::redis::RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = flowgate::RedisStore::connect_with(
        &server.url(),
        // A wide deadline: on a busy machine the default 25 ms would let the failure policy
        // decide (admit, taking nothing), which these exact counts do not test.
        flowgate::RedisOptions::default()
            .clock_override(clock.clone())
            .deadline(Duration::from_secs(5)),
    )
    .await
    .unwrap();
    all(Arc::new(Limiter::new(rules(), store)), clock).await;
}

/// Dropped where no Tokio runtime runs, a reservation logs and leaves its estimate counted.
#[tokio::test]
async fn dropped_outside_a_runtime_the_estimate_stays_counted() {
    let clock = ManualClock::new(1_700_000_000_000_000);
    let l = Arc::new(Limiter::new(rules(), MemoryStore::with_clock(clock)));
    let r = req(&[("key", "thread")]);
    let res = l.reserve(&r, 300).await.unwrap();
    std::thread::spawn(move || drop(res)).join().unwrap();
    assert_eq!(remaining(&l, &r).await, LIMIT - 300);
}
