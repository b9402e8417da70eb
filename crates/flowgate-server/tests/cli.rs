//! The `flowgate` binary: help, version, bad configuration, clean shutdown on SIGTERM, and two
//! server processes sharing limits exactly through one Redis.

mod common;

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_flowgate");

fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn help_and_version() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("serve") && text.contains("bench"), "{text}");
    let out = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FLOWGATE_REDIS_URL") && text.contains("--grpc-addr"),
        "{text}"
    );
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn bad_config_exits_non_zero_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[rule]]\ndomain = \"d\"\nname = \"a\"\nmatch = \"user\"\nlimit = \"ten/s\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&bad)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:5: field `rule[0].limit`"), "{err}");
    let out = Command::new(BIN)
        .args(["serve", "--config", "/nonexistent/flowgate.toml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

struct Proc {
    child: Child,
    http: SocketAddr,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `flowgate serve` on ephemeral ports and reads its addresses from its log.
fn spawn(config: &std::path::Path, extra: &[&str]) -> Proc {
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(config)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .args(extra)
        .env("FLOWGATE_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("flowgate serving") {
                let _ = tx.send(line);
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("server start");
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http_addr="))
        .unwrap()
        .parse()
        .unwrap();
    Proc { child, http: addr }
}

#[tokio::test]
async fn sigterm_exits_zero() {
    let mut p = spawn(&examples().join("flowgate.toml"), &[]);
    let r = common::post_json(
        p.http,
        "/v1/check",
        json!({"domain": "api", "descriptors": ["client=1"]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let ok = Command::new("kill")
        .args(["-TERM", &p.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = p.child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(tokio::time::Instant::now() < end, "no exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn two_processes_on_one_redis_share_limits_exactly() {
    let redis = flowgate_testkit::redis::RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("shared.toml");
    std::fs::write(
        &cfg,
        "[[rule]]\ndomain = \"d\"\nname = \"shared\"\nmatch = \"user\"\nlimit = \"25/1h\"\nalgorithm = \"sliding_log\"\n",
    )
    .unwrap();
    let url = redis.url();
    let a = spawn(&cfg, &["--redis-url", &url]);
    let b = spawn(&cfg, &["--redis-url", &url]);
    let r = common::http(a.http, "GET", "/readyz", &[], "").await;
    assert_eq!((r.status, r.json()["store"].clone()), (200, json!("redis")));
    // 40 requests, 20 to each, concurrently: exactly 25 admitted in total.
    let mut tasks = Vec::new();
    for i in 0..40 {
        let addr = if i % 2 == 0 { a.http } else { b.http };
        tasks.push(tokio::spawn(async move {
            common::post_json(
                addr,
                "/v1/check",
                json!({"domain": "d", "descriptors": ["user=7"]}),
            )
            .await
            .status
        }));
    }
    let mut admitted = 0;
    let mut rejected = 0;
    for t in tasks {
        match t.await.unwrap() {
            200 => admitted += 1,
            429 => rejected += 1,
            s => panic!("status {s}"),
        }
    }
    assert_eq!((admitted, rejected), (25, 15));
}
