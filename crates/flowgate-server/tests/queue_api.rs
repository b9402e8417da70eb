//! The queue HTTP API's payloads, bounds and answers, in-process on loopback: payloads returned
//! byte-exact on lease and in the dead letters, on the embedded store and on Redis; every delay
//! and queue duration bounded, with a 400 (or a refused configuration) naming the field, its
//! value and the maximum; each 413 stating the bound that applies and the user's own bytes;
//! `Retry-After` on every 429 and 503; and the start-up line naming where jobs are kept.

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::{TestServer, http, post_json};
use flowgate_testkit::redis::RedisServer;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

const CONFIG: &str = r#"
domain = "payments"

# Payload round trips: every job leasable at once, dead on its first nack.
[[queue]]
name = "exact"
match = ["channel=EXACT"]
rate = "1000/s"
burst = 100
max_attempts = 1

# Bounds: one job at most, one release a minute, 64-byte payloads.
[[queue]]
name = "small"
match = ["channel=SMALL"]
rate = "1/min"
max_depth = 1
max_payload = 64

[[queue]]
name = "tiny"
match = ["channel=TINY"]
rate = "1/s"
max_payload = 64

[[rule]]
domain = "api"
name = "one"
match = "client"
limit = "1/min"
algorithm = "fixed_window"
failure = "closed"
"#;

async fn start() -> TestServer {
    TestServer::start(&[("q.toml", CONFIG)]).await
}

async fn start_on(redis: &RedisServer) -> TestServer {
    let url = redis.url();
    TestServer::start_with(&[("q.toml", CONFIG)], |mut c| {
        c.redis_url = Some(url);
        c.redis_deadline = Duration::from_millis(500);
        c
    })
    .await
}

/// A payload as the test submits it, and as it must come back.
enum Sent {
    /// JSON text, sent as `payload` and answered as that text.
    Json(String),
    /// Bytes, sent as `payload_base64` and answered as such.
    Bytes(Vec<u8>),
}

