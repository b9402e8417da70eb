//! Redis Sentinel with real processes (one primary, one replica, three sentinels): the primary
//! found through the sentinels, a promotion followed (decisions fail for a bounded window, then
//! are exact again on the new primary), nothing written to the old primary once it is back, a
//! failover whose old primary stays up followed too, the sentinels' password apart from the data
//! nodes', the sentinels' ACL user, and a start with no sentinel reachable.

mod common;

use std::time::Duration;

use common::bounded;
use common::sentinel::{DEADLINE, admitted, decide, options, per_minute, until_answered};
use flowgate_core::StoreError;
use flowgate_redis::{RedisStore, SentinelAuth, TopologyKind};
use flowgate_testkit::sentinel::{RedisSentinels, SentinelsConfig};
use tokio::time::Instant;

/// The client commands a data node ran that write through a script (Flowgate's decisions), from
/// `INFO commandstats`: a replica applies its primary's writes as their effects, never as these.
fn script_calls(s: &RedisSentinels, port: u16) -> Vec<String> {
    s.data_cli(port, &["INFO", "commandstats"])
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.starts_with("cmdstat_evalsha:")
                || l.starts_with("cmdstat_eval:")
                || l.starts_with("cmdstat_script|load:")
        })
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_promotion_and_never_writes_to_the_old_primary() {
    bounded(110, async {
        let mut s = RedisSentinels::start();
        let first = s.primary().port();
        let store = RedisStore::connect_with(&s.url(), options())
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let topology = store.topology();
        assert_eq!(topology.kind, TopologyKind::Sentinel);
        assert_eq!(topology.primaries, vec![format!("127.0.0.1:{first}")]);

        let limit = per_minute(3);
        assert_eq!(admitted(&store, "before", &limit, 5).await, 3);

        let killed_at = Instant::now();
        let old = s.kill_primary();
        let window = until_answered(&store, "during", &limit).await;
        let new = s.wait_promoted(old);
        eprintln!(
            "sentinel failover: decisions answered again {:?} after the primary's SIGKILL (down-after-milliseconds 1000)",
            killed_at.elapsed()
        );
        assert!(window < Duration::from_secs(30), "window {window:?}");
        let topology = store.topology();
        assert_eq!(topology.primaries, vec![format!("127.0.0.1:{new}")]);
        assert_eq!(topology.failovers, 1);
        // Exact again on the new primary.
        assert_eq!(admitted(&store, "after", &limit, 5).await, 3);

        // The old primary comes back, a primary of its own (empty) until the sentinels demote it
        // (8 to 20 s later): a hundred decisions meanwhile, and none reaches it.
        s.restart(old);
        let mut answered = 0;
        let mut n = 0;
        while answered < 100 {
            if decide(&store, &format!("meanwhile:{n}"), &limit).await.is_ok() {
                answered += 1;
            }
            n += 1;
            assert!(n < 2_000, "decisions failed after the old primary came back");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(admitted(&store, "end", &limit, 4).await, 3);
        assert_eq!(
            script_calls(&s, old),
            Vec::<String>::new(),
            "Flowgate wrote to the old primary"
        );
        assert!(!script_calls(&s, new).is_empty(), "no decision reached the new primary");
        assert_eq!(store.topology().primaries, vec![format!("127.0.0.1:{new}")]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_failover_whose_old_primary_stays_up() {
    bounded(60, async {
        let s = RedisSentinels::start();
        let old = s.primary().port();
        let store = RedisStore::connect_with(&s.url(), options())
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let limit = per_minute(3);
        assert_eq!(admitted(&store, "before", &limit, 4).await, 3);
        s.failover();
        // The old primary answers throughout: only the sentinels' `+switch-master`, the
        // connections they close when they demote it, or its READONLY can move the store.
        let started = Instant::now();
        let mut n = 0;
        while store.topology().primaries != vec![format!("127.0.0.1:{}", s.wait_promoted(old))] {
            let _ = decide(&store, &format!("during:{n}"), &limit).await;
            n += 1;
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "still on {:?}",
                store.topology().primaries
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        until_answered(&store, "after", &limit).await;
        assert_eq!(admitted(&store, "after", &limit, 4).await, 2);
        assert_eq!(store.topology().failovers, 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sentinels_password_is_apart_from_the_data_nodes() {
    bounded(60, async {
        let s = RedisSentinels::start_with(SentinelsConfig {
            data_password: Some("data-secret-1".into()),
            sentinel_password: Some("sentinel-secret-2".into()),
            ..SentinelsConfig::default()
        });
        // The URL carries the data nodes' password; the sentinels' is an option of its own.
        let without = RedisStore::connect_with(&s.url(), options()).await;
        assert!(
            matches!(
                without,
                Err(StoreError::Unavailable(_) | StoreError::Timeout)
            ),
            "connected without the sentinels' password"
        );
        let auth = SentinelAuth::default().password("sentinel-secret-2");
        let store = RedisStore::connect_with(&s.url(), options().sentinel(auth.clone()))
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        assert_eq!(admitted(&store, "k", &per_minute(2), 3).await, 2);
        // The data nodes' password changed, then restored: the connection made again meanwhile
        // is refused, and the next one, after the restore, is taken (a refusal is not kept).
        let primary = s.primary().port();
        s.data_cli(primary, &["CONFIG", "SET", "requirepass", "changed-secret"])
            .unwrap_or_else(|e| panic!("{e}"));
        let reconnects = store.topology().reconnects;
        s.kill_clients(primary, Some("changed-secret"));
        // Until the node refuses the old password on a connection made again.
        let started = Instant::now();
        loop {
            let r = decide(&store, "k3", &per_minute(2)).await;
            assert!(r.is_err(), "decided with the old password: {r:?}");
            let health = format!("{r:?} {:?}", store.health().last_error);
            if health.contains("WRONGPASS") || health.contains("uthentication") {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "never refused: {health}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        flowgate_testkit::sentinel::cli(
            primary,
            Some("changed-secret"),
            &["CONFIG", "SET", "requirepass", "data-secret-1"],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        until_answered(&store, "k3", &per_minute(2)).await;
        assert!(store.topology().reconnects > reconnects);
        // The sentinels' password as the data nodes' is refused by the data nodes.
        let port = s.sentinel_ports()[0];
        let wrong = format!("redis+sentinel://:sentinel-secret-2@127.0.0.1:{port}/flowgate");
        let refused = RedisStore::connect_with(&wrong, options().sentinel(auth)).await;
        assert!(
            refused.is_err(),
            "the data nodes took the sentinels' password"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_with_no_sentinel_reachable_and_connects_once_one_answers() {
    bounded(60, async {
        let mut s = RedisSentinels::start();
        s.stop_sentinels();
        assert!(
            RedisStore::connect_with(&s.url(), options()).await.is_err(),
            "connected with no sentinel up"
        );
        let store = RedisStore::connect_lazy_with(&s.url(), options())
            .unwrap_or_else(|e| panic!("lazy store: {e}"));
        let limit = per_minute(2);
        for _ in 0..3 {
            let started = Instant::now();
            let r = decide(&store, "k", &limit).await;
            assert!(
                matches!(r, Err(StoreError::Unavailable(_) | StoreError::Timeout)),
                "{r:?}"
            );
            assert!(started.elapsed() < DEADLINE + Duration::from_secs(1));
        }
        assert!(store.topology().primaries.is_empty());
        s.start_sentinels();
        until_answered(&store, "k", &limit).await;
        assert_eq!(admitted(&store, "k2", &limit, 3).await, 2);
        assert_eq!(
            store.topology().primaries,
            vec![format!("127.0.0.1:{}", s.primary().port())]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sentinels_acl_user_is_required_and_a_wrong_one_refused_clearly() {
    bounded(60, async {
        const USER: &str = "flowgate-app";
        const PASSWORD: &str = "acl-secret-7f3e";
        let s = RedisSentinels::start_with(SentinelsConfig {
            sentinel_user: Some(USER.into()),
            sentinel_password: Some(PASSWORD.into()),
            ..SentinelsConfig::default()
        });
        let right = SentinelAuth::default().username(USER).password(PASSWORD);
        let store = RedisStore::connect_with(&s.url(), options().sentinel(right))
            .await
            .unwrap_or_else(|e| panic!("connect as the sentinels' ACL user: {e}"));
        assert_eq!(
            store.topology().primaries,
            vec![format!("127.0.0.1:{}", s.primary().port())]
        );
        assert_eq!(admitted(&store, "k", &per_minute(2), 3).await, 2);
        // A wrong user, and the password alone (the sentinels' `default` user is off): refused
        // at once, the error naming a sentinel and never the password.
        for auth in [
            SentinelAuth::default()
                .username("someone-else")
                .password(PASSWORD),
            SentinelAuth::default().password(PASSWORD),
        ] {
            let started = Instant::now();
            let r = RedisStore::connect_with(&s.url(), options().sentinel(auth.clone())).await;
            assert!(started.elapsed() < Duration::from_secs(5));
            let Err(StoreError::Unavailable(e)) = r else {
                panic!("{auth:?}: not refused as unavailable: {:?}", r.err());
            };
            let port = s.sentinel_ports()[0];
            assert!(
                e.contains(&format!("127.0.0.1:{port}"))
                    && e.contains("authentication")
                    && !e.contains(PASSWORD),
                "{auth:?}: {e} (sentinel port {port})"
            );
        }
    })
    .await;
}
