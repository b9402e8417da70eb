//! The server's scripts (`scripts/alerts_lease.lua`, `alerts_write.lua`, `rules_push.lua`) on a
//! real redis-server, held to the contract at the head of each file, and sent as `EVALSHA`:
//! after `SCRIPT FLUSH` (Redis restarted, or flushed by someone) they are loaded again, and no
//! plain `EVAL` reaches Redis.

use flowgate_redis::scripts::{ALERTS_LEASE, ALERTS_WRITE, RULES_PUSH};
use flowgate_redis::{ConnectionOptions, RedisConnection};
use flowgate_testkit::redis::RedisServer;

const LEADER: &str = "flowgate:{alerts}:leader";
const STATES: &str = "flowgate:{alerts}:state";
const VERSION: &str = "flowgate:{rules}:version";
const PREFIX: &str = "flowgate:{rules}:v:";

async fn connect(server: &RedisServer) -> RedisConnection {
    RedisConnection::connect(&server.url(), ConnectionOptions::default())
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

async fn lease(conn: &RedisConnection, id: &str, ms: u64) -> i64 {
    let mut call = ALERTS_LEASE.prepare_invoke();
    call.key(LEADER).arg(id).arg(ms);
    conn.query_script(&call).await.expect("lease")
}

async fn write(conn: &RedisConnection, id: &str, states: &[(&str, &str)]) -> i64 {
    let mut call = ALERTS_WRITE.prepare_invoke();
    call.key(LEADER).key(STATES).arg(id);
    for (name, state) in states {
        call.arg(*name).arg(*state);
    }
    conn.query_script(&call).await.expect("write")
}

async fn push(conn: &RedisConnection, base: &str, doc: &str, kept: u64) -> (u64, i64) {
    let mut call = RULES_PUSH.prepare_invoke();
    call.key(VERSION)
        .arg(base)
        .arg(PREFIX)
        .arg(doc)
        .arg("ops")
        .arg("push")
        .arg("+ a line")
        .arg("1 added")
        .arg("flowgate:rules")
        .arg(kept);
    conn.query_script(&call).await.expect("push")
}

/// `calls` of `command` Redis counted (`INFO commandstats`), 0 when none.
fn calls(server: &RedisServer, command: &str) -> u64 {
    let info = server.cli(&["INFO", "commandstats"]).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alerts_lease_is_taken_renewed_and_fenced() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    // Free: taken (2); the holder renews (1); another is refused (0).
    assert_eq!(lease(&conn, "a", 60_000).await, 2);
    assert_eq!(lease(&conn, "a", 60_000).await, 1);
    assert_eq!(lease(&conn, "b", 60_000).await, 0);
    let ttl: i64 = server
        .cli(&["PTTL", LEADER])
        .expect("PTTL")
        .trim()
        .parse()
        .expect("ms");
    assert!((1..=60_000).contains(&ttl), "{ttl}");
    // Only the holder writes the states, replacing those stored.
    assert_eq!(write(&conn, "a", &[("x", "1"), ("y", "2")]).await, 1);
    assert_eq!(write(&conn, "a", &[("z", "3")]).await, 1);
    assert_eq!(write(&conn, "b", &[("w", "4")]).await, 0);
    let stored = server.cli(&["HGETALL", STATES]).expect("HGETALL");
    assert_eq!(stored.split_whitespace().collect::<Vec<_>>(), ["z", "3"]);
    assert_eq!(write(&conn, "a", &[]).await, 1);
    assert_eq!(server.cli(&["EXISTS", STATES]).expect("EXISTS").trim(), "0");
    // Lapsed, the lease is the first asker's.
    server.cli(&["DEL", LEADER]).expect("DEL");
    assert_eq!(lease(&conn, "b", 60_000).await, 2);
    assert_eq!(write(&conn, "a", &[("x", "1")]).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_version_is_stored_on_its_base_only_and_old_ones_go() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    assert_eq!(push(&conn, "empty", "{\"files\":[]}", 2).await, (1, 1));
    // `empty` once a version exists: not stored.
    assert_eq!(push(&conn, "empty", "{}", 2).await, (1, 0));
    // A stale base: refused, the version in force answered.
    assert_eq!(push(&conn, "0", "{}", 2).await, (1, -1));
    assert_eq!(push(&conn, "1", "{\"v\":2}", 2).await, (2, 1));
    assert_eq!(push(&conn, "2", "{\"v\":3}", 2).await, (3, 1));
    let field = |n: u64, f: &str| {
        server
            .cli(&["HGET", &format!("{PREFIX}{n}"), f])
            .expect("HGET")
            .trim()
            .to_owned()
    };
    assert_eq!(field(3, "doc"), "{\"v\":3}");
    assert_eq!(
        (field(3, "author"), field(3, "action"), field(3, "summary")),
        ("ops".to_owned(), "push".to_owned(), "1 added".to_owned())
    );
    assert!(
        field(3, "at_ms")
            .parse::<u64>()
            .is_ok_and(|ms| ms > 1_600_000_000_000)
    );
    // Two kept: version 1 is gone.
    assert_eq!(field(1, "doc"), "");
    assert_eq!(field(2, "doc"), "{\"v\":2}");
    assert_eq!(server.cli(&["GET", VERSION]).expect("GET").trim(), "3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripts_go_as_evalsha_and_are_loaded_again_after_a_flush() {
    let server = RedisServer::start();
    let conn = connect(&server).await;
    assert_eq!(lease(&conn, "a", 60_000).await, 2);
    assert_eq!(push(&conn, "empty", "{}", 10).await, (1, 1));
    server.cli(&["SCRIPT", "FLUSH"]).expect("SCRIPT FLUSH");
    assert_eq!(lease(&conn, "a", 60_000).await, 1);
    assert_eq!(write(&conn, "a", &[("x", "1")]).await, 1);
    assert_eq!(push(&conn, "1", "{}", 10).await, (2, 1));
    assert!(
        calls(&server, "evalsha") >= 5,
        "{}",
        calls(&server, "evalsha")
    );
    assert_eq!(calls(&server, "eval"), 0);
    // Loaded at most once per script and flush (NOSCRIPT, then SCRIPT LOAD).
    assert!(calls(&server, "script|load") <= 6);
}
