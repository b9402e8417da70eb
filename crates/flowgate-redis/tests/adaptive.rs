//! Differential property test: the shared adaptive limits' Lua (`scripts/aimd.lua`, through
//! [`RedisAdaptive`] on a real redis-server) and the Rust transition it ports
//! ([`flowgate_core::adaptive::Aimd`]) give the same limit for every key after every batch of
//! random reports: latencies below, exactly at and above `max_latency`, failures, calls in
//! flight around half the limit, parameters of every shape (`max` under `min`, `initial` out of
//! bounds, backoffs with many digits), and a rule whose parameters change mid-way (a key moved
//! under the old ones starts again, as the library's per-process state does). After every batch
//! the script's answers and a read of every key ([`RedisAdaptive::limits`]) must both be the
//! Rust limits, and each key's stored state must be the Rust state exactly: the same double
//! for the limit (not only its floor) and the same `hold`. Batches big enough to take several
//! script calls keep each key's order.
//!
//! 200 cases by default; `PROPTEST_CASES=n` runs more.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{live_options, runner, runtime, single};
use flowgate_core::adaptive::{Aimd, AimdSpec};
use flowgate_redis::{ADAPTIVE_TTL, AdaptiveReport, RedisAdaptive};
use flowgate_testkit::redis::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn spec_case() -> impl Strategy<Value = AimdSpec> {
    (
        0u64..40,
        0u64..12,
        0u64..60,
        prop_oneof![
            Just(1.0),
            Just(250_000.0),
            Just(12_345.678_9),
            0.001f64..1e7
        ],
        prop_oneof![Just(0.9), Just(0.5), 0.01f64..0.999],
    )
        .prop_map(|(initial, min, max, max_latency, backoff)| AimdSpec {
            initial,
            min,
            max,
            max_latency,
            backoff,
        })
}

/// A report before its latency is known: `(key, latency as a share of max_latency, failed,
/// inflight)`. A share of exactly 1 is a latency equal to the bound (not a sign of overload).
type Raw = (usize, f64, bool, u64);

fn raw_report() -> impl Strategy<Value = Raw> {
    (
        0usize..4,
        prop_oneof![
            Just(1.0),
            Just(0.0),
            Just(0.999_999),
            Just(1.000_001),
            0.0f64..2.0
        ],
        prop::bool::weighted(0.15),
        prop_oneof![0u64..8, 0u64..80],
    )
}

/// A batch: the parameters it is sent under (0 mostly, 1 sometimes) and its reports.
fn batch() -> impl Strategy<Value = (usize, Vec<Raw>)> {
    (
        prop::sample::select(vec![0usize, 0, 0, 1]),
        prop_oneof![
            8 => prop::collection::vec(raw_report(), 0..40),
            1 => prop::collection::vec(raw_report(), 900..1_300),
        ],
    )
}

/// The exact state of `a` (its limit's bits, its hold), read from its `Debug` text (the
/// state's fields are private; `Debug` writes a double so that it reads back exactly).
fn rust_state(a: &Aimd) -> (u64, u64) {
    let text = format!("{a:?}");
    let field = |name: &str| -> String {
        let at = text
            .rfind(name)
            .unwrap_or_else(|| panic!("{name} in {text}"))
            + name.len();
        text[at..]
            .chars()
            .take_while(|c| !matches!(c, ',' | ' ' | '}'))
            .collect()
    };
    let limit: f64 = field(", limit: ").parse().unwrap();
    let hold: u64 = field(", hold: ").parse().unwrap();
    (limit.to_bits(), hold)
}

/// The state stored in a field: `<limit %.17g> <hold> <spec>`.
fn stored_state(v: &redis::Value) -> Option<(u64, u64)> {
    let redis::Value::BulkString(b) = v else {
        return None;
    };
    let text = std::str::from_utf8(b).ok()?;
    let mut parts = text.split(' ');
    let limit: f64 = parts.next()?.parse().ok()?;
    let hold: u64 = parts.next()?.parse().ok()?;
    Some((limit.to_bits(), hold))
}

