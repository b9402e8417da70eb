//! The shared breaker's script (`scripts/breaker.lua`) against the pure state machine
//! (`flowgate_core::breaker`): random sequences of reports, probes and clock steps, run on both
//! with one clock; every answer, phase (with why it opened), window and count of probes out must
//! be the same. Then the properties only a cluster has: probes counted across nodes, `min_nodes`,
//! and a transition published.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{runner, runtime, single, test_options};
use flowgate_core::breaker::{Admit, Breaker, BreakerSpec, Opened, State, Strategy as Kind};
use flowgate_core::{Clock, ManualClock, Micros};
use flowgate_redis::breakers::{
    InstanceReport, OpenInstance, ProbeAnswer, RedisBreakers, SharedBreaker, SharedPhase,
};
use flowgate_testkit::redis::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const START: Micros = 1_700_000_000_000_000;
const MS: Micros = 1_000;

#[derive(Clone, Debug)]
enum Op {
    /// The clock moves on.
    Step(Micros),
    /// A call (not a probe) reported on instance `i`.
    Call {
        i: usize,
        failed: bool,
        latency: Micros,
    },
    /// A call asks to go ahead on instance `i` (a probe when half-open).
    Admit { i: usize },
    /// The oldest probe out on instance `i` reports.
    ProbeReport { i: usize, failed: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => prop::sample::select(vec![MS, 40 * MS, 200 * MS, 500 * MS, 1_100 * MS]).prop_map(Op::Step),
        5 => (0usize..2, any::<bool>(), prop::sample::select(vec![MS, 50 * MS, 500 * MS]))
            .prop_map(|(i, failed, latency)| Op::Call { i, failed, latency }),
        2 => (0usize..2).prop_map(|i| Op::Admit { i }),
        2 => (0usize..2, any::<bool>()).prop_map(|(i, failed)| Op::ProbeReport { i, failed }),
    ]
}

fn spec() -> impl Strategy<Value = BreakerSpec> {
    (
        0usize..3,
        prop::sample::select(vec![0.25, 0.5, 1.0]),
        1u64..6,
        1u32..3,
    )
        .prop_map(|(strategy, ratio, min_calls, probes)| {
            let (strategy, threshold) = match strategy {
                0 => (Kind::ErrorRatio, ratio),
                1 => (
                    Kind::SlowCallRatio {
                        slow_call: 100 * MS,
                    },
                    ratio,
                ),
                _ => (Kind::ErrorCount, 3.0),
            };
            BreakerSpec::new(
                strategy,
                threshold,
                1_000 * MS,
                min_calls,
                500 * MS,
                probes,
                200 * MS,
            )
            .unwrap_or_else(|e| panic!("spec: {e}"))
        })
}

fn shared_phase(p: &State) -> SharedPhase {
    match p {
        State::Closed => SharedPhase::Closed,
        State::Open { until, opened } => SharedPhase::Open {
            until: *until,
            opened: Some(*opened),
        },
        State::HalfOpen {
            succeeded, opened, ..
        } => SharedPhase::HalfOpen {
            succeeded: *succeeded,
            opened: Some(*opened),
        },
    }
}

/// The probes out of a pure breaker at `now` (leases not expired).
fn probes_out(b: &mut Breaker, now: Micros) -> u32 {
    match b.state(now) {
        State::HalfOpen { leases, .. } => leases.len() as u32,
        _ => 0,
    }
}

fn open_until(until: Micros, calls: u64, bad: u64) -> SharedPhase {
    SharedPhase::Open {
        until,
        opened: Some(Opened { calls, bad }),
    }
}

const INSTANCES: [&str; 2] = ["pay:wpg:channel=WPG", "pay:wpg:channel=ADY"];

