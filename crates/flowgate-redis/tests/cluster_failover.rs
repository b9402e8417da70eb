//! A Redis Cluster primary killed under load (SIGKILL): the store follows its replica's
//! promotion (the killed shard's decisions come back, exact, within a bounded window), the other
//! shards keep deciding meanwhile (a third of the slots failing is not "Redis down"), and the
//! connection's topology records the new primary and the connection made again.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::bounded;
use flowgate_core::{Algorithm, Item, Limit, Quota, Store, StoreError};
use flowgate_redis::keys::redis_key;
use flowgate_redis::{RedisOptions, RedisStore};
use flowgate_testkit::cluster::{NODE_TIMEOUT, ReplicatedCluster};
use flowgate_testkit::redis::raw_command;
use parking_lot::Mutex;
use tokio::time::Instant;

fn limit(quota: &str) -> Limit {
    Limit::new(
        Algorithm::FixedWindow,
        quota.parse::<Quota>().unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn decide(store: &RedisStore, key: &str, limit: &Limit) -> Result<bool, StoreError> {
    store
        .decide(&[Item {
            key,
            limit,
            cost: 1,
            enforce: true,
        }])
        .await
        .map(|d| d[0].allowed)
}

/// A key whose Redis key under `limit` is in `shard`'s slots.
fn key_in(cluster: &ReplicatedCluster, shard: usize, limit: &Limit) -> String {
    (0..1000)
        .map(|i| format!("k{i}"))
        .find(|k| cluster.shard_of(&redis_key(k, limit)) == shard)
        .unwrap_or_else(|| panic!("no key of shard {shard}"))
}

/// Outcomes seen by the load: (ms since the start, key's shard, ok).
type Seen = Arc<Mutex<Vec<(u64, usize, bool)>>>;

/// Decides on `key` (of `shard`) every 5 ms until `stop`, each decision within its deadline.
fn load(
    store: &RedisStore,
    (shard, key): (usize, &str),
    limit: &Limit,
    start: Instant,
    (stop, seen): (&Arc<AtomicBool>, &Seen),
) -> tokio::task::JoinHandle<()> {
    let (store, key, limit) = (store.clone(), key.to_owned(), limit.clone());
    let (stop, seen) = (Arc::clone(stop), Arc::clone(seen));
    let deadline = DEADLINE;
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            let ok = decide(&store, &key, &limit).await.is_ok();
            let took = t.elapsed();
            // (a wide margin for a busy machine: the point is no wait of seconds)
            assert!(
                took < deadline + Duration::from_millis(750),
                "a decision waited {took:?}, past its deadline {deadline:?}"
            );
            seen.lock().push((ms(start), shard, ok));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

const DEADLINE: Duration = Duration::from_millis(250);

fn ms(start: Instant) -> u64 {
    start.elapsed().as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_followed_to_its_promoted_replica() {
    bounded(90, async {
        let mut cluster = ReplicatedCluster::start(3);
        let options = RedisOptions::default()
            .deadline(DEADLINE)
            .blocked_capacity(0)
            .probe_every(Duration::from_millis(50));
        let store = RedisStore::connect_cluster_with(&cluster.urls(), options)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let big = limit("1000000/1m");
        let keys: Vec<String> = (0..3).map(|s| key_in(&cluster, s, &big)).collect();
        for k in &keys {
            assert_eq!(decide(&store, k, &big).await, Ok(true));
        }
        let before = store.topology();
        assert_eq!(before.primaries.len(), 3, "{before:?}");

        let stop = Arc::new(AtomicBool::new(false));
        let seen: Seen = Arc::default();
        let start = Instant::now();
        let loads: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(s, k)| load(&store, (s, k), &big, start, (&stop, &seen)))
            .collect();
        tokio::time::sleep(Duration::from_millis(200)).await;

        let killed_at = ms(start);
        let killed = cluster.kill_primary(0);
        let promoted_at = tokio::task::block_in_place(|| {
            cluster.wait_promoted(0).unwrap_or_else(|e| panic!("{e}"));
            ms(start)
        });
        // The killed shard's decisions come back soon after the promotion.
        let back = Instant::now();
        while decide(&store, &keys[0], &big).await.is_err() {
            assert!(
                back.elapsed() < Duration::from_secs(10),
                "the killed shard's decisions did not come back within 10 s of the promotion"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let back_at = ms(start);
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        for l in loads {
            l.await.unwrap_or_else(|e| panic!("load: {e}"));
        }
        let seen = seen.lock().clone();
        let failed = |shard: usize| -> Vec<u64> {
            seen.iter()
                .filter(|(_, s, ok)| *s == shard && !ok)
                .map(|(t, _, _)| *t)
                .collect()
        };
        eprintln!(
            "killed at {killed_at} ms, promoted at {promoted_at} ms, the killed shard back at \
             {back_at} ms; failures: shard 0 {:?}..{:?}, shard 1 {}, shard 2 {}",
            failed(0).first(),
            failed(0).last(),
            failed(1).len(),
            failed(2).len(),
        );
        // Decisions failed only from the kill until shortly after the promotion.
        for s in 0..3 {
            for t in failed(s) {
                assert!(
                    t >= killed_at && t <= back_at + 1_000,
                    "shard {s} failed at {t} ms, outside the failover"
                );
            }
        }
        // A third of the slots failing is not Redis down: before the killed primary can be
        // marked failed (one node timeout), the other shards decide, and only them.
        let early = killed_at + 50..killed_at + NODE_TIMEOUT.as_millis() as u64 - 100;
        for s in 1..3 {
            let answered = seen
                .iter()
                .filter(|(t, sh, _)| *sh == s && early.contains(t))
                .map(|(_, _, ok)| *ok)
                .collect::<Vec<_>>();
            assert!(
                !answered.is_empty() && answered.iter().all(|ok| *ok),
                "shard {s} while only shard 0 failed: {answered:?}"
            );
        }
        // The topology follows within a few reads of the primaries.
        let old = format!("127.0.0.1:{}", cluster.nodes()[killed].port());
        let promoted = format!(
            "127.0.0.1:{}",
            cluster.nodes()[ReplicatedCluster::partner(killed)].port()
        );
        let read = Instant::now();
        loop {
            let t = store.topology();
            if t.primaries.contains(&promoted) {
                assert!(!t.primaries.contains(&old), "{t:?}");
                assert_eq!(t.primaries.len(), 3, "{t:?}");
                assert_eq!(t.failovers, 1, "{t:?}");
                break;
            }
            assert!(read.elapsed() < Duration::from_secs(10), "{t:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(cluster);
    })
    .await;
}

/// While every node refuses every slot (a killed primary marked failed, its replica not yet
/// promoted; held here for as long as the test needs), the store, once known down, stays
/// down: its probe asks for the cluster's state, which a `PING` would not tell. Then it comes
/// back by itself once the replica is promoted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_stays_known_down_while_the_cluster_refuses_every_slot() {
    bounded(90, async {
        let mut cluster = ReplicatedCluster::start(3);
        let options = RedisOptions::default()
            .deadline(DEADLINE)
            .blocked_capacity(0)
            .probe_every(Duration::from_millis(20));
        let store = RedisStore::connect_cluster_with(&cluster.urls(), options)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let big = limit("1000000/1m");
        let keys: Vec<String> = (0..3).map(|s| key_in(&cluster, s, &big)).collect();
        cluster.hold_failover(0, true);
        cluster.kill_primary(0);
        tokio::task::block_in_place(|| {
            let start = Instant::now();
            while !cluster.failed_everywhere() {
                assert!(start.elapsed() < Duration::from_secs(20), "no fail state");
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let start = Instant::now();
        while !store.health().down {
            let _ = decide(&store, &keys[1], &big).await;
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "never known down"
            );
        }
        let held = Instant::now();
        while held.elapsed() < Duration::from_millis(1500) {
            let _ = decide(&store, &keys[2], &big).await;
            assert!(
                store.health().down,
                "the store came back while the cluster refused every slot"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cluster.hold_failover(0, false);
        tokio::task::block_in_place(|| cluster.wait_promoted(0).unwrap_or_else(|e| panic!("{e}")));
        let back = Instant::now();
        while store.health().down || decide(&store, &keys[0], &big).await.is_err() {
            assert!(
                back.elapsed() < Duration::from_secs(10),
                "not back after the promotion"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for k in &keys {
            assert_eq!(decide(&store, k, &big).await, Ok(true));
        }
    })
    .await;
}

/// Every node killed, then started again: the store's connection answers again by itself (the
/// client asks the slot map of the URL's nodes again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_restarted_whole_is_connected_again() {
    bounded(90, async {
        let mut cluster = ReplicatedCluster::start(3);
        let options = RedisOptions::default()
            .deadline(DEADLINE)
            .blocked_capacity(0)
            .probe_every(Duration::from_millis(50));
        let store = RedisStore::connect_cluster_with(&cluster.urls(), options)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let big = limit("1000000/1m");
        let keys: Vec<String> = (0..3).map(|s| key_in(&cluster, s, &big)).collect();
        for k in &keys {
            assert_eq!(decide(&store, k, &big).await, Ok(true));
        }
        cluster.kill_all();
        let dead = Instant::now();
        while dead.elapsed() < Duration::from_millis(2500) {
            assert!(decide(&store, &keys[0], &big).await.is_err());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::task::block_in_place(|| cluster.restart_all()).unwrap_or_else(|e| panic!("{e}"));
        let back = Instant::now();
        for k in &keys {
            while decide(&store, k, &big).await != Ok(true) {
                assert!(
                    back.elapsed() < Duration::from_secs(20),
                    "not back within 20 s of the restart: {:?}",
                    store.topology()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    })
    .await;
}

/// Every node's password changed (its clients' connections closed), then restored: the store's
/// decisions fail meanwhile and come back by themselves once it is restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_changed_then_restored_is_followed() {
    bounded(90, async {
        let cluster = ReplicatedCluster::start(3);
        let options = RedisOptions::default()
            .deadline(DEADLINE)
            .blocked_capacity(0);
        let store = RedisStore::connect_cluster_with(&cluster.urls(), options)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let big = limit("1000000/1m");
        let keys: Vec<String> = (0..3).map(|s| key_in(&cluster, s, &big)).collect();
        let on_every_node = |command: &str| {
            for n in cluster.nodes() {
                let r = raw_command(n.port(), command);
                assert!(
                    r.as_ref().is_ok_and(|r| r.starts_with("+OK")),
                    "{command}: {r:?}"
                );
            }
        };
        on_every_node("CONFIG SET requirepass s3cret-pass-0123456789");
        on_every_node("AUTH s3cret-pass-0123456789\r\nCLIENT KILL TYPE normal");
        for k in &keys {
            assert!(decide(&store, k, &big).await.is_err());
        }
        on_every_node("AUTH s3cret-pass-0123456789\r\nCONFIG SET requirepass \"\"");
        let back = Instant::now();
        for k in &keys {
            while decide(&store, k, &big).await != Ok(true) {
                assert!(
                    back.elapsed() < Duration::from_secs(10),
                    "not back within 10 s"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    })
    .await;
}
