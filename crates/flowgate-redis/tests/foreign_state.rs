//! A key holding a value no script writes (another writer, a corrupted value) counts as no state
//! on both sides (script and client), and never drives a script into a long loop: a ring whose
//! head is 1e300 once kept Redis busy in the sliding window's loops.

mod common;

use common::{bounded, live_options, single};
use flowgate_core::{Algorithm, Item, Limit, Quota, Store};
use flowgate_redis::keys::redis_key;
use flowgate_testkit::redis::RedisServer;

/// A value of the right length for `l` whose first double is `x`: the state's time (a sliding
/// window's head, after its counts; its total, the last double, is then 0, so that the head
/// alone is foreign).
fn value(l: &Limit, x: f64) -> Vec<u8> {
    match l.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => x.to_le_bytes().to_vec(),
        Algorithm::FixedWindow => {
            let mut v = x.to_le_bytes().to_vec();
            v.extend([1; 4]);
            v
        }
        Algorithm::SlidingWindow => {
            let mut v = vec![1; 4 * (l.buckets() as usize + 1)];
            v.extend(x.to_le_bytes());
            v.extend(0f64.to_le_bytes());
            v
        }
        a => panic!("{a:?} has no single-double state"),
    }
}

/// A sliding window's value `v` with its total (the last double) set to `x`.
fn with_total(mut v: Vec<u8>, x: f64) -> Vec<u8> {
    let at = v.len() - 8;
    v[at..].copy_from_slice(&x.to_le_bytes());
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_no_script_writes_count_as_no_state() {
    let server = RedisServer::start();
    bounded(60, async {
        let store = single(&server, live_options()).await;
        let q: Quota = "5/s".parse().unwrap_or_else(|e| panic!("{e}"));
        let mut n = 0;
        for a in Algorithm::ALL {
            let l = Limit::new(a, q).unwrap_or_else(|e| panic!("{e}"));
            let mut values: Vec<Vec<u8>> = vec![b"garbage of no length".to_vec(), Vec::new()];
            if !matches!(a, Algorithm::SlidingLog | Algorithm::Concurrency) {
                for x in [
                    1e300,
                    -5.0,
                    f64::NAN,
                    f64::INFINITY,
                    4_503_599_627_370_496.0,
                ] {
                    values.push(value(&l, x));
                    if a == Algorithm::SlidingWindow {
                        // A good head (bucket 5 of the epoch), a foreign total.
                        values.push(with_total(value(&l, 5.0), x));
                    }
                }
                if a == Algorithm::SlidingWindow {
                    values.push(with_total(value(&l, 5.0), 0.5));
                }
            }
            for v in values {
                n += 1;
                let key = format!("foreign:{n}");
                store
                    .query(redis::cmd("SET").arg(redis_key(&key, &l)).arg(&v))
                    .await
                    .unwrap_or_else(|e| panic!("set: {e}"));
                let d = store
                    .decide(&[Item {
                        key: &key,
                        limit: &l,
                        cost: 1,
                        enforce: true,
                    }])
                    .await
                    .unwrap_or_else(|e| panic!("{a:?} on {v:?}: {e}"));
                assert!(d[0].allowed, "{a:?} on {v:?}: {:?}", d[0]);
                // Decided as a fresh key: the limit minus this request (a leaky bucket's
                // burst is 1).
                let fresh = if a == Algorithm::LeakyBucket { 0 } else { 4 };
                assert_eq!(d[0].remaining, fresh, "{a:?} on {v:?}");
            }
        }
    })
    .await;
}
