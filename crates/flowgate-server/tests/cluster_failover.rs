//! A Redis Cluster primary SIGKILLed under steady load from two `flowgate serve` nodes: the
//! decisions fall back to each rule's failure policy only within a bounded window, the limits
//! are exact again within one window of the promotion, and over-admission meanwhile stays
//! within what each policy allows (`open`: anything, `closed`: none, `local`: the limit
//! divided among the nodes); jobs acknowledged with `--redis-wait-replicas 1` are neither lost
//! nor delivered again after their ack; the shared rules and an open breaker survive.

mod common;
mod failover;

use std::time::Duration;

use failover::figures::{Figures, QueueFigures};
use failover::load::{self, LIMIT, Load};
use failover::{Cluster, Topology, targets};
use tokio::time::Instant;

async fn wait(what: &str, within: Duration, mut cond: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_under_load() {
    tokio::time::timeout(Duration::from_secs(120), run())
        .await
        .unwrap_or_else(|_| panic!("the failover test did not finish within 120 s"));
}

async fn run() {
    let mut topology = Cluster::start();
    let rules = load::rules();
    let (_dir, cfg) = common::config(&rules);
    let url = topology.url();
    let nodes = [
        failover::node(&cfg, &url, "a", "250ms"),
        failover::node(&cfg, &url, "b", "250ms"),
    ];
    let addrs = [nodes[0].http, nodes[1].http];
    let put = load::put_rules(addrs[0], &rules).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let version = load::rules_version(addrs[0]).await;
    wait(
        "both nodes on the shared rules",
        Duration::from_secs(10),
        async || load::rules_version(addrs[1]).await == version,
    )
    .await;
    load::open_breaker(addrs[0]).await;
    for a in addrs {
        wait(
            "the breaker open on both nodes",
            Duration::from_secs(10),
            async || load::breaker_open(a).await,
        )
        .await;
    }
    let targets = targets(&topology);
    let run = Load::start(&addrs, &targets);
    // Steady load, then the kill (past a window boundary, so that windows are whole).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed = load::now_ms();
    let what = topology.kill_primary();
    tokio::task::block_in_place(|| topology.wait_promoted())
        .unwrap_or_else(|e| panic!("no promotion: {e}"));
    let promoted = load::now_ms();
    // Two whole windows after the promotion, then the old primary back as a replica.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    tokio::task::block_in_place(|| topology.heal()).unwrap_or_else(|e| panic!("{e}"));
    run.stop_submits();
    let drain = Instant::now();
    while !run.drained() && drain.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drained = run.drained();
    let until = load::now_ms();
    let seen = std::mem::take(&mut *run.stop().await.lock());
    let figures = Figures::of(&what, &seen, killed, promoted, until);
    let queue = QueueFigures::of(&seen);
    eprintln!("{figures}{queue}");

    for r in &figures.rules {
        // Every key measured is on the killed primary: each rule fell back, for a bounded
        // window (the node timeout, the election, a slot refresh: seconds, not more).
        let (first, last) = r
            .fallback
            .unwrap_or_else(|| panic!("{}: no fallback", r.rule));
        assert!(
            first < 2_000,
            "{}: the first fallback {first} ms after the kill",
            r.rule
        );
        // (the nodes learn the new primary at their next slot refresh: a busy machine delays it)
        assert!(
            last <= figures.promoted_after_ms + 2_500,
            "{}: decided by its policy until {last} ms, promoted at {} ms",
            r.rule,
            figures.promoted_after_ms
        );
        // Exact again within one window of the promotion, and from then on.
        assert!(r.exact_after_promotion_ms <= 2_000, "{r:?}");
        assert_eq!(
            r.over_after, 0,
            "{}: over the limit after the failover: {r:?}",
            r.rule
        );
        // No decision waited past its deadline (250 ms; a wide margin for a busy machine).
        assert!(
            r.slowest_ms < 1_500,
            "{}: an answer took {} ms",
            r.rule,
            r.slowest_ms
        );
        if let Some(allowed) = r.allowance {
            assert!(
                r.over_admitted <= allowed,
                "{}: over-admitted: {r:?}",
                r.rule
            );
        }
    }
    let closed = &figures.rules[1];
    assert_eq!(closed.admitted_by_policy, 0, "{closed:?}");
    let local = &figures.rules[2];
    assert!(
        local.most_by_policy_in_a_window <= LIMIT.div_ceil(2),
        "{local:?}"
    );
    assert!(seen.reports_ok > 0 && queue.submitted > 0, "{queue}");
    assert!(drained, "not every acknowledged job delivered within 30 s");
    assert!(
        queue.lost.is_empty(),
        "acknowledged jobs lost: {:?}",
        queue.lost
    );
    assert!(
        queue.after_ack.is_empty(),
        "jobs delivered again after their ack: {:?}",
        queue.after_ack
    );
    // The shared rules and the open breaker survived.
    for a in addrs {
        assert_eq!(load::rules_version(a).await, version);
        assert!(
            load::breaker_open(a).await,
            "the breaker closed by the failover"
        );
    }
    let put = load::put_rules(addrs[1], &rules.replace("40/s", "41/s")).await;
    assert_eq!(put.status, 200, "{}", put.body);
}
