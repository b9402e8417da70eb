//! Issue 40's load test: 64 concurrent tasks reserving 1,000-token estimates and committing
//! random actual costs against a 10,000 tokens/min limit on two servers sharing one Redis,
//! against the same load checking with cost 0 and charging the actual cost afterwards.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::common::{config, post_json, spawn_server};
use flowgate_testkit::redis::RedisServer;

/// A token bucket of 10,000 tokens a minute, debt bounded at one window's limit (the default).
const RULES: &str = r#"
domain = "llm"

[[rule]]
name = "tokens"
match = "api_key"
limit = "10000/m"
algorithm = "token_bucket"
failure = "closed"
"#;

const LIMIT: u64 = 10_000;
const MAX_DEBT: u64 = 10_000;
const TASKS: usize = 64;
const ESTIMATE: u64 = 1_000;
/// How long the load runs: admitted tokens are bounded by the limit, what the bucket refills
/// meanwhile (10,000 × RUN / 60 s) and the debt.
const RUN: Duration = Duration::from_secs(2);

/// A pseudo-random actual cost in 0..=1,500 (some past the estimate, to run into debt).
fn actual(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed % 1_501
}

/// The work an admitted request does before its cost is known (an LLM answer streaming).
const WORK: Duration = Duration::from_millis(30);

/// Runs the load on `nodes` for [`RUN`]; answers the tokens of the requests admitted.
async fn run(nodes: [SocketAddr; 2], key: &'static str, reserved: bool) -> u64 {
    let admitted = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + RUN;
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let admitted = Arc::clone(&admitted);
        let node = nodes[t % 2];
        let other = nodes[(t + 1) % 2];
        tasks.push(tokio::spawn(async move {
            let mut seed = 0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1);
            while Instant::now() < end {
                let body = if reserved {
                    json!({"domain": "llm", "descriptors": [format!("api_key={key}")], "estimate": ESTIMATE})
                } else {
                    json!({"domain": "llm", "descriptors": [format!("api_key={key}")], "cost": 0})
                };
                let path = if reserved { "/v1/reserve" } else { "/v1/check" };
                let r = post_json(node, path, body).await;
                if r.status != 200 {
                    assert_eq!(r.status, 429, "{}", r.body);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                let cost = actual(&mut seed);
                admitted.fetch_add(cost, Ordering::Relaxed);
                tokio::time::sleep(WORK).await;
                // Committed on the other node half the time.
                let body = if reserved {
                    json!({"id": r.json()["id"], "cost": cost})
                } else {
                    json!({"cost": cost, "domain": "llm", "descriptors": [format!("api_key={key}")]})
                };
                let c = post_json(other, "/v1/commit", body).await;
                assert_eq!(c.status, 200, "{}", c.body);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    admitted.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_hold_a_token_limit_that_check_then_charge_overshoots() {
    let redis = RedisServer::start();
    let url = redis.url();
    let (_dir, path) = config(RULES);
    // A deadline wide enough for a debug build on a busy machine: a store timeout would be
    // decided by the failure policy (closed: refused), not measured.
    let args = ["--redis-url", &url, "--redis-deadline", "2s"];
    let a = spawn_server(&path, &args);
    let b = spawn_server(&path, &args);
    let nodes = [a.http, b.http];
    let started = Instant::now();
    let with = run(nodes, "reserved", true).await;
    let with_secs = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let without = run(nodes, "unreserved", false).await;
    let without_secs = started.elapsed().as_secs_f64();
    // What the bucket may admit over a run: its limit, its refill meanwhile, and the debt.
    let bound = |secs: f64| LIMIT + (LIMIT as f64 * secs / 60.0).ceil() as u64 + MAX_DEBT;
    println!(
        "{TASKS} tasks, 2 servers on one Redis, {LIMIT} tokens/min, estimate {ESTIMATE}, actual 0..=1500:\n  \
         with reservations: {with} tokens admitted in {with_secs:.1} s (bound {})\n  \
         check then charge: {without} tokens admitted in {without_secs:.1} s (bound {})",
        bound(with_secs),
        bound(without_secs)
    );
    assert!(with <= bound(with_secs), "reservations overshot: {with}");
    assert!(
        without > bound(without_secs),
        "check then charge was expected to overshoot: {without}"
    );
}
