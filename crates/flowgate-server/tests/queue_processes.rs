//! Queues across real server processes: three servers on one Redis release at the queue's rate
//! to eight workers (spacing on Redis's clock, FIFO, drain time); a server killed with SIGKILL
//! mid-drain and a worker that vanishes holding a lease lose nothing; one idempotency key
//! submitted from 16 tasks through 2 servers makes one job; the embedded store killed with
//! SIGKILL and restarted on its data directory keeps every job, in order.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{Proc, http, post_json, spawn_server};
use flowgate_testkit::redis::RedisServer;
use parking_lot::Mutex;
use serde_json::{Value, json};

const CONFIG: &str = r#"
domain = "payments"

[[queue]]
name = "fast"
match = ["channel=FAST"]
rate = "20/s"
lease = "10s"

[[queue]]
name = "slow"
match = ["channel=SLOW"]
rate = "1/s"
lease = "10s"

[[queue]]
name = "crash"
match = ["channel=CRASH"]
rate = "10/s"
lease = "2s"
max_attempts = 10

[[queue]]
name = "bulk"
match = ["channel=BULK"]
rate = "1000/s"
"#;

fn config() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queues.toml");
    std::fs::write(&path, CONFIG).unwrap();
    (dir, path)
}

fn servers(n: usize, config: &std::path::Path, redis: &RedisServer) -> Vec<Proc> {
    let url = redis.url();
    (0..n)
        .map(|_| spawn_server(config, &["--redis-url", &url, "--redis-deadline", "2s"]))
        .collect()
}

