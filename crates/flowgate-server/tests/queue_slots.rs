//! A handed-back job's slot is used again: workers drain a 10/s queue while long-polls are
//! abandoned by their clients (a proxy timeout shorter than `wait_ms`), each holding a job for a
//! slot ahead; the jobs they give back go out in the slots they held, so the backlog drains at the
//! queue's rate, on Redis as on the embedded store, and never two releases closer than the
//! spacing. Real server processes, a real redis-server, real HTTP clients.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{http, post_json, spawn_server};
use flowgate_testkit::redis::RedisServer;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

const CONFIG: &str = r#"
[[queue]]
domain = "payments"
name = "tenth"
match = ["channel=TENTH"]
rate = "10/s"
lease = "30s"
"#;

/// The queue's spacing, in µs.
const SPACING: u64 = 100_000;
/// Jobs drained.
const JOBS: u64 = 40;
/// Long-polls abandoned during the drain.
const ABANDONED: usize = 8;

fn lease_body() -> Value {
    json!({"domain": "payments", "descriptor": "channel=TENTH", "wait_ms": 5000})
}

/// A client that sends a lease, waits `after`, and closes its connection before the answer.
async fn abandon(addr: SocketAddr, after: Duration) {
    let mut gone = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = lease_body().to_string();
    let req = format!(
        "POST /v1/queues/lease HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    gone.write_all(req.as_bytes()).await.unwrap();
    tokio::time::sleep(after).await;
    drop(gone);
}

/// Three workers drain [`JOBS`] jobs while [`ABANDONED`] long-polls are sent and abandoned
/// 150 ms later (each then holds a job for a slot one to four spacings ahead, behind the
/// workers' own reservations). Answers the release slots of the deliveries, sorted.
async fn drain_with_abandoned_polls(addr: SocketAddr) -> Vec<u64> {
    let jobs: Vec<Value> = (0..JOBS).map(|i| json!({"payload": i})).collect();
    let r = post_json(
        addr,
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": "channel=TENTH", "jobs": jobs}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let slots = Arc::new(parking_lot::Mutex::new(Vec::<u64>::new()));
    let end = Instant::now() + Duration::from_secs(30);
    let mut workers = Vec::new();
    for _ in 0..3 {
        let slots = slots.clone();
        workers.push(tokio::spawn(async move {
            while slots.lock().len() < JOBS as usize && Instant::now() < end {
                let r = post_json(addr, "/v1/queues/lease", lease_body()).await;
                if r.status != 200 {
                    continue;
                }
                let job = r.json();
                slots.lock().push(job["released_at_us"].as_u64().unwrap());
                let ack = post_json(addr, "/v1/queues/ack", json!({"token": job["token"]})).await;
                assert_eq!(ack.status, 200, "{}", ack.body);
            }
        }));
    }
    for _ in 0..ABANDONED {
        tokio::time::sleep(Duration::from_millis(300)).await;
        abandon(addr, Duration::from_millis(150)).await;
    }
    for w in workers {
        w.await.unwrap();
    }
    let mut slots = slots.lock().clone();
    slots.sort_unstable();
    slots
}

/// The drain's slots: every job once, never two closer than the spacing, and the whole backlog
/// in (N − 1) spacings plus at most two (a slot given back may pass before a worker asks again,
/// on a busy machine); each abandoned poll that cost its slot would add one.
fn check(store: &str, slots: &[u64], queues: &Value) {
    assert_eq!(slots.len(), JOBS as usize, "{store}: {slots:?}");
    let gaps: Vec<u64> = slots.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|&g| g >= SPACING),
        "{store}: two releases closer than the spacing: {gaps:?}"
    );
    let span = slots[slots.len() - 1] - slots[0];
    let lost = (span - (JOBS - 1) * SPACING) as f64 / SPACING as f64;
    eprintln!("{store}: {JOBS} jobs in {span} µs: {lost:.2} slots lost");
    assert!(
        lost <= 2.0,
        "{store}: {lost:.2} slots lost to abandoned long-polls (gaps {gaps:?})"
    );
    let i = &queues["instances"][0];
    assert_eq!(
        (i["released_total"].as_u64(), i["acked_total"].as_u64()),
        (Some(JOBS), Some(JOBS)),
        "{store}: a delivery given back is not a release: {i}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_long_poll_costs_no_slot_on_redis() {
    let redis = RedisServer::start();
    let (_dir, cfg) = common::config(CONFIG);
    let p = spawn_server(&cfg, &["--redis-url", &redis.url()]);
    let slots = drain_with_abandoned_polls(p.http).await;
    let queues = http(p.http, "GET", "/v1/queues", &[], "").await.json();
    check("redis", &slots, &queues);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_long_poll_costs_no_slot_on_disk() {
    let (dir, cfg) = common::config(CONFIG);
    let data = dir.path().join("data");
    let p = spawn_server(&cfg, &["--data-dir", data.to_str().unwrap()]);
    let slots = drain_with_abandoned_polls(p.http).await;
    let queues = http(p.http, "GET", "/v1/queues", &[], "").await.json();
    check("disk", &slots, &queues);
}