#[test]
fn lua_moves_every_limit_as_the_rust_transition_does() {
    let server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(single(&server, live_options()));
    let redis = store.adaptive();
    let cases = AtomicU64::new(0);
    let strategy = (
        spec_case(),
        spec_case(),
        prop::collection::vec(batch(), 1..12),
    );
    let mut runner = runner(200);
    let result = runner.run(&strategy, |(first, second, batches)| {
        let rule = format!("r{}", cases.fetch_add(1, Ordering::Relaxed));
        let specs = [first, second];
        let keys = ["k0", "k1", "k2", "k3"];
        let mut model: HashMap<&str, Aimd> = HashMap::new();
        for (b, (which, raws)) in batches.iter().enumerate() {
            let spec = &specs[*which];
            let mut per_key: Vec<(&str, Vec<AdaptiveReport>)> = Vec::new();
            for &(k, share, failed, inflight) in raws {
                let r = AdaptiveReport {
                    rtt: spec.max_latency * share,
                    failed,
                    inflight,
                };
                match per_key.iter_mut().find(|(key, _)| *key == keys[k]) {
                    Some((_, rs)) => rs.push(r),
                    None => per_key.push((keys[k], vec![r])),
                }
            }
            let mut want = Vec::new();
            for (key, rs) in &per_key {
                let a = model.entry(key).or_insert_with(|| Aimd::new(spec.clone()));
                if a.spec() != spec {
                    *a = Aimd::new(spec.clone());
                }
                for r in rs {
                    a.report(r.rtt, r.failed, r.inflight);
                }
                want.push(Some(a.limit()));
            }
            let refs: Vec<(&str, &[AdaptiveReport])> =
                per_key.iter().map(|(k, rs)| (*k, rs.as_slice())).collect();
            let got = rt
                .block_on(redis.apply("diff", &rule, spec, &refs))
                .map_err(|e| TestCaseError::fail(format!("apply: {e}")))?;
            prop_assert_eq!(
                &got,
                &want,
                "batch {}: answers, keys {:?}",
                b,
                refs.iter().map(|r| r.0).collect::<Vec<_>>()
            );
            let read = rt
                .block_on(redis.limits("diff", &rule, spec, &keys))
                .map_err(|e| TestCaseError::fail(format!("read: {e}")))?;
            let expected: Vec<Option<u64>> = keys
                .iter()
                .map(|k| model.get(k).filter(|a| a.spec() == spec).map(Aimd::limit))
                .collect();
            prop_assert_eq!(read, expected, "batch {}: read", b);
            let hash = RedisAdaptive::hash_key("diff", &rule);
            for (key, a) in &model {
                if a.spec() != spec {
                    continue;
                }
                let stored = rt
                    .block_on(store.query(redis::cmd("HGET").arg(&hash).arg(*key)))
                    .map_err(|e| TestCaseError::fail(format!("HGET: {e}")))?;
                prop_assert_eq!(
                    stored_state(&stored),
                    Some(rust_state(a)),
                    "batch {}: key {} stored as {:?}",
                    b,
                    key,
                    stored
                );
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn a_full_hash_refuses_new_keys_and_every_write_sets_the_expiry() {
    let server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(single(&server, live_options()));
    let redis = store.adaptive().max_keys(2);
    let spec = AimdSpec {
        initial: 10,
        ..AimdSpec::new(2, 50, 1_000.0)
    };
    let slow = [AdaptiveReport {
        rtt: 5_000.0,
        failed: false,
        inflight: 0,
    }];
    let got = rt
        .block_on(redis.apply(
            "d",
            "r",
            &spec,
            &[("a", &slow[..]), ("b", &slow[..]), ("c", &slow[..])],
        ))
        .unwrap();
    assert_eq!(
        got,
        [Some(9), Some(9), None],
        "the third key is past the cap"
    );
    assert_eq!(redis.refused(), 1);
    let got = rt
        .block_on(redis.apply("d", "r", &spec, &[("a", &slow[..]), ("c", &slow[..])]))
        .unwrap();
    assert_eq!(got, [Some(8), None], "a key in the hash still moves");
    assert_eq!(redis.refused(), 2);
    let key = RedisAdaptive::hash_key("d", "r");
    let ttl = rt
        .block_on(store.query(redis::cmd("TTL").arg(&key)))
        .unwrap();
    let ttl = match ttl {
        redis::Value::Int(t) => t,
        other => panic!("TTL: {other:?}"),
    };
    let full = ADAPTIVE_TTL.as_secs() as i64;
    assert!((full - 5..=full).contains(&ttl), "TTL {ttl}");
    let read = rt
        .block_on(redis.limits("d", "r", &spec, &["a", "b", "c"]))
        .unwrap();
    assert_eq!(read, [Some(8), Some(9), None]);
}

#[test]
fn an_unreachable_redis_fails_within_the_deadline() {
    let mut server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(single(&server, live_options()));
    let redis = store
        .adaptive()
        .deadline(std::time::Duration::from_millis(300));
    server.stop();
    let spec = AimdSpec::new(1, 10, 1.0);
    let r = [AdaptiveReport {
        rtt: 1.0,
        failed: true,
        inflight: 0,
    }];
    rt.block_on(async {
        let started = tokio::time::Instant::now();
        assert!(
            redis
                .apply("d", "r", &spec, &[("a", &r[..])])
                .await
                .is_err()
        );
        assert!(redis.limits("d", "r", &spec, &["a"]).await.is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    });
}
