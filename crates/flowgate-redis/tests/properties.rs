//! Property test: the Lua scripts and the Rust transitions (through the memory store, which
//! applies `algorithm::check` + `apply` with the same all-or-nothing batch rules) agree decision
//! for decision on random schedules of random limits, single and multi-item requests, shadow
//! items, lease releases, and batches of requests decided in one script call (as coalescing
//! sends them: requests that share keys, some rejected, see each other exactly as if decided one
//! after another), and charges and refunds (`charge.lua` against `algorithm::charge`: the same
//! answers, and the states they leave decided alike after). Both read the same ManualClock (the
//! Redis store's test-only clock override).

mod common;

use std::time::Duration;

use common::{cluster, runner, runtime, single, test_options};
use flowgate_core::algorithm::Amount;
use flowgate_core::{
    Algorithm, CalendarUnit, ChargeItem, Clock, Decision, Item, Limit, ManualClock, MemoryStore,
    Mode, Quota, Store, Tz,
};
use flowgate_redis::RedisStore;
use flowgate_testkit::redis::{RedisCluster, RedisServer};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

#[derive(Clone, Debug)]
struct LimitCase {
    algorithm: Algorithm,
    limit: u64,
    window: u64,
    burst: Option<u64>,
    buckets: u32,
    delay_ms: Option<u64>,
    /// A token bucket's warm-up: its period in us and cold factor in thousandths.
    warmup: Option<(u64, u32)>,
    max_debt: Option<u64>,
}

#[derive(Clone, Debug)]
enum Step {
    /// Advance the clock by `dt` us, then decide items `(limit index, cost, shadow)`.
    Decide(u64, Vec<(usize, u64, bool)>),
    /// Release the lease granted at the `n`-th concurrency grant still held.
    Release(usize),
    /// Advance the clock by `dt` us, then decide these requests in one call (`decide_batch`);
    /// the memory store decides them one after another.
    Batch(u64, Vec<Vec<(usize, u64, bool)>>),
    /// Advance the clock by `dt` us, then charge items `(limit index, units, kind, ago)` in one
    /// report: kind 0 a charge, 1 a refund, 2 the release of units taken `ago` us before now.
    Charge(u64, Vec<(usize, u64, u8, u64)>),
}

fn limit_case() -> impl Strategy<Value = LimitCase> {
    (
        prop_oneof![
            6 => prop::sample::select(Algorithm::ALL.to_vec()),
            2 => Just(Algorithm::TokenBucket)
        ],
        // (limits above 254 let costs that the script reads as a double be admitted)
        prop_oneof![6 => 0u64..8, 1 => 250u64..600],
        // (0: a calendar day in Europe/Paris, for fixed windows)
        prop::sample::select(vec![0, 1_000u64, 7_777, 100_000, 1_000_000, 2_500_000]),
        prop::option::of(1u64..6),
        1u32..6,
        prop::option::of(0u64..3_000),
        prop::option::weighted(
            0.6,
            (
                prop_oneof![1_000u64..100_000, 100_000u64..20_000_000],
                prop_oneof![Just(3_000u32), 1_001u32..10_000],
            ),
        ),
        prop::option::of(0u64..12),
    )
        .prop_map(
            |(algorithm, limit, window, burst, buckets, delay_ms, warmup, max_debt)| LimitCase {
                algorithm,
                limit,
                window,
                burst,
                buckets,
                delay_ms,
                warmup: warmup.filter(|_| algorithm == Algorithm::TokenBucket),
                max_debt,
            },
        )
}

fn build(c: &LimitCase) -> Option<Limit> {
    let mut b = Limit::builder(algorithm_quota(c)?.0, algorithm_quota(c)?.1).buckets(c.buckets);
    if let Some(x) = c.burst {
        b = b.burst(x);
    }
    if c.algorithm.supports_delay()
        && let Some(ms) = c.delay_ms
    {
        b = b.mode(Mode::Delay).max_wait(Duration::from_millis(ms));
    }
    if let Some(d) = c.max_debt {
        b = b.max_debt(d);
    }
    if let Some((period, cold_milli)) = c.warmup {
        b = b
            .warmup(Duration::from_micros(period))
            .cold_factor(f64::from(cold_milli) / 1000.0);
    }
    b.build().ok()
}

