//! The limiter end to end on the memory store: rule matching, all-or-nothing, shadow, unlimited,
//! delay-mode waits, leases, rule swaps, and failure policies; quota mode and shared wildcards on
//! the memory store and on Redis.

use std::sync::Arc;
use std::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::store::{Decisions, Item, Store, StoreError};
use flowgate::{
    Algorithm, Descriptor, FailurePolicy, Limit, Limiter, Matcher, MemoryStore, Mode, Quota,
    Request, Rule, RuleSet,
};

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

fn rule(name: &str, pattern: &str, limit: Option<Limit>) -> Rule {
    Rule::new(
        "pay",
        name,
        pattern.split(',').map(Matcher::parse).collect(),
        limit,
    )
}

fn req(descs: &[&str]) -> Request {
    Request::new("pay", descs.iter().map(|d| d.parse().unwrap()).collect())
}

fn limiter(rules: Vec<Rule>) -> (Arc<Limiter<MemoryStore<ManualClock>>>, ManualClock) {
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = MemoryStore::with_clock(clock.clone());
    (
        Arc::new(Limiter::new(RuleSet::new(rules).unwrap(), store)),
        clock,
    )
}

#[tokio::test]
async fn global_channel_and_user_rules_all_or_nothing() {
    let fw = |s| Some(Limit::new(Algorithm::FixedWindow, q(s)).unwrap());
    let (l, _) = limiter(vec![
        rule("global", "scope=all", fw("100/s")),
        rule("wpg", "biz=PAY,channel=WPG", fw("20/s")),
        rule("user", "user", fw("2/s")),
    ]);
    let r = req(&["scope=all", "biz=PAY, channel=WPG", "user=7"]);
    for _ in 0..2 {
        let v = l.check(&r).await;
        assert!(v.allowed);
        assert_eq!(v.statuses.len(), 3);
    }
    let v = l.check(&r).await;
    assert!(!v.allowed);
    assert_eq!(v.binding().unwrap().rule.as_ref().unwrap().name, "user");
    assert_eq!(v.retry_after(), Some(Duration::from_secs(1)));
    // The rejected request charged neither the global nor the channel rule.
    let peek = l
        .check(&req(&["scope=all", "biz=PAY, channel=WPG"]).with_cost(0))
        .await;
    assert_eq!(peek.statuses[0].decision.remaining, 98);
    assert_eq!(peek.statuses[1].decision.remaining, 18);
    // Another user is unaffected.
    assert!(l.check(&req(&["user=8"])).await.allowed);
}

#[tokio::test]
async fn unmatched_and_unlimited_descriptors_pass() {
    let (l, _) = limiter(vec![
        rule("free", "tier=free", None),
        rule(
            "blocked",
            "tier=banned",
            Some(Limit::new(Algorithm::FixedWindow, q("0/s")).unwrap()),
        ),
    ]);
    let v = l.check(&req(&["tier=free", "nothing=here"])).await;
    assert!(v.allowed);
    assert!(v.statuses[1].rule.is_none());
    assert!(v.headers().is_empty(), "no limit applied, no headers");
    let v = l.check(&req(&["tier=banned"])).await;
    assert!(!v.allowed);
    assert_eq!(v.retry_after(), None, "a limit of 0 never admits");
    let other = Request::new("other-domain", vec!["tier=banned".parse().unwrap()]);
    assert!(l.check(&other).await.allowed);
}

#[tokio::test]
async fn shadow_rules_report_but_never_block() {
    let mut r = rule(
        "shadow",
        "user",
        Some(Limit::new(Algorithm::FixedWindow, q("1/s")).unwrap()),
    );
    r.shadow = true;
    let (l, _) = limiter(vec![r]);
    for _ in 0..3 {
        assert!(l.check(&req(&["user=1"])).await.allowed);
    }
    let v = l.check(&req(&["user=1"])).await;
    assert!(!v.statuses[0].decision.allowed && v.allowed);
}

#[tokio::test(start_paused = true)]
async fn acquire_waits_its_slot_in_delay_mode() {
    let shaped = Limit::builder(Algorithm::LeakyBucket, q("1/s"))
        .mode(Mode::Delay)
        .max_wait(Duration::from_secs(2))
        .build()
        .unwrap();
    let (l, _) = limiter(vec![rule("refund", "biz=REFUND", Some(shaped))]);
    let r = req(&["biz=REFUND"]);
    let start = tokio::time::Instant::now();
    let p1 = l.acquire(&r).await.unwrap();
    assert_eq!(p1.verdict().wait, Duration::ZERO);
    let p2 = l.acquire(&r).await.unwrap();
    assert_eq!(p2.verdict().wait, Duration::from_secs(1));
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(1),
        "acquire slept the wait"
    );
    // The manual clock did not move: the third caller's slot is 2 s ahead, the fourth's 3 s.
    assert_eq!(
        l.acquire(&r).await.unwrap().verdict().wait,
        Duration::from_secs(2)
    );
    let rejected = l.acquire(&r).await.err().unwrap();
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(1)));
}

