//! Scheduled limits through the limiter: the limit in force switches exactly at the schedule's
//! instants, across changes of time, on the memory store and on Redis (where the store's clock
//! is its estimate of Redis's `TIME`).

use std::sync::Arc;
use std::time::Duration;

use flowgate::clock::{Clock, ManualClock};
use flowgate::rule::{Hours, Override, Schedule};
use flowgate::store::Store;
use flowgate::{Algorithm, Limit, Limiter, Matcher, MemoryStore, Quota, Request, Rule, RuleSet};

fn fixed(q: &str) -> Option<Limit> {
    Some(Limit::new(Algorithm::FixedWindow, q.parse::<Quota>().unwrap()).unwrap())
}

/// `1/s`, but `50/s` from 02:00 to 02:30 and `100/s` from 02:30 to 03:30, Paris time.
fn rules() -> RuleSet {
    let at = |limit, hours| Override {
        limit: fixed(limit),
        dates: None,
        days: vec![],
        hours: Some(Hours::parse(hours).unwrap()),
    };
    let mut rule = Rule::new(
        "pay",
        "channel",
        vec![Matcher::parse("channel")],
        fixed("1/s"),
    );
    let paris = "Europe/Paris".parse().unwrap();
    rule.time_zone = paris;
    rule.schedule = Some(Schedule::new(
        paris,
        vec![at("50/s", "02:00-02:30"), at("100/s", "02:30-03:30")],
    ));
    RuleSet::new(vec![rule]).unwrap()
}

/// The limit in force after each change: (instant, limit), each checked one microsecond before
/// (the previous limit) and at the instant.
const SWITCHES: [(u64, u64); 8] = [
    // 2026-03-29: Paris jumps from 02:00 CET to 03:00 CEST at 01:00Z; 02:00-02:30 never shows.
    (1_774_746_000_000_000, 100), // 03:00 CEST
    (1_774_747_800_000_000, 1),   // 03:30 CEST
    // 2026-10-25: Paris goes back from 03:00 CEST to 02:00 CET at 01:00Z; 02:00-03:00 shows twice.
    (1_792_886_400_000_000, 50),  // 02:00 CEST
    (1_792_888_200_000_000, 100), // 02:30 CEST
    (1_792_890_000_000_000, 50),  // 02:00 CET again, at the change of time
    (1_792_891_800_000_000, 100), // 02:30 CET
    (1_792_895_400_000_000, 1),   // 03:30 CET
    (1_792_976_400_000_000, 50),  // 02:00 CET the next day
];

async fn limit_at<S: Store>(l: &Limiter<S>, clock: &ManualClock, at: u64) -> u64 {
    clock.set(at);
    let r = Request::new("pay", vec!["channel=WPG".parse().unwrap()]);
    let v = l.check(&r).await;
    assert!(v.allowed, "at {at}");
    v.statuses[0].decision.limit
}

async fn switches_exactly<S: Store>(l: &Limiter<S>, clock: &ManualClock) {
    let mut before = 1;
    for (at, limit) in SWITCHES {
        assert_eq!(limit_at(l, clock, at - 1).await, before, "just before {at}");
        assert_eq!(limit_at(l, clock, at).await, limit, "at {at}");
        // What the rule announces as its next change is this one.
        let rules = l.rules();
        let rule = &rules.rules()[0];
        let (next, then) = rule.next_change(at - 1).unwrap();
        assert_eq!((next, then.map(Limit::limit)), (at, Some(limit)));
        before = limit;
    }
}

