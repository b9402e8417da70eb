//! The limiter over a real Redis that goes away and comes back: every call answers within the
//! store's deadline with the rule's failure policy, and exact enforcement resumes by itself.

#![cfg(feature = "redis")]

use std::time::Duration;

use flowgate::{
    Algorithm, FailurePolicy, Limit, Limiter, Matcher, Quota, RedisOptions, RedisStore, Request,
    Rule, RuleSet,
};
use flowgate_testkit::redis::RedisServer;

fn rule(name: &str, key: &str, failure: FailurePolicy) -> Rule {
    let limit = Limit::new(
        Algorithm::SlidingLog,
        Quota::new(3, Duration::from_secs(3600)).unwrap(),
    )
    .unwrap();
    let mut r = Rule::new("d", name, vec![Matcher::parse(key)], Some(limit));
    r.failure = failure;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_policies_under_a_redis_outage() {
    let mut server = RedisServer::start();
    // Generous for a loaded CI machine: the exact phase must not time out into the policies.
    let deadline = Duration::from_millis(300);
    let store = RedisStore::connect_with(&server.url(), RedisOptions::default().deadline(deadline))
        .await
        .unwrap();
    let rules = RuleSet::new(vec![
        rule("open", "o", FailurePolicy::Open),
        rule("closed", "c", FailurePolicy::Closed),
        rule("local", "l", FailurePolicy::Local { nodes: 3 }),
    ])
    .unwrap();
    let limiter = Limiter::new(rules, store);
    let req = |d: &str| Request::new("d", vec![d.parse().unwrap()]);

    // Exact while Redis is up: 3 per hour.
    for d in ["o=1", "c=1", "l=1"] {
        let ok = futures_ok(&limiter, &req(d), 5).await;
        assert_eq!(ok, 3, "{d}");
    }

    server.stop();
    let mut degraded = 0;
    for round in 0..10 {
        for (d, expect) in [("o=2", Some(true)), ("c=2", Some(false)), ("l=2", None)] {
            let started = tokio::time::Instant::now();
            let v = limiter.check(&req(d)).await;
            let took = started.elapsed();
            assert!(
                took < deadline + Duration::from_millis(250),
                "round {round} {d}: {took:?}"
            );
            if v.statuses[0].error.is_some() {
                degraded += 1;
                if let Some(e) = expect {
                    assert_eq!(v.allowed, e, "round {round} {d}");
                }
            }
        }
    }
    assert!(
        degraded >= 25,
        "the store reported its failures ({degraded})"
    );
    assert!(limiter.store().is_degraded());
    // Local: 3 per hour over 3 nodes = 1 on this node during the outage.
    let local_ok = futures_ok(&limiter, &req("l=3"), 5).await;
    assert_eq!(local_ok, 1);

    server.restart();
    // Exact enforcement resumes without recreating the limiter (reconnect may take a moment).
    let mut resumed = false;
    for _ in 0..100 {
        let v = limiter.check(&req("c=9")).await;
        if v.statuses[0].error.is_none() {
            assert!(v.allowed);
            resumed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(resumed, "the store reconnected by itself");
    assert_eq!(
        futures_ok(&limiter, &req("c=9"), 5).await,
        2,
        "exact again: 3 in all"
    );
    assert!(!limiter.store().is_degraded());
}

async fn futures_ok<S: flowgate::store::Store>(l: &Limiter<S>, r: &Request, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        if l.check(r).await.allowed {
            ok += 1;
        }
    }
    ok
}