#[tokio::test]
async fn permits_release_concurrency_leases_on_drop() {
    let c = Limit::new(Algorithm::Concurrency, q("1/30s")).unwrap();
    let (l, _) = limiter(vec![rule("inflight", "api", Some(c))]);
    let r = req(&["api=upload"]);
    let p = l.acquire(&r).await.unwrap();
    assert!(l.acquire(&r).await.is_err());
    p.release().await;
    let p = l.acquire(&r).await.unwrap();
    drop(p);
    // The drop spawned the release on the runtime; let it run.
    tokio::task::yield_now().await;
    assert!(l.acquire(&r).await.is_ok());
}

#[tokio::test]
async fn release_by_descriptor() {
    let c = Limit::new(Algorithm::Concurrency, q("1/30s")).unwrap();
    let (l, _) = limiter(vec![rule("inflight", "api", Some(c))]);
    let r = req(&["api=x"]);
    let v = l.check(&r).await;
    let lease = v.statuses[0].decision.lease.unwrap();
    assert!(!l.check(&r).await.allowed);
    let d: Descriptor = "api=x".parse().unwrap();
    assert!(l.release("pay", &d, lease).await.unwrap());
    assert!(!l.release("pay", &d, lease).await.unwrap());
    assert!(l.check(&r).await.allowed);
}

/// A `concurrency` rule whose wildcard entry shares one counter (`share_threshold`): a lease
/// taken by `tenant=acme-eu` is released by its descriptor, and the shared counter has room again.
#[tokio::test]
async fn release_of_a_shared_counter() {
    let c = Limit::new(Algorithm::Concurrency, q("1/30s")).unwrap();
    let mut r = rule("inflight", "tenant=acme*", Some(c));
    r.pattern[0].share = true;
    let (l, _) = limiter(vec![r]);
    let eu = req(&["tenant=acme-eu"]);
    let lease = l.check(&eu).await.statuses[0].decision.lease.unwrap();
    // One counter for every acme tenant: the US one waits for the EU lease.
    assert!(!l.check(&req(&["tenant=acme-us"])).await.allowed);
    let d: Descriptor = "tenant=acme-eu".parse().unwrap();
    assert!(
        l.release("pay", &d, lease).await.unwrap(),
        "the lease was not released"
    );
    assert!(l.check(&req(&["tenant=acme-us"])).await.allowed);
}

#[tokio::test]
async fn set_rules_swaps_atomically_and_keeps_counters() {
    let fw = |s| Some(Limit::new(Algorithm::FixedWindow, q(s)).unwrap());
    let (l, _) = limiter(vec![rule("user", "user", fw("2/s"))]);
    let r = req(&["user=1"]);
    assert!(l.check(&r).await.allowed);
    l.set_rules(RuleSet::new(vec![rule("user", "user", fw("1/s"))]).unwrap());
    assert!(
        !l.check(&r).await.allowed,
        "the count carried over under the new limit"
    );
    l.set_rules(RuleSet::new(vec![rule("user", "user", None)]).unwrap());
    assert!(l.check(&r).await.allowed);
}

/// A store whose every call fails, to exercise the failure policies (the Redis store's outage
/// tests exercise the same path against a real, killed redis-server).
struct Down;

impl Store for Down {
    async fn decide(&self, _: &[Item<'_>]) -> Result<Decisions, StoreError> {
        Err(StoreError::Timeout)
    }
    async fn release(&self, _: &str, _: &Limit, _: u64) -> Result<bool, StoreError> {
        Err(StoreError::Timeout)
    }
}

#[tokio::test]
async fn failure_policies_decide_when_the_store_is_down() {
    let lim = || Some(Limit::new(Algorithm::FixedWindow, q("4/s")).unwrap());
    let mut open = rule("open", "o", lim());
    open.failure = FailurePolicy::Open;
    let mut closed = rule("closed", "c", lim());
    closed.failure = FailurePolicy::Closed;
    let mut local = rule("local", "l", lim());
    local.failure = FailurePolicy::Local { nodes: 2 };
    let l = Limiter::new(RuleSet::new(vec![open, closed, local]).unwrap(), Down);
    let v = l.check(&req(&["o=1"])).await;
    assert!(v.allowed && v.statuses[0].error == Some(StoreError::Timeout));
    assert!(!l.check(&req(&["c=1"])).await.allowed);
    assert!(!l.check(&req(&["o=1", "c=1"])).await.allowed);
    // Local: 4/s over 2 nodes = 2/s on this node.
    let admitted = futures_count(&l, &req(&["l=1"]), 5).await;
    assert_eq!(admitted, 2);
}

async fn futures_count<S: Store>(l: &Limiter<S>, r: &Request, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        if l.check(r).await.allowed {
            ok += 1;
        }
    }
    ok
}

