//! Expiries on Redis's own clock (no clock override: the scripts then write absolute expiries,
//! PXAT): every written key expires when its state is empty again, never before;
//! a rejected request writes nothing.

mod common;

use std::time::Duration;

use common::{TEST_DEADLINE, bounded, live_options, single};
use flowgate_core::{Algorithm, Item, Limit, Quota, Store};
use flowgate_redis::keys::redis_key;
use flowgate_redis::{RedisOptions, RedisStore};
use flowgate_testkit::redis::RedisServer;

const HOUR_MS: i64 = 3_600_000;

async fn pttl(store: &RedisStore, key: &str) -> i64 {
    let v = store
        .query(redis::cmd("PTTL").arg(key))
        .await
        .unwrap_or_else(|e| panic!("pttl: {e}"));
    redis::from_redis_value(v).unwrap_or_else(|e| panic!("pttl: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_keys_expire_when_idle_and_rejections_write_nothing() {
    let server = RedisServer::start();
    bounded(60, async {
        for coalesce in [false, true] {
            let store = single(&server, live_options().coalesce(coalesce)).await;
            let q = Quota::new(10, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
            let limits: Vec<Limit> = Algorithm::ALL
                .iter()
                .map(|&a| Limit::new(a, q).unwrap_or_else(|e| panic!("{e}")))
                .collect();
            // One request per algorithm, then all of them in one request.
            for (n, l) in limits.iter().enumerate() {
                let key = format!("exp:{coalesce}:{n}");
                let d = store
                    .decide(&[Item {
                        key: &key,
                        limit: l,
                        cost: 1,
                        enforce: true,
                    }])
                    .await
                    .unwrap_or_else(|e| panic!("decide: {e}"));
                assert!(d[0].allowed);
                let t = pttl(&store, &redis_key(&key, l)).await;
                // GCRA: TAT = now + T (360 s); the others idle one window (1 h) after now, the
                // fixed window at its end (at most 1 h), the sliding window up to one bucket
                // later.
                let (lo, hi) = match l.algorithm() {
                    Algorithm::TokenBucket | Algorithm::LeakyBucket => (358_000, 362_000),
                    Algorithm::FixedWindow => (1, HOUR_MS + 2_000),
                    Algorithm::SlidingWindow => (HOUR_MS - 2_000, HOUR_MS + 400_000),
                    _ => (HOUR_MS - 2_000, HOUR_MS + 2_000),
                };
                assert!(
                    lo <= t && t <= hi,
                    "{:?}: pttl {t} not in {lo}..={hi}",
                    l.algorithm()
                );
            }
            let keys: Vec<String> = (0..limits.len())
                .map(|n| format!("exp:{coalesce}:multi:{n}"))
                .collect();
            let items: Vec<Item<'_>> = limits
                .iter()
                .zip(&keys)
                .map(|(l, k)| Item {
                    key: k,
                    limit: l,
                    cost: 1,
                    enforce: true,
                })
                .collect();
            let d = store
                .decide(&items)
                .await
                .unwrap_or_else(|e| panic!("decide: {e}"));
            assert!(d.iter().all(|d| d.allowed));
            for (l, k) in limits.iter().zip(&keys) {
                let t = pttl(&store, &redis_key(k, l)).await;
                assert!(t > 0, "{:?}: pttl {t}", l.algorithm());
            }
            // A request rejected by its last item writes nothing for the others.
            let one = Quota::new(1, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
            let zero = Limit::new(Algorithm::FixedWindow, one).unwrap_or_else(|e| panic!("{e}"));
            let full = format!("exp:{coalesce}:full");
            let d = store
                .decide(&[Item {
                    key: &full,
                    limit: &zero,
                    cost: 1,
                    enforce: true,
                }])
                .await
                .unwrap_or_else(|e| panic!("decide: {e}"));
            assert!(d[0].allowed);
            let fresh: Vec<String> = (0..limits.len())
                .map(|n| format!("exp:{coalesce}:rejected:{n}"))
                .collect();
            let mut items: Vec<Item<'_>> = limits
                .iter()
                .zip(&fresh)
                .map(|(l, k)| Item {
                    key: k,
                    limit: l,
                    cost: 1,
                    enforce: true,
                })
                .collect();
            items.push(Item {
                key: &full,
                limit: &zero,
                cost: 1,
                enforce: true,
            });
            let d = store
                .decide(&items)
                .await
                .unwrap_or_else(|e| panic!("decide: {e}"));
            assert!(!d.last().is_some_and(|d| d.allowed));
            for (l, k) in limits.iter().zip(&fresh) {
                let t = pttl(&store, &redis_key(k, l)).await;
                assert_eq!(
                    t,
                    -2,
                    "{:?}: a rejected request wrote its key",
                    l.algorithm()
                );
            }
        }
    })
    .await;
}

/// The scripts' expiry roundings are exact ceilings in Redis's Lua, up to 2^53: to whole ms
/// (`v = us + 999; (v - v % 1000) / 1000`, and with `math.fmod`) and to whole seconds in ms
/// (`v = us + 999999; (v - v % 1000000) / 1000`, and with `math.fmod`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_rounding_is_an_exact_ceiling() {
    let server = RedisServer::start();
    bounded(30, async {
        let store = single(&server, RedisOptions::default().deadline(TEST_DEADLINE)).await;
        let mut values: Vec<u64> = (0..2_100).collect();
        let mut p = 1u64;
        while p < (1 << 53) / 10 {
            p *= 10;
            for d in [0, 1, 999, 1_000, 1_001, 999_999, 1_000_000, 1_000_001] {
                values.extend([p - d.min(p), p + d]);
            }
        }
        // The largest: the second rounding adds 999,999 and stays below 2^53.
        values.extend([
            (1 << 53) - 1_000_000,
            (1 << 53) - 1_000_001,
            1_700_000_000_123_456,
            1_700_000_000_000_000,
            1_700_000_000_000_001,
        ]);
        let script = "local fmod, out = math.fmod, {} \
            for i, a in ipairs(ARGV) do local v, w = tonumber(a) + 999, tonumber(a) + 999999 \
            out[i] = string.format('%d %d %d %d', (v - v % 1000) / 1000, \
            (v - fmod(v, 1000)) / 1000, (w - w % 1000000) / 1000, (w - fmod(w, 1000000)) / 1000) \
            end return out";
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script).arg(0);
        for v in &values {
            cmd.arg(v.to_string());
        }
        let got: Vec<String> = redis::from_redis_value(
            store
                .query(&cmd)
                .await
                .unwrap_or_else(|e| panic!("eval: {e}")),
        )
        .unwrap_or_else(|e| panic!("reply: {e}"));
        assert_eq!(got.len(), values.len());
        for (v, g) in values.iter().zip(&got) {
            let g: Vec<u64> = g
                .split(' ')
                .map(|x| x.parse().unwrap_or_else(|e| panic!("{g}: {e}")))
                .collect();
            let (ms, sec) = (v.div_ceil(1_000), v.div_ceil(1_000_000) * 1_000);
            assert_eq!(g, [ms, ms, sec, sec], "{v} us");
        }
    })
    .await;
}

/// A key's state (`None` if it has none) and its expiry (ms since the epoch, PEXPIRETIME), read
/// in one atomic call.
async fn state_and_expiry(store: &RedisStore, key: &str) -> (Option<Vec<u8>>, i64) {
    let mut c = redis::cmd("EVAL");
    c.arg("return { redis.call('GET', KEYS[1]), redis.call('PEXPIRETIME', KEYS[1]) }")
        .arg(1)
        .arg(key);
    redis::from_redis_value(store.query(&c).await.unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("reply: {e}"))
}

/// When a key holding state `v` must expire (ms since the epoch): the next whole second at or
/// after the instant the state is empty again.
fn expires_at(l: &Limit, v: &[u8]) -> i64 {
    i64::try_from(empty_at(l, v).div_ceil(1_000_000) * 1_000).unwrap_or(i64::MAX)
}

/// The instant (us) a state is empty again, from the state as the scripts store it (binary, see
/// `src/state.rs`).
fn empty_at(l: &Limit, v: &[u8]) -> u64 {
    let double = |b: &[u8]| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        f64::from_le_bytes(a) as u64
    };
    match l.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::FixedWindow => double(v),
        // The head (the first of the last 16 bytes: head, total).
        Algorithm::SlidingWindow => {
            (double(&v[v.len() - 16..]) + 1) * l.bucket_width() + l.window() - 1
        }
        // The newest entry (the last 12 bytes before the 8-byte trailer: time, cost) leaves the
        // window.
        Algorithm::SlidingLog => double(&v[v.len() - 20..]) + l.window(),
        // The last lease (20 bytes: expiry, id, cost; in order of expiry) expires.
        Algorithm::Concurrency => double(&v[v.len() - 20..]),
    }
}

