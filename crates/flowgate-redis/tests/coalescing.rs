//! Coalescing on a Redis Cluster: requests of one slot that are in flight at the same moment
//! share script calls (each slot has its own lane), and the decisions stay exact.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TEST_DEADLINE, bounded, cluster};
use flowgate_core::{Algorithm, Item, Limit, Quota, Store};
use flowgate_redis::RedisOptions;
use flowgate_redis::keys::{redis_key, slot};
use flowgate_testkit::redis::RedisCluster;

const TASKS: usize = 64;
const PER_TASK: usize = 4;
const LIMIT: u64 = 10;

/// `LIMIT` per hour: nothing refills while the test runs.
fn limit(a: Algorithm) -> Limit {
    let q = Quota::new(LIMIT, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
    Limit::builder(a, q)
        .burst(LIMIT)
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_keys_on_a_cluster_share_script_calls_per_slot_and_stay_exact() {
    let nodes = RedisCluster::start(3);
    bounded(120, async {
        for a in [Algorithm::SlidingLog, Algorithm::TokenBucket] {
            let store = Arc::new(
                cluster(
                    &nodes,
                    RedisOptions::default()
                        .deadline(TEST_DEADLINE)
                        .blocked_capacity(0),
                )
                .await,
            );
            let l = Arc::new(limit(a));
            // Eight hot keys in eight different slots (so on several nodes).
            let keys: Arc<Vec<String>> =
                Arc::new((0..8).map(|k| format!("hot-{a:?}-{k}")).collect());
            let mut slots: Vec<u16> = keys
                .iter()
                .map(|k| slot(redis_key(k, &l).as_bytes()))
                .collect();
            slots.sort_unstable();
            slots.dedup();
            assert_eq!(slots.len(), keys.len(), "the test's keys share a slot");
            let mut tasks = Vec::new();
            for t in 0..TASKS {
                let (store, l, keys) = (store.clone(), l.clone(), keys.clone());
                tasks.push(tokio::spawn(async move {
                    let mut admitted = vec![0u64; keys.len()];
                    for r in 0..PER_TASK {
                        let k = (t * PER_TASK + r) % keys.len();
                        let d = store
                            .decide(&[Item {
                                key: &keys[k],
                                limit: &l,
                                cost: 1,
                                enforce: true,
                            }])
                            .await
                            .unwrap_or_else(|e| panic!("decide: {e}"));
                        admitted[k] += u64::from(d[0].allowed);
                    }
                    admitted
                }));
            }
            let mut admitted = vec![0u64; keys.len()];
            for t in tasks {
                let a = t.await.unwrap_or_else(|e| panic!("task: {e}"));
                for (total, n) in admitted.iter_mut().zip(a) {
                    *total += n;
                }
            }
            // Each key was asked TASKS * PER_TASK / 8 = 32 times: exactly LIMIT admitted.
            assert_eq!(admitted, vec![LIMIT; keys.len()], "{a:?}: admitted per key");
            let st = store.stats();
            assert_eq!(st.decisions, (TASKS * PER_TASK) as u64);
            assert_eq!(st.errors + st.timeouts, 0, "{a:?}: {st:?}");
            // 64 requests in flight over 8 keys, 2 calls in flight per slot: calls carry several.
            assert!(
                st.script_calls < st.decisions,
                "{a:?}: no request shared a script call: {st:?}"
            );
        }
    })
    .await;
}
