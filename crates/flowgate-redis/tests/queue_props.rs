//! Differential property test: the queue's Lua (`queue.lua`, through [`RedisQueueStore`] on a
//! real redis-server) and the Rust engine (`flowgate_core::queue::engine::Instance`, the embedded
//! store's transitions) give the same answer to every operation of random sequences: submits of
//! batches with and without idempotency keys and `not_before`, leases at any horizon (several at
//! one instant, as workers long-polling together), acks and nacks of live, stale and forged
//! deliveries, give-backs of deliveries never made (slots still ahead among them), lease
//! expiry and dead letters after `max_attempts`, listing, requeueing and purging dead letters,
//! purges, key conflicts (a key resubmitted with another payload), and clock steps of every
//! size. After every operation the instance's stats (depths, totals, next slot, oldest job,
//! recent releases, or its being forgotten) must agree too, and at the end the whole
//! dead-letter list, and after every operation every job record Redis holds must read, with the
//! stores' one record encoding, as the engine's job. Half the cases stage every batch's records before its submit (the path of
//! big batches), half send them with the submit.
//!
//! Both read the same `ManualClock` (the Redis store's test-only clock override). An empty
//! idempotency key is no key, in both.
//!
//! 200 cases by default (about 14 s here, reading the records after every step included);
//! `PROPTEST_CASES=n` runs more (600 take 40 s).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{runtime, single, test_options};
use flowgate_core::queue::engine::Instance;
use flowgate_core::queue::record::Record;
use flowgate_core::queue::{LeaseOutcome, Nacked, NewJob, QueueError, QueueSpec, QueueStore};
use flowgate_core::{Clock, ManualClock, Matcher, Micros, Quota};
use flowgate_redis::{RedisQueueStore, RedisStore};
use flowgate_testkit::redis::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const START: Micros = 1_700_000_000_000_000;
const MS: u64 = 1_000;

/// A queue's declaration, in small numbers so that every bound is reached.
#[derive(Clone, Debug)]
struct SpecCase {
    limit: u64,
    window_ms: u64,
    burst: u64,
    max_depth: u64,
    lease_ms: u64,
    max_attempts: u32,
    backoff_ms: u64,
    retention_ms: u64,
}

impl SpecCase {
    fn build(&self) -> Result<QueueSpec, TestCaseError> {
        let fail = |e: flowgate_core::queue::QueueSpecError| TestCaseError::fail(e.to_string());
        let rate = Quota::from_micros(self.limit, self.window_ms * MS)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        QueueSpec::new("diff", "q", vec![Matcher::parse("channel")], rate)
            .and_then(|s| s.with_burst(self.burst))
            .and_then(|s| s.with_max_depth(self.max_depth))
            .and_then(|s| s.with_lease(Duration::from_millis(self.lease_ms)))
            .and_then(|s| s.with_max_attempts(self.max_attempts))
            .and_then(|s| s.with_retry_backoff(Duration::from_millis(self.backoff_ms)))
            .and_then(|s| s.with_key_retention(Duration::from_millis(self.retention_ms)))
            .map_err(fail)
    }
}

fn spec_case() -> impl Strategy<Value = SpecCase> {
    (
        (
            1u64..4,
            prop::sample::select(vec![100u64, 1_000, 2_500]),
            1u64..4,
        ),
        (2u64..12, prop::sample::select(vec![150u64, 700, 3_000])),
        (1u32..4, prop::sample::select(vec![0u64, 60, 400])),
        prop::sample::select(vec![0u64, 300, 5_000]),
    )
        .prop_map(
            |((limit, window_ms, burst), (max_depth, lease_ms), (max_attempts, backoff_ms), r)| {
                SpecCase {
                    limit,
                    window_ms,
                    burst,
                    max_depth,
                    lease_ms,
                    max_attempts,
                    backoff_ms,
                    retention_ms: r,
                }
            },
        )
}

/// A job of a submit: its payload's length, its key (an index into [`KEYS`]) and whether its
/// payload is the key's usual one (else unique: a resubmission conflicts), and its
/// `not_before` in ms from the submit's instant (negative: in the past).
type JobCase = (usize, Option<(usize, bool)>, Option<i64>);

const KEYS: [&str; 5] = ["a", "b", "c:d", "é", ""];

