//! Queues as the channel sees them, with real server processes and a real redis-server: lease
//! answers keep
//! their spacing through a store stall of half a second (measured at the workers); a lease whose
//! client goes away gives its job back at once; a lease waits out a store that cannot answer.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{http, post_json, spawn_server};
use flowgate_testkit::redis::{RedisServer, raw_command};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

const CONFIG: &str = r#"
[[rule]]
domain = "api"
name = "per-user"
match = "user"
limit = 5
window = "1h"
algorithm = "fixed_window"

[[rule]]
domain = "api"
name = "probe"
match = "probe"
limit = "1000000/s"
failure = "closed"

[[queue]]
domain = "payments"
name = "bulk"
match = ["channel=BULK"]
rate = "1000/s"
max_payload = 4096
max_depth = 100000

[[queue]]
domain = "payments"
name = "steady"
match = ["channel=STEADY"]
rate = "20/s"
lease = "30s"

[[queue]]
domain = "payments"
name = "slow"
match = ["channel=SLOW"]
rate = "1/s"

[[queue]]
domain = "payments"
name = "gone"
match = ["channel=GONE"]
rate = "12/m"
"#;

fn config() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flowgate.toml");
    std::fs::write(&path, CONFIG).unwrap();
    (dir, path)
}

/// The largest batch the API takes, near its 32 MiB: 10,000 jobs of 3 KB.
fn largest_batch(channel: &str) -> String {
    let memo = "x".repeat(3_000);
    let jobs: Vec<Value> = (0..10_000)
        .map(|i| json!({"payload": {"refund": i, "memo": memo}}))
        .collect();
    json!({"domain": "payments", "descriptor": format!("channel={channel}"), "jobs": jobs})
        .to_string()
}

/// Held by one timed measurement at a time: the arrivals are timed at the workers, so another
/// test's workers and servers on the same 2 cores would delay an answer after the server sent it
/// in its slot, and the next one would seem to come too soon.
static TIMED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How late after its slot an answer may reach its worker: the server's tolerance (12.5 ms at
/// 20/s) and what 2 busy cores add between the server's last check and the worker. An answer
/// that was not re-slotted after the half-second stall would be up to 500 ms late.
const LATE: Duration = Duration::from_millis(150);

/// How early before its slot an answer may reach its worker: half the spacing (two answers
/// then leave at least half a spacing apart). The server holds each answer until its slot by its
/// estimate of the store's clock, which is off by at most half its fastest round trip to the
/// store: well under a millisecond on a quiet loopback, 16.5 ms seen with both cores kept busy
/// by another process. A server that did not hold answers would send them up to
/// [`flowgate::queue::MAX_HORIZON`] (1 s) early.
const EARLY: Duration = Duration::from_millis(25);

/// This machine's wall clock, in µs since the epoch (the clock `released_at_us` is on).
fn wall_us() -> u64 {
    flowgate::clock::system_now()
}

