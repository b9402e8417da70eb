//! A Redis whose eviction policy may drop keys without expiry (queued jobs, the shared rules) is
//! refused at start, or with `--redis-allow-eviction` run with a warning in `/readyz` and a
//! metric; limit state alone (keys that expire) runs on any policy.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{config, http, spawn_server};
use flowgate_testkit::redis::{RedisServer, raw_command};

const WITH_QUEUE: &str = r#"
[[rule]]
domain = "api"
name = "per-user"
match = "user"
limit = "5/s"

[[queue]]
domain = "payments"
name = "refunds"
match = ["channel"]
rate = "1/s"
"#;

const RULES_ONLY: &str = r#"
[[rule]]
domain = "api"
name = "per-user"
match = "user"
limit = "5/s"
"#;

fn redis_with(policy: &str) -> RedisServer {
    let redis = RedisServer::start();
    let ok = raw_command(
        redis.port(),
        &format!("CONFIG SET maxmemory-policy {policy}"),
    )
    .unwrap();
    assert!(ok.starts_with("+OK"), "{ok}");
    redis
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
}

#[test]
fn queues_on_an_evicting_redis_are_refused_at_start() {
    let redis = redis_with("allkeys-lru");
    let (_dir, cfg) = config(WITH_QUEUE);
    let cwd = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flowgate"))
        .current_dir(cwd.path())
        .args(["serve", "--config"])
        .arg(&cfg)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .args(["--redis-url", &redis.url()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Up to 20 s for it to exit.
    let mut status = None;
    for _ in 0..400 {
        status = child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let Some(status) = status else {
        let _ = child.kill();
        panic!("the server started on an allkeys-lru Redis");
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(
        err.contains("maxmemory-policy is allkeys-lru")
            && err.contains("noeviction")
            && err.contains("--redis-allow-eviction"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_eviction_runs_with_a_warning() {
    let redis = redis_with("allkeys-lfu");
    let (_dir, cfg) = config(WITH_QUEUE);
    let p = spawn_server(
        &cfg,
        &["--redis-url", &redis.url(), "--redis-allow-eviction"],
    );
    let ready = http(p.http, "GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    let warnings = ready.json()["warnings"].clone();
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.contains("allkeys-lfu")),
        "{warnings}"
    );
    let m = http(p.http, "GET", "/metrics", &[], "").await.body;
    assert_eq!(metric(&m, "flowgate_redis_eviction_risk "), Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_safe_policy_or_limits_alone_run_without_a_warning() {
    let redis = redis_with("volatile-lru");
    let (_dir, cfg) = config(WITH_QUEUE);
    let p = spawn_server(&cfg, &["--redis-url", &redis.url()]);
    let ready = http(p.http, "GET", "/readyz", &[], "").await.json();
    assert_eq!(ready["warnings"], serde_json::json!([]));
    let m = http(p.http, "GET", "/metrics", &[], "").await.body;
    assert_eq!(metric(&m, "flowgate_redis_eviction_risk "), Some(0.0));
    // Limit state expires: an evicting Redis is fine for rules from files and no queue.
    let evicting = redis_with("allkeys-random");
    let (_dir2, rules) = config(RULES_ONLY);
    let q = spawn_server(&rules, &["--redis-url", &evicting.url()]);
    let ready = http(q.http, "GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200, "{}", ready.body);
}
