//! Fuzzing the Redis store's state decoders with values someone else wrote, against a real
//! redis-server: for every algorithm, a limit's key holding arbitrary bytes, a value of the right
//! shape with hostile numbers (NaN, infinities, 2^53, negative, huge), a real state truncated or
//! with a byte changed, or a key of the wrong type (list, hash, set, zset); for the queues, any
//! key of an instance holding junk of any type (a job record cut short, a counter that is not a
//! number, ids that are not ids), then every operation.
//!
//! Asserted: nothing panics and no call runs into its deadline (a foreign value must never drive
//! a script into a long loop); a decision on a foreign string is made and leaves a state the
//! scripts wrote (the foreign value is replaced, as `src/state.rs` states: a value no script
//! writes counts as no state); anything else is a store error that says what is wrong.
//! `tests/foreign_state.rs` holds the hand-picked cases; `FUZZ_CASES=N` runs each target N cases
//! (see `docs/fuzzing.md`).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::{live_options, runtime, single};
use flowgate_core::queue::{LeaseOutcome, NewJob, QueueError, QueueSpec, QueueStore};
use flowgate_core::{Algorithm, Item, Limit, Matcher, Quota, Store, StoreError};
use flowgate_redis::RedisStore;
use flowgate_redis::keys::redis_key;
use flowgate_testkit::fuzz;
use flowgate_testkit::redis::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

/// A fresh key per case.
static NEXT: AtomicU64 = AtomicU64::new(0);

fn next() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A double a foreign writer may leave: valid instants and counts, and every kind of junk.
fn hostile_double() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(1.0),
        Just(0.5),
        Just(-5.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE),
        Just(4_503_599_627_370_495.0),
        Just(4_503_599_627_370_496.0),
        Just(9_007_199_254_740_993.0),
        Just(1e300),
        Just(1_800_000_000_000_000.0),
        (0u64..1 << 52).prop_map(|n| n as f64),
        any::<f64>(),
    ]
}

fn hostile_u32() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), Just(1), Just(5), Just(u32::MAX), any::<u32>()]
}

/// The double of 8 little-endian bytes.
fn f64_of(b: &[u8]) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    f64::from_le_bytes(a)
}

/// A double no script writes as a total, which both sides read as no state (not an integer in
/// `[0, 2^52)`).
fn foreign_total() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(-5.0),
        Just(0.5),
        Just(1e300),
        Just(4_503_599_627_370_496.0),
    ]
}

/// A value of the shape the scripts write for `limit`'s algorithm, its instants hostile.
///
/// A stored total (sliding window, sliding log, concurrency) is the sum of the counts it
/// stands for, or a value no script writes, and the instants of a log or of leases are
/// integers in `[0, 2^52)`, in order: a total that is a valid number but not that sum, or an instant out
/// of that range, makes the script (which trusts the total and reads any instant) and the Rust
/// replay (which sums, and reads such a value as no state) disagree, a finding still open
/// (`foreign_values_the_script_takes_and_the_replay_refuses`).
fn shaped(limit: &Limit) -> BoxedStrategy<Vec<u8>> {
    let d = || hostile_double().prop_map(|x| x.to_le_bytes().to_vec());
    // An instant or id the scripts may have written: an integer in [0, 2^52), far in the past
    // or the future.
    let valid = || {
        prop_oneof![Just(0u64), Just((1 << 52) - 1), 0u64..1 << 52]
            .prop_map(|x| (x as f64).to_le_bytes().to_vec())
    };
    let u = || hostile_u32().prop_map(|x| x.to_le_bytes().to_vec());
    let cost = || 0u32..1000;
    match limit.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => d().boxed(),
        Algorithm::FixedWindow => (d(), u()).prop_map(|(a, b)| [a, b].concat()).boxed(),
        Algorithm::SlidingWindow => {
            let ring = limit.buckets() as usize + 1;
            (
                prop::collection::vec(cost(), ring),
                d(),
                prop::option::of(foreign_total()),
            )
                .prop_map(|(counts, head, foreign)| {
                    let sum: u32 = counts.iter().sum();
                    let total = foreign.unwrap_or(f64::from(sum));
                    let mut v: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
                    v.extend(head);
                    v.extend(total.to_le_bytes());
                    v
                })
                .boxed()
        }
        Algorithm::SlidingLog => (prop::collection::vec((valid(), cost()), 0..6), 0u32..8)
            .prop_map(|(mut entries, dead)| {
                entries.sort_by(|a, b| f64_of(&a.0).total_cmp(&f64_of(&b.0)));
                let live: u32 = entries.iter().skip(dead as usize).map(|e| e.1).sum();
                let mut v: Vec<u8> = entries
                    .iter()
                    .flat_map(|(ts, c)| [ts.clone(), c.to_le_bytes().to_vec()].concat())
                    .collect();
                v.extend(dead.to_le_bytes());
                v.extend(live.to_le_bytes());
                v
            })
            .boxed(),
        Algorithm::Concurrency => prop::collection::vec((valid(), valid(), cost()), 0..6)
            .prop_map(|mut leases| {
                leases.sort_by(|a, b| f64_of(&a.0).total_cmp(&f64_of(&b.0)));
                let total: u32 = leases.iter().map(|l| l.2).sum();
                let mut v = total.to_le_bytes().to_vec();
                for (a, b, c) in leases {
                    v.extend([a, b, c.to_le_bytes().to_vec()].concat());
                }
                v
            })
            .boxed(),
    }
}

