//! Exactness under concurrency, on Redis's own clock (no clock override): two store instances
//! (separate connections, as two app servers), 64 concurrent tasks, one key: admitted == limit
//! exactly, for every exact algorithm; multi-rule requests charge no rule when rejected. Then
//! the same with the two instances' own clocks 40 s apart (blocked-keys cache on, which is the
//! only thing that reads them): still exact, because Redis's `TIME` decides.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{TEST_DEADLINE, bounded};
use flowgate_core::{Algorithm, Clock, Item, Limit, Micros, Quota, Store, SystemClock};
use flowgate_redis::{RedisOptions, RedisStore};
use flowgate_testkit::redis::{RedisCluster, RedisServer};

const TASKS: usize = 64;
const PER_TASK: usize = 3;

/// A limit of `n` per hour: nothing refills or rolls over while a test runs (a fixed window
/// boundary falls within a test with probability test time / 1 h).
fn limit(a: Algorithm, n: u64) -> Limit {
    let q = Quota::new(n, Duration::from_secs(3600)).unwrap_or_else(|e| panic!("{e}"));
    Limit::builder(a, q)
        .burst(n)
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// An app server's clock that is `offset` ahead of (or behind) the others.
struct Skewed(SystemClock, i64);

impl Clock for Skewed {
    fn now(&self) -> Micros {
        self.0.now().saturating_add_signed(self.1)
    }
}

fn options() -> RedisOptions {
    RedisOptions::default().deadline(TEST_DEADLINE)
}

enum Target<'a> {
    Single(&'a RedisServer),
    Cluster(&'a RedisCluster),
}

async fn stores(target: &Target<'_>, opts: [RedisOptions; 2]) -> [Arc<RedisStore>; 2] {
    let [a, b] = opts;
    let connect = async |o: RedisOptions| {
        match target {
            Target::Single(s) => RedisStore::connect_with(&s.url(), o).await,
            Target::Cluster(c) => RedisStore::connect_cluster_with(&c.urls(), o).await,
        }
        .map(Arc::new)
        .unwrap_or_else(|e| panic!("connect: {e}"))
    };
    [connect(a).await, connect(b).await]
}

/// 64 tasks over the two stores, each deciding `PER_TASK` requests of `items(i)`; answers how
/// many requests were admitted.
async fn hammer(stores: &[Arc<RedisStore>; 2], items: Arc<Vec<Vec<(String, Limit)>>>) -> u64 {
    let admitted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let store = stores[t % 2].clone();
        let items = items.clone();
        let admitted = admitted.clone();
        tasks.push(tokio::spawn(async move {
            for r in 0..PER_TASK {
                let req = &items[(t * PER_TASK + r) % items.len()];
                let batch: Vec<Item<'_>> = req
                    .iter()
                    .map(|(k, l)| Item {
                        key: k,
                        limit: l,
                        cost: 1,
                        enforce: true,
                    })
                    .collect();
                let d = store
                    .decide(&batch)
                    .await
                    .unwrap_or_else(|e| panic!("decide: {e}"));
                if flowgate_core::store::admitted(&batch, &d) {
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap_or_else(|e| panic!("task: {e}"));
    }
    admitted.load(Ordering::Relaxed)
}

async fn remaining(store: &RedisStore, key: &str, limit: &Limit) -> u64 {
    let d = store
        .decide(&[Item {
            key,
            limit,
            cost: 0,
            enforce: true,
        }])
        .await
        .unwrap_or_else(|e| panic!("peek: {e}"));
    d[0].remaining
}

async fn exact_one_key(target: Target<'_>, opts: [RedisOptions; 2], tag: &str) {
    let stores = stores(&target, opts).await;
    for a in Algorithm::ALL {
        let n = 50;
        let key = format!("exact:{tag}:{a}");
        let l = limit(a, n);
        let items = Arc::new(vec![vec![(key.clone(), l.clone())]]);
        let got = hammer(&stores, items).await;
        assert_eq!(
            got,
            n,
            "{tag}: {a} admitted {got} of {} for a limit of {n}",
            TASKS * PER_TASK
        );
        assert_eq!(remaining(&stores[0], &key, &l).await, 0, "{tag}: {a}");
    }
}

async fn multi_rule(target: Target<'_>, tag: &str) {
    let stores = stores(&target, [options(), options()]).await;
    let a = limit(Algorithm::SlidingLog, 20);
    let b = limit(Algorithm::FixedWindow, 1000);
    let c = limit(Algorithm::TokenBucket, 40);
    let w = limit(Algorithm::SlidingWindow, 1000);
    let k = |s: &str| format!("multi:{tag}:{s}");
    // Requests alternate between [a, b, w] and [c, b, w]; b and w are shared, a and c reject
    // most requests, and b and w must only count the admitted ones.
    let items = Arc::new(vec![
        vec![
            (k("a"), a.clone()),
            (k("b"), b.clone()),
            (k("w"), w.clone()),
        ],
        vec![
            (k("c"), c.clone()),
            (k("b"), b.clone()),
            (k("w"), w.clone()),
        ],
    ]);
    let got = hammer(&stores, items).await;
    assert_eq!(got, 60, "{tag}: 20 via a plus 40 via c");
    assert_eq!(remaining(&stores[1], &k("a"), &a).await, 0, "{tag}");
    assert_eq!(remaining(&stores[1], &k("c"), &c).await, 0, "{tag}");
    assert_eq!(
        remaining(&stores[0], &k("b"), &b).await,
        940,
        "{tag}: b charged only when admitted"
    );
    assert_eq!(
        remaining(&stores[0], &k("w"), &w).await,
        940,
        "{tag}: w charged only when admitted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_on_a_single_server() {
    let server = RedisServer::start();
    bounded(120, async {
        exact_one_key(Target::Single(&server), [options(), options()], "single").await;
        multi_rule(Target::Single(&server), "single").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    bounded(120, async {
        exact_one_key(Target::Cluster(&cluster), [options(), options()], "cluster").await;
        multi_rule(Target::Cluster(&cluster), "cluster").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_with_app_clocks_40_seconds_apart() {
    let server = RedisServer::start();
    let cluster = RedisCluster::start(3);
    let skewed = |offset| options().local_clock(Skewed(SystemClock::new(), offset));
    bounded(120, async {
        exact_one_key(
            Target::Single(&server),
            [skewed(-20_000_000), skewed(20_000_000)],
            "skew-single",
        )
        .await;
        exact_one_key(
            Target::Cluster(&cluster),
            [skewed(-20_000_000), skewed(20_000_000)],
            "skew-cluster",
        )
        .await;
    })
    .await;
}
