//! Adaptive concurrency limits shared by two limiters ("nodes", each with its own connection) on
//! one real Redis: what one node's reports do to a limit, the other enforces; with Redis gone
//! each decides by its failure policy and moves its own limits, and says so; with Redis back
//! both use the cluster's limits again.
//!
//! Waits are polls bounded by a generous deadline (the read period is 1 s): never a timed
//! assertion tighter than a loaded 2-core machine holds.

#![cfg(feature = "redis")]

use std::future::Future;
use std::time::Duration;

use flowgate::adaptive::AdaptiveView;
use flowgate::breakers::Outcome;
use flowgate::rule::AimdSpec;
use flowgate::{
    Algorithm, Descriptor, FailurePolicy, Limit, Limiter, Matcher, Quota, RedisOptions, RedisStore,
    Request, Rule, RuleSet,
};
use flowgate_testkit::redis::RedisServer;

type Node = Limiter<RedisStore>;

/// The longest any wait for the cluster's limits may take here.
const PATIENCE: Duration = Duration::from_secs(15);

const SLOW: Duration = Duration::from_millis(500);
const FAST: Duration = Duration::from_millis(1);

fn rules() -> RuleSet {
    let limit = Limit::new(Algorithm::Concurrency, "10/30s".parse::<Quota>().unwrap()).unwrap();
    let mut rule = Rule::new("pay", "calls", vec![Matcher::parse("channel")], Some(limit));
    rule.adaptive = Some(AimdSpec {
        initial: 10,
        // Slower than 100 ms is a sign of overload.
        ..AimdSpec::new(2, 50, 100_000.0)
    });
    rule.failure = FailurePolicy::Open;
    RuleSet::new(vec![rule]).unwrap()
}

async fn store(server: &RedisServer) -> RedisStore {
    RedisStore::connect_with(
        &server.url(),
        RedisOptions::default().deadline(Duration::from_millis(300)),
    )
    .await
    .unwrap()
}

async fn node(server: &RedisServer) -> Node {
    let l = Limiter::new(rules(), store(server).await);
    l.adaptive().share(l.store());
    l
}

fn wpg() -> Descriptor {
    Descriptor::new([("channel", "WPG")])
}

fn request() -> Request {
    Request::new("pay", vec![wpg()])
}

/// Takes leases until refused: the leases taken.
async fn fill(l: &Node) -> Vec<u64> {
    let mut leases = Vec::new();
    for _ in 0..100 {
        let v = l.check(&request()).await;
        assert!(v.statuses[0].error.is_none(), "{:?}", v.statuses[0].error);
        if !v.allowed {
            return leases;
        }
        leases.push(v.statuses[0].decision.lease.unwrap());
    }
    panic!("never refused: {} leases", leases.len());
}

async fn release(l: &Node, leases: Vec<u64>) {
    for lease in leases {
        assert!(l.release("pay", &wpg(), lease).await.unwrap());
    }
}

fn report(l: &Node, latency: Duration, n: usize) {
    for _ in 0..n {
        l.report("pay", &[wpg()], Outcome::Ok, latency, None);
    }
}

fn view(l: &Node) -> AdaptiveView {
    l.adaptive()
        .limits("pay", "calls")
        .into_iter()
        .next()
        .expect("the key has a limit")
}