impl Sent {
    fn job(&self) -> String {
        match self {
            Sent::Json(t) => format!(r#"{{"payload":{t}}}"#),
            Sent::Bytes(b) => format!(r#"{{"payload_base64":"{}"}}"#, BASE64.encode(b)),
        }
    }

    fn check(&self, got: &Answered, where_: &str) {
        match self {
            Sent::Json(t) => {
                assert!(got.payload_base64.is_none(), "{where_}: answered as bytes");
                let raw = got.payload.as_ref().map(|p| p.get());
                assert!(
                    raw == Some(t.as_str()),
                    "{where_}: payload {} answered as {}",
                    short(t),
                    short(raw.unwrap_or("nothing"))
                );
            }
            Sent::Bytes(b) => {
                assert!(got.payload.is_none(), "{where_}: answered as JSON");
                assert_eq!(
                    got.payload_base64.as_deref(),
                    Some(BASE64.encode(b).as_str()),
                    "{where_}"
                );
            }
        }
    }
}

fn short(t: &str) -> String {
    if t.len() > 60 {
        format!("{}… ({} bytes)", &t[..60], t.len())
    } else {
        t.to_owned()
    }
}

/// A delivery or a dead letter, its payload read as raw text.
#[derive(Deserialize)]
struct Answered {
    id: u64,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    payload: Option<Box<RawValue>>,
    #[serde(default)]
    payload_base64: Option<String>,
}

#[derive(Deserialize)]
struct DeadList {
    jobs: Vec<Answered>,
}

fn cases() -> Vec<Sent> {
    let deep_arrays = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_objects = format!("{}null{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
    let all_bytes: Vec<u8> = (0..=255).collect();
    vec![
        Sent::Json("12345678901234567890.123456789".into()),
        Sent::Json(r#"{"b":1,"a":2}"#.into()),
        Sent::Json(r#"{"a":1,"a":2}"#.into()),
        Sent::Json(r#""\u00e9""#.into()),
        Sent::Json(
            r#"{"name": "caf\u00e9 \ud83d\ude00", "amount": 12.50, "list": [1.0, -0, 1E+2]}"#
                .into(),
        ),
        Sent::Json(deep_arrays),
        Sent::Json(deep_objects),
        Sent::Bytes(br#"{"a":1}"#.to_vec()),
        Sent::Bytes(b"12".to_vec()),
        Sent::Bytes(vec![0, 1, 2]),
        Sent::Bytes(vec![0]),
        Sent::Bytes(all_bytes),
        Sent::Bytes(Vec::new()),
    ]
}

/// Submits every case as one batch, leases each (checking its payload), nacks it into the dead
/// letters, and checks the dead letters' payloads.
async fn round_trips(s: &TestServer, store: &str) {
    let cases = cases();
    let jobs: Vec<String> = cases.iter().map(Sent::job).collect();
    let body = format!(
        r#"{{"domain":"payments","descriptor":"channel=EXACT","jobs":[{}]}}"#,
        jobs.join(",")
    );
    let r = http(
        s.http(),
        "POST",
        "/v1/queues/submit",
        &[("content-type", "application/json")],
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{store}: {}", short(&r.body));
    let ids: Vec<u64> = r.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids.len(), cases.len());
    let sent_for = |id: u64| {
        let i = ids.iter().position(|&x| x == id).expect("a submitted id");
        &cases[i]
    };

    for _ in 0..cases.len() {
        let r = post_json(
            s.http(),
            "/v1/queues/lease",
            json!({"domain": "payments", "descriptor": "channel=EXACT", "wait_ms": 2000}),
        )
        .await;
        assert_eq!(r.status, 200, "{store}: {}", short(&r.body));
        let got: Answered = serde_json::from_str(&r.body).unwrap();
        let sent = sent_for(got.id);
        sent.check(&got, &format!("{store}, lease of job {}", got.id));
        if let Sent::Json(t) = sent {
            assert!(
                r.body.contains(&format!(r#""payload":{t}"#)),
                "{store}: the answer does not hold the text as sent"
            );
        }
        let r = post_json(s.http(), "/v1/queues/nack", json!({"token": got.token})).await;
        assert_eq!((r.status, r.json()["state"].as_str()), (200, Some("dead")));
    }

    let r = post_json(
        s.http(),
        "/v1/queues/dead",
        json!({"domain": "payments", "descriptor": "channel=EXACT", "limit": 1000}),
    )
    .await;
    assert_eq!(r.status, 200, "{store}: {}", short(&r.body));
    let dead: DeadList = serde_json::from_str(&r.body).unwrap();
    assert_eq!(dead.jobs.len(), cases.len());
    for got in &dead.jobs {
        sent_for(got.id).check(got, &format!("{store}, dead letter {}", got.id));
    }
}

#[tokio::test]
async fn payloads_come_back_as_submitted_on_the_embedded_store() {
    let s = start().await;
    round_trips(&s, "embedded").await;
}

#[tokio::test]
async fn payloads_come_back_as_submitted_on_redis() {
    let redis = RedisServer::start();
    let s = start_on(&redis).await;
    round_trips(&s, "redis").await;
}

/// The server's clock for `not_before_ms` (the system clock), in ms.
fn now_ms() -> u64 {
    flowgate::clock::Clock::now(&flowgate::clock::SystemClock::new()) / 1000
}

const DAY_MS: u64 = 86_400_000;

async fn submit(s: &TestServer, channel: &str, extra: Value) -> common::HttpResponse {
    let mut body = json!({"domain": "payments", "descriptor": format!("channel={channel}")});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    post_json(s.http(), "/v1/queues/submit", body).await
}

fn detail(r: &common::HttpResponse) -> String {
    r.json()["detail"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn delays_are_bounded_at_30_days_and_wait_at_60_s() {
    let s = start().await;
    // not_before_ms: at most 30 days after now.
    let far = now_ms() + 31 * DAY_MS;
    let r = submit(&s, "TINY", json!({"payload": 1, "not_before_ms": far})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let d = detail(&r);
    assert!(
        d.contains("`not_before_ms`") && d.contains(&far.to_string()) && d.contains("30 days"),
        "{d}"
    );
    let r = submit(
        &s,
        "TINY",
        json!({"jobs": [{"payload": 1}, {"payload": 2, "not_before_ms": u64::MAX}]}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(detail(&r).contains("`jobs[1].not_before_ms`"), "{}", r.body);
    let near = now_ms() + 29 * DAY_MS;
    let r = submit(&s, "TINY", json!({"payload": 1, "not_before_ms": near})).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // retry_after_ms: at most 30 days.
    let r = submit(&s, "SMALL", json!({"payload": 1})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = post_json(
        s.http(),
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": "channel=SMALL"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let token = r.json()["token"].clone();
    let over = 30 * DAY_MS + 1;
    let r = post_json(
        s.http(),
        "/v1/queues/nack",
        json!({"token": token, "retry_after_ms": over}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let d = detail(&r);
    assert!(
        d.contains("`retry_after_ms`") && d.contains(&over.to_string()) && d.contains("2592000000"),
        "{d}"
    );
    let r = post_json(
        s.http(),
        "/v1/queues/nack",
        json!({"token": token, "retry_after_ms": 30 * DAY_MS}),
    )
    .await;
    assert_eq!((r.status, r.json()["state"].as_str()), (200, Some("retry")));

    // wait_ms: at most 60 s.
    let r = post_json(
        s.http(),
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": "channel=TINY", "wait_ms": 60_001}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        detail(&r).contains("`wait_ms`") && detail(&r).contains("60000"),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn each_413_states_its_bound_and_the_bytes_sent() {
    let s = start().await;
    // A payload_base64 counts its marker byte: 63 bytes fit in 64, 64 do not.
    let r = submit(
        &s,
        "TINY",
        json!({"payload_base64": BASE64.encode([7u8; 63])}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = submit(
        &s,
        "TINY",
        json!({"payload_base64": BASE64.encode([7u8; 64])}),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (413, Some("payload_too_large"))
    );
    assert_eq!(
        detail(&r),
        "`payload_base64` is 64 bytes (65 stored, with the 1-byte marker of a payload_base64), more than the queue's max_payload of 64 bytes"
    );
    // A JSON payload is its text, as sent.
    let text = format!("\"{}\"", "x".repeat(63));
    let r = http(
        s.http(),
        "POST",
        "/v1/queues/submit",
        &[("content-type", "application/json")],
        &format!(
            r#"{{"domain":"payments","descriptor":"channel=TINY","jobs":[{{"payload":1}},{{"payload":{text}}}]}}"#
        ),
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(
        detail(&r),
        "`jobs[1].payload` is 65 bytes of JSON text, more than the queue's max_payload of 64 bytes"
    );

    // A submit body over 32 MiB, and another route's over 64 KiB.
    let big = format!(
        r#"{{"domain":"payments","descriptor":"channel=TINY","payload":"{}"}}"#,
        "x".repeat(32 << 20)
    );
    let r = http(
        s.http(),
        "POST",
        "/v1/queues/submit",
        &[("content-type", "application/json")],
        &big,
    )
    .await;
    assert_eq!(r.status, 413, "{}", short(&r.body));
    assert!(detail(&r).contains("32 MiB (33554432 bytes)"), "{}", r.body);
    let r = http(
        s.http(),
        "POST",
        "/v1/queues/lease",
        &[("content-type", "application/json")],
        &big[..(64 << 10) + 1],
    )
    .await;
    assert_eq!(r.status, 413, "{}", short(&r.body));
    assert!(detail(&r).contains("64 KiB (65536 bytes)"), "{}", r.body);
}

#[test]
fn queue_durations_past_their_maximum_are_refused_naming_file_line_and_field() {
    let load = |extra: &str| {
        let text = format!(
            "domain = \"d\"\n[[queue]]\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\n{extra}\n"
        );
        flowgate_config::load_texts(&[("q.toml".to_owned(), text)])
    };
    for (field, ok, bad, max) in [
        ("lease", "12h", "13h", "12h"),
        ("retry_backoff", "1h", "61m", "1h"),
        ("key_retention", "30d", "31d", "30d"),
    ] {
        assert!(load(&format!("{field} = \"{ok}\"")).is_ok(), "{field} {ok}");
        let e = load(&format!("{field} = \"{bad}\""))
            .err()
            .unwrap_or_else(|| panic!("{field} {bad} was accepted"));
        assert_eq!(
            (e.file.as_str(), e.line, e.field.as_str()),
            ("q.toml", Some(6), format!("queue[0].{field}").as_str()),
            "{e}"
        );
        assert!(
            e.message.contains(&format!("above the maximum of {max}")),
            "{e}"
        );
    }
}

/// Calls `f`, failing the test if it takes more than 10 s.
async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .unwrap_or_else(|_| panic!("{what} took more than 10 s"))
}

fn retry_after(r: &common::HttpResponse) -> u64 {
    r.header("retry-after")
        .unwrap_or_else(|| panic!("{} without Retry-After: {}", r.status, r.body))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn every_429_and_503_says_when_to_retry() {
    // 429s: a full queue (retry after its spacing, 60 s here) and the limiter.
    let s = start().await;
    assert_eq!(submit(&s, "SMALL", json!({"payload": 1})).await.status, 200);
    let r = submit(&s, "SMALL", json!({"payload": 2})).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (429, Some("queue_full"))
    );
    assert_eq!(retry_after(&r), 60);
    let check = json!({"domain": "api", "descriptors": ["client=1"]});
    assert_eq!(
        post_json(s.http(), "/v1/check", check.clone()).await.status,
        200
    );
    let r = post_json(s.http(), "/v1/check", check.clone()).await;
    assert_eq!(r.status, 429);
    assert!((1..=60).contains(&retry_after(&r)), "{:?}", r.headers);

    // 503s (and a 429 decided closed) with the store gone: 1 s.
    let mut redis = RedisServer::start();
    let s = start_on(&redis).await;
    assert_eq!(submit(&s, "SMALL", json!({"payload": 1})).await.status, 200);
    redis.stop();
    let q = json!({"domain": "payments", "descriptor": "channel=SMALL"});
    let answers = [
        (
            "submit",
            bounded("submit", submit(&s, "SMALL", json!({"payload": 2}))).await,
        ),
        (
            "lease",
            bounded("lease", post_json(s.http(), "/v1/queues/lease", q.clone())).await,
        ),
        (
            "dead",
            bounded("dead", post_json(s.http(), "/v1/queues/dead", q.clone())).await,
        ),
        (
            "list",
            bounded("list", http(s.http(), "GET", "/v1/queues", &[], "")).await,
        ),
        (
            "store",
            bounded("store", http(s.http(), "GET", "/v1/store", &[], "")).await,
        ),
    ];
    for (what, r) in &answers {
        assert_eq!(r.status, 503, "{what}: {}", r.body);
        assert_eq!(retry_after(r), 1, "{what}");
    }
    let r = bounded("check", post_json(s.http(), "/v1/check", check)).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(retry_after(&r), 1);
}

/// The `flowgate serving` line of a server process started with `extra` arguments.
fn serving_line(config: &std::path::Path, cwd: &std::path::Path, extra: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flowgate"))
        .current_dir(cwd)
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
    let line = rx.recv_timeout(Duration::from_secs(20));
    let _ = child.kill();
    let _ = child.wait();
    line.expect("the server starts")
}

#[test]
fn the_start_up_line_says_where_jobs_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("q.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let line = serving_line(&config, dir.path(), &[]);
    let file = dir.path().join("flowgate-data").join("queues.redb");
    assert!(
        line.contains(r#"store="memory""#)
            && line.contains(r#"queues="disk""#)
            && line.contains(&format!("queues_path={}", file.display())),
        "{line}"
    );
    let redis = RedisServer::start();
    let line = serving_line(&config, dir.path(), &["--redis-url", &redis.url()]);
    assert!(
        line.contains(r#"store="redis""#)
            && line.contains(r#"queues="redis""#)
            && !line.contains("queues_path"),
        "{line}"
    );
}