/// What a foreign writer left at a limit's key.
#[derive(Clone, Debug)]
enum Foreign {
    /// A string of arbitrary bytes.
    Bytes(Vec<u8>),
    /// A string of the scripts' shape, with hostile numbers.
    Shaped(Vec<u8>),
    /// The state a decision wrote, cut to `n` bytes.
    Truncated(prop::sample::Index),
    /// The state a decision wrote, one byte changed.
    Flipped(prop::sample::Index, u8),
    /// A key of another type: `LPUSH`, `HSET`, `SADD` or `ZADD`.
    WrongType(&'static str),
}

fn limits() -> Vec<Limit> {
    let mut out = Vec::new();
    for a in Algorithm::ALL {
        for q in ["5/s", "3/1m", "1000/day", "7/1d"] {
            let q: Quota = q.parse().unwrap_or_else(|e| panic!("{e}"));
            if let Ok(l) = Limit::new(a, q) {
                out.push(l);
            }
        }
    }
    out
}

fn limit_case() -> impl Strategy<Value = (Limit, Foreign)> {
    prop::sample::select(limits()).prop_flat_map(|l| {
        let foreign = prop_oneof![
            2 => prop::collection::vec(any::<u8>(), 0..80).prop_map(Foreign::Bytes),
            4 => shaped(&l).prop_map(Foreign::Shaped),
            1 => any::<prop::sample::Index>().prop_map(Foreign::Truncated),
            1 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Foreign::Flipped(i, b)),
            1 => prop::sample::select(&["LPUSH", "HSET", "SADD", "ZADD"][..]).prop_map(Foreign::WrongType),
        ];
        (Just(l), foreign)
    })
}

/// Whether `v` has a length the scripts write for `limit`'s algorithm.
fn script_shaped(limit: &Limit, v: &[u8]) -> bool {
    match limit.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => v.len() == 8,
        Algorithm::FixedWindow => v.len() == 12,
        Algorithm::SlidingWindow => v.len() == 4 * (limit.buckets() as usize + 1) + 16,
        Algorithm::SlidingLog => v.len() >= 8 && (v.len() - 8).is_multiple_of(12),
        Algorithm::Concurrency => v.len() >= 4 && (v.len() - 4).is_multiple_of(20),
    }
}

async fn decide(
    store: &RedisStore,
    key: &str,
    limit: &Limit,
) -> Result<flowgate_core::Decision, StoreError> {
    let d = store
        .decide(&[Item {
            key,
            limit,
            cost: 1,
            enforce: true,
        }])
        .await?;
    d.into_iter()
        .next()
        .ok_or_else(|| StoreError::Internal("no decision".into()))
}

async fn get(store: &RedisStore, key: &str) -> Result<redis::Value, StoreError> {
    store.query(redis::cmd("GET").arg(key)).await
}