async fn submit(addr: SocketAddr, channel: &str, jobs: Vec<Value>) -> Value {
    let r = post_json(
        addr,
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": format!("channel={channel}"), "jobs": jobs}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// One delivery as a worker saw it.
#[derive(Clone, Debug)]
struct Seen {
    id: u64,
    released_us: u64,
}

/// Runs `workers` workers over `addrs` until `total` jobs are acked (or `limit` passes); each
/// acked job's delivery is recorded, and every successful ack counted per id.
async fn drain(
    addrs: Vec<SocketAddr>,
    workers: usize,
    channel: &'static str,
    total: usize,
    limit: Duration,
) -> (Vec<Seen>, HashMap<u64, u32>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let acks = Arc::new(Mutex::new(HashMap::<u64, u32>::new()));
    let end = tokio::time::Instant::now() + limit;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (seen, acks, addrs) = (seen.clone(), acks.clone(), addrs.clone());
        tasks.push(tokio::spawn(async move {
            let mut at = w % addrs.len();
            while tokio::time::Instant::now() < end && acks.lock().len() < total {
                let addr = addrs[at];
                let lease = tokio::time::timeout(
                    Duration::from_secs(5),
                    try_post(
                        addr,
                        "/v1/queues/lease",
                        json!({"domain": "payments", "descriptor": format!("channel={channel}"), "wait_ms": 1000}),
                    ),
                )
                .await;
                let Ok(Some((200, job))) = lease else {
                    if !matches!(lease, Ok(Some((204, _)))) {
                        at = (at + 1) % addrs.len(); // that server is gone: use another
                    }
                    continue;
                };
                let id = job["id"].as_u64().unwrap();
                let released_us = job["released_at_us"].as_u64().unwrap();
                if let Some((200, _)) =
                    try_post(addr, "/v1/queues/ack", json!({"token": job["token"]})).await
                {
                    seen.lock().push(Seen { id, released_us });
                    *acks.lock().entry(id).or_default() += 1;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let seen = seen.lock().clone();
    let acks = acks.lock().clone();
    (seen, acks)
}

/// The `crash` queue's `acked_total`, as server `addr` reports it (0 before it is listed).
async fn crash_acked(addr: SocketAddr) -> u64 {
    let q = http(addr, "GET", "/v1/queues", &[], "").await.json();
    q["instances"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["queue"] == "crash"))
        .and_then(|i| i["acked_total"].as_u64())
        .unwrap_or(0)
}

/// A POST that answers `None` when the server cannot be reached.
async fn try_post(addr: SocketAddr, path: &str, body: Value) -> Option<(u16, Value)> {
    let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .ok()?;
    tokio::spawn(conn);
    let req = hyper::Request::post(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(hyper::body::Bytes::from(
            body.to_string(),
        )))
        .ok()?;
    let resp = send.send_request(req).await.ok()?;
    let status = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .ok()?
        .to_bytes();
    Some((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

fn check_spacing(name: &str, seen: &[Seen], n: usize, spacing_us: u64) {
    let mut by_release = seen.to_vec();
    by_release.sort_by_key(|s| s.released_us);
    let ids: Vec<u64> = by_release.iter().map(|s| s.id).collect();
    assert_eq!(
        ids,
        (1..=n as u64).collect::<Vec<_>>(),
        "{name}: FIFO order"
    );
    for w in by_release.windows(2) {
        let gap = w[1].released_us - w[0].released_us;
        assert!(
            gap >= spacing_us,
            "{name}: releases {gap} us apart, spacing {spacing_us}"
        );
    }
    let drain = by_release[n - 1].released_us - by_release[0].released_us;
    let ideal = (n as u64 - 1) * spacing_us;
    let off = (drain as f64 - ideal as f64).abs() / ideal as f64;
    assert!(
        off <= 0.05,
        "{name}: drained in {drain} us, ideal {ideal} us ({off:.3} off)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_release_at_the_rate_to_eight_workers_in_order() {
    let redis = RedisServer::start();
    let (_dir, cfg) = config();
    let procs = servers(3, &cfg, &redis);
    let addrs: Vec<SocketAddr> = procs.iter().map(|p| p.http).collect();
    submit(
        addrs[0],
        "FAST",
        (0..100).map(|i| json!({"payload": i})).collect(),
    )
    .await;
    submit(
        addrs[1],
        "SLOW",
        (0..5).map(|i| json!({"payload": i})).collect(),
    )
    .await;
    let (fast, slow) = tokio::join!(
        drain(addrs.clone(), 8, "FAST", 100, Duration::from_secs(40)),
        drain(addrs.clone(), 8, "SLOW", 5, Duration::from_secs(40)),
    );
    assert_eq!(fast.1.len(), 100, "every fast job acked");
    assert!(fast.1.values().all(|&n| n == 1), "acked once each");
    check_spacing("20/s", &fast.0, 100, 50_000);
    assert_eq!(slow.1.len(), 5);
    check_spacing("1/s", &slow.0, 5, 1_000_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_and_a_vanished_worker_lose_no_job() {
    let redis = RedisServer::start();
    let (_dir, cfg) = config();
    let mut procs = servers(2, &cfg, &redis);
    let (a, b) = (procs[0].http, procs[1].http);
    submit(a, "CRASH", (0..30).map(|i| json!({"payload": i})).collect()).await;
    // A worker leases a job and vanishes without acking.
    let (status, held) = try_post(
        b,
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": "channel=CRASH", "wait_ms": 1000}),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    let held_id = held["id"].as_u64().unwrap();
    // Workers on both servers; server A is killed (SIGKILL) mid-drain, once the store counts
    // 5 of the 30 jobs acked (at 10/s, some 2.5 s before the drain would end).
    let workers = tokio::spawn(drain(vec![a, b], 4, "CRASH", 30, Duration::from_secs(40)));
    let draining = common::wait_until(Duration::from_secs(20), || async {
        crash_acked(b).await >= 5
    })
    .await;
    assert!(
        draining,
        "the workers never acked 5 jobs; the queues: {}",
        http(b, "GET", "/v1/queues", &[], "").await.body
    );
    let mut killed = procs.remove(0);
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let (seen, acks) = workers.await.unwrap();
    // The store says whether a job was lost; the workers may miss one ack's answer, sent by
    // server A as it was killed (the job is done, its answer gone).
    assert!(
        acks.len() >= 29,
        "{} of 30 jobs acked: {acks:?}; the queues: {}",
        acks.len(),
        http(b, "GET", "/v1/queues", &[], "").await.body
    );
    assert!(
        acks.values().all(|&n| n == 1),
        "each exactly once: {acks:?}"
    );
    if let Some(redelivered) = seen.iter().find(|s| s.id == held_id) {
        assert!(
            redelivered.released_us >= held["lease_deadline_ms"].as_u64().unwrap() * 1000,
            "the held job came back after its lease expired"
        );
    }
    let q = http(b, "GET", "/v1/queues", &[], "").await.json();
    let i = q["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["queue"] == "crash")
        .unwrap()
        .clone();
    assert_eq!(
        (i["depth"].as_u64(), i["in_flight"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(i["acked_total"], 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_from_sixteen_tasks_on_two_servers_makes_one_job() {
    let redis = RedisServer::start();
    let (_dir, cfg) = config();
    let procs = servers(2, &cfg, &redis);
    let mut tasks = Vec::new();
    for t in 0..16 {
        let addr = procs[t % 2].http;
        tasks.push(tokio::spawn(async move {
            let r = post_json(
                addr,
                "/v1/queues/submit",
                json!({"domain": "payments", "descriptor": "channel=SLOW", "payload": {"refund": 42}, "key": "refund-42"}),
            )
            .await;
            assert_eq!(r.status, 200, "{}", r.body);
            r.json()["id"].as_u64().unwrap()
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.unwrap());
    }
    assert!(ids.iter().all(|&id| id == ids[0]), "{ids:?}");
    let q = http(procs[0].http, "GET", "/v1/queues", &[], "")
        .await
        .json();
    assert_eq!(q["instances"][0]["submitted_total"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_store_killed_and_restarted_keeps_every_job_in_order() {
    let (dir, cfg) = config();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap().to_owned();
    let mut p = spawn_server(&cfg, &["--data-dir", &data_arg]);
    // Batches and single jobs, some submitted concurrently; kill -9 right after the last answer.
    submit(
        p.http,
        "BULK",
        (0..200)
            .map(|i| json!({"payload": format!("b{i}")}))
            .collect(),
    )
    .await;
    let mut singles = Vec::new();
    for i in 0..50 {
        let addr = p.http;
        singles.push(tokio::spawn(async move {
            submit(
                addr,
                "BULK",
                vec![json!({"payload": format!("s{i}"), "key": format!("k{i}")})],
            )
            .await
        }));
    }
    for s in singles {
        s.await.unwrap();
    }
    p.child.kill().unwrap();
    p.child.wait().unwrap();
    drop(p);
    let p = spawn_server(&cfg, &["--data-dir", &data_arg]);
    let q = http(p.http, "GET", "/v1/queues", &[], "").await.json();
    assert_eq!(q["instances"][0]["depth"], 250, "{q}");
    let mut last = 0;
    for n in 0..250 {
        let (status, job) = try_post(
            p.http,
            "/v1/queues/lease",
            json!({"domain": "payments", "descriptor": "channel=BULK", "wait_ms": 1000}),
        )
        .await
        .unwrap();
        assert_eq!(status, 200, "{job}");
        let id = job["id"].as_u64().unwrap();
        assert!(id > last, "order kept: {id} after {last}");
        last = id;
        if n < 200 {
            assert_eq!(job["payload"], json!(format!("b{n}")));
        }
    }
    assert_eq!(last, 250);
}
