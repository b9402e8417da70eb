//! The steady load of the failover measurement, from every node at once, and what it saw:
//! limit checks under each failure policy (`open`, `closed`, `local`), a queue whose jobs are
//! submitted through one node and leased and acked through both (submits and acks wait for a
//! replica), and reports into a breaker.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;

use crate::common::{HttpResponse, http};

/// The domain of everything measured.
pub const DOMAIN: &str = "pay";
/// Each measured limit: this many a second (a fixed window), across the nodes.
pub const LIMIT: u64 = 40;
/// The nodes the limits are shared by (a `local` rule's `nodes`).
pub const NODES: u64 = 2;

/// The measured rules: (name, descriptor key, failure policy).
pub const RULES: [(&str, &str, &str); 3] = [
    ("open", "o", "open"),
    ("closed", "c", "closed"),
    ("local", "l", "local"),
];

/// The rules, the breaker and the queue (shared through Redis: `PUT /v1/rules`).
pub fn rules() -> String {
    let mut doc = format!("domain = \"{DOMAIN}\"\n");
    for (name, key, failure) in RULES {
        doc.push_str(&format!(
            "\n[[rule]]\nname = \"{name}\"\nmatch = \"{key}\"\nalgorithm = \"fixed_window\"\n\
             limit = \"{LIMIT}/s\"\nfailure = \"{failure}\"\nnodes = {NODES}\n"
        ));
    }
    doc.push_str(
        r#"
[[breaker]]
name = "dep"
match = ["dep"]
strategy = "error_ratio"
threshold = 0.5
window = "30s"
min_calls = 4
open_for = "10m"
probes = 1
probe_timeout = "2s"

[[queue]]
name = "work"
match = ["ch"]
rate = "1000/s"
burst = 100
lease = "2s"
max_attempts = 1000
"#,
    );
    doc
}

/// The Redis key of rule `rule`'s limit for its descriptor value `value`.
pub fn limit_key(rule: usize, value: u32) -> String {
    let (name, key, _) = RULES[rule];
    format!("flowgate:{{{DOMAIN}:{name}:{key}={value}}}:f1s")
}

/// The queue instance of channel `value`, and a Redis key of it.
pub fn queue_instance(value: u32) -> (String, String) {
    let instance = format!("{DOMAIN}:work:ch={value}");
    let key = format!("flowgate:q:{{{instance}}}:ready");
    (instance, key)
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    flowgate::clock::system_now() / 1000
}

/// One limit check.
#[derive(Clone, Copy, Debug)]
pub struct Check {
    pub at: u64,
    pub node: usize,
    pub rule: usize,
    pub allowed: bool,
    /// Decided by the rule's failure policy (the store failed it).
    pub policy: bool,
    /// How long the answer took, ms.
    pub took: u64,
    /// The window (Unix second) the decision counted in: for Redis's, from its reset (windows
    /// end on whole seconds), as the answer's instant may be past the end of the window it was
    /// decided in; for the policy's, from its reset when it has one (`local`), else the answer's
    /// instant.
    pub window: u64,
}

/// What the load saw.
#[derive(Default, Debug)]
pub struct Seen {
    pub checks: Vec<Check>,
    /// Jobs whose submit was answered 200 (stored on a replica too), and when.
    pub submitted: Vec<(u64, u64)>,
    /// Jobs whose submit failed (maybe stored: a `WAIT` that timed out).
    pub submit_failed: Vec<u64>,
    /// Deliveries: (job, when leased, node).
    pub delivered: Vec<(u64, u64, usize)>,
    /// Acks answered 200: (job, when).
    pub acked: Vec<(u64, u64)>,
    /// Checks not answered 200 or 429 (a connection that failed: 599).
    pub check_failed: u64,
    pub reports_ok: u64,
    pub reports_failed: u64,
}

/// The load's descriptor values: each rule's and the queue's.
#[derive(Clone, Debug)]
pub struct Targets {
    pub limits: [u32; 3],
    pub channel: u32,
}

/// The load running; [`Load::stop`] ends it.
pub struct Load {
    stop: Arc<AtomicBool>,
    stop_submits: Arc<AtomicBool>,
    pub seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    consumers: Vec<tokio::task::JoinHandle<()>>,
}