/// Writes `foreign` at `key`'s state, decides twice, checks the answers and what is left.
async fn limit_target(
    store: &RedisStore,
    limit: &Limit,
    foreign: &Foreign,
) -> Result<(), TestCaseError> {
    let fail = |m: String| TestCaseError::fail(m);
    let key = format!("fuzz:{}", next());
    let at = redis_key(&key, limit);
    let set = |v: Vec<u8>| redis::cmd("SET").arg(&at).arg(v).clone();
    match foreign {
        Foreign::Bytes(v) | Foreign::Shaped(v) => {
            store
                .query(&set(v.clone()))
                .await
                .map_err(|e| fail(e.to_string()))?;
        }
        Foreign::Truncated(_) | Foreign::Flipped(..) => {
            decide(store, &key, limit)
                .await
                .map_err(|e| fail(e.to_string()))?;
            let Ok(redis::Value::BulkString(mut v)) = get(store, &at).await else {
                return Ok(());
            };
            match foreign {
                Foreign::Truncated(i) => v.truncate(i.index(v.len() + 1)),
                Foreign::Flipped(i, b) if !v.is_empty() => {
                    let n = i.index(v.len());
                    v[n] = *b;
                }
                _ => {}
            }
            store
                .query(&set(v))
                .await
                .map_err(|e| fail(e.to_string()))?;
        }
        Foreign::WrongType(cmd) => {
            let mut c = redis::cmd(cmd);
            c.arg(&at);
            match *cmd {
                "HSET" => c.arg("f").arg("junk"),
                "ZADD" => c.arg(1).arg("junk"),
                _ => c.arg("junk"),
            };
            store.query(&c).await.map_err(|e| fail(e.to_string()))?;
        }
    }
    // At most one disagreement (the first decision that reads the foreign value differently,
    // which deletes it), in four decisions.
    let mut disagreed = false;
    for round in 0..4 {
        match decide(store, &key, limit).await {
            Ok(d) => {
                prop_assert!(d.remaining <= d.limit, "round {round}: {d:?}");
                if d.allowed {
                    // The decision's state replaced the foreign value.
                    match get(store, &at).await {
                        Ok(redis::Value::BulkString(v)) => prop_assert!(
                            script_shaped(limit, &v),
                            "round {round}: {:?} left {} bytes: {v:?}",
                            limit.algorithm(),
                            v.len()
                        ),
                        other => prop_assert!(false, "round {round}: GET {at}: {other:?}"),
                    }
                }
            }
            Err(StoreError::Timeout) => {
                prop_assert!(false, "round {round}: the script ran into its deadline")
            }
            // Arbitrary bytes, or a real state with a byte changed or cut short, may hold a
            // total that is not the sum of its counts, or an instant out of range: the script
            // and the replay read it differently once, and the store deletes it (see
            // `foreign_values_the_script_takes_and_the_replay_refuses`).
            Err(StoreError::Internal(m))
                if !disagreed
                    && matches!(
                        foreign,
                        Foreign::Bytes(_) | Foreign::Truncated(_) | Foreign::Flipped(..)
                    )
                    && matches!(
                        limit.algorithm(),
                        Algorithm::SlidingWindow | Algorithm::SlidingLog | Algorithm::Concurrency
                    )
                    && m.contains("disagree") =>
            {
                disagreed = true;
                prop_assert_eq!(
                    get(store, &at).await.ok(),
                    Some(redis::Value::Nil),
                    "round {}: the state was deleted",
                    round
                );
            }
            Err(e) => {
                // Only a key of another type is refused, and the error says so.
                prop_assert!(
                    matches!(foreign, Foreign::WrongType(_)),
                    "round {round}: {e}"
                );
                prop_assert!(e.to_string().contains("WRONGTYPE"), "round {round}: {e}");
            }
        }
    }
    Ok(())
}

#[test]
fn limit_states_written_by_someone_else() {
    let server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(single(&server, live_options()));
    let mut runner = TestRunner::new(fuzz::config(300));
    let result = runner.run(&limit_case(), |(limit, foreign)| {
        rt.block_on(limit_target(&store, &limit, &foreign))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Queues

/// The suffixes of an instance's keys and the type the script keeps there.
const QUEUE_KEYS: [(&str, &str); 13] = [
    ("m", "hash"),
    ("j", "hash"),
    ("r", "list"),
    ("rz", "zset"),
    ("d", "zset"),
    ("f", "zset"),
    ("x", "zset"),
    ("k", "hash"),
    ("kt", "zset"),
    ("bt", "zset"),
    ("rl", "list"),
    ("kf", "hash"),
    ("fs", "zset"),
];

/// Junk text a foreign writer may leave in a field, a member or a record.
fn junk() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        fuzz::hostile_text().prop_map(String::into_bytes),
        fuzz::hostile_number().prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..40),
        // Job records cut short, or whose key length lies.
        Just(b"1:2".to_vec()),
        Just(b"0:0:0:999:short".to_vec()),
        Just(b"0:0:0:-5:x".to_vec()),
        Just(b"a:b:c:d:e".to_vec()),
        Just(b"1:1:1:0:".to_vec()),
        Just(b"1e400:0:0:0:".to_vec()),
        // Batch members.
        Just(b"1:2:3".to_vec()),
        Just(b"x:1".to_vec()),
    ]
}