#[derive(Clone, Debug)]
enum Op {
    Submit(Vec<JobCase>),
    /// How far ahead (ms) a slot may be reserved, how many leases ask at this instant, and
    /// whether one of their workers then goes away (`GiveBackAhead`) and another one asks.
    Lease(u64, usize, bool),
    /// A delivery made by an earlier lease (picked among them all, acked or not), with its own
    /// nonce or a forged one.
    Ack(usize, bool),
    /// As `Ack`, with `retry_after` in ms (none: the backoff).
    Nack(usize, bool, Option<u64>),
    /// As `Ack`: the delivery was never made, its job goes back.
    GiveBack(usize, bool),
    /// As `GiveBack`, picked among the deliveries whose slot has not come (as a worker that went
    /// away while its lease waited for its slot): the earliest such first. None: the last one.
    GiveBackAhead(usize),
    /// Dead letters from an offset, at most a limit.
    Dead(usize, usize),
    /// Requeue dead letters: all, or these (an index into the dead letters, or from
    /// [`RAW_ID`] on, an id that may be anything).
    Requeue(Option<Vec<usize>>),
    /// Purge dead letters, picked as `Requeue`'s.
    PurgeDead(Option<Vec<usize>>),
    Purge,
}

const RAW_ID: usize = 100;

fn op() -> impl Strategy<Value = Op> {
    let job = (
        prop_oneof![1 => Just(0usize), 6 => 1usize..12],
        prop::option::weighted(0.5, (0..KEYS.len(), prop::bool::weighted(0.85))),
        prop::option::weighted(0.25, -500i64..2_500),
    );
    let picks = prop::option::weighted(
        0.6,
        prop::collection::vec(prop_oneof![4 => 0usize..4, 1 => RAW_ID..RAW_ID + 20], 1..3),
    );
    prop_oneof![
        6 => prop::collection::vec(job, 1..5).prop_map(Op::Submit),
        8 => (
            prop_oneof![2 => Just(0u64), 2 => 0u64..1_500, 1 => Just(60_000)],
            prop_oneof![3 => Just(1usize), 1 => 2usize..5],
            prop::bool::weighted(0.3),
        )
            .prop_map(|(h, n, gone)| Op::Lease(h, n, gone)),
        4 => (any::<usize>(), prop::bool::weighted(0.15)).prop_map(|(p, f)| Op::Ack(p, f)),
        3 => (
            any::<usize>(),
            prop::bool::weighted(0.1),
            prop::option::of(prop_oneof![Just(0u64), 0u64..2_000]),
        )
            .prop_map(|(p, f, r)| Op::Nack(p, f, r)),
        2 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(p, f)| Op::GiveBack(p, f)),
        1 => prop_oneof![2 => Just(0usize), 1 => 1usize..3].prop_map(Op::GiveBackAhead),
        1 => (0usize..3, 0usize..4).prop_map(|(o, l)| Op::Dead(o, l)),
        1 => picks.clone().prop_map(Op::Requeue),
        1 => picks.prop_map(Op::PurgeDead),
        1 => Just(Op::Purge),
    ]
}

/// A step: the clock moves by `dt` µs, then the operation runs on both.
fn steps() -> impl Strategy<Value = Vec<(u64, Op)>> {
    let dt = prop_oneof![
        5 => Just(0u64),
        5 => 0u64..400_000,
        2 => 0u64..4_000_000,
        1 => 10_000_000u64..30_000_000,
    ];
    prop::collection::vec((dt, op()), 1..45)
}

fn new_jobs(now: Micros, jobs: &[JobCase], n: usize) -> Vec<NewJob> {
    jobs.iter()
        .enumerate()
        .map(|(i, &(len, key, nb))| {
            let payload = match key {
                Some((k, true)) => format!("usual {}", KEYS[k]).into_bytes(),
                _ => {
                    let mut p = format!("{n}.{i}:").into_bytes();
                    p.resize(len, b'~');
                    p
                }
            };
            NewJob {
                payload,
                key: key.map(|(k, _)| KEYS[k].to_owned()),
                not_before: nb.map(|ms| now.saturating_add_signed(ms * 1_000)),
            }
        })
        .collect()
}

