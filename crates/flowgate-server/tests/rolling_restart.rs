//! A rolling restart with no failed request: three `flowgate serve` processes on one real Redis
//! (same rules, one shared queue) behind a load balancer that behaves as a Kubernetes Service
//! with a readiness probe: it polls each node's `/readyz` every 100 ms and sends a request only
//! to a node whose last answer was 200 (its connections kept alive, as a proxy's are). Under a
//! mix of HTTP checks, `acquire` held in `delay` mode, gRPC `ShouldRateLimit`, breaker reports,
//! queue submits and workers that long-poll leases and ack, the nodes are restarted one by one
//! (SIGTERM, exit, start again on the same ports, ready). Not one request fails (no connection
//! error, no 5xx, no gRPC error), every job submitted is delivered and acked exactly once, and
//! each node exits with status 0 within its documented bound (drain delay + shutdown grace +
//! the flush bound).
//!
//! And a node stopped right after its last requests leaves them to the cluster: its breaker
//! reports (still queued for Redis) open the breaker on the other node, and its last second of
//! figures is in the cluster's.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Proc, spawn_server_at, wait_until};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use flowgate_testkit::redis::RedisServer;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::time::Instant;
use tonic::transport::Channel;

const CONFIG: &str = r#"domain = "pay"

[[rule]]
name = "per-client"
match = "client"
limit = "100000/s"

# Four shapers against 4/s: their holds grow towards max_wait, longer than the drain delay.
[[rule]]
name = "shaped"
match = "channel=WPG"
limit = "4/s"
algorithm = "leaky_bucket"
mode = "delay"
max_wait = "1500ms"

[[breaker]]
name = "dep"
match = ["dep"]
strategy = "error_ratio"
threshold = 0.5
window = "10s"
min_calls = 4
open_for = "30s"

[[queue]]
name = "jobs"
match = ["channel=JOBS"]
rate = "500/s"
lease = "20s"

# Never given a job: its long-polls are waiting when a port closes.
[[queue]]
name = "idle"
match = ["channel=IDLE"]
rate = "1/s"
"#;

/// The load balancer's readiness poll, and the drain delay set longer, as the docs tell.
const POLL: Duration = Duration::from_millis(100);
const DRAIN: Duration = Duration::from_secs(1);
const GRACE: Duration = Duration::from_secs(5);
/// A node exits within drain delay + grace + the flush bound ...
const BOUND: Duration = Duration::from_secs(1 + 5 + 2);
/// ... plus the process's own teardown, on a busy machine.
const EXIT_SLACK: Duration = Duration::from_secs(1);
/// A worker's long-poll wait: longer than the drain delay, so that some are waiting when a port
/// closes.
const LEASE_WAIT_MS: u64 = 3_000;
/// The wait of a long-poll on the idle queue: longer than a node's whole shutdown bound.
const IDLE_WAIT_MS: u64 = 20_000;

type Http = Client<HttpConnector, Full<Bytes>>;

/// One node as the balancer sees it: its addresses, its readiness at the last poll, and a gRPC
/// channel made again for each run of the process (`incarnation`).
struct Node {
    http: SocketAddr,
    grpc: SocketAddr,
    ready: AtomicBool,
    incarnation: AtomicU64,
    channel: Mutex<Option<(u64, RateLimitServiceClient<Channel>)>>,
}

/// A Service in front of the nodes, and what went through it.
struct Balancer {
    nodes: Vec<Node>,
    next: AtomicUsize,
    client: Http,
    failures: Mutex<Vec<String>>,
    sent: Mutex<HashMap<&'static str, u64>>,
}

impl Balancer {
    fn new(addrs: &[(SocketAddr, SocketAddr)]) -> Arc<Self> {
        Arc::new(Self {
            nodes: addrs
                .iter()
                .map(|&(http, grpc)| Node {
                    http,
                    grpc,
                    ready: AtomicBool::new(false),
                    incarnation: AtomicU64::new(0),
                    channel: Mutex::new(None),
                })
                .collect(),
            next: AtomicUsize::new(0),
            client: Client::builder(hyper_util::rt::TokioExecutor::new()).build_http(),
            failures: Mutex::new(Vec::new()),
            sent: Mutex::new(HashMap::new()),
        })
    }