/// Every write of a state (by a call of one request or a coalesced one, by a request naming a key
/// twice) leaves its key expiring at the next whole second of Redis's clock at or after the
/// instant the state is empty again: the invariant that lets the script keep a key's expiry
/// (KEEPTTL, SETRANGE) when it would not move.
/// Checked with PEXPIRETIME (Redis 7) while four tasks per store hit a few keys for 2.5 s, so
/// that expiries both stay and move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn states_expire_at_the_next_whole_second_of_their_empty_instant() {
    let server = RedisServer::start();
    bounded(60, async {
        let limit = |a, q: &str| {
            Limit::new(a, q.parse::<Quota>().unwrap_or_else(|e| panic!("{e}")))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let limits = std::sync::Arc::new(vec![
            limit(Algorithm::TokenBucket, "50/s"),
            limit(Algorithm::FixedWindow, "40/300ms"),
            limit(Algorithm::SlidingWindow, "60/700ms"),
            limit(Algorithm::SlidingLog, "30/3ms"),
            limit(Algorithm::Concurrency, "5/300ms"),
        ]);
        let mut tasks = Vec::new();
        for coalesce in [false, true] {
            let store =
                std::sync::Arc::new(single(&server, live_options().coalesce(coalesce)).await);
            for t in 0..4u64 {
                let (store, limits) = (store.clone(), limits.clone());
                tasks.push(tokio::spawn(async move {
                    let start = tokio::time::Instant::now();
                    let mut i = t;
                    let mut admitted = 0u64;
                    while start.elapsed() < Duration::from_millis(2_500) {
                        i += 1;
                        let l = &limits[(i % 5) as usize];
                        let key = format!("sec:{}", i % 4);
                        let item = Item {
                            key: &key,
                            limit: l,
                            cost: 1,
                            enforce: true,
                        };
                        // Every 7th request names its key twice.
                        let d = if i % 7 == 0 {
                            store.decide(&[item, item]).await
                        } else {
                            store.decide(&[item]).await
                        }
                        .unwrap_or_else(|e| panic!("decide: {e}"));
                        admitted += u64::from(d[0].allowed);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    admitted
                }));
            }
        }
        let checker = single(&server, RedisOptions::default().deadline(TEST_DEADLINE)).await;
        let mut checked = 0;
        let start = tokio::time::Instant::now();
        while start.elapsed() < Duration::from_millis(2_600) {
            for l in limits.iter() {
                for k in 0..4 {
                    let key = redis_key(&format!("sec:{k}"), l);
                    // State and expiry in one atomic read.
                    let (Some(v), at) = state_and_expiry(&checker, &key).await else {
                        continue;
                    };
                    let want = expires_at(l, &v);
                    assert_eq!(at, want, "{key} = {v:?}: expires at {at} ms, not {want}");
                    checked += 1;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap_or_else(|e| panic!("task: {e}"));
        }
        assert!(checked > 100, "only {checked} keys checked");
        assert!(admitted > 100, "only {admitted} admitted");
    })
    .await;
}

/// A sliding log that an admission extends in place (the new entry and the trailer written at its
/// end, `SETRANGE`) still moves its expiry when the newest entry's whole second moves. Four
/// admissions 600 ms apart under 100/s: the first makes the log, the other three find a live
/// entry, few dead ones and the log far from its limit, so each is written in place; they span
/// more than a second, so at least one of them moves the expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_written_in_place_moves_its_expiry() {
    let server = RedisServer::start();
    bounded(60, async {
        let store = single(&server, live_options()).await;
        let l = Limit::new(
            Algorithm::SlidingLog,
            "100/s".parse::<Quota>().unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let key = redis_key("in-place", &l);
        let mut expiries = Vec::new();
        for i in 0..4 {
            if i > 0 {
                // 600 ms apart on purpose: the entry before stays live (its window is 1 s, a
                // 400 ms margin for the calls in between), and the four span 1.8 s, over a
                // whole second. The entries' times and the expiry are Redis's own.
                tokio::time::sleep(Duration::from_millis(600)).await;
            }
            let d = store
                .decide(&[Item {
                    key: "in-place",
                    limit: &l,
                    cost: 1,
                    enforce: true,
                }])
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(d[0].allowed);
            let (Some(v), at) = state_and_expiry(&store, &key).await else {
                panic!("admission {i}: no state");
            };
            // Every entry but the first is written while the one before is live (600 ms ago).
            assert_eq!(
                v.len(),
                12 * (i + 1) + 8,
                "admission {i}: not written in place"
            );
            let want = expires_at(&l, &v);
            assert_eq!(at, want, "admission {i}: expires at {at} ms, not {want}");
            expiries.push(at);
        }
        // (the test's premise: an expiry moved while the log was written in place)
        assert!(
            expiries[1..].windows(2).any(|w| w[0] != w[1]),
            "{expiries:?}"
        );
    })
    .await;
}

/// A hot key (several requests of one call on a token bucket or a fixed window, the key written
/// once, after the call) expires at the next whole second of the instant its state is empty,
/// whether that second moved or not. Batches of 5 requests 300 ms apart for 2.1 s: the
/// bucket (10/s, burst 20) takes 500 ms of its TAT per batch and gives back 300, so its TAT runs
/// 0.5 to 1.9 s ahead and the key is still there when the next batch moves its expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_shared_by_a_call_moves_its_expiry() {
    let server = RedisServer::start();
    bounded(60, async {
        let store = single(&server, live_options()).await;
        for (a, q, burst) in [
            (Algorithm::TokenBucket, "10/s", 20),
            (Algorithm::FixedWindow, "1000/300ms", 1000),
        ] {
            let l = Limit::builder(a, q.parse::<Quota>().unwrap_or_else(|e| panic!("{e}")))
                .burst(burst)
                .build()
                .unwrap_or_else(|e| panic!("{e}"));
            let item = Item {
                key: "bulk",
                limit: &l,
                cost: 1,
                enforce: true,
            };
            let requests = [[item]; 5];
            let refs: Vec<&[Item<'_>]> = requests.iter().map(|r| &r[..]).collect();
            let key = redis_key("bulk", &l);
            let mut expiries = Vec::new();
            for i in 0..8 {
                if i > 0 {
                    // 300 ms apart on purpose: the bucket's TAT stays 0.5 s or more ahead, so
                    // its key outlives each gap by at least 200 ms; the states and expiries
                    // compared are Redis's own.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                let got = store
                    .decide_batch(&refs)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                assert!(got.iter().all(|d| d[0].allowed), "{a:?}, batch {i}");
                let (Some(v), at) = state_and_expiry(&store, &key).await else {
                    panic!("admission {i}: no state");
                };
                let want = expires_at(&l, &v);
                assert_eq!(at, want, "{a:?}, batch {i}: expires at {at} ms, not {want}");
                expiries.push(at);
            }
            // (the test's premise: the expiry both moved and stayed between batches)
            assert!(
                expiries.windows(2).any(|w| w[0] != w[1]),
                "{a:?}: {expiries:?}"
            );
            assert!(
                expiries.windows(2).any(|w| w[0] == w[1]),
                "{a:?}: {expiries:?}"
            );
        }
    })
    .await;
}
