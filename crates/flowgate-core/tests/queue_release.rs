//! The queue's release guarantee, on the engine (which `queue.lua` is held equal to by
//! `flowgate-redis/tests/queue_props.rs`), through random leases at any horizon, give-backs of
//! deliveries whose slot is still ahead (a worker that went away) or has passed (an answer too
//! late), acks and expired leases: the releases that stand (every delivery not given back) are
//! GCRA's, never more than `burst` at once and then one per spacing: in any span between two of
//! them, at most `burst + span / spacing` releases. With burst 1: never two closer than the
//! spacing.

use std::time::Duration;

use flowgate_core::queue::engine::Instance;
use flowgate_core::queue::{LeaseOutcome, NewJob, QueueSpec};
use flowgate_core::{Matcher, Micros, Quota};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const START: Micros = 1_700_000_000_000_000;

#[derive(Clone, Debug)]
enum Op {
    /// Jobs submitted.
    Submit(usize),
    /// A lease reserving up to this many µs ahead.
    Lease(u64),
    /// A standing delivery (picked by index) given back.
    GiveBack(usize),
    /// A standing delivery acked.
    Ack(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (1usize..6).prop_map(Op::Submit),
        4 => prop_oneof![Just(0u64), 0u64..2_000_000].prop_map(Op::Lease),
        2 => any::<usize>().prop_map(Op::GiveBack),
        1 => any::<usize>().prop_map(Op::Ack),
    ]
}

/// (µs the clock moves first, the operation)
fn steps() -> impl Strategy<Value = Vec<(u64, Op)>> {
    let dt = prop_oneof![3 => Just(0u64), 3 => 0u64..200_000, 1 => 0u64..3_000_000];
    prop::collection::vec((dt, op()), 1..120)
}

fn spec(limit: u64, window_ms: u64, burst: u64, lease_ms: u64) -> QueueSpec {
    let rate =
        Quota::new(limit, Duration::from_millis(window_ms)).unwrap_or_else(|e| panic!("{e}"));
    QueueSpec::new("q", "release", vec![Matcher::parse("c")], rate)
        .and_then(|s| s.with_burst(burst))
        .and_then(|s| s.with_lease(Duration::from_millis(lease_ms)))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// One sequence on a fresh instance; answers how many leases were given a slot that an
/// earlier delivery had given back.
fn run(
    (limit, window_ms, burst, lease_ms): (u64, u64, u64, u64),
    steps: Vec<(u64, Op)>,
) -> Result<u64, TestCaseError> {
    let spec = spec(limit, window_ms, burst, lease_ms);
    let mut q = Instance::new();
    let mut now = START;
    let mut nonce = 0;
    // Deliveries that stand: (id, nonce, slot); and every slot ever given.
    let mut standing: Vec<(u64, u64, Micros)> = Vec::new();
    let mut given: Vec<Micros> = Vec::new();
    let mut reused = 0;
    for (dt, op) in steps {
        now += dt;
        match op {
            Op::Submit(n) => {
                let jobs: Vec<NewJob> = (0..n).map(|i| NewJob::new(format!("{i}"))).collect();
                let _ = q.submit(&spec, now, &jobs);
            }
            Op::Lease(horizon) => {
                nonce += 1;
                if let LeaseOutcome::Leased(l) = q.lease(&spec, now, horizon, nonce) {
                    let at = l.released_at;
                    prop_assert!(at >= now && at - now <= horizon, "slot {at} at {now}");
                    reused += u64::from(given.iter().any(|&g| g > at));
                    given.push(at);
                    standing.push((l.id, l.nonce, at));
                }
            }
            Op::GiveBack(pick) | Op::Ack(pick) if !standing.is_empty() => {
                let i = pick % standing.len();
                let (id, n, slot) = standing[i];
                if matches!(op, Op::Ack(_)) {
                    let _ = q.ack(&spec, now, id, n);
                } else if q.give_back(&spec, now, id, n, slot).is_ok() {
                    standing.remove(i);
                }
            }
            Op::GiveBack(_) | Op::Ack(_) => {}
        }
    }
    let mut slots: Vec<Micros> = standing.iter().map(|s| s.2).collect();
    slots.sort_unstable();
    let spacing = spec.spacing();
    for i in 0..slots.len() {
        for j in i + 1..slots.len() {
            let span = slots[j] - slots[i];
            let count = (j - i + 1) as u64;
            prop_assert!(
                count <= burst + span / spacing,
                "{count} releases within {span} µs (spacing {spacing}, burst {burst}): {slots:?}"
            );
        }
    }
    Ok(reused)
}

#[test]
fn standing_releases_keep_the_rate_through_give_backs() {
    let mut runner = TestRunner::new(Config {
        cases: 400,
        failure_persistence: None,
        ..Config::default()
    });
    let spec = (
        1u64..5,
        prop::sample::select(vec![100u64, 1_000]),
        1u64..4,
        prop::sample::select(vec![300u64, 5_000]),
    );
    let reused = std::cell::Cell::new(0);
    let result = runner.run(&(spec, steps()), |(spec, steps)| {
        reused.set(reused.get() + run(spec, steps)?);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // (the sequences reach what is tested: slots given back and used again)
    assert!(reused.get() > 0, "no slot given back was used again");
}
