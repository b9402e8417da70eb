//! The failover measurement, run by hand (`scripts/failover.sh`), not by CI: a Redis topology
//! with replicas (`TOPOLOGY`: `cluster` or `sentinel`), two `flowgate serve` nodes on it, steady
//! load from both (limits under each failure policy, a queue whose submits and acks wait for a
//! replica, reports), then a primary SIGKILLed, healed, and a whole machine's worth killed (for
//! a cluster: a primary and another shard's replica; for Sentinel: the primary and a sentinel).
//! Prints, for each failover, the window in which decisions were decided by the failure policy,
//! when the limits were exact again, over-admission against each policy's allowance; then jobs
//! lost or delivered again after their ack, and whether the shared rules and an open breaker
//! survived.
//!
//! `SOAK=600`: for that many seconds, a primary killed every 60 s (healed in between), then the
//! same figures for each, and the nodes' memory at the start and the end.

mod common;
mod failover;

use std::time::Duration;

use failover::figures::{Figures, QueueFigures};
use failover::load::{self, Load};
use failover::{Topology, targets, topology};
use tokio::time::Instant;

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// A node's resident memory (kB), from `/proc`.
fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// One failover: kill (a primary, or a machine), the promotion, steady load, the heal.
async fn failover(
    topology: &mut Box<dyn Topology>,
    machine: bool,
    settle: Duration,
) -> (String, u64, u64) {
    let killed = load::now_ms();
    let what = if machine {
        topology.kill_machine()
    } else {
        topology.kill_primary()
    };
    tokio::task::block_in_place(|| topology.wait_promoted())
        .unwrap_or_else(|e| panic!("no promotion: {e}"));
    let promoted = load::now_ms();
    tokio::time::sleep(settle).await;
    tokio::task::block_in_place(|| topology.heal()).unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(settle).await;
    (what, killed, promoted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand: scripts/failover.sh"]
async fn measure() {
    let name = env("TOPOLOGY", "cluster");
    let soak: u64 = env("SOAK", "0").parse().unwrap_or(0);
    let deadline = env("DEADLINE", "100ms");
    let mut topology = topology(&name);
    let rules = load::rules();
    let (_dir, cfg) = common::config(&rules);
    let url = topology.url();
    let nodes = [
        failover::node(&cfg, &url, "a", &deadline),
        failover::node(&cfg, &url, "b", &deadline),
    ];
    let addrs = [nodes[0].http, nodes[1].http];
    let put = load::put_rules(addrs[0], &rules).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let version = load::rules_version(addrs[0]).await;
    load::open_breaker(addrs[0]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let targets = targets(topology.as_ref());
    let run = Load::start(&addrs, &targets);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_start: Vec<u64> = nodes.iter().map(|n| rss_kb(n.child.id())).collect();

    let mut events = Vec::new();
    if soak == 0 {
        events.push(failover(&mut topology, false, Duration::from_secs(3)).await);
        events.push(failover(&mut topology, true, Duration::from_secs(3)).await);
    } else {
        let start = Instant::now();
        while start.elapsed() + Duration::from_secs(60) <= Duration::from_secs(soak) {
            let began = Instant::now();
            let e = failover(&mut topology, false, Duration::from_secs(3)).await;
            eprintln!("{:>4} s: killed {}", start.elapsed().as_secs(), e.0);
            events.push(e);
            tokio::time::sleep(Duration::from_secs(60).saturating_sub(began.elapsed())).await;
        }
    }
    let rss_end: Vec<u64> = nodes.iter().map(|n| rss_kb(n.child.id())).collect();
    run.stop_submits();
    let drain = Instant::now();
    while !run.drained() && drain.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let until = load::now_ms();
    let seen = std::mem::take(&mut *run.stop().await.lock());

    println!(
        "\n== failover measurement: TOPOLOGY={name} DEADLINE={deadline} SOAK={soak} FULL_COVERAGE={}",
        env("FULL_COVERAGE", "yes")
    );
    println!(
        "load: {} checks ({} not answered), {} reports ({} failed)",
        seen.checks.len(),
        seen.check_failed,
        seen.reports_ok + seen.reports_failed,
        seen.reports_failed
    );
    for (i, (what, killed, promoted)) in events.iter().enumerate() {
        let next = events.get(i + 1).map_or(until, |e| e.1);
        let f = Figures::of(what, &seen, *killed, *promoted, next);
        print!("{f}");
        println!("  window of decisions by policy: {} ms", f.window_ms());
    }
    println!("{}", QueueFigures::of(&seen));
    let mut survived = true;
    for a in addrs {
        let v = load::rules_version(a).await;
        let open = load::breaker_open(a).await;
        println!("node {a}: shared rules version {v} (was {version}), breaker open: {open}");
        survived &= v == version && open;
    }
    println!(
        "rules and breaker survived: {survived}; memory (kB) at the start {rss_start:?}, at the end {rss_end:?}"
    );
}