#[tokio::test]
async fn switches_at_the_instant_across_changes_of_time_on_memory() {
    let clock = ManualClock::new(0);
    let l = Limiter::new(rules(), MemoryStore::with_clock(clock.clone()));
    switches_exactly(&l, &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switches_at_the_instant_across_changes_of_time_on_redis() {
    let server = flowgate_testkit::redis::RedisServer::start();
    let clock = ManualClock::new(0);
    let store = flowgate::RedisStore::connect_with(
        &server.url(),
        flowgate::RedisOptions::default()
            .deadline(Duration::from_secs(5))
            .clock_override(clock.clone()),
    )
    .await
    .unwrap();
    let l = Arc::new(Limiter::new(rules(), store));
    switches_exactly(&l, &clock).await;
}

/// A clock an hour ahead of the real one.
struct HourAhead;

impl Clock for HourAhead {
    fn now(&self) -> u64 {
        flowgate::clock::system_now() + 3_600_000_000
    }
}

/// The Redis store's clock is Redis's `TIME` as estimated from this node's clock: an hour off
/// here, corrected by the first exchange (a decision or, idle, the store's own `TIME`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_tells_redis_time() {
    let server = flowgate_testkit::redis::RedisServer::start();
    let store = flowgate::RedisStore::connect_with(
        &server.url(),
        flowgate::RedisOptions::default()
            .deadline(Duration::from_secs(5))
            .local_clock(HourAhead),
    )
    .await
    .unwrap();
    let near = |store: &flowgate::RedisStore| {
        let off = store.now().abs_diff(flowgate::clock::system_now());
        off < 200_000
    };
    // Idle: the store reads TIME by itself at once.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while !near(&store) {
        assert!(tokio::time::Instant::now() < deadline, "never corrected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The trait's clock is the same estimate (read twice, so a few microseconds apart).
    assert!(Store::now(&store).abs_diff(store.now()) < 50_000);
}

/// A clock that counts its reads, at 03:00 CEST on 2026-03-29 (the scheduled rule's `100/s`).
#[derive(Clone, Default)]
struct Counting(Arc<std::sync::atomic::AtomicU64>);

impl Clock for Counting {
    fn now(&self) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        SWITCHES[0].0
    }
}

impl Counting {
    /// The reads of `check`ing `r` once (after a first check, so that nothing is made afresh).
    async fn reads_of<S: Store>(&self, l: &Limiter<S>, r: &Request) -> u64 {
        assert!(l.check(r).await.allowed);
        let before = self.0.load(std::sync::atomic::Ordering::Relaxed);
        assert!(l.check(r).await.allowed);
        self.0.load(std::sync::atomic::Ordering::Relaxed) - before
    }
}

/// The limiter reads the clock once per decision: a scheduled rule's limit in force and the
/// breakers' look and admission share one instant (the store reads it too, for its own
/// transitions, as often either way).
#[tokio::test]
async fn a_decision_reads_the_clock_once() {
    use flowgate::breakers::{BreakerDef, BreakerSet, BreakerSpec, Strategy};
    let r = Request::new("pay", vec!["channel=WPG".parse().unwrap()]);
    let plain = {
        let rule = Rule::new(
            "pay",
            "channel",
            vec![Matcher::parse("channel")],
            fixed("100/s"),
        );
        RuleSet::new(vec![rule]).unwrap()
    };
    let clock = Counting::default();
    let store_reads = clock
        .reads_of(
            &Limiter::new(plain, MemoryStore::with_clock(clock.clone())),
            &r,
        )
        .await;

    let clock = Counting::default();
    let l = Limiter::new(rules(), MemoryStore::with_clock(clock.clone()));
    let spec = BreakerSpec::new(
        Strategy::ErrorRatio,
        0.5,
        10_000_000,
        4,
        1_000_000,
        1,
        1_000_000,
    )
    .unwrap();
    let def = BreakerDef::new("pay", "wpg", vec![Matcher::parse("channel")], spec);
    l.breakers().set(BreakerSet::new(vec![def]).unwrap());
    let v = l.check(&r).await;
    assert_eq!(v.statuses[0].decision.limit, 100, "the schedule's limit");
    assert!(v.statuses[0].breaker.is_some(), "the breaker matched");
    assert_eq!(clock.reads_of(&l, &r).await, store_reads + 1);
}