/// A POST of `body` on a fresh connection; `None` when the connection failed (counted by the
/// callers: the load goes on).
async fn post(addr: SocketAddr, path: &str, body: serde_json::Value) -> Option<HttpResponse> {
    let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .ok()?;
    tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method("POST")
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .ok()?;
    let resp = send.send_request(req).await.ok()?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.ok()?.to_bytes();
    Some(HttpResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// `post`, a failed connection answered as a 599.
async fn post_json(addr: SocketAddr, path: &str, body: serde_json::Value) -> HttpResponse {
    post(addr, path, body).await.unwrap_or(HttpResponse {
        status: 599,
        headers: Default::default(),
        body: String::new(),
    })
}

async fn check(addr: SocketAddr, descriptor: &str) -> HttpResponse {
    post_json(
        addr,
        "/v1/check",
        json!({"domain": DOMAIN, "descriptors": [descriptor]}),
    )
    .await
}

impl Load {
    /// Starts the load on `nodes`, on `targets`.
    pub fn start(nodes: &[SocketAddr], targets: &Targets) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_submits = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut tasks = Vec::new();
        for (node, &addr) in nodes.iter().enumerate() {
            for (rule, (_, key, _)) in RULES.iter().enumerate() {
                let descriptor = format!("{key}={}", targets.limits[rule]);
                let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let sent = now_ms();
                        let r = check(addr, &descriptor).await;
                        let at = now_ms();
                        if r.status == 200 || r.status == 429 {
                            let v = r.json();
                            let policy = !v["statuses"][0]["error"].is_null();
                            let reset = v["statuses"][0]["reset_after_ms"].as_f64();
                            // A failure policy's `local` decision has its own window's reset
                            // too (the fallback store's windows are aligned as Redis's are); the
                            // answer's arrival may be in the next window on a busy machine.
                            let window = match reset {
                                Some(reset) if !policy || reset > 0.0 => {
                                    ((at as f64 + reset) / 1000.0).round() as u64 - 1
                                }
                                _ => at / 1000,
                            };
                            seen.lock().checks.push(Check {
                                window,
                                at,
                                node,
                                rule,
                                allowed: v["allowed"] == true,
                                policy,
                                took: at - sent,
                            });
                        } else {
                            seen.lock().check_failed += 1;
                        }
                        tokio::time::sleep(Duration::from_millis(3)).await;
                    }
                }));
            }
            // Reports into the breaker, on an instance that stays closed.
            let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let one = json!({"domain": DOMAIN, "descriptors": ["dep=steady"], "outcome": "ok", "latency_ms": 2});
                    let r = post_json(addr, "/v1/report", json!({ "reports": [one] })).await;
                    {
                        let mut s = seen.lock();
                        if r.status == 200 {
                            s.reports_ok += 1;
                        } else {
                            s.reports_failed += 1;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }));
        }
        tasks.push(Self::producer(
            nodes[0],
            targets.channel,
            &stop_submits,
            &seen,
        ));
        let consumers = nodes
            .iter()
            .enumerate()
            .map(|(node, &addr)| Self::consumer(node, addr, targets.channel, &stop, &seen))
            .collect();
        Self {
            stop,
            stop_submits,
            seen,
            tasks,
            consumers,
        }
    }

    /// Submits job after job (its payload its number) through `addr`.
    fn producer(
        addr: SocketAddr,
        channel: u32,
        stop: &Arc<AtomicBool>,
        seen: &Arc<Mutex<Seen>>,
    ) -> tokio::task::JoinHandle<()> {
        let (stop, seen) = (Arc::clone(stop), Arc::clone(seen));
        let next = AtomicU64::new(1);
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let r = post_json(
                    addr,
                    "/v1/queues/submit",
                    json!({"domain": DOMAIN, "descriptor": format!("ch={channel}"), "payload": n, "key": format!("job-{n}")}),
                )
                .await;
                let at = now_ms();
                {
                    let mut s = seen.lock();
                    if r.status == 200 {
                        s.submitted.push((n, at));
                    } else {
                        s.submit_failed.push(n);
                    }
                }
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        })
    }

    /// Leases and acks jobs through `addr` until stopped.
    fn consumer(
        node: usize,
        addr: SocketAddr,
        channel: u32,
        stop: &Arc<AtomicBool>,
        seen: &Arc<Mutex<Seen>>,
    ) -> tokio::task::JoinHandle<()> {
        let (stop, seen) = (Arc::clone(stop), Arc::clone(seen));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let r = post_json(
                    addr,
                    "/v1/queues/lease",
                    json!({"domain": DOMAIN, "descriptor": format!("ch={channel}"), "wait_ms": 300}),
                )
                .await;
                if r.status != 200 {
                    if r.status != 204 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    continue;
                }
                let at = now_ms();
                let v = r.json();
                let Some(job) = v["payload"].as_u64() else {
                    panic!("a job without its number: {v}");
                };
                seen.lock().delivered.push((job, at, node));
                let ack = post_json(addr, "/v1/queues/ack", json!({"token": v["token"]})).await;
                if ack.status == 200 && ack.json()["acked"] == true {
                    seen.lock().acked.push((job, now_ms()));
                }
            }
        })
    }

    /// Stops the submits; the consumers go on.
    pub fn stop_submits(&self) {
        self.stop_submits.store(true, Ordering::Relaxed);
    }

    /// Whether every job submitted with a 200 was delivered.
    pub fn drained(&self) -> bool {
        let s = self.seen.lock();
        let delivered: std::collections::HashSet<u64> =
            s.delivered.iter().map(|(j, _, _)| *j).collect();
        s.submitted.iter().all(|(j, _)| delivered.contains(j))
    }

    /// Stops everything and waits for the tasks.
    pub async fn stop(self) -> Arc<Mutex<Seen>> {
        self.stop_submits.store(true, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks.into_iter().chain(self.consumers) {
            t.await
                .unwrap_or_else(|e| panic!("a load task failed: {e}"));
        }
        self.seen
    }
}

/// Puts the shared rules through `addr` (answered 200, once a replica holds them).
pub async fn put_rules(addr: SocketAddr, doc: &str) -> HttpResponse {
    let auth = format!("Bearer {}", super::TOKEN);
    http(
        addr,
        "PUT",
        "/v1/rules",
        &[
            ("content-type", "application/toml"),
            ("authorization", &auth),
        ],
        doc,
    )
    .await
}

/// The shared rules' version as `addr` follows it.
pub async fn rules_version(addr: SocketAddr) -> u64 {
    let auth = format!("Bearer {}", super::TOKEN);
    let r = http(addr, "GET", "/v1/rules", &[("authorization", &auth)], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["version"].as_u64().unwrap_or(0)
}

/// Opens the breaker's instance `dep=down` (errors reported through `addr`).
pub async fn open_breaker(addr: SocketAddr) {
    let one =
        json!({"domain": DOMAIN, "descriptors": ["dep=down"], "outcome": "error", "latency_ms": 2});
    let r = post_json(addr, "/v1/report", json!({ "reports": vec![one; 6] })).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Whether `addr` refuses `dep=down` as its breaker is open.
pub async fn breaker_open(addr: SocketAddr) -> bool {
    let r = check(addr, "dep=down").await;
    r.status == 429 && r.json()["reason"] == "circuit_open"
}