fn check(
    server: &RedisServer,
    rt: &tokio::runtime::Runtime,
    n: u64,
    spec: BreakerSpec,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new(START);
    let store = rt.block_on(single(server, test_options(&clock)));
    // Made within the runtime: the breakers open a connection of their own.
    let redis = rt.block_on(async { RedisBreakers::new(&store, "node-a") });
    // A breaker of its own per case (its name), so that cases never share state.
    let shared = SharedBreaker::new("pay", &format!("case{n}"), "channel", spec.clone(), 1);
    let mut pure: Vec<Breaker> = (0..2).map(|_| Breaker::new(spec.clone())).collect();
    // Probes out per instance: (pure lease, Redis lease), oldest first.
    let mut out: Vec<Vec<(u64, u64)>> = vec![Vec::new(), Vec::new()];
    for (step, op) in ops.into_iter().enumerate() {
        let now = clock.now();
        let ctx = || format!("step {step} at +{} ms: {op:?}", (now - START) / MS);
        match &op {
            Op::Step(dt) => clock.advance(Duration::from_micros(*dt)),
            Op::Call { i, failed, latency } => {
                pure[*i].report(now, None, *failed, *latency);
                let bad = spec.is_bad(*failed, *latency);
                let report = InstanceReport {
                    instance: INSTANCES[*i].to_owned(),
                    calls: 1,
                    bad: u64::from(bad),
                    probes: Vec::new(),
                };
                let got = rt
                    .block_on(redis.report(&shared, &[report]))
                    .map_err(|e| TestCaseError::fail(format!("{}: {e}", ctx())))?;
                let want = shared_phase(pure[*i].state(now));
                prop_assert_eq!(got[0].phase, want, "{}", ctx());
                if want == SharedPhase::Closed {
                    prop_assert_eq!(
                        (got[0].calls, got[0].bad),
                        pure[*i].window(now),
                        "{}",
                        ctx()
                    );
                }
            }
            Op::Admit { i } => {
                let (want, _) = pure[*i].admit(now);
                let (got, phase, out_now) = rt
                    .block_on(redis.probe(&shared, INSTANCES[*i]))
                    .map_err(|e| TestCaseError::fail(format!("{}: {e}", ctx())))?;
                match (want, got) {
                    (Admit::Call, ProbeAnswer::Call) => {}
                    (Admit::Probe(p), ProbeAnswer::Probe(r)) => out[*i].push((p, r)),
                    (
                        Admit::Refused { retry_after: a },
                        ProbeAnswer::Refused { retry_after: b },
                    ) => {
                        prop_assert_eq!(a, b, "{}", ctx());
                    }
                    (w, g) => prop_assert!(false, "{}: pure {w:?}, script {g:?}", ctx()),
                }
                prop_assert_eq!(phase, shared_phase(pure[*i].state(now)), "{}", ctx());
                prop_assert_eq!(out_now, probes_out(&mut pure[*i], now), "{}", ctx());
            }
            Op::ProbeReport { i, failed } => {
                if out[*i].is_empty() {
                    continue;
                }
                let (p, r) = out[*i].remove(0);
                pure[*i].report(now, Some(p), *failed, MS);
                let report = InstanceReport {
                    instance: INSTANCES[*i].to_owned(),
                    calls: 0,
                    bad: 0,
                    probes: vec![(r, spec.is_bad(*failed, MS))],
                };
                let got = rt
                    .block_on(redis.report(&shared, &[report]))
                    .map_err(|e| TestCaseError::fail(format!("{}: {e}", ctx())))?;
                prop_assert_eq!(got[0].phase, shared_phase(pure[*i].state(now)), "{}", ctx());
                prop_assert_eq!(
                    got[0].probes_out,
                    probes_out(&mut pure[*i], now),
                    "{}",
                    ctx()
                );
            }
        }
    }
    // What every node reads: the instances not closed, with their phases.
    let now = clock.now();
    let mut read = rt
        .block_on(redis.read(&shared))
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    read.sort_by(|a, b| a.instance.cmp(&b.instance));
    let mut want: Vec<OpenInstance> = INSTANCES
        .iter()
        .zip(pure.iter_mut())
        .filter_map(|(name, b)| {
            let phase = shared_phase(b.state(now));
            (phase != SharedPhase::Closed).then(|| OpenInstance {
                instance: (*name).to_owned(),
                phase,
                probes_out: probes_out(b, now),
            })
        })
        .collect();
    want.sort_by(|a, b| a.instance.cmp(&b.instance));
    // The hash keeps "open" past its end until someone asks; a reader turns it half-open by time.
    let read: Vec<OpenInstance> = read
        .into_iter()
        .map(|i| match i.phase {
            SharedPhase::Open { until, opened } if now >= until => OpenInstance {
                phase: SharedPhase::HalfOpen {
                    succeeded: 0,
                    opened,
                },
                ..i
            },
            _ => i,
        })
        .collect();
    prop_assert_eq!(read, want);
    Ok(())
}