/// The ids picked by `Requeue`/`PurgeDead`, from the dead letters `dead` (ids) as Rust holds them.
fn picked(picks: &Option<Vec<usize>>, dead: &[u64]) -> Option<Vec<u64>> {
    picks.as_ref().map(|p| {
        p.iter()
            .map(|&i| match i {
                i if i >= RAW_ID => (i - RAW_ID) as u64,
                i if dead.is_empty() => i as u64 + 1,
                i => dead[i % dead.len()],
            })
            .collect()
    })
}

/// The `k`-th (from the earliest, cyclically) of the deliveries whose slot is at or after
/// `now`, as an index into `leases`; the last delivery when none is.
fn ahead(leases: &[(u64, u64, u64)], now: Micros, k: usize) -> usize {
    let ahead: Vec<usize> = (0..leases.len()).filter(|&i| leases[i].2 >= now).collect();
    match ahead.len() {
        0 => leases.len().saturating_sub(1),
        len => ahead[k % len],
    }
}

/// How often the answers that the sequences must reach were seen, over the whole run.
#[derive(Debug, Default)]
struct Seen {
    duplicates: u64,
    conflicts: u64,
    full: u64,
    delayed: u64,
    leased: u64,
    redelivered: u64,
    later: u64,
    empty_with_next: u64,
    acked: u64,
    not_held: u64,
    retried: u64,
    nacked_dead: u64,
    expired_dead: u64,
    requeued: u64,
    purged_dead: u64,
    not_dead: u64,
    purged: u64,
    given_back: u64,
    /// A lease given a slot that an earlier delivery had and gave back.
    slot_reused: u64,
    forgotten: u64,
}