fn algorithm_quota(c: &LimitCase) -> Option<(Algorithm, Quota)> {
    if c.window == 0 {
        let day = Quota::per_calendar(c.limit, CalendarUnit::Day, Tz::Europe__Paris).ok()?;
        return Some((c.algorithm, day));
    }
    Some((c.algorithm, Quota::from_micros(c.limit, c.window).ok()?))
}

/// Where a case starts: a few seconds before Paris's midnight of 2026-03-29 when a limit counts
/// calendar days (so that its steps cross it), else at 2023-11-14T22:13:20Z.
fn start_of(limits: &[Limit]) -> u64 {
    if limits.iter().any(|l| l.quota().calendar().is_some()) {
        1_774_738_800_000_000 - 5_000_000
    } else {
        1_700_000_000_000_000
    }
}

/// A cost: mostly small; sometimes one the script reads from a byte (up to 254) or as a double
/// after it (255 and above, and above the largest limit).
fn cost() -> impl Strategy<Value = u64> {
    prop_oneof![12 => 0u64..4, 1 => 252u64..258, 1 => Just(1u64 << 33)]
}

fn schedule(limits: usize) -> impl Strategy<Value = Vec<Step>> {
    let decide = (
        prop_oneof![3 => 0u64..50, 3 => 0u64..400_000, 1 => 0u64..3_000_000],
        prop::collection::vec((0..limits, cost(), prop::bool::weighted(0.15)), 1..4),
    )
        .prop_map(|(dt, items)| Step::Decide(dt, items));
    let batch = (
        prop_oneof![3 => 0u64..50, 3 => 0u64..400_000, 1 => 0u64..3_000_000],
        prop::collection::vec(
            prop::collection::vec((0..limits, cost(), prop::bool::weighted(0.15)), 1..4),
            2..7,
        ),
    )
        .prop_map(|(dt, requests)| Step::Batch(dt, requests));
    let charge = (
        prop_oneof![3 => 0u64..50, 3 => 0u64..400_000, 1 => 0u64..3_000_000],
        prop::collection::vec(
            (
                0..limits,
                prop_oneof![8 => 0u64..12, 1 => 250u64..600, 1 => Just(1u64 << 33)],
                prop_oneof![5 => Just(0u8), 2 => Just(1u8), 3 => Just(2u8)],
                prop_oneof![2 => Just(0u64), 3 => 0u64..1_000, 3 => 0u64..400_000, 1 => 0u64..3_000_000],
            ),
            1..4,
        ),
    )
        .prop_map(|(dt, items)| Step::Charge(dt, items));
    prop::collection::vec(
        prop_oneof![
            8 => decide,
            3 => batch,
            3 => charge,
            1 => (0usize..4).prop_map(Step::Release)
        ],
        1..40,
    )
}

fn same(a: &Decision, b: &Decision) -> bool {
    a.allowed == b.allowed
        && a.limit == b.limit
        && a.remaining == b.remaining
        && a.retry_after == b.retry_after
        && a.reset_after == b.reset_after
        && a.wait == b.wait
        && a.lease.is_some() == b.lease.is_some()
}

/// The items of a request: `(limit index, cost, shadow)` each.
fn request<'a>(
    raw: &[(usize, u64, bool)],
    keys: &'a [String],
    limits: &'a [Limit],
) -> Vec<Item<'a>> {
    raw.iter()
        .map(|&(i, cost, shadow)| {
            let i = i % limits.len();
            Item {
                key: &keys[i],
                limit: &limits[i],
                cost,
                enforce: !shadow,
            }
        })
        .collect()
}