#[test]
fn the_script_decides_as_the_state_machine() {
    let server = RedisServer::start();
    let rt = runtime();
    let cases: u32 = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    let n = std::sync::atomic::AtomicU64::new(0);
    runner(cases)
        .run(
            &(spec(), prop::collection::vec(op(), 1..60)),
            |(spec, ops)| {
                let case = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                check(&server, &rt, case, spec, ops)
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
}

fn spec_of(probes: u32) -> BreakerSpec {
    BreakerSpec::new(
        Kind::ErrorRatio,
        0.5,
        1_000 * MS,
        4,
        500 * MS,
        probes,
        200 * MS,
    )
    .unwrap_or_else(|e| panic!("spec: {e}"))
}

fn calls(instance: &str, calls: u64, bad: u64) -> InstanceReport {
    InstanceReport {
        instance: instance.to_owned(),
        calls,
        bad,
        probes: Vec::new(),
    }
}

/// Exactly `probes` probes out across the cluster, whichever nodes ask, however many at once.
#[test]
fn probes_are_counted_across_nodes() {
    let server = RedisServer::start();
    let rt = runtime();
    rt.block_on(async {
        let clock = ManualClock::new(START);
        let a = RedisBreakers::new(&single(&server, test_options(&clock)).await, "a");
        let b = RedisBreakers::new(&single(&server, test_options(&clock)).await, "b");
        let shared = SharedBreaker::new("pay", "probes", "channel", spec_of(2), 1);
        let i = "pay:probes:channel=WPG";
        let s = a
            .report(&shared, &[calls(i, 4, 4)])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s[0].phase, open_until(START + 500 * MS, 4, 4));
        clock.advance(Duration::from_millis(500));
        let asks = (0..20).map(|k| {
            let node = if k % 2 == 0 { a.clone() } else { b.clone() };
            let shared = shared.clone();
            tokio::spawn(async move { node.probe(&shared, i).await })
        });
        let mut probes = 0;
        for ask in asks {
            match ask
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|e| panic!("{e}"))
            {
                (ProbeAnswer::Probe(_), _, out) => {
                    probes += 1;
                    assert!((1..=2).contains(&out), "{out} probes out");
                }
                (ProbeAnswer::Refused { retry_after }, _, out) => {
                    assert_eq!((retry_after, out), (200 * MS, 2));
                }
                (other, ..) => panic!("{other:?}"),
            }
        }
        assert_eq!(probes, 2);
        // Every node reads the probes out, and why it opened.
        let read = b.read(&shared).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.len(), 1, "{read:?}");
        assert_eq!(read[0].probes_out, 2, "{read:?}");
        assert_eq!(read[0].phase.opened(), Some(Opened { calls: 4, bad: 4 }));
        // A probe given back unused frees its place at once.
        let (free, ..) = {
            clock.advance(Duration::from_millis(200));
            a.probe(&shared, i).await.unwrap_or_else(|e| panic!("{e}"))
        };
        let ProbeAnswer::Probe(lease) = free else {
            panic!("{free:?}")
        };
        a.cancel(&shared, i, lease)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (again, ..) = b.probe(&shared, i).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(again, ProbeAnswer::Probe(_)), "{again:?}");
    });
}

/// With `min_nodes = 2`, one node's failures never open it; the same failures seen by two nodes
/// do.
#[test]
fn min_nodes_needs_failures_from_that_many_nodes() {
    let server = RedisServer::start();
    let rt = runtime();
    rt.block_on(async {
        let clock = ManualClock::new(START);
        let a = RedisBreakers::new(&single(&server, test_options(&clock)).await, "a");
        let b = RedisBreakers::new(&single(&server, test_options(&clock)).await, "b");
        let shared = SharedBreaker::new("pay", "nodes", "channel", spec_of(1), 2);
        let i = "pay:nodes:channel=WPG";
        let s = a
            .report(&shared, &[calls(i, 50, 50)])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s[0].phase,
            SharedPhase::Closed,
            "one bad node opens nothing"
        );
        assert_eq!((s[0].calls, s[0].bad), (50, 50));
        let s = b
            .report(&shared, &[calls(i, 1, 0)])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s[0].phase,
            SharedPhase::Closed,
            "a good call from b is not a bad node"
        );
        let s = b
            .report(&shared, &[calls(i, 1, 1)])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s[0].phase, open_until(START + 500 * MS, 52, 51));
        // a's failures left the window: b's alone are one node again.
        clock.advance(Duration::from_millis(500));
        let (p, ..) = a.probe(&shared, i).await.unwrap_or_else(|e| panic!("{e}"));
        let ProbeAnswer::Probe(lease) = p else {
            panic!("{p:?}")
        };
        let s = a
            .report(
                &shared,
                &[InstanceReport {
                    probes: vec![(lease, false)],
                    ..calls(i, 0, 0)
                }],
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s[0].phase, SharedPhase::Closed);
    });
}