/// A task deciding in a loop (every decision answered in process, never waiting) still hands its
/// thread back to the runtime: on a one-thread runtime, a timer set beside it fires on time
/// instead of after the loop. (Before `check` spent Tokio budget, the `flowgate bench` library
/// run on a hot key saw decisions time out after 1 s.)
#[tokio::test(flavor = "current_thread")]
async fn a_deciding_loop_does_not_starve_the_runtime() {
    let fw = Some(Limit::new(Algorithm::FixedWindow, q("1/h")).unwrap());
    let (l, _) = limiter(vec![rule("user", "user", fw)]);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinner = {
        let (l, stop) = (l.clone(), stop.clone());
        tokio::spawn(async move {
            let r = req(&["user=7"]);
            let mut n = 0u64;
            // Bounded: 20 million decisions at most (seconds), if the runtime is starved.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 20_000_000 {
                l.check(&r).await;
                n += 1;
            }
            n
        })
    };
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let n = spinner.await.unwrap();
    assert!(n > 0, "the loop never ran");
    assert!(
        n < 20_000_000,
        "the timer only fired after the loop: the runtime was starved"
    );
}

/// Quota mode and shared wildcards, on the memory store and on Redis alike: a request is
/// rejected only when every quota-mode rule is over, takes nothing then, and the values of a
/// shared wildcard count together.
async fn quota_and_shared_wildcards<S: Store>(l: &Limiter<S>) {
    let allowed = |v: &flowgate::Verdict| v.allowed;
    // gold 1/min and silver 2/min in quota mode; user 3/min enforced.
    let gold_silver = req(&["plan=gold", "plan=silver"]);
    assert!(allowed(&l.check(&gold_silver).await));
    let second = l.check(&gold_silver).await;
    assert!(second.allowed);
    assert!(second.statuses[0].over_limit() && !second.statuses[1].over_limit());
    let third = l.check(&gold_silver).await;
    assert!(!third.allowed);
    assert!(
        third
            .statuses
            .iter()
            .all(flowgate::decision::Status::over_limit)
    );
    // Rejected by its only quota rule: the user's limit gave nothing.
    assert!(!l.check(&req(&["plan=gold", "user=u"])).await.allowed);
    for _ in 0..3 {
        assert!(l.check(&req(&["user=u"])).await.allowed);
    }
    assert!(!l.check(&req(&["user=u"])).await.allowed);
    // files/* shared: 2 across every file.
    assert!(l.check(&req(&["path=files/a"])).await.allowed);
    assert!(l.check(&req(&["path=files/b"])).await.allowed);
    assert!(!l.check(&req(&["path=files/c"])).await.allowed);
}

fn quota_rules() -> Vec<Rule> {
    let fw = |s| Some(Limit::new(Algorithm::FixedWindow, q(s)).unwrap());
    let mut gold = rule("gold", "plan=gold", fw("1/1m"));
    gold.quota_mode = true;
    let mut silver = rule("silver", "plan=silver", fw("2/1m"));
    silver.quota_mode = true;
    let mut files = rule("files", "path=files/*", fw("2/1m"));
    files.pattern[0].share = true;
    vec![gold, silver, rule("user", "user", fw("3/1m")), files]
}

#[tokio::test]
async fn quota_mode_and_shared_wildcards_on_memory() {
    let (l, _clock) = limiter(quota_rules());
    quota_and_shared_wildcards(&*l).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_mode_and_shared_wildcards_on_redis() {
    let server = flowgate_testkit::redis::RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = flowgate::RedisStore::connect_with(
        &server.url(),
        flowgate::RedisOptions::default().clock_override(clock.clone()),
    )
    .await
    .unwrap();
    let l = Limiter::new(RuleSet::new(quota_rules()).unwrap(), store);
    quota_and_shared_wildcards(&l).await;
}

/// A rule swapped for one with a new limit keeps its counter; a new window or algorithm starts
/// from empty (the state tag, see `Limit::state_tag`).
#[tokio::test]
async fn new_rules_keep_counters_exactly_when_the_state_means_the_same() {
    let fw = |s| Some(Limit::new(Algorithm::FixedWindow, q(s)).unwrap());
    let (l, _) = limiter(vec![rule("user", "user", fw("5/s"))]);
    let r = req(&["user=7"]);
    for _ in 0..5 {
        assert!(l.check(&r).await.allowed);
    }
    assert!(!l.check(&r).await.allowed);
    let swap = |limit| RuleSet::new(vec![rule("user", "user", limit)]).unwrap();
    l.set_rules(swap(fw("10/s")));
    let v = l.check(&r).await;
    assert!(v.allowed);
    assert_eq!(v.statuses[0].decision.remaining, 4, "5 + 1 of 10 taken");
    l.set_rules(swap(fw("10/2s")));
    assert_eq!(l.check(&r).await.statuses[0].decision.remaining, 9);
    l.set_rules(swap(Some(
        Limit::new(Algorithm::SlidingLog, q("10/2s")).unwrap(),
    )));
    assert_eq!(l.check(&r).await.statuses[0].decision.remaining, 9);
    l.set_rules(swap(fw("10/s")));
    assert_eq!(
        l.check(&r).await.statuses[0].decision.remaining,
        3,
        "the 1 s window's counter is still there"
    );
}