impl Seen {
    /// Every kind, at least once.
    fn all(&self) -> bool {
        let s = self;
        [
            s.duplicates,
            s.conflicts,
            s.full,
            s.delayed,
            s.leased,
            s.redelivered,
            s.later,
            s.empty_with_next,
            s.acked,
            s.not_held,
            s.retried,
            s.nacked_dead,
            s.expired_dead,
            s.requeued,
            s.purged_dead,
            s.not_dead,
            s.purged,
            s.given_back,
            s.slot_reused,
            s.forgotten,
        ]
        .iter()
        .all(|&n| n > 0)
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

#[test]
fn queue_lua_agrees_with_the_rust_engine() {
    let server = RedisServer::start();
    let rt = runtime();
    let clock = ManualClock::new(START);
    let store = rt.block_on(single(&server, test_options(&clock)));
    let redis = store.queues();
    let staged = redis.clone().stage_above(0);
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_time: 60_000,
        ..Config::default()
    });
    let case_no = AtomicU64::new(0);
    let seen = parking_lot::Mutex::new(Seen::default());
    let strategy = (spec_case(), steps(), 0u64..1_000_000);
    let result = runner.run(&strategy, |(spec, steps, offset)| {
        let n = case_no.fetch_add(1, Ordering::Relaxed);
        let case = (&spec, &steps[..], offset);
        let queues = if n.is_multiple_of(2) { &redis } else { &staged };
        run_case(&rt, (&store, queues), &clock, case, n, &mut seen.lock())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let seen = seen.into_inner();
    // (the sequences reach every answer, so that an agreement means something)
    assert!(seen.all(), "some answers were never reached: {seen:?}");
}

fn run_case(
    rt: &tokio::runtime::Runtime,
    (store, redis): (&RedisStore, &RedisQueueStore),
    clock: &ManualClock,
    (spec, steps, offset): (&SpecCase, &[(u64, Op)], u64),
    case_no: u64,
    seen: &mut Seen,
) -> Result<(), TestCaseError> {
    let spec = spec.build()?;
    let instance = format!("diff:q:channel=case{case_no}");
    clock.set(START + offset);
    let mut rust = Instance::new();
    // Every delivery made, in order: (id, nonce, slot).
    let mut leases: Vec<(u64, u64, u64)> = Vec::new();
    let redis_err = |e| TestCaseError::fail(format!("redis: {e}"));
    // Leases one of whose workers goes away are three steps at one instant: the leases, the
    // give-back, and another worker's lease.
    let steps = steps.iter().flat_map(|(dt, op)| match op {
        Op::Lease(h, count, true) => vec![
            (*dt, Op::Lease(*h, *count, false)),
            (0, Op::GiveBackAhead(0)),
            (0, Op::Lease(*h, 1, false)),
        ],
        op => vec![(*dt, op.clone())],
    });
    for (n, (dt, op)) in steps.enumerate() {
        clock.advance(Duration::from_micros(dt));
        let now = clock.now();
        let mut dead_before = rust.meta().totals.dead;
        let at = format!("step {n} (+{} µs) {op:?}", now - START - offset);
        let delivery = |pick: usize, forged: bool| match leases.get(pick % leases.len().max(1)) {
            Some(&(id, nonce, slot)) => (id, if forged { nonce + 1_000_000 } else { nonce }, slot),
            None => (1, 1, 0),
        };
        match &op {
            Op::Submit(jobs) => {
                let jobs = new_jobs(now, jobs, n);
                let want = rust.submit(&spec, now, &jobs);
                let got = rt.block_on(redis.submit(&spec, &instance, &jobs));
                match &want {
                    Ok(s) => {
                        seen.duplicates += s.iter().filter(|s| s.duplicate).count() as u64;
                        seen.delayed +=
                            jobs.iter().filter(|j| j.not_before > Some(now)).count() as u64;
                    }
                    Err(QueueError::QueueFull { .. }) => seen.full += 1,
                    Err(QueueError::KeyConflict { .. }) => seen.conflicts += 1,
                    Err(_) => {}
                }
                prop_assert_eq!(want, got, "{}", at);
            }
            Op::Lease(horizon, count, _) => {
                for k in 0..*count {
                    // (distinct per lease: the step's number, plus 100 per lease before it)
                    let nonce = n as u64 + 1 + 100 * k as u64;
                    let want = rust.lease(&spec, now, horizon * MS, nonce);
                    let got = rt
                        .block_on(redis.lease(&spec, &instance, horizon * MS, nonce))
                        .map_err(redis_err)?;
                    match &want {
                        LeaseOutcome::Leased(l) => {
                            // (slots are given in order, but for one given back and used again)
                            seen.slot_reused +=
                                u64::from(leases.iter().any(|&(_, _, s)| s > l.released_at));
                            leases.push((l.id, l.nonce, l.released_at));
                            seen.leased += 1;
                            seen.redelivered += u64::from(l.attempt > 1);
                        }
                        LeaseOutcome::Later(_) => seen.later += 1,
                        LeaseOutcome::Empty { next } => {
                            seen.empty_with_next += u64::from(next.is_some())
                        }
                    }
                    prop_assert_eq!(want, got, "{} (lease {})", at, k);
                }
            }
            Op::GiveBack(..) | Op::GiveBackAhead(_) => {
                let (id, nonce, slot) = match op {
                    Op::GiveBackAhead(k) => delivery(ahead(&leases, now, k), false),
                    Op::GiveBack(pick, forged) => delivery(pick, forged),
                    _ => unreachable!("a give-back"),
                };
                let want = rust.give_back(&spec, now, id, nonce, slot);
                let got = rt.block_on(redis.give_back(&spec, &instance, id, nonce, slot));
                if want.is_ok() {
                    seen.given_back += 1;
                }
                prop_assert_eq!(want, got, "{} (job {}, nonce {})", at, id, nonce);
            }
            Op::Ack(pick, forged) => {
                let (id, nonce, _) = delivery(*pick, *forged);
                let want = rust.ack(&spec, now, id, nonce);
                let got = rt.block_on(redis.ack(&spec, &instance, id, nonce));
                match &want {
                    Ok(()) => seen.acked += 1,
                    Err(_) => seen.not_held += 1,
                }
                prop_assert_eq!(want, got, "{} (job {}, nonce {})", at, id, nonce);
            }
            Op::Nack(pick, forged, retry_after) => {
                let (id, nonce, _) = delivery(*pick, *forged);
                let retry = retry_after.map(|ms| ms * MS);
                let want = rust.nack(&spec, now, id, nonce, retry);
                let got = rt.block_on(redis.nack(&spec, &instance, id, nonce, retry));
                match &want {
                    Ok(Nacked::Retry { .. }) => seen.retried += 1,
                    Ok(Nacked::Dead) => {
                        seen.nacked_dead += 1;
                        dead_before += 1;
                    }
                    Err(_) => seen.not_held += 1,
                }
                prop_assert_eq!(want, got, "{} (job {}, nonce {})", at, id, nonce);
            }
            Op::Dead(offset, limit) => {
                rust.sweep(&spec, now);
                let want = rust.dead(*offset, *limit);
                let got = rt
                    .block_on(redis.dead(&spec, &instance, *offset, *limit))
                    .map_err(redis_err)?;
                prop_assert_eq!(want, got, "{}", at);
            }
            Op::Requeue(picks) | Op::PurgeDead(picks) => {
                rust.sweep(&spec, now);
                let dead: Vec<u64> = rust.dead(0, usize::MAX).iter().map(|j| j.id).collect();
                let ids = picked(picks, &dead);
                let (want, got) = if matches!(op, Op::Requeue(_)) {
                    (
                        rust.requeue_dead(&spec, now, ids.as_deref()),
                        rt.block_on(redis.requeue_dead(&spec, &instance, ids.as_deref())),
                    )
                } else {
                    (
                        rust.purge_dead(&spec, now, ids.as_deref()),
                        rt.block_on(redis.purge_dead(&spec, &instance, ids.as_deref())),
                    )
                };
                match (&want, matches!(op, Op::Requeue(_))) {
                    (Ok(n), true) => seen.requeued += n,
                    (Ok(n), false) => seen.purged_dead += n,
                    (Err(_), _) => seen.not_dead += 1,
                }
                prop_assert_eq!(want, got, "{} (ids {:?})", at, ids);
            }
            Op::Purge => {
                let want = rust.purge(&spec, now);
                seen.purged += want;
                let got = rt
                    .block_on(redis.purge(&spec, &instance))
                    .map_err(redis_err)?;
                prop_assert_eq!(want, got, "{}", at);
            }
        }
        let stats = rust.stats(&spec, now);
        // (a nack's death is counted above; any other is a lease that expired)
        seen.expired_dead += stats.dead_total - dead_before;
        let want = if rust.forgettable(&spec, now) {
            seen.forgotten += 1;
            rust = Instance::new();
            leases.clear();
            None
        } else {
            Some(stats)
        };
        let got = rt
            .block_on(redis.stats(&spec, &instance))
            .map_err(redis_err)?;
        prop_assert_eq!(want, got, "{}: stats", at);
        records_agree(rt, store, &instance, &rust)
            .map_err(|e| TestCaseError::fail(format!("{at}: the job records: {e}")))?;
    }
    let now = clock.now();
    rust.sweep(&spec, now);
    let want = rust.dead(0, usize::MAX);
    let got = rt
        .block_on(redis.dead(&spec, &instance, 0, 1_000))
        .map_err(redis_err)?;
    prop_assert_eq!(want, got, "the dead letters at the end");
    Ok(())
}

/// Every job record Redis holds for `instance` (in `j`, and in the hashes of batches whose jobs
/// were never delivered), read with the stores' one encoding
/// (`flowgate_core::queue::record::Record`), against the engine's jobs: the same jobs, each with
/// the same submission instant (a batch's record says 0: its batch's), attempts, nonce, key and
/// payload.
fn records_agree(
    rt: &tokio::runtime::Runtime,
    store: &RedisStore,
    instance: &str,
    rust: &Instance,
) -> Result<(), String> {
    let prefix = format!("flowgate:q:{{{instance}}}:");
    let query = |cmd: &redis::Cmd| -> Result<redis::Value, String> {
        rt.block_on(store.query(cmd)).map_err(|e| e.to_string())
    };
    let batches: Vec<String> =
        redis::from_redis_value(query(redis::cmd("KEYS").arg(format!("{prefix}b:*")))?)
            .map_err(|e| e.to_string())?;
    let mut hashes = vec![(format!("{prefix}j"), None)];
    for b in batches {
        let first: u64 = b[prefix.len() + 2..]
            .parse()
            .map_err(|_| format!("batch {b}"))?;
        hashes.push((b, Some(first)));
    }
    let mut held = 0;
    for (hash, first) in hashes {
        let records: HashMap<u64, Vec<u8>> =
            redis::from_redis_value(query(redis::cmd("HGETALL").arg(&hash))?)
                .map_err(|e| e.to_string())?;
        for (field, bytes) in records {
            let id = first.map_or(field, |f| f + field - 1);
            let r = Record::decode(&bytes)
                .ok_or_else(|| format!("job {id}'s record in {hash} does not decode"))?;
            let job = rust
                .job(id)
                .ok_or_else(|| format!("{hash} holds job {id}, the engine does not"))?;
            let fields = (r.attempts, r.nonce, r.key, r.rest);
            let want = (
                job.attempts,
                job.nonce,
                job.key.as_deref(),
                &job.payload[..],
            );
            if fields != want || (r.submitted != 0 && r.submitted != job.submitted) {
                return Err(format!(
                    "job {id} in {hash}: {r:?}, the engine's: submitted {}, {want:?}",
                    job.submitted
                ));
            }
            held += 1;
        }
    }
    let want = (1..=rust.meta().seq)
        .filter(|&id| rust.job(id).is_some())
        .count();
    if held != want {
        return Err(format!(
            "Redis holds {held} records, the engine {want} jobs"
        ));
    }
    Ok(())
}

/// Redis orders the members of a zset with one score by their text ("10" before "9"), the engine
/// by id: dead letters that died at one instant are listed by id, and the oldest of delayed jobs
/// due at one instant is the lowest id's.
#[test]
fn ties_in_time_are_ordered_by_id() {
    let server = RedisServer::start();
    let rt = runtime();
    let clock = ManualClock::new(START);
    let redis = rt.block_on(single(&server, test_options(&clock))).queues();
    let spec = SpecCase {
        limit: 1,
        window_ms: 1_000,
        burst: 12,
        max_depth: 100,
        lease_ms: 100,
        max_attempts: 1,
        backoff_ms: 0,
        retention_ms: 0,
    }
    .build()
    .unwrap_or_else(|e| panic!("{e}"));
    let mut rust = Instance::new();
    // Twelve jobs leased at one instant die at one instant.
    let jobs: Vec<NewJob> = (0..12).map(|i| NewJob::new(format!("{i}"))).collect();
    let now = clock.now();
    let want = rust.submit(&spec, now, &jobs);
    assert_eq!(want, rt.block_on(redis.submit(&spec, "ties", &jobs)));
    for nonce in 1..=12 {
        let want = rust.lease(&spec, now, 0, nonce);
        let got = rt.block_on(redis.lease(&spec, "ties", 0, nonce));
        assert_eq!(Ok(want), got);
    }
    clock.advance(Duration::from_millis(100));
    let now = clock.now();
    rust.sweep(&spec, now);
    let got = rt
        .block_on(redis.dead(&spec, "ties", 0, 100))
        .unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<u64> = got.iter().map(|j| j.id).collect();
    assert_eq!(ids, (1..=12).collect::<Vec<u64>>());
    assert_eq!(rust.dead(0, 100), got);
    let page = rt
        .block_on(redis.dead(&spec, "ties", 8, 2))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rust.dead(8, 2), page);
    assert_eq!(page.iter().map(|j| j.id).collect::<Vec<u64>>(), vec![9, 10]);
    // On another instance, jobs 9 (at t) and 10 (at t + 1 ms) due at one instant: the oldest
    // is 9's.
    let mut rust = Instance::new();
    let eight: Vec<NewJob> = (0..8).map(|i| NewJob::new(format!("{i}"))).collect();
    assert_eq!(
        rust.submit(&spec, now, &eight),
        rt.block_on(redis.submit(&spec, "ties-due", &eight))
    );
    assert_eq!(
        Ok(rust.purge(&spec, now)),
        rt.block_on(redis.purge(&spec, "ties-due"))
    );
    let due = now + 60_000_000;
    for _ in 0..2 {
        let job = [NewJob::new("late").not_before(due)];
        let now = clock.now();
        assert_eq!(
            rust.submit(&spec, now, &job),
            rt.block_on(redis.submit(&spec, "ties-due", &job))
        );
        clock.advance(Duration::from_millis(1));
    }
    let now = clock.now();
    let want = rust.stats(&spec, now);
    assert_eq!(want.oldest_submitted, Some(now - 2_000));
    assert_eq!(Ok(Some(want)), rt.block_on(redis.stats(&spec, "ties-due")));
}
