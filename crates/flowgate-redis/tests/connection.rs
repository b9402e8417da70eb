//! The connection layer on real `redis-server`s: one URL form for a single server and a cluster,
//! typed replies and pipelines, every call bounded by its timeout, errors classified alike,
//! and a connection made on first use while Redis is down.

use std::time::Duration;

use flowgate_core::StoreError;
use flowgate_redis::{ConnectionOptions, RedisConnection};
use flowgate_testkit::redis::{RedisCluster, RedisServer};
use tokio::time::Instant;

/// Scheduling slack on a shared 2-core machine.
const SLACK: Duration = Duration::from_millis(500);

fn options(timeout: Duration) -> ConnectionOptions {
    ConnectionOptions::default().timeout(timeout)
}

/// A round trip of typed commands and a pipeline.
async fn round_trip(conn: &RedisConnection) {
    let () = conn
        .query(redis::cmd("SET").arg("t:{k}:a").arg(41))
        .await
        .unwrap();
    let n: u64 = conn.query(redis::cmd("INCR").arg("t:{k}:a")).await.unwrap();
    assert_eq!(n, 42);
    let mut pipe = redis::pipe();
    pipe.cmd("INCR").arg("t:{k}:a").cmd("GET").arg("t:{k}:b");
    let (a, b): (u64, Option<String>) = conn.query_pipe(&pipe).await.unwrap();
    assert_eq!((a, b), (43, None));
    // An error reply and a reply of another type are the store failing, not Redis gone.
    let wrong = conn
        .query::<u64>(redis::cmd("HGET").arg("t:{k}:a").arg("f"))
        .await;
    assert!(matches!(wrong, Err(StoreError::Internal(_))), "{wrong:?}");
    let () = conn
        .query(redis::cmd("SET").arg("t:{k}:c").arg("x"))
        .await
        .unwrap();
    let not_a_number = conn.query::<u64>(redis::cmd("GET").arg("t:{k}:c")).await;
    assert!(
        matches!(not_a_number, Err(StoreError::Internal(_))),
        "{not_a_number:?}"
    );
}

#[tokio::test]
async fn a_single_server_by_its_url() {
    let redis = RedisServer::start();
    let conn = RedisConnection::connect(&redis.url(), ConnectionOptions::default())
        .await
        .unwrap();
    assert!(!conn.is_cluster());
    round_trip(&conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_by_its_nodes_url() {
    let cluster = RedisCluster::start(3);
    let hosts: Vec<String> = cluster
        .urls()
        .iter()
        .map(|u| {
            u.trim_start_matches("redis://")
                .trim_end_matches('/')
                .to_owned()
        })
        .collect();
    let url = format!("redis+cluster://{}", hosts.join(","));
    let conn = RedisConnection::connect(&url, ConnectionOptions::default())
        .await
        .unwrap();
    assert!(conn.is_cluster());
    round_trip(&conn).await;
    // Keys of other slots, each routed to its node.
    for i in 0..20 {
        let key = format!("t:spread:{i}");
        let () = conn
            .query(redis::cmd("SET").arg(&key).arg(i))
            .await
            .unwrap();
        let v: u64 = conn.query(redis::cmd("GET").arg(&key)).await.unwrap();
        assert_eq!(v, i);
    }
}

#[tokio::test]
async fn a_call_on_a_server_that_does_not_answer_ends_at_its_timeout() {
    let redis = RedisServer::start();
    let timeout = Duration::from_millis(300);
    let conn = RedisConnection::connect(&redis.url(), options(timeout))
        .await
        .unwrap();
    assert_eq!(conn.timeout(), timeout);
    // Redis holds every client's commands for 3 s.
    let () = conn
        .query(redis::cmd("CLIENT").arg("PAUSE").arg(3000).arg("ALL"))
        .await
        .unwrap();
    let start = Instant::now();
    let r = conn
        .query::<Option<String>>(redis::cmd("GET").arg("k"))
        .await;
    assert_eq!(r, Err(StoreError::Timeout));
    let took = start.elapsed();
    assert!(took >= timeout && took < timeout + SLACK, "{took:?}");
    let start = Instant::now();
    let r = conn
        .query_pipe::<(Option<String>,)>(redis::pipe().cmd("GET").arg("k"))
        .await;
    assert_eq!(r, Err(StoreError::Timeout));
    assert!(start.elapsed() < timeout + SLACK, "{:?}", start.elapsed());
}

#[tokio::test]
async fn made_while_redis_is_down_it_answers_once_redis_is_up() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    redis.stop();
    let conn = RedisConnection::connect_lazy(&url, options(Duration::from_secs(2))).unwrap();
    let start = Instant::now();
    let r = conn
        .query::<Option<String>>(redis::cmd("GET").arg("k"))
        .await;
    assert!(
        matches!(r, Err(StoreError::Unavailable(_) | StoreError::Timeout)),
        "{r:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(2) + SLACK);
    // Connecting now, instead of on first use, says so at once.
    assert!(matches!(
        RedisConnection::connect(&url, ConnectionOptions::default()).await,
        Err(StoreError::Unavailable(_) | StoreError::Timeout)
    ));
    redis.restart();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match conn
            .query::<Option<String>>(redis::cmd("GET").arg("k"))
            .await
        {
            Ok(v) => {
                assert_eq!(v, None);
                break;
            }
            Err(e) => assert!(Instant::now() < end, "still failing: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_bad_url_is_refused() {
    for url in ["http://127.0.0.1:1/", "redis+cluster://"] {
        let r = RedisConnection::connect_lazy(url, ConnectionOptions::default());
        assert!(matches!(r, Err(StoreError::Unavailable(_))), "{url}");
    }
}