/// A transition is published on the channel; a follower is woken.
#[test]
fn a_transition_is_published() {
    let server = RedisServer::start();
    let rt = runtime();
    rt.block_on(async {
        let clock = ManualClock::new(START);
        let a = RedisBreakers::new(&single(&server, test_options(&clock)).await, "a");
        let shared = SharedBreaker::new("pay", "published", "channel", spec_of(1), 1);
        let notify = Arc::new(tokio::sync::Notify::new());
        let follower = {
            let (a, notify) = (a.clone(), Arc::clone(&notify));
            tokio::spawn(async move { a.follow(notify).await })
        };
        // The first wake-up is the subscription itself.
        tokio::time::timeout(Duration::from_secs(5), notify.notified())
            .await
            .unwrap_or_else(|_| panic!("never subscribed"));
        let i = "pay:published:channel=WPG";
        a.report(&shared, &[calls(i, 4, 1)])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let quiet = tokio::time::timeout(Duration::from_millis(200), notify.notified()).await;
        assert!(quiet.is_err(), "no transition, no message");
        // 6 calls, 3 bad: half, at least the threshold.
        a.report(&shared, &[calls(i, 2, 2)])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        tokio::time::timeout(Duration::from_secs(2), notify.notified())
            .await
            .unwrap_or_else(|_| panic!("the opening was not published"));
        let read = a.read(&shared).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read,
            vec![OpenInstance {
                instance: i.to_owned(),
                phase: open_until(START + 500 * MS, 6, 3),
                probes_out: 0,
            }]
        );
        follower.abort();
    });
}

/// Reports of several breakers in one batch (one script call per 100 instances on a single
/// Redis, one per breaker on a cluster) are each counted by their own breaker, and answered in
/// order.
#[test]
fn several_breakers_report_in_one_batch() {
    let server = RedisServer::start();
    let cluster = flowgate_testkit::redis::RedisCluster::start(3);
    let rt = runtime();
    rt.block_on(async {
        let clock = ManualClock::new(START);
        let single = single(&server, test_options(&clock)).await;
        let cluster = common::cluster(&cluster, test_options(&clock)).await;
        for store in [single, cluster] {
            several_breakers(RedisBreakers::new(&store, "a")).await;
        }
    });
}

async fn several_breakers(a: RedisBreakers) {
    let strict = SharedBreaker::new("pay", "strict", "channel", spec_of(1), 1);
    let count = SharedBreaker::new(
        "pay",
        "count",
        "channel",
        BreakerSpec::new(Kind::ErrorCount, 2.0, 1_000 * MS, 1, 500 * MS, 1, 200 * MS)
            .unwrap_or_else(|e| panic!("{e}")),
        1,
    );
    // 60 instances of each: two calls (100 instances, then 20).
    let strict_reports: Vec<InstanceReport> = (0..60)
        .map(|n| {
            calls(
                &format!("pay:strict:channel={n}"),
                4,
                u64::from(n % 2 == 0) * 4,
            )
        })
        .collect();
    let count_reports: Vec<InstanceReport> = (0..60)
        .map(|n| {
            calls(
                &format!("pay:count:channel={n}"),
                3,
                u64::from(n % 3 == 0) * 2,
            )
        })
        .collect();
    let out = a
        .report_many(&[(&strict, &strict_reports), (&count, &count_reports)])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.len(), 2);
    for (n, s) in out[0].iter().enumerate() {
        let open = n % 2 == 0;
        assert_eq!(
            matches!(s.phase, SharedPhase::Open { .. }),
            open,
            "strict {n}: {s:?}"
        );
    }
    for (n, s) in out[1].iter().enumerate() {
        let open = n % 3 == 0;
        assert_eq!(
            matches!(s.phase, SharedPhase::Open { .. }),
            open,
            "count {n}: {s:?}"
        );
        if !open {
            assert_eq!((s.calls, s.bad), (3, 0), "count {n}");
        }
    }
    let read = a
        .read_many(&[&strict, &count])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((read[0].len(), read[1].len()), (30, 20));
    let (p, ..) = a
        .probe(&strict, "pay:strict:channel=1")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p, ProbeAnswer::Call);
}
