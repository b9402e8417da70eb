//! Queue workers through a store outage, with a real redis-server stopped and restarted under a
//! real server process and real HTTP clients: every lease waiting on an instance answers 503
//! with `Retry-After` once its own wait ends (not 204, which says "nothing released"), whatever
//! its `wait_ms`; the node logs one line when the store fails for the queues and one when it
//! answers again, not one per request or per second.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Proc, post_json, spawn_server};
use flowgate_testkit::redis::RedisServer;
use serde_json::json;
use tokio::time::Instant;

const CONFIG: &str = r#"
[[queue]]
domain = "payments"
name = "refunds"
match = ["channel"]
rate = "5/s"
"#;

/// The log lines that say the queues' store failed, and that it answers again.
const FAILED: &str = "queues: the store fails";
const BACK: &str = "queues: the store answers again";

fn lines(p: &Proc, text: &str) -> Vec<String> {
    p.log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(text))
        .cloned()
        .collect()
}

/// A lease of `wait_ms` on channel `channel`: its status, `Retry-After`, and how long it took.
async fn lease(addr: SocketAddr, channel: &str, wait_ms: u64) -> (u16, Option<String>, Duration) {
    let started = Instant::now();
    let r = post_json(
        addr,
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": format!("channel={channel}"), "wait_ms": wait_ms}),
    )
    .await;
    let retry = r.header("retry-after").map(str::to_owned);
    (r.status, retry, started.elapsed())
}

/// Five workers long-poll one instance (1.5 s) with Redis stopped, and a sixth asks with
/// `wait_ms` 0 while they wait: each answers 503 with `Retry-After`, the long-polls once their
/// wait ends (not before, not seconds after), the one that does not wait at once. Through
/// the whole outage (over two seconds, two reads of the queues' state by the watcher) the node
/// logged the failure once, at WARN under `flowgate::queue`; once Redis is back it logs that
/// once, at INFO, and the queue works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiting_lease_is_told_the_store_is_down_and_the_node_logs_it_once() {
    let mut redis = RedisServer::start();
    let (_dir, cfg) = common::config(CONFIG);
    let p = spawn_server(&cfg, &["--redis-url", &redis.url()]);
    assert_eq!(
        lease(p.http, "WPG", 0).await.0,
        204,
        "the queue works before"
    );
    redis.stop();
    let addr = p.http;
    let waiting: Vec<_> = (0..5)
        .map(|_| tokio::spawn(lease(addr, "WPG", 1_500)))
        .collect();
    // The sixth asks once the node has met the failure (it logs it), while the five wait.
    assert!(
        common::wait_until(Duration::from_secs(10), || async {
            !lines(&p, FAILED).is_empty()
        })
        .await,
        "no line says the queues' store fails: {:#?}",
        p.log.lock().unwrap()
    );
    let at_once = lease(addr, "WPG", 0).await;
    let mut waited = Vec::new();
    for w in waiting {
        waited.push(w.await.unwrap());
    }
    for (i, (status, retry, took)) in waited.iter().enumerate() {
        assert_eq!(
            (*status, retry.as_deref()),
            (503, Some("1")),
            "long-poll {i} after {took:?}"
        );
        assert!(
            *took >= Duration::from_millis(1_400) && *took < Duration::from_millis(3_500),
            "long-poll {i} answered after {took:?}, its wait was 1.5 s"
        );
    }
    let (status, retry, took) = at_once;
    assert_eq!((status, retry.as_deref()), (503, Some("1")), "wait_ms 0");
    assert!(
        took < Duration::from_secs(1),
        "wait_ms 0 answered after {took:?}"
    );
    let failed = lines(&p, FAILED);
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(
        failed[0].contains("WARN") && failed[0].contains("flowgate::queue"),
        "{}",
        failed[0]
    );
    assert!(lines(&p, BACK).is_empty());
    redis.restart();
    assert!(
        common::wait_until(Duration::from_secs(10), || async {
            !lines(&p, BACK).is_empty()
        })
        .await,
        "no line says the queues' store answers again: {:#?}",
        p.log.lock().unwrap()
    );
    let back = lines(&p, BACK);
    assert_eq!(back.len(), 1, "{back:#?}");
    assert!(
        back[0].contains("INFO") && back[0].contains("flowgate::queue"),
        "{}",
        back[0]
    );
    assert_eq!(lines(&p, FAILED).len(), 1, "the outage was logged again");
    let r = post_json(
        p.http,
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": "channel=WPG", "payload": 1}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(lease(p.http, "WPG", 1_000).await.0, 200);
}

/// Once the store is known to fail for an instance, a lease is held no longer than its own
/// wait by a store that hangs (Redis frozen: connections open, nothing answered), not until the
/// store's deadline (5 s): 503 when its wait (0.5 s) ends, at once for `wait_ms` 0. The call it
/// made goes on; when Redis answers it with the queued job, the job is given back, and the next
/// worker gets it as its first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_store_holds_a_lease_no_longer_than_its_wait_once_it_is_known_to_fail() {
    let mut redis = RedisServer::start();
    let (_dir, cfg) = common::config(CONFIG);
    let p = spawn_server(&cfg, &["--redis-url", &redis.url()]);
    redis.stop();
    assert_eq!(
        lease(p.http, "HUNG", 0).await.0,
        503,
        "the failure is known"
    );
    redis.restart();
    let submit = || async {
        post_json(
            p.http,
            "/v1/queues/submit",
            json!({"domain": "payments", "descriptor": "channel=HUNG", "payload": "refund"}),
        )
        .await
        .status
            == 200
    };
    assert!(
        common::wait_until(Duration::from_secs(10), submit).await,
        "no submit after Redis came back"
    );
    redis.pause();
    let (status, retry, took) = lease(p.http, "HUNG", 500).await;
    let (at_once, _, at_once_took) = lease(p.http, "HUNG", 0).await;
    redis.resume();
    assert_eq!(
        (status, retry.as_deref()),
        (503, Some("1")),
        "after {took:?}"
    );
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_millis(1_500),
        "a 0.5 s lease answered after {took:?}"
    );
    assert_eq!(at_once, 503, "wait_ms 0");
    assert!(
        at_once_took < Duration::from_millis(500),
        "wait_ms 0 answered after {at_once_took:?}"
    );
    let r = post_json(
        p.http,
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": "channel=HUNG", "wait_ms": 3000}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let job = r.json();
    assert_eq!(
        (job["id"].as_u64(), job["attempt"].as_u64()),
        (Some(1), Some(1)),
        "{job}"
    );
}

/// A lease whose wait ends while another lease's call waits on a store that hangs (no failure
/// known yet: the store answered before it froze) is told the store fails, not "nothing
/// released": the store never answered it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_behind_an_unanswered_call_is_not_told_nothing_was_released() {
    let redis = RedisServer::start();
    let (_dir, cfg) = common::config(CONFIG);
    let p = spawn_server(&cfg, &["--redis-url", &redis.url()]);
    assert_eq!(lease(p.http, "SILENT", 0).await.0, 204, "the store answers");
    redis.pause();
    let addr = p.http;
    let first = tokio::spawn(async move { lease(addr, "SILENT", 3000).await });
    // (at least this long: its call has then gone unanswered past the threshold)
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (behind, retry, _) = lease(p.http, "SILENT", 200).await;
    redis.resume();
    let _ = first.await;
    assert_eq!((behind, retry.as_deref()), (503, Some("1")));
}
