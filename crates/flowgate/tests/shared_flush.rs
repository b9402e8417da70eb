//! The reports of shared breakers and adaptive limits, sent on demand (`flush`, what a server
//! shutting down calls): once it completes they are in Redis, not waiting for the next batch.
//! Several rounds, each checked at once against Redis itself: a flush that answered before the
//! batch was sent would be caught by one of them.

#![cfg(feature = "redis")]

use std::time::Duration;

use flowgate::breakers::{BreakerDef, BreakerSet, BreakerSpec, Outcome, Strategy};
use flowgate::rule::AimdSpec;
use flowgate::{
    Algorithm, Descriptor, FailurePolicy, Limit, Limiter, Matcher, Quota, RedisOptions, RedisStore,
    Request, Rule, RuleSet,
};
use flowgate_testkit::redis::{RedisServer, raw_command};

const ROUNDS: usize = 8;

/// A breaker on `channel`, an adaptive concurrency limit on `dep`.
fn limiter(store: RedisStore) -> Limiter<RedisStore> {
    let concurrency =
        Limit::new(Algorithm::Concurrency, "10/30s".parse::<Quota>().unwrap()).unwrap();
    let mut rule = Rule::new(
        "pay",
        "calls",
        vec![Matcher::parse("dep")],
        Some(concurrency),
    );
    rule.adaptive = Some(AimdSpec {
        initial: 10,
        ..AimdSpec::new(2, 50, 100_000.0)
    });
    rule.failure = FailurePolicy::Open;
    let l = Limiter::new(RuleSet::new(vec![rule]).unwrap(), store.clone());
    let s = 1_000_000;
    let spec = BreakerSpec::new(Strategy::ErrorRatio, 0.5, 10 * s, 4, s, 1, 2 * s).unwrap();
    let breakers = BreakerSet::new(vec![BreakerDef::new(
        "pay",
        "channel",
        vec![Matcher::parse("channel")],
        spec,
    )])
    .unwrap();
    l.breakers().set(breakers);
    l.breakers().share(&store, "a");
    l.adaptive().share(&store);
    l
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_puts_the_queued_reports_in_redis_before_it_completes() {
    let server = RedisServer::start();
    let store = RedisStore::connect_with(
        &server.url(),
        RedisOptions::default().deadline(Duration::from_secs(2)),
    )
    .await
    .unwrap();
    let l = limiter(store);
    let port = server.port();
    for round in 0..ROUNDS {
        let channel = format!("C{round}");
        let dep = format!("D{round}");
        let breaker = [Descriptor::new([("channel", channel.as_str())])];
        let adaptive = Descriptor::new([("dep", dep.as_str())]);
        // The adaptive key exists once a decision has seen it.
        let v = l.check(&Request::new("pay", vec![adaptive.clone()])).await;
        assert!(v.allowed, "{v:?}");
        l.report(
            "pay",
            &breaker,
            Outcome::Error,
            Duration::from_millis(3),
            None,
        );
        l.report(
            "pay",
            &[adaptive],
            Outcome::Ok,
            Duration::from_millis(500),
            None,
        );
        tokio::time::timeout(Duration::from_secs(10), async {
            l.breakers().flush().await;
            l.adaptive().flush().await;
        })
        .await
        .expect("the flushes complete");
        let windows = raw_command(port, "KEYS flowgate:brk:*").unwrap();
        assert!(
            windows.contains(&format!(":channel={channel}")),
            "round {round}: the breaker's report is not in Redis: {windows}"
        );
        let limits = raw_command(port, "HKEYS flowgate:adaptive:{pay:calls}").unwrap();
        assert!(
            limits.contains(&dep),
            "round {round}: the adaptive report is not in Redis: {limits}"
        );
    }
    assert_eq!(l.breakers().unsent(), 0);
    assert_eq!(l.adaptive().unsent(), 0);
}

#[tokio::test]
async fn a_flush_per_process_completes_at_once() {
    let l = Limiter::new(RuleSet::default(), flowgate::MemoryStore::default());
    tokio::time::timeout(Duration::from_secs(1), async {
        l.breakers().flush().await;
        l.adaptive().flush().await;
    })
    .await
    .expect("nothing shared: nothing to wait for");
}