/// Polls `f` every 20 ms until it holds, for at most [`PATIENCE`].
async fn until<F: Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    let started = tokio::time::Instant::now();
    while !f().await {
        assert!(
            started.elapsed() < PATIENCE,
            "not within {PATIENCE:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_nodes_reports_move_the_limit_the_other_enforces_and_redis_going_away_falls_back() {
    let mut server = RedisServer::start();
    let (a, b) = (node(&server).await, node(&server).await);
    let (a, b) = (&a, &b);
    assert_eq!(a.adaptive().shared(), Some(true));

    // Both start at the rule's `initial`: 10 calls at once, wherever they go.
    let leases = fill(b).await;
    assert_eq!(leases.len(), 10);
    release(b, leases).await;
    let leases = fill(a).await;
    assert_eq!(leases.len(), 10);
    release(a, leases).await;

    // Slow calls reported through A (none out: each backs off) bring the cluster's limit to its
    // min; B follows, and admits 2 at once.
    report(a, SLOW, 30);
    until("B follows A's slow reports down to 2", move || async move {
        view(b).limit == 2
    })
    .await;
    let v = view(b);
    assert!(v.shared, "{v:?}");
    let leases = fill(b).await;
    assert_eq!(leases.len(), 2, "B enforces the limit A's reports set");
    release(b, leases).await;

    // Fast calls reported through B, while B uses its limit, raise it; A follows.
    until("A follows B's fast reports up to 6", move || async move {
        let leases = fill(b).await;
        let held = leases.len();
        report(b, FAST, held + 1);
        release(b, leases).await;
        view(a).limit >= 6
    })
    .await;
    // Once B stops, A's copy settles on the cluster's limit, which A enforces.
    until("A and B agree", move || async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        view(a).limit == view(b).limit
    })
    .await;
    let shared_limit = view(a).limit;
    let held_by_a = fill(a).await;
    assert_eq!(held_by_a.len() as u64, shared_limit);

    assert_eq!(a.adaptive().unsent(), 0, "every report reached Redis");
    // Redis goes away (A's leases stay out, so A's calls in flight stay at the limit).
    server.stop();
    for l in [a, b] {
        let v = l.check(&request()).await;
        assert!(v.statuses[0].error.is_some(), "the store failed");
        assert!(v.allowed, "the rule's failure policy (open) decides");
    }
    report(b, SLOW, 1);
    until("both say they fell back", move || async move {
        !view(a).shared && !view(b).shared
    })
    .await;
    assert_eq!(a.adaptive().shared(), Some(false));
    // Each moves its own limit on its own reports. A's own reports were all slow (its limit is
    // at min); fast ones with its calls out raise it.
    let (a_before, b_before) = (view(a).limit, view(b).limit);
    assert_eq!(a_before, 2, "A's own limit: its slow reports only");
    report(a, FAST, 30);
    report(b, SLOW, 5);
    // Not sent: counted at A's next turns.
    until("A counts its unsent reports", move || async move {
        a.adaptive().unsent() >= 30
    })
    .await;
    let (a_after, b_after) = (view(a), view(b));
    assert!(a_after.limit > a_before, "A: {a_before} -> {a_after:?}");
    assert!(
        b_after.limit < b_before || b_after.limit == 2,
        "B: {b_before} -> {b_after:?}"
    );
    assert!(!a_after.shared && !b_after.shared);
    for l in [a, b] {
        let v = l.check(&request()).await;
        assert!(v.statuses[0].error.is_some() && v.allowed);
    }

    // Redis is back (empty: the test server keeps nothing): both use the cluster's limits again,
    // which start over at `initial`.
    server.restart();
    until("both shared again", move || async move {
        view(a).shared && view(b).shared
    })
    .await;
    assert_eq!((view(a).limit, view(b).limit), (10, 10));
    assert_eq!(a.adaptive().shared(), Some(true));
    let leases = fill(b).await;
    assert_eq!(leases.len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharing_task_ends_with_the_limiter() {
    let server = RedisServer::start();
    let store = store(&server).await;
    let metrics = &tokio::runtime::Handle::current().metrics();
    // The store's own tasks, kept alive by `store`.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = metrics.num_alive_tasks();
    let l = Limiter::new(rules(), store.clone());
    l.adaptive().share(&store);
    until("the task runs", move || async move {
        metrics.num_alive_tasks() > before
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(l);
    until("the task ended", move || async move {
        metrics.num_alive_tasks() <= before
    })
    .await;
}

/// One node alone on Redis: its reports, batched per rule and key, move the shared limits
/// exactly as a per-process limiter fed the same reports moves its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_reports_move_the_shared_limits_as_one_process_would() {
    let server = RedisServer::start();
    let shared = node(&server).await;
    let alone = Limiter::new(rules(), flowgate::MemoryStore::new());
    let channels = ["A", "B", "C"];
    let desc = |c: &str| Descriptor::new([("channel", c)]);
    for c in channels {
        for _ in 0..8 {
            let r = Request::new("pay", vec![desc(c)]);
            assert!(shared.check(&r).await.allowed);
            assert!(alone.check(&r).await.allowed);
        }
    }
    // Per key (8 calls out), 35 fast reports then a slow one: 11 at the end. In the other order
    // it would be 12, with no call out 9, with no report at all 10: each is told apart.
    for i in 0..108usize {
        let c = channels[i % 3];
        let latency = if i / 3 == 35 { SLOW } else { FAST };
        shared.report("pay", &[desc(c)], Outcome::Ok, latency, None);
        alone.report("pay", &[desc(c)], Outcome::Ok, latency, None);
    }
    let limits = |l: &Node| -> Vec<(String, u64, bool)> {
        l.adaptive()
            .limits("pay", "calls")
            .into_iter()
            .map(|v| (v.key, v.limit, v.shared))
            .collect()
    };
    let want: Vec<(String, u64, bool)> = alone
        .adaptive()
        .limits("pay", "calls")
        .into_iter()
        .map(|v| (v.key, v.limit, true))
        .collect();
    assert_eq!(
        want.iter().map(|w| w.1).collect::<Vec<_>>(),
        [11, 11, 11],
        "per process: 35 fast reports, then a slow one"
    );
    let shared = &shared;
    let want = &want;
    until(
        "the shared limits are the per-process ones",
        move || async move { limits(shared) == *want },
    )
    .await;
}