    /// Polls every node's `/readyz` every [`POLL`] until `stop`.
    async fn poll(self: Arc<Self>, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::Relaxed) {
            for n in &self.nodes {
                let req = hyper::Request::get(format!("http://{}/readyz", n.http))
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                let ready = matches!(
                    tokio::time::timeout(POLL * 5, self.client.request(req)).await,
                    Ok(Ok(r)) if r.status() == 200
                );
                if ready && !n.ready.load(Ordering::Relaxed) {
                    n.incarnation.fetch_add(1, Ordering::Relaxed);
                }
                n.ready.store(ready, Ordering::Relaxed);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A ready node, round robin (waits while none is).
    async fn pick(&self) -> &Node {
        loop {
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            let n = self.nodes.len();
            if let Some(i) = (0..n)
                .map(|k| (start + k) % n)
                .find(|&i| self.nodes[i].ready.load(Ordering::Relaxed))
            {
                return &self.nodes[i];
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn failed(&self, what: String) {
        self.failures.lock().push(what);
    }

    fn count(&self, kind: &'static str) {
        *self.sent.lock().entry(kind).or_default() += 1;
    }

    /// POSTs `body` to `path` on a ready node: its status and JSON body, or `None` when it
    /// failed (a connection error, a 5xx, no answer within 10 s: recorded as a failure).
    async fn post(&self, kind: &'static str, path: &str, body: Value) -> Option<(u16, Value)> {
        self.count(kind);
        let node = self.pick().await;
        let req = hyper::Request::post(format!("http://{}{path}", node.http))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(10), async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("{e:?}"))?;
            let status = resp.status().as_u16();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("body: {e}"))?
                .to_bytes();
            Ok::<_, String>((
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            ))
        })
        .await;
        match answer {
            Ok(Ok((status, v))) if status < 500 => Some((status, v)),
            Ok(Ok((status, v))) => {
                self.failed(format!("{kind} on {}: {status} {v}", node.http));
                None
            }
            Ok(Err(e)) => {
                self.failed(format!("{kind} on {}: {e}", node.http));
                None
            }
            Err(_) => {
                self.failed(format!("{kind} on {}: no answer within 10 s", node.http));
                None
            }
        }
    }

    /// `ShouldRateLimit` on a ready node, through its channel for the node's current run.
    async fn should_rate_limit(&self, client: &str) {
        self.count("grpc");
        let node = self.pick().await;
        let inc = node.incarnation.load(Ordering::Relaxed);
        let mut c = {
            let mut slot = node.channel.lock();
            match &*slot {
                Some((i, c)) if *i == inc => c.clone(),
                _ => {
                    let ch =
                        tonic::transport::Endpoint::from_shared(format!("http://{}", node.grpc))
                            .unwrap()
                            .connect_lazy();
                    let c = RateLimitServiceClient::new(ch);
                    *slot = Some((inc, c.clone()));
                    c
                }
            }
        };
        let req = RateLimitRequest {
            domain: "pay".into(),
            descriptors: vec![common::descriptor(&[("client", client)])],
            hits_addend: 1,
        };
        match tokio::time::timeout(Duration::from_secs(10), c.should_rate_limit(req)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => self.failed(format!("grpc on {}: {e}", node.grpc)),
            Err(_) => self.failed(format!("grpc on {}: no answer within 10 s", node.grpc)),
        }
    }
}

/// Jobs submitted, delivered and acked, by id.
#[derive(Default)]
struct Jobs {
    submitted: Vec<u64>,
    delivered: HashMap<u64, u32>,
    acked: HashMap<u64, u32>,
}

/// Acquires held in `delay` mode at least half a second before their answer.
static LONG_HOLDS: AtomicU64 = AtomicU64::new(0);

/// One kind of traffic, every ~10 ms until `stop`.
async fn generate(lb: Arc<Balancer>, kind: usize, jobs: Arc<Mutex<Jobs>>, stop: Arc<AtomicBool>) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        match kind {
            0 => {
                let body = json!({"domain": "pay", "descriptors": [format!("client={}", i % 50)]});
                if let Some((s, v)) = lb.post("check", "/v1/check", body).await {
                    assert!(s == 200 || s == 429, "check: {s} {v}");
                }
            }
            1 => {
                let body = json!({"domain": "pay", "descriptors": ["channel=WPG"], "hold": true});
                let sent = Instant::now();
                if let Some((s, v)) = lb.post("acquire", "/v1/acquire", body).await {
                    assert!(s == 200 || s == 429, "acquire: {s} {v}");
                    if s == 200 && sent.elapsed() >= Duration::from_millis(500) {
                        LONG_HOLDS.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            2 => lb.should_rate_limit(&format!("g{}", i % 50)).await,
            3 => {
                // One error in five: the breaker's ratio stays under its threshold.
                let outcome = |k: u64| {
                    if (i + k).is_multiple_of(5) {
                        "error"
                    } else {
                        "ok"
                    }
                };
                let reports: Vec<Value> = (0..5)
                    .map(|k| json!({"domain": "pay", "descriptors": ["dep=ledger"], "outcome": outcome(k), "latency_ms": 3}))
                    .collect();
                if let Some((s, v)) = lb
                    .post("report", "/v1/report", json!({ "reports": reports }))
                    .await
                {
                    assert_eq!(s, 200, "report: {v}");
                }
            }
            _ => {
                let body = json!({"domain": "pay", "descriptor": "channel=JOBS", "jobs": [{"payload": {"n": i}}]});
                if let Some((s, v)) = lb.post("submit", "/v1/queues/submit", body).await {
                    assert_eq!(s, 200, "submit: {v}");
                    let id = v["jobs"][0]["id"].as_u64().expect("a job id");
                    jobs.lock().submitted.push(id);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A worker: long-polls a lease on a ready node, acks through the balancer, until `stop`.
async fn work(lb: Arc<Balancer>, jobs: Arc<Mutex<Jobs>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let body = json!({"domain": "pay", "descriptor": "channel=JOBS", "wait_ms": LEASE_WAIT_MS});
        let Some((s, job)) = lb.post("lease", "/v1/queues/lease", body).await else {
            continue;
        };
        if s == 204 {
            continue;
        }
        assert_eq!(s, 200, "lease: {job}");
        let id = job["id"].as_u64().expect("a job id");
        *jobs.lock().delivered.entry(id).or_default() += 1;
        let ack = json!({"token": job["token"]});
        if let Some((s, v)) = lb.post("ack", "/v1/queues/ack", ack).await {
            assert_eq!(s, 200, "ack of job {id}: {v}");
            *jobs.lock().acked.entry(id).or_default() += 1;
        }
    }
}

/// Long-polls on the idle queue answered 204 well before their wait: by a port closing.
static CLOSED_POLLS: AtomicU64 = AtomicU64::new(0);

/// Long-polls the idle queue (no job ever), over and over, on ready nodes.
async fn idle_poll(lb: Arc<Balancer>) {
    loop {
        let body = json!({"domain": "pay", "descriptor": "channel=IDLE", "wait_ms": IDLE_WAIT_MS});
        let sent = Instant::now();
        if let Some((s, v)) = lb.post("idle lease", "/v1/queues/lease", body).await {
            assert_eq!(s, 204, "idle lease: {v}");
            if sent.elapsed() < Duration::from_millis(IDLE_WAIT_MS / 2) {
                CLOSED_POLLS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Free loopback addresses, as `127.0.0.1:port` (bound, then let go).
fn free_addrs(n: usize) -> Vec<SocketAddr> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter().map(|l| l.local_addr().unwrap()).collect()
}

async fn start(
    config: std::path::PathBuf,
    http: SocketAddr,
    grpc: SocketAddr,
    args: Vec<String>,
) -> Proc {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        spawn_server_at(&config, &http.to_string(), &grpc.to_string(), &args)
    })
    .await
    .unwrap()
}

fn sigterm(p: &Proc) {
    let ok = Command::new("kill")
        .args(["-TERM", &p.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// SIGTERM, then the exit: its status and how long it took (panics past [`BOUND`] + 10 s).
async fn stop_node(p: &mut Proc) -> (std::process::ExitStatus, Duration) {
    let started = Instant::now();
    sigterm(p);
    loop {
        if let Some(status) = p.child.try_wait().unwrap() {
            return (status, started.elapsed());
        }
        assert!(
            started.elapsed() < BOUND + Duration::from_secs(10),
            "node {} never exited after SIGTERM",
            p.http
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn node_args(url: &str, id: &str, drain: Duration) -> Vec<String> {
    [
        "--redis-url",
        url,
        "--redis-deadline",
        "2s",
        "--node-id",
        id,
        "--drain-delay",
        &format!("{}ms", drain.as_millis()),
        "--shutdown-grace",
        &format!("{}ms", GRACE.as_millis()),
    ]
    .map(String::from)
    .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_restarted_one_by_one_under_load_fail_no_request_and_lose_no_job() {
    let redis = RedisServer::start();
    let (_dir, cfg) = common::config(CONFIG);
    let addrs = free_addrs(6);
    let pairs: Vec<(SocketAddr, SocketAddr)> =
        (0..3).map(|i| (addrs[2 * i], addrs[2 * i + 1])).collect();
    let args = |i: usize| node_args(&redis.url(), &format!("n{i}"), DRAIN);
    let mut procs = Vec::new();
    for (i, &(http, grpc)) in pairs.iter().enumerate() {
        procs.push(start(cfg.clone(), http, grpc, args(i)).await);
    }
    let lb = Balancer::new(&pairs);
    let polling = Arc::new(AtomicBool::new(false));
    let poller = tokio::spawn(Arc::clone(&lb).poll(Arc::clone(&polling)));
    let all_ready = wait_until(Duration::from_secs(20), || async {
        lb.nodes.iter().all(|n| n.ready.load(Ordering::Relaxed))
    })
    .await;
    assert!(all_ready, "the three nodes never answered /readyz 200");

    let jobs = Arc::new(Mutex::new(Jobs::default()));
    let (load_stop, work_stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    // Two checkers, four shapers, a gRPC caller, a reporter, a submitter; three workers.
    let kinds = [0, 0, 1, 1, 1, 1, 2, 3, 4];
    let load: Vec<_> = kinds
        .iter()
        .map(|&k| {
            tokio::spawn(generate(
                Arc::clone(&lb),
                k,
                Arc::clone(&jobs),
                Arc::clone(&load_stop),
            ))
        })
        .collect();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            tokio::spawn(work(
                Arc::clone(&lb),
                Arc::clone(&jobs),
                Arc::clone(&work_stop),
            ))
        })
        .collect();
    // Six idle long-polls: each node's ports close while one waits on it, most likely.
    let idle: Vec<_> = (0..6)
        .map(|_| tokio::spawn(idle_poll(Arc::clone(&lb))))
        .collect();
    let total = || lb.sent.lock().values().sum::<u64>();
    let warm = wait_until(Duration::from_secs(10), || async { total() > 100 }).await;
    assert!(warm, "no traffic");

    let mut exits = Vec::new();
    for i in 0..3 {
        let (status, took) = stop_node(&mut procs[i]).await;
        let log = procs[i].log.lock().unwrap().join("\n");
        assert!(status.success(), "node {i} exited with {status:?}:\n{log}");
        assert!(
            took <= BOUND + EXIT_SLACK,
            "node {i} took {took:?} to exit, over its bound {BOUND:?}"
        );
        exits.push(took);
        let (http, grpc) = pairs[i];
        procs[i] = start(cfg.clone(), http, grpc, args(i)).await;
        let back = wait_until(Duration::from_secs(20), || async {
            lb.nodes[i].ready.load(Ordering::Relaxed)
        })
        .await;
        assert!(back, "node {i} never ready again");
        // Some traffic on the three before the next one goes.
        let before = total();
        let _ = wait_until(Duration::from_secs(5), || async { total() > before + 50 }).await;
    }

    load_stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.unwrap();
    }
    let submitted = jobs.lock().submitted.len();
    let drained = wait_until(Duration::from_secs(20), || async {
        jobs.lock().acked.len() >= submitted
    })
    .await;
    work_stop.store(true, Ordering::Relaxed);
    for t in workers {
        t.await.unwrap();
    }
    for t in idle {
        t.abort();
    }
    polling.store(true, Ordering::Relaxed);
    poller.await.unwrap();

    let failures = lb.failures.lock().clone();
    let sent = lb.sent.lock().clone();
    let (holds, closed) = (
        LONG_HOLDS.load(Ordering::Relaxed),
        CLOSED_POLLS.load(Ordering::Relaxed),
    );
    eprintln!(
        "sent through the balancer: {sent:?}; exits after SIGTERM: {exits:?}; acquires held 500 ms or more: {holds}; long-polls answered by a port closing: {closed}"
    );
    assert!(
        failures.is_empty(),
        "{} failed requests: {failures:#?}",
        failures.len()
    );
    let j = jobs.lock();
    assert!(drained, "{} of {submitted} jobs acked", j.acked.len());
    for kind in [
        "check", "acquire", "grpc", "report", "submit", "lease", "ack",
    ] {
        assert!(sent.get(kind).copied().unwrap_or(0) > 0, "no {kind} sent");
    }
    assert!(holds > 0, "no acquire held long");
    assert!(closed > 0, "no long-poll was waiting when a port closed");
    let mut ids = j.submitted.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), submitted, "one id per job");
    for id in &ids {
        assert_eq!(
            j.delivered.get(id),
            Some(&1),
            "job {id} delivered {:?} times",
            j.delivered.get(id)
        );
        assert_eq!(
            j.acked.get(id),
            Some(&1),
            "job {id} acked {:?} times",
            j.acked.get(id)
        );
    }
    assert_eq!(j.acked.len(), ids.len(), "acks of jobs never submitted");
}

/// The admitted decisions of rule `name` over the last minute, as `/v1/stats` on `addr` shows
/// the cluster's.
async fn admitted(addr: SocketAddr, name: &str) -> u64 {
    let v = common::http(addr, "GET", "/v1/stats?window=60", &[], "")
        .await
        .json();
    v["rules"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == name))
        .and_then(|r| r["series"]["admitted"].as_array())
        .map_or(0, |s| s.iter().filter_map(Value::as_u64).sum())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_right_after_its_requests_leaves_their_reports_and_figures_in_redis() {
    let redis = RedisServer::start();
    let (_dir, cfg) = common::config(CONFIG);
    let addrs = free_addrs(4);
    let mut a = start(
        cfg.clone(),
        addrs[0],
        addrs[1],
        node_args(&redis.url(), "a", Duration::ZERO),
    )
    .await;
    let b = start(
        cfg.clone(),
        addrs[2],
        addrs[3],
        node_args(&redis.url(), "b", Duration::ZERO),
    )
    .await;
    // Both nodes in the cluster's figures before the requests.
    let both = wait_until(Duration::from_secs(10), || async {
        let v = common::http(b.http, "GET", "/v1/stats?window=1", &[], "")
            .await
            .json();
        v["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().filter(|n| n["live"] == true).count() == 2)
    })
    .await;
    assert!(both, "the nodes never saw each other");
    const N: u64 = 40;
    for i in 0..N {
        let r = common::post_json(
            a.http,
            "/v1/check",
            json!({"domain": "pay", "descriptors": [format!("client={i}")]}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let errors = vec![
        json!({"domain": "pay", "descriptors": ["dep=ledger"], "outcome": "error", "latency_ms": 3});
        4
    ];
    let r = common::post_json(a.http, "/v1/report", json!({ "reports": errors })).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // At once: the reports are still in the node's batch, its last figures in its second.
    let (status, _) = stop_node(&mut a).await;
    assert!(status.success(), "{status:?}");

    let open = wait_until(Duration::from_secs(5), || async {
        let r = common::post_json(
            b.http,
            "/v1/check",
            json!({"domain": "pay", "descriptors": ["dep=ledger"]}),
        )
        .await;
        r.status == 429 && r.json()["reason"] == "circuit_open"
    })
    .await;
    assert!(
        open,
        "the stopped node's error reports never reached the cluster's breaker"
    );
    let counted = wait_until(Duration::from_secs(5), || async {
        admitted(b.http, "per-client").await == N
    })
    .await;
    assert!(
        counted,
        "the cluster's figures count {} of the stopped node's {N} decisions",
        admitted(b.http, "per-client").await
    );
}

/// A kept-alive HTTP/1.1 connection while the node drains: still served, each answer with
/// `Connection: close`, and closed after it, long before the ports close, so that its caller's
/// next connection goes (through its Service) to a node still ready.
#[tokio::test]
async fn a_draining_node_closes_kept_alive_connections_after_their_next_answer() {
    let ts = common::TestServer::start_with(&[("rules.toml", CONFIG)], |mut c| {
        c.drain_delay = Duration::from_secs(5);
        c
    })
    .await;
    let addr = ts.http();
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let get = |path: &str| {
        hyper::Request::get(path)
            .header("host", addr.to_string())
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    let r = send.send_request(get("/livez")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("connection").is_none(), "{:?}", r.headers());
    r.into_body().collect().await.unwrap();

    let common::TestServer { server, dir, .. } = ts;
    let stopping = tokio::spawn(server.shutdown());
    let draining = wait_until(Duration::from_secs(5), || async {
        common::http(addr, "GET", "/readyz", &[], "").await.status == 503
    })
    .await;
    assert!(draining, "never draining");
    let started = Instant::now();
    let r = send.send_request(get("/livez")).await.unwrap();
    assert_eq!(r.status(), 200, "still served while draining");
    assert_eq!(
        r.headers().get("connection").and_then(|v| v.to_str().ok()),
        Some("close"),
        "{:?}",
        r.headers()
    );
    r.into_body().collect().await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), conn)
        .await
        .expect("the connection closed after that answer")
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    stopping.await.unwrap().unwrap();
    drop(dir);
}