/// The fields and members the script reads.
const FIELDS: [&str; 9] = [
    "seq",
    "tat",
    "submitted",
    "released",
    "acked",
    "dead",
    "1",
    "2",
    "0",
];

/// One foreign write to an instance's key: `(suffix, type, entries)`; the type may be the
/// script's or another.
#[derive(Clone, Debug)]
struct QueueWrite {
    suffix: &'static str,
    kind: &'static str,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

fn queue_write() -> impl Strategy<Value = QueueWrite> {
    let field = prop_oneof![
        // The fields and members the script reads, with junk values.
        prop::sample::select(&FIELDS[..]).prop_map(|f| f.as_bytes().to_vec()),
        junk(),
    ];
    (
        prop::sample::select(&QUEUE_KEYS[..]),
        prop::bool::weighted(0.8),
        prop::sample::select(&["string", "list", "hash", "zset", "set"][..]),
        prop::collection::vec((field, junk()), 1..4),
    )
        .prop_map(|((suffix, own), right, other, entries)| QueueWrite {
            suffix,
            kind: if right { own } else { other },
            entries,
        })
}

/// A queue case: whether real jobs come first, the foreign writes.
fn queue_case() -> impl Strategy<Value = (bool, Vec<QueueWrite>)> {
    (any::<bool>(), prop::collection::vec(queue_write(), 1..4))
}

fn write_cmd(instance: &str, w: &QueueWrite) -> Vec<redis::Cmd> {
    let key = format!("flowgate:q:{{{instance}}}:{}", w.suffix);
    let mut out = vec![redis::cmd("DEL").arg(&key).clone()];
    for (f, v) in &w.entries {
        let mut c = match w.kind {
            "string" => redis::cmd("SET"),
            "list" => redis::cmd("RPUSH"),
            "hash" => redis::cmd("HSET"),
            "zset" => redis::cmd("ZADD"),
            _ => redis::cmd("SADD"),
        };
        c.arg(&key);
        match w.kind {
            "hash" => {
                c.arg(f).arg(v);
            }
            "zset" => {
                // A score Redis takes, from the junk when it is a number.
                let score = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
                    .filter(|x| !x.is_nan())
                    .unwrap_or(1.0);
                c.arg(score).arg(f);
            }
            _ => {
                c.arg(v);
            }
        }
        out.push(c);
    }
    out
}

/// A queue error is a store error that says what is wrong, or one of the queue's own answers;
/// never a timeout.
fn clear_queue_error(op: &str, e: &QueueError) -> Result<(), TestCaseError> {
    match e {
        QueueError::Store(StoreError::Timeout) => {
            prop_assert!(false, "{op}: the script ran into its deadline")
        }
        // Named: a key of the wrong type, a value that is not a number, a counter that would
        // overflow (Redis's own errors), a value the script does not write (`queue: ...`), or a reply the client does
        // not read; never a bare Lua error.
        QueueError::Store(s) => {
            let m = s.to_string();
            prop_assert!(
                [
                    "WRONGTYPE",
                    "is not an integer",
                    "is not a valid float",
                    "would overflow",
                    "queue: ",
                    "queue script: unexpected",
                ]
                .iter()
                .any(|named| m.contains(named)),
                "{op}: {m}"
            );
        }
        _ => {}
    }
    Ok(())
}

async fn queue_target(
    queues: &flowgate_redis::RedisQueueStore,
    store: &RedisStore,
    jobs_first: bool,
    writes: &[QueueWrite],
) -> Result<(), TestCaseError> {
    let spec = QueueSpec::new(
        "fz",
        "q",
        vec![Matcher::parse("channel")],
        "1000/s"
            .parse()
            .map_err(|e| TestCaseError::fail(format!("{e}")))?,
    )
    .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    let instance = format!("fz:q:channel=c{}", next());
    if jobs_first {
        let jobs = [NewJob::new("a"), NewJob::new("b").with_key("k1")];
        let _ = queues.submit(&spec, &instance, &jobs).await;
        let _ = queues.lease(&spec, &instance, 1_000_000, 7).await;
    }
    for w in writes {
        for c in write_cmd(&instance, w) {
            // (Redis refuses some writes, such as a NaN score: the key keeps what it had)
            let _ = store.query(&c).await;
        }
    }
    let check = |op: &str, r: Result<(), QueueError>| match r {
        Ok(()) => Ok(()),
        Err(e) => clear_queue_error(op, &e),
    };
    let sub = queues
        .submit(
            &spec,
            &instance,
            &[NewJob::new("c"), NewJob::new("d").with_key("k1")],
        )
        .await;
    check("submit", sub.map(|_| ()))?;
    let leased = queues.lease(&spec, &instance, 1_000_000, 9).await;
    let mut held = None;
    match leased {
        Ok(LeaseOutcome::Leased(l)) => held = Some(l.id),
        Ok(_) => {}
        Err(e) => clear_queue_error("lease", &e)?,
    }
    if let Some(id) = held {
        check(
            "nack",
            queues
                .nack(&spec, &instance, id, 9, Some(0))
                .await
                .map(|_| ()),
        )?;
        check("ack", queues.ack(&spec, &instance, id, 9).await)?;
    }
    check(
        "ack of an id never leased",
        queues.ack(&spec, &instance, 1, 1).await,
    )?;
    check("stats", queues.stats(&spec, &instance).await.map(|_| ()))?;
    check(
        "dead",
        queues.dead(&spec, &instance, 0, 10).await.map(|_| ()),
    )?;
    check(
        "requeue",
        queues
            .requeue_dead(&spec, &instance, None)
            .await
            .map(|_| ()),
    )?;
    check(
        "purge dead",
        queues
            .purge_dead(&spec, &instance, Some(&[1, 2]))
            .await
            .map(|_| ()),
    )?;
    check("purge", queues.purge(&spec, &instance).await.map(|_| ()))?;
    check("instances", queues.instances().await.map(|_| ()))?;
    Ok(())
}

#[test]
fn queue_keys_written_by_someone_else() {
    let server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(single(&server, live_options()));
    let queues = store.queues();
    let mut runner = TestRunner::new(fuzz::config(150));
    let result = runner.run(&queue_case(), |(jobs_first, writes)| {
        rt.block_on(queue_target(&queues, &store, jobs_first, &writes))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Found by the fuzzer: a sliding log written by someone else whose total (5) is not the sum
/// of its entries (one entry of cost 0), or whose entry's instant is 2^52 (out of the range the
/// Rust replay reads), is read differently by the script (through its total; any instant) and
/// by the Rust replay (sums the entries; an instant out of range makes the state none). The
/// store answers "the decide script and the Rust transition disagree on an admission" once,
/// and the rule's failure policy decides that call; it deletes the state, so the key's next
/// decision starts afresh instead of failing until the state expires.
#[test]
fn foreign_values_the_script_takes_and_the_replay_refuses() {
    let server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(single(&server, live_options()));
    let q: Quota = "5/s".parse().unwrap_or_else(|e| panic!("{e}"));
    let limit = Limit::new(Algorithm::SlidingLog, q).unwrap_or_else(|e| panic!("{e}"));
    // One entry (instant, cost), the dead count, the total.
    let log = |ts: f64, cost: u32, total: u32| {
        let mut v = ts.to_le_bytes().to_vec();
        v.extend(cost.to_le_bytes());
        v.extend(0u32.to_le_bytes());
        v.extend(total.to_le_bytes());
        Foreign::Shaped(v)
    };
    for foreign in [log(0.0, 0, 5), log(4_503_599_627_370_496.0, 4, 4)] {
        let key = format!("fuzz:{}", next());
        let at = redis_key(&key, &limit);
        let Foreign::Shaped(v) = &foreign else {
            unreachable!()
        };
        rt.block_on(store.query(redis::cmd("SET").arg(&at).arg(v.clone())))
            .unwrap_or_else(|e| panic!("{e}"));
        // The disagreement comes at the first decision that reads the log differently (the
        // second, for the far instant: both sides admit the first).
        let mut disagreed = false;
        for _ in 0..2 {
            match rt.block_on(decide(&store, &key, &limit)) {
                Ok(_) => {}
                Err(StoreError::Internal(m)) if m.contains("disagree") => {
                    disagreed = true;
                    break;
                }
                Err(e) => panic!("{foreign:?}: {e}"),
            }
        }
        assert!(disagreed, "{foreign:?}: the script and the replay agreed");
        assert_eq!(
            rt.block_on(get(&store, &at)).ok(),
            Some(redis::Value::Nil),
            "{foreign:?}: the state was deleted"
        );
        for _ in 0..5 {
            let d = rt
                .block_on(decide(&store, &key, &limit))
                .unwrap_or_else(|e| panic!("{foreign:?}: {e}"));
            assert!(d.allowed, "{foreign:?}: a fresh log admits 5");
        }
        let d = rt
            .block_on(decide(&store, &key, &limit))
            .unwrap_or_else(|e| panic!("{foreign:?}: {e}"));
        assert!(!d.allowed, "{foreign:?}: the sixth is over the limit");
    }
}

/// Found by the fuzzer: a member of an instance's sorted sets with no job record (written by
/// someone else) was never removed by a purge, which answered "more" forever: the client called
/// it again without end. Every purge now ends, and a lease drops a ready id with no record,
/// saying so, instead of failing on it each time.
#[test]
fn members_without_a_job_end_purges_and_are_dropped_by_a_lease() {
    let server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(single(&server, live_options()));
    let queues = store.queues();
    let spec = QueueSpec::new(
        "fz",
        "q",
        vec![Matcher::parse("channel")],
        "1000/s".parse().unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(common::bounded(60, async {
        let instance = "fz:q:channel=dangling";
        let key = |s: &str| format!("flowgate:q:{{{instance}}}:{s}");
        // 150 dead letters and ready ids without records, and junk members.
        for id in 1..=150 {
            for z in ["x", "rz"] {
                store
                    .query(redis::cmd("ZADD").arg(key(z)).arg(id).arg(id))
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        for junk in ["NaN", "seq", ""] {
            store
                .query(redis::cmd("ZADD").arg(key("d")).arg(1).arg(junk))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        assert!(queues.purge_dead(&spec, instance, None).await.is_ok());
        let e = queues.lease(&spec, instance, 1_000_000, 3).await;
        let Err(QueueError::Store(StoreError::Internal(m))) = e else {
            panic!("{e:?}");
        };
        assert!(
            m.contains("queue: job 1 was listed as ready without a record"),
            "{m}"
        );
        assert!(queues.purge(&spec, instance).await.is_ok());
        assert!(matches!(
            queues.lease(&spec, instance, 1_000_000, 4).await,
            Ok(LeaseOutcome::Empty { .. })
        ));
    }));
}

/// Found by the fuzzer: a sliding window written by someone else whose head is far beyond any
/// instant (2^51 buckets of a day) overflowed the Rust replay (a panic in a debug build). Such a
/// head is no state, on both sides.
#[test]
fn a_sliding_window_head_beyond_every_instant_is_no_state() {
    let server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(single(&server, live_options()));
    let q: Quota = "5/1d".parse().unwrap_or_else(|e| panic!("{e}"));
    let limit = Limit::new(Algorithm::SlidingWindow, q).unwrap_or_else(|e| panic!("{e}"));
    let mut v = vec![0u8; 4 * (limit.buckets() as usize + 1)];
    v.extend(2_251_799_813_685_248f64.to_le_bytes());
    v.extend(0f64.to_le_bytes());
    rt.block_on(limit_target(&store, &limit, &Foreign::Shaped(v)))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Found by the fuzzer: a sliding log written by someone else with its entries out of order
/// underflowed the Rust replay (a panic in a debug build). Such a log is no state to the replay
/// (the script still reads it: the open finding above).
#[test]
fn a_sliding_log_out_of_order_does_not_panic() {
    let server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(single(&server, live_options()));
    let q: Quota = "5/s".parse().unwrap_or_else(|e| panic!("{e}"));
    let limit = Limit::new(Algorithm::SlidingLog, q).unwrap_or_else(|e| panic!("{e}"));
    let key = format!("fuzz:{}", next());
    let now = rt
        .block_on(store.query(&redis::cmd("TIME")))
        .unwrap_or_else(|e| panic!("{e}"));
    let redis::Value::Array(t) = now else {
        panic!("{now:?}")
    };
    let secs = redis::from_redis_value::<u64>(t[0].clone()).unwrap_or_else(|e| panic!("{e}"));
    let now = (secs * 1_000_000) as f64;
    let mut v = Vec::new();
    // Left the window, live, left the window; the total is their sum.
    for ts in [now - 5_000_000.0, now, now - 5_000_000.0] {
        v.extend(ts.to_le_bytes());
        v.extend(5u32.to_le_bytes());
    }
    v.extend(0u32.to_le_bytes());
    v.extend(15u32.to_le_bytes());
    rt.block_on(store.query(redis::cmd("SET").arg(redis_key(&key, &limit)).arg(v)))
        .unwrap_or_else(|e| panic!("{e}"));
    // An answer, whichever: no panic.
    let _ = rt.block_on(decide(&store, &key, &limit));
}