/// Workers leasing from a 20/s queue (50 ms spacing) through two servers, with their answers'
/// arrival timed at the workers; `stall` holds the store up for about half a second meanwhile.
/// - The store released the answers a full spacing apart (their `released_at_us` slots).
/// - No answer reached its worker more than [`LATE`] after its slot: one that comes too late
///   for its slot is re-slotted, not sent. (The store's clock is this machine's: Redis on
///   loopback, or the embedded store.)
/// - No answer reached its worker before its slot, less [`EARLY`]: the server holds each answer
///   until its slot, so that two answers leave about a spacing apart. This is measured against the
///   store's own clock (the slots), not as gaps between arrivals at the workers: on 2 busy cores
///   a worker that was not scheduled for a while reads two answers together that the server
///   sent a spacing apart.
/// - No second with more answers at the workers than the slots that can reach them in it (those
///   of 1 s + `LATE` + `EARLY`, and the one answer allowed late): no burst after the stall.
async fn spacing_through_a_stall(addrs: Vec<SocketAddr>, stall: impl FnOnce() + Send + 'static) {
    let _timed = TIMED.lock().await;
    let jobs: Vec<Value> = (0..200).map(|i| json!({"payload": i})).collect();
    let r = post_json(
        addrs[0],
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": "channel=STEADY", "jobs": jobs}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // (arrival, arrival on the wall clock, slot, id)
    let arrivals = Arc::new(parking_lot::Mutex::new(
        Vec::<(Instant, u64, u64, u64)>::new(),
    ));
    let end = Instant::now() + Duration::from_millis(3_500);
    let mut workers = Vec::new();
    for w in 0..6usize {
        let (arrivals, addr) = (arrivals.clone(), addrs[w % addrs.len()]);
        workers.push(tokio::spawn(async move {
            while Instant::now() < end {
                let r = post_json(
                    addr,
                    "/v1/queues/lease",
                    json!({"domain": "payments", "descriptor": "channel=STEADY", "wait_ms": 1000}),
                )
                .await;
                let (at, wall) = (Instant::now(), wall_us());
                if r.status != 200 {
                    continue;
                }
                let job = r.json();
                let slot = job["released_at_us"].as_u64().unwrap();
                arrivals
                    .lock()
                    .push((at, wall, slot, job["id"].as_u64().unwrap()));
                let ack = post_json(addr, "/v1/queues/ack", json!({"token": job["token"]})).await;
                assert_eq!(ack.status, 200, "{}", ack.body);
            }
        }));
    }
    // The stall comes 1.2 s into the workers' fixed 3.5 s run, with answers flowing before and
    // after it.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let stalled = std::thread::spawn(stall);
    for w in workers {
        w.await.unwrap();
    }
    stalled.join().unwrap();
    let mut seen = arrivals.lock().clone();
    seen.sort();
    assert!(seen.len() >= 20, "only {} answers in 3.5 s", seen.len());
    let mut slots: Vec<u64> = seen.iter().map(|a| a.2).collect();
    slots.sort_unstable();
    let slot_gaps: Vec<u64> = slots.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        slot_gaps.iter().all(|&g| g >= 49_000),
        "the store released two answers less than a spacing apart: {slot_gaps:?}"
    );
    let late: Vec<u64> = seen.iter().map(|a| a.1.saturating_sub(a.2)).collect();
    // A server frozen between an answer's lateness check and its write sends that one answer
    // late (it cannot be re-slotted once checked): at most one, across a stall.
    assert!(
        late.iter()
            .filter(|&&l| l > LATE.as_micros() as u64)
            .count()
            <= 1,
        "an answer reached its worker more than {LATE:?} after its slot (µs late): {late:?}"
    );
    let early: Vec<u64> = seen.iter().map(|a| a.2.saturating_sub(a.1)).collect();
    assert!(
        early.iter().all(|&e| e <= EARLY.as_micros() as u64),
        "an answer reached its worker more than {EARLY:?} before its slot (µs early): {early:?}"
    );
    let gaps: Vec<u128> = seen
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).as_micros())
        .collect();
    let min = gaps.iter().min().copied().unwrap_or(0);
    // Answers reach the workers between EARLY before and LATE after their slots, a spacing
    // (50 ms) apart: one second of arrivals holds at most the slots of 1 s + LATE + EARLY, and
    // the one answer allowed later than LATE. A burst (a backlog sent at once after the stall)
    // holds many more.
    let bound = ((1_000 + LATE.as_millis() + EARLY.as_millis()) / 50 + 2) as usize;
    let mut most = 0;
    for (i, (t, ..)) in seen.iter().enumerate() {
        let within = seen[i..]
            .iter()
            .take_while(|(u, ..)| *u - *t < Duration::from_secs(1))
            .count();
        assert!(
            within <= bound,
            "{within} answers within one second (at most {bound})"
        );
        most = most.max(within);
    }
    // (the figures of BENCHMARKS.md, with --nocapture)
    eprintln!(
        "{} answers; closest two {:.1} ms apart; at most {most} in one second; the latest {:.1} ms after its slot",
        seen.len(),
        min as f64 / 1e3,
        late.iter().max().copied().unwrap_or(0) as f64 / 1e3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_answers_keep_their_spacing_through_a_redis_stall() {
    let redis = RedisServer::start();
    let (_dir, cfg) = config();
    let url = redis.url();
    let procs: Vec<_> = (0..2)
        .map(|_| spawn_server(&cfg, &["--redis-url", &url]))
        .collect();
    let port = redis.port();
    // A script that holds Redis for half a second, as a big script call did.
    let busy = "EVAL \"local s = redis.call('TIME') repeat local n = redis.call('TIME') until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 500000 return 1\" 0";
    spacing_through_a_stall(procs.iter().map(|p| p.http).collect(), move || {
        let _ = raw_command(port, busy);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_answers_keep_their_spacing_while_a_big_batch_is_stored_on_disk() {
    let (dir, cfg) = config();
    let data = dir.path().join("data");
    let p = spawn_server(&cfg, &["--data-dir", data.to_str().unwrap()]);
    let addr = p.http;
    let body = largest_batch("BULK");
    let rt = tokio::runtime::Handle::current();
    spacing_through_a_stall(vec![addr], move || {
        let r = rt.block_on(http(
            addr,
            "POST",
            "/v1/queues/submit",
            &[("content-type", "application/json")],
            &body,
        ));
        assert_eq!(r.status, 200);
    })
    .await;
}

/// A lease waiting for its slot (job 2, five seconds ahead on a 12/m queue: room for a busy
/// machine) whose client gives up while it waits: the job goes back at once, first in line, with
/// no attempt counted, and the next worker gets it at its slot.
async fn a_client_gone_gives_its_job_back(addr: SocketAddr) {
    let jobs: Vec<Value> = ["a", "b", "c"]
        .iter()
        .map(|p| json!({"payload": p}))
        .collect();
    let r = post_json(
        addr,
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": "channel=GONE", "jobs": jobs}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let lease = json!({"domain": "payments", "descriptor": "channel=GONE", "wait_ms": 10000});
    let first = post_json(addr, "/v1/queues/lease", lease.clone())
        .await
        .json();
    assert_eq!(first["id"], 1);
    // A raw client: sends the lease, waits, and closes the connection.
    let mut gone = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = lease.to_string();
    let req = format!(
        "POST /v1/queues/lease HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    gone.write_all(req.as_bytes()).await.unwrap();
    // It closes once the store holds job 2's slot for it, and the next worker asks once the
    // job is back (no slot held).
    let reserved = |n: u64| async move {
        common::wait_until(Duration::from_secs(10), || async {
            gone_instance(addr).await["reserved"] == n
        })
        .await
    };
    assert!(
        reserved(1).await,
        "job 2's slot was never reserved for the waiting lease: {}",
        gone_instance(addr).await
    );
    drop(gone);
    assert!(
        reserved(0).await,
        "the lease whose client went away never gave job 2 back: {}",
        gone_instance(addr).await
    );
    let next = post_json(addr, "/v1/queues/lease", lease).await.json();
    assert_eq!(
        (next["id"].as_u64(), next["attempt"].as_u64()),
        (Some(2), Some(1)),
        "{next}"
    );
    let i = gone_instance(addr).await;
    assert_eq!(i["released_total"], 2, "{i}");
}

/// The `gone` queue's instance as `GET /v1/queues` shows it (`null` before it is listed).
async fn gone_instance(addr: SocketAddr) -> Value {
    let q = http(addr, "GET", "/v1/queues", &[], "").await.json();
    q["instances"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["queue"] == "gone"))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_whose_client_went_away_gives_its_job_back_on_redis() {
    let redis = RedisServer::start();
    let (_dir, cfg) = config();
    let p = spawn_server(&cfg, &["--redis-url", &redis.url()]);
    a_client_gone_gives_its_job_back(p.http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_whose_client_went_away_gives_its_job_back_on_disk() {
    let (dir, cfg) = config();
    let data = dir.path().join("data");
    let p = spawn_server(&cfg, &["--data-dir", data.to_str().unwrap()]);
    a_client_gone_gives_its_job_back(p.http).await;
}

/// With Redis gone, a lease retries until its `wait_ms` ends, then answers 503 with
/// `Retry-After`, instead of failing at once (workers would spin). The queue figures say so
/// meanwhile: `flowgate_queue_store_degraded` is 1 (queue traffic alone failed: no limit was
/// asked) and the gauges' age grows; once Redis is back (empty: its persistence is off) they are
/// read afresh: degraded 0, a young age, and no series left of the instance it no longer holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_waits_out_a_store_that_cannot_answer() {
    let mut redis = RedisServer::start();
    let (_dir, cfg) = config();
    let p = spawn_server(&cfg, &["--redis-url", &redis.url()]);
    let gauge = |text: &str, name: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
    };
    let metrics = || async { http(p.http, "GET", "/metrics", &[], "").await.body };
    let ready = "flowgate_queue_jobs{domain=\"payments\",queue=\"slow\",instance=\"payments:slow:channel=SLOW\",state=\"ready\"} ";
    let r = post_json(
        p.http,
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": "channel=SLOW", "payload": 1}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // The queue gauges are read every second: their age is shown.
    assert!(
        common::wait_until(Duration::from_secs(10), || async {
            gauge(&metrics().await, ready) == Some(1.0)
        })
        .await,
        "the queue's gauges never showed its job"
    );
    let before = metrics().await;
    let age = gauge(&before, "flowgate_queue_state_age_seconds ").expect("the age gauge");
    assert!(age < 2.0, "{age}");
    assert_eq!(gauge(&before, "flowgate_queue_store_degraded "), Some(0.0));
    redis.stop();
    let started = Instant::now();
    let r = post_json(
        p.http,
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": "channel=SLOW", "wait_ms": 1500}),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.header("retry-after").is_some());
    assert!(
        took >= Duration::from_millis(1_400),
        "answered after {took:?}"
    );
    let during = metrics().await;
    assert_eq!(
        gauge(&during, "flowgate_queue_store_degraded "),
        Some(1.0),
        "a failing queue store is not shown as degraded"
    );
    // Last read before Redis stopped, at least 1.4 s ago.
    let age = gauge(&during, "flowgate_queue_state_age_seconds ").expect("the age gauge");
    assert!(
        age >= 1.0,
        "the gauges claim to be {age} s old through an outage"
    );
    redis.restart();
    assert!(
        common::wait_until(Duration::from_secs(10), || async {
            let m = metrics().await;
            gauge(&m, "flowgate_queue_store_degraded ") == Some(0.0)
                && gauge(&m, "flowgate_queue_state_age_seconds ").is_some_and(|a| a < 2.0)
                && gauge(&m, ready).is_none()
        })
        .await,
        "the queue figures still show the outage, or what Redis held before it:\n{}",
        metrics()
            .await
            .lines()
            .filter(|l| l.starts_with("flowgate_queue"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// One of two servers frozen for half a second (SIGSTOP, then SIGCONT): the store's answers to
/// its leases arrive after their slots, and are re-slotted rather than sent late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_answers_are_re_slotted_when_a_server_is_frozen() {
    let redis = RedisServer::start();
    let (_dir, cfg) = config();
    let url = redis.url();
    let procs: Vec<_> = (0..2)
        .map(|_| spawn_server(&cfg, &["--redis-url", &url]))
        .collect();
    let pid = procs[1].child.id().to_string();
    spacing_through_a_stall(procs.iter().map(|p| p.http).collect(), move || {
        let signal = |s: &str| {
            let ok = std::process::Command::new("kill")
                .args([s, &pid])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "kill {s} {pid}");
        };
        signal("-STOP");
        std::thread::sleep(Duration::from_millis(500));
        signal("-CONT");
    })
    .await;
}

/// Idempotency as payment systems expect it, over HTTP on the embedded store: a key resubmitted
/// with another payload is a 409 `key_conflict` naming the job; with the same payload, a
/// duplicate carrying the job's state and place; a purge forgets the keys it deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_resubmitted_with_another_payload_is_a_conflict() {
    let (dir, cfg) = config();
    let data = dir.path().join("data");
    let p = spawn_server(
        &cfg,
        &[
            "--data-dir",
            data.to_str().unwrap(),
            "--admin-token",
            "secret-token-1-0123456789abcdef0123456789abcdef",
        ],
    );
    let submit = |payload: Value| json!({"domain": "payments", "descriptor": "channel=SLOW", "payload": payload, "key": "R-1"});
    let first = post_json(
        p.http,
        "/v1/queues/submit",
        submit(json!({"amount": "12.50"})),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let again = post_json(
        p.http,
        "/v1/queues/submit",
        submit(json!({"amount": "12.50"})),
    )
    .await;
    let a = again.json();
    assert_eq!(
        (&a["id"], &a["duplicate"], &a["state"], &a["position"]),
        (&json!(1), &json!(true), &json!("ready"), &json!(0)),
        "{a}"
    );
    let other = post_json(
        p.http,
        "/v1/queues/submit",
        submit(json!({"amount": "125.00"})),
    )
    .await;
    assert_eq!(other.status, 409, "{}", other.body);
    assert_eq!(other.json()["error"], "key_conflict");
    assert!(
        other.json()["detail"]
            .as_str()
            .unwrap()
            .contains("belongs to job id 1"),
        "{}",
        other.body
    );
    let purge = common::http(
        p.http,
        "POST",
        "/v1/queues/purge",
        &[
            (
                "authorization",
                "Bearer secret-token-1-0123456789abcdef0123456789abcdef",
            ),
            ("content-type", "application/json"),
        ],
        &json!({"domain": "payments", "descriptor": "channel=SLOW"}).to_string(),
    )
    .await;
    assert_eq!(purge.status, 200, "{}", purge.body);
    let corrected = post_json(
        p.http,
        "/v1/queues/submit",
        submit(json!({"amount": "125.00"})),
    )
    .await;
    assert_eq!(corrected.status, 200, "{}", corrected.body);
    assert_eq!(corrected.json()["duplicate"], false);
}

/// SIGTERM with leases long-polling: they answer 204 at once, a job held for its slot goes back
/// untouched (first in line, its attempt not counted), and the server exits cleanly; restarted
/// on the same data directory, it has every job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_long_polls_and_leaves_their_jobs_untouched() {
    let (dir, cfg) = config();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap().to_owned();
    let mut p = spawn_server(&cfg, &["--data-dir", &data_arg]);
    let addr = p.http;
    let jobs: Vec<Value> = ["a", "b"].iter().map(|x| json!({"payload": x})).collect();
    let r = post_json(
        addr,
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": "channel=SLOW", "jobs": jobs}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let slow = json!({"domain": "payments", "descriptor": "channel=SLOW", "wait_ms": 30000});
    assert_eq!(
        post_json(addr, "/v1/queues/lease", slow.clone())
            .await
            .json()["id"],
        1
    );
    // Job 2 is held for its slot a second ahead; another lease waits on an empty queue.
    let held = tokio::spawn(post_json(addr, "/v1/queues/lease", slow.clone()));
    let empty = tokio::spawn(post_json(
        addr,
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": "channel=STEADY", "wait_ms": 30000}),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &p.child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok);
    assert_eq!(held.await.unwrap().status, 204);
    assert_eq!(empty.await.unwrap().status, 204);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
    drop(p);
    let p = spawn_server(&cfg, &["--data-dir", &data_arg]);
    let next = post_json(p.http, "/v1/queues/lease", slow).await.json();
    assert_eq!(
        (next["id"].as_u64(), next["attempt"].as_u64()),
        (Some(2), Some(1)),
        "{next}"
    );
}