/// Compares one request's decisions (`want` the memory store's, `got` Redis's) and notes the
/// leases it was granted in `held` (limit index, memory lease, Redis lease, expiry).
fn compare(
    at: &str,
    (items, raw): (&[Item<'_>], &[(usize, u64, bool)]),
    want: &[Decision],
    got: &[Decision],
    limits: &[Limit],
    clock: &ManualClock,
    held: &mut Vec<(usize, u64, u64, u64)>,
) -> Result<(), TestCaseError> {
    for (j, (w, g)) in want.iter().zip(got).enumerate() {
        prop_assert!(
            same(w, g),
            "{at}, item {j} ({:?}, cost {}): rust {w:?} != lua {g:?}",
            items[j].limit,
            items[j].cost
        );
    }
    for (j, (w, g)) in want.iter().zip(got).enumerate() {
        if let (Some(a), Some(b)) = (w.lease, g.lease)
            && flowgate_core::store::admitted(items, want)
        {
            let i = raw[j].0 % limits.len();
            held.push((i, a, b, clock.now() + limits[i].window()));
        }
    }
    Ok(())
}

#[test]
fn lua_agrees_with_rust_transitions() {
    let server = RedisServer::start();
    let rt = runtime();
    let clock = ManualClock::new(0);
    let redis = rt.block_on(single(&server, test_options(&clock)));
    agree(&rt, &redis, &clock, 160);
}

/// On a cluster, multi-item requests usually span slots: decided per slot in parallel, with
/// refunds when another slot rejects. The decisions (and so the state left behind) must still be
/// the Rust ones.
#[test]
fn lua_agrees_with_rust_transitions_on_a_cluster() {
    let nodes = RedisCluster::start(3);
    let rt = runtime();
    let clock = ManualClock::new(0);
    let redis = rt.block_on(cluster(&nodes, test_options(&clock)));
    agree(&rt, &redis, &clock, 80);
}

fn agree(rt: &tokio::runtime::Runtime, redis: &RedisStore, clock: &ManualClock, cases: u32) {
    let strategy = prop::collection::vec(limit_case(), 1..4).prop_flat_map(|limits| {
        let n = limits.len();
        (Just(limits), schedule(n), 0u64..10_000_000)
    });
    let mut runner = runner(cases);
    let case_counter = std::sync::atomic::AtomicU64::new(0);
    let result = runner.run(&strategy, |(cases, steps, offset)| {
        let case_no = case_counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let limits: Vec<Limit> = cases.iter().filter_map(build).collect();
        if limits.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = (0..limits.len())
            .map(|i| format!("prop:{case_no}:{i}"))
            .collect();
        clock.set(start_of(&limits) + offset);
        let memory = MemoryStore::with_clock(clock.clone());
        // Leases granted and still held: (limit index, memory lease, redis lease, expiry).
        let mut held: Vec<(usize, u64, u64, u64)> = Vec::new();
        for (n, step) in steps.iter().enumerate() {
            match step {
                Step::Decide(dt, raw) => {
                    clock.advance(Duration::from_micros(*dt));
                    let items = request(raw, &keys, &limits);
                    let want = memory
                        .decide_now(&items)
                        .map_err(|e| TestCaseError::fail(format!("memory: {e}")))?;
                    let got = rt
                        .block_on(redis.decide(&items))
                        .map_err(|e| TestCaseError::fail(format!("redis: {e}")))?;
                    let at = format!("step {n}");
                    compare(&at, (&items, raw), &want, &got, &limits, clock, &mut held)?;
                }
                Step::Batch(dt, raw) => {
                    clock.advance(Duration::from_micros(*dt));
                    // Each request names a limit once (the Decide steps repeat keys).
                    let raw: Vec<Vec<(usize, u64, bool)>> = raw
                        .iter()
                        .map(|r| {
                            let mut seen = Vec::new();
                            r.iter()
                                .filter(|x| {
                                    let i = x.0 % limits.len();
                                    let new = !seen.contains(&i);
                                    seen.push(i);
                                    new
                                })
                                .copied()
                                .collect()
                        })
                        .collect();
                    let requests: Vec<Vec<Item<'_>>> =
                        raw.iter().map(|r| request(r, &keys, &limits)).collect();
                    let refs: Vec<&[Item<'_>]> = requests.iter().map(|r| &r[..]).collect();
                    let got = rt
                        .block_on(redis.decide_batch(&refs))
                        .map_err(|e| TestCaseError::fail(format!("redis batch: {e}")))?;
                    prop_assert_eq!(got.len(), requests.len());
                    for (q, (items, got)) in requests.iter().zip(&got).enumerate() {
                        let want = memory
                            .decide_now(items)
                            .map_err(|e| TestCaseError::fail(format!("memory: {e}")))?;
                        let at = format!("step {n}, request {q} of the batch");
                        compare(&at, (items, &raw[q]), &want, got, &limits, clock, &mut held)?;
                    }
                }
                Step::Charge(dt, raw) => {
                    clock.advance(Duration::from_micros(*dt));
                    charges_agree(
                        &format!("step {n}"),
                        rt,
                        redis,
                        &memory,
                        raw,
                        &keys,
                        &limits,
                    )?;
                }
                Step::Release(k) => {
                    if held.is_empty() {
                        continue;
                    }
                    let (i, a, b, expires) = held.remove(k % held.len());
                    let want = memory.release_now(&keys[i], &limits[i], a);
                    let got = rt
                        .block_on(redis.release(&keys[i], &limits[i], b))
                        .map_err(|e| TestCaseError::fail(format!("redis release: {e}")))?;
                    // Releasing an expired lease is not specified (the memory store answers
                    // whether it was still listed, which depends on when it swept): compare
                    // only live leases.
                    if clock.now() < expires {
                        prop_assert_eq!(want, got, "step {}: release", n);
                    }
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Charges `raw` (`(limit index, units, kind, ago)` each, as [`Step::Charge`]) on both stores: both refuse the report
/// (a limit that takes no charges), or both answer alike.
fn charges_agree(
    at: &str,
    rt: &tokio::runtime::Runtime,
    redis: &RedisStore,
    memory: &MemoryStore<ManualClock>,
    raw: &[(usize, u64, u8, u64)],
    keys: &[String],
    limits: &[Limit],
) -> Result<(), TestCaseError> {
    let now = memory.now();
    let items: Vec<ChargeItem<'_>> = raw
        .iter()
        .map(|&(i, n, kind, ago)| {
            let i = i % limits.len();
            ChargeItem {
                key: &keys[i],
                limit: &limits[i],
                amount: match kind {
                    0 => Amount::Charge(n),
                    1 => Amount::Refund(n),
                    _ => Amount::release(n, now.saturating_sub(ago)),
                },
            }
        })
        .collect();
    let want = memory.charge_now(&items);
    let got = rt.block_on(redis.charge(&items));
    match (want, got) {
        (Ok(want), Ok(got)) => {
            for (j, (w, g)) in want.iter().zip(&got).enumerate() {
                prop_assert!(
                    (w.applied, w.dropped, w.debt) == (g.applied, g.dropped, g.debt)
                        && same(&w.decision, &g.decision),
                    "{at}, charge {j} ({:?}, {:?}): rust {w:?} != lua {g:?}",
                    items[j].limit,
                    items[j].amount
                );
            }
        }
        (Err(_), Err(_)) => {}
        (w, g) => prop_assert!(false, "{at}: rust {w:?}, lua {g:?}"),
    }
    Ok(())
}

/// A server, a runtime, a clock, a Redis store on them and a memory store on the same clock.
fn batch_setup() -> (
    RedisServer,
    tokio::runtime::Runtime,
    ManualClock,
    RedisStore,
    MemoryStore<ManualClock>,
) {
    let server = RedisServer::start();
    let rt = runtime();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let redis = rt.block_on(single(&server, test_options(&clock)));
    let memory = MemoryStore::with_clock(clock.clone());
    (server, rt, clock, redis, memory)
}

fn limit(a: Algorithm, q: &str) -> Limit {
    Limit::new(a, q.parse::<Quota>().unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Decides `requests` in one batch on Redis and one after another on the memory store, asserts
/// that every item's decision agrees (`what` names the case in a failure), and answers the
/// decisions and how many requests were admitted in full.
fn batch_agrees(
    rt: &tokio::runtime::Runtime,
    redis: &RedisStore,
    memory: &MemoryStore<ManualClock>,
    requests: &[Vec<Item<'_>>],
    what: &str,
) -> (Vec<flowgate_core::Decisions>, usize) {
    let refs: Vec<&[Item<'_>]> = requests.iter().map(|r| &r[..]).collect();
    let got = rt
        .block_on(redis.decide_batch(&refs))
        .unwrap_or_else(|e| panic!("{what}: redis batch: {e}"));
    assert_eq!(got.len(), requests.len(), "{what}");
    let mut admitted = 0;
    for (q, (items, got)) in requests.iter().zip(&got).enumerate() {
        let want = memory
            .decide_now(items)
            .unwrap_or_else(|e| panic!("{what}: memory: {e}"));
        for (j, (w, g)) in want.iter().zip(got.iter()).enumerate() {
            assert!(
                same(w, g),
                "{what}, request {q}, item {j}: rust {w:?} != lua {g:?}"
            );
        }
        admitted += usize::from(got.iter().all(|d| d.allowed));
    }
    (got, admitted)
}

/// Requests of one batch that give one key different limits (a rule changed between them) are
/// decided as if one after another, each under its own limit: a call gives a key one limit, so
/// the client splits such a batch into calls.
#[test]
fn a_batch_giving_one_key_two_limits_decides_each_under_its_own() {
    let (_server, rt, _clock, redis, memory) = batch_setup();
    let (three, five) = (
        limit(Algorithm::FixedWindow, "3/s"),
        limit(Algorithm::FixedWindow, "5/s"),
    );
    let requests: Vec<Vec<Item<'_>>> = (0..8)
        .map(|i| {
            vec![Item {
                key: "two-limits",
                limit: if i % 2 == 0 { &three } else { &five },
                cost: 1,
                enforce: true,
            }]
        })
        .collect();
    let (_, admitted) = batch_agrees(&rt, &redis, &memory, &requests, "two limits");
    // 3/s admits the first 3 (0, 1, 2), 5/s then two more (3, 5).
    assert_eq!(admitted, 5);
}

/// In one call, a request admitted by a shared concurrency limit but rejected by another limit
/// leaves no lease behind, neither in the decisions of the call's later requests nor in the
/// state written (the script keeps a shared lease list as a table within the call).
#[test]
fn a_batch_request_rejected_by_another_limit_leaves_no_lease() {
    let (_server, rt, clock, redis, memory) = batch_setup();
    let (conc, once) = (
        limit(Algorithm::Concurrency, "10/s"),
        limit(Algorithm::FixedWindow, "1/s"),
    );
    let c = Item {
        key: "shared-leases",
        limit: &conc,
        cost: 1,
        enforce: true,
    };
    let x = Item {
        key: "once",
        limit: &once,
        cost: 1,
        enforce: true,
    };
    // The second [c, x] is rejected by x (1/s): its lease must not count.
    let requests: Vec<Vec<Item<'_>>> = vec![vec![c], vec![c, x], vec![c, x], vec![c], vec![c]];
    let (got, _) = batch_agrees(&rt, &redis, &memory, &requests, "no lease");
    assert!(!got[2][1].allowed, "x admitted twice in a second");
    // The state written holds 4 leases: 6 more fit, then none.
    clock.advance(std::time::Duration::from_millis(1));
    for more in 1..=7u64 {
        let want = memory
            .decide_now(&[c])
            .unwrap_or_else(|e| panic!("memory: {e}"));
        let got = rt
            .block_on(redis.decide(&[c]))
            .unwrap_or_else(|e| panic!("redis: {e}"));
        assert!(
            same(&want[0], &got[0]),
            "lease {more}: rust {want:?} != lua {got:?}"
        );
        assert_eq!(got[0].allowed, more <= 6, "lease {more}");
    }
}

/// A limit that every request of a call fits is decided in bulk (the script does not decide its
/// later items one by one, and writes its state once, from the call's total on it), yet a
/// request rejected by another limit still takes nothing from it: 6 requests of [hot, tight],
/// the tight limit (2/s, shared) rejecting the last 4, then a second batch and single requests
/// on the hot key alone, whose decisions show the state written. For every algorithm that has a
/// bulk path (all but concurrency), in each of its states: new (first batch), and with the window,
/// bucket or log in use (second batch, same instant and 30 ms later).
#[test]
fn a_limit_decided_in_bulk_gives_back_what_rejected_requests_took() {
    let (_server, rt, clock, redis, memory) = batch_setup();
    let tight = limit(Algorithm::FixedWindow, "2/s");
    // (a leaky bucket takes the token bucket's path, GCRA, but admits one unit per instant)
    for a in [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ] {
        let hot = limit(a, "1000/s");
        let key = format!("bulk:{a:?}");
        let tight_key = format!("bulk-tight:{a:?}");
        let h = Item {
            key: &key,
            limit: &hot,
            cost: 3,
            enforce: true,
        };
        let t = Item {
            key: &tight_key,
            limit: &tight,
            cost: 1,
            enforce: true,
        };
        let what = format!("{a:?}");
        let mixed: Vec<Vec<Item<'_>>> = (0..6).map(|_| vec![h, t]).collect();
        let (_, admitted) = batch_agrees(&rt, &redis, &memory, &mixed, &what);
        assert_eq!(admitted, 2, "{what}");
        let alone: Vec<Vec<Item<'_>>> = (0..3).map(|_| vec![h]).collect();
        batch_agrees(&rt, &redis, &memory, &alone, &what);
        clock.advance(std::time::Duration::from_millis(30));
        batch_agrees(&rt, &redis, &memory, &mixed, &what);
        let mut left = 0;
        for _ in 0..3 {
            let (got, _) = batch_agrees(&rt, &redis, &memory, &alone[..1], &what);
            left = got[0][0].remaining;
        }
        // Up to the limit exactly, then one unit more: the script admits by the state it wrote
        // (a count or total it got wrong shows here, as a disagreement with the Rust transition).
        for cost in [left, 1] {
            let r = vec![vec![Item { cost, ..h }]];
            let (got, _) = batch_agrees(&rt, &redis, &memory, &r, &what);
            assert_eq!(
                got[0][0].allowed,
                cost == left,
                "{what}: cost {cost} of {left} left"
            );
        }
    }
}

/// A call larger than one slice of the script's `unpack` (4,000 values): 4,100 requests of a
/// per-user and a global limit in one batch (8,200 items, 4,101 keys) are decided as the memory
/// store decides them one after another, and the global limit admits exactly its 3,000.
#[test]
fn a_batch_of_thousands_of_requests_decides_each_as_one_after_another() {
    let (_server, rt, _clock, redis, memory) = batch_setup();
    let (user, global) = (
        limit(Algorithm::FixedWindow, "1/s"),
        limit(Algorithm::TokenBucket, "3000/s"),
    );
    let keys: Vec<String> = (0..4_100).map(|u| format!("many:user:{u}")).collect();
    let requests: Vec<Vec<Item<'_>>> = keys
        .iter()
        .map(|k| {
            vec![
                Item {
                    key: k,
                    limit: &user,
                    cost: 1,
                    enforce: true,
                },
                Item {
                    key: "many:global",
                    limit: &global,
                    cost: 1,
                    enforce: true,
                },
            ]
        })
        .collect();
    let (_, admitted) = batch_agrees(&rt, &redis, &memory, &requests, "4,100 requests");
    assert_eq!(admitted, 3_000);
}

/// A call carries at most 255 distinct limits (an item names its limit in one byte); batches with
/// 255 (one call), 256 and 300 (two) decide as one after another, concurrency leases granted
/// (limit 1) and refused (limit 0) among them.
#[test]
fn batches_of_many_distinct_limits_decide_each_as_one_after_another() {
    let (_server, rt, _clock, redis, memory) = batch_setup();
    for distinct in [255usize, 256, 300] {
        let windows = distinct - 2;
        let mut limits: Vec<Limit> = (1..=windows)
            .map(|n| limit(Algorithm::FixedWindow, &format!("{n}/s")))
            .collect();
        limits.push(limit(Algorithm::Concurrency, "0/s"));
        limits.push(limit(Algorithm::Concurrency, "1/s"));
        let keys: Vec<String> = (0..distinct)
            .map(|n| format!("blocks:{distinct}:{n}"))
            .collect();
        // Each fixed window's key twice (a limit of 1 rejects the second), then each concurrency
        // key twice (a limit of 1 grants one lease).
        let order = (0..2 * windows).map(|i| i % windows).chain([
            windows,
            windows + 1,
            windows,
            windows + 1,
        ]);
        let requests: Vec<Vec<Item<'_>>> = order
            .map(|n| {
                vec![Item {
                    key: &keys[n],
                    limit: &limits[n],
                    cost: 1,
                    enforce: true,
                }]
            })
            .collect();
        let what = format!("{distinct} limits");
        let (_, admitted) = batch_agrees(&rt, &redis, &memory, &requests, &what);
        // Every window once, all but the limit of 1 twice, one lease.
        assert_eq!(admitted, 2 * windows - 1 + 1, "{distinct} limits");
    }
}
