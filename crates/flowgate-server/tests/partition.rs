//! Partitions, on real processes: Redis and two `flowgate` nodes as hosts in network namespaces
//! joined by veth links, the callers (this test) in the root namespace ([`netns`]). A cut link
//! drops every frame silently, so connections hang rather than being refused.
//!
//! - Node A cut off from Redis decides by each rule's failure policy (`open` admits, `closed`
//!   rejects, `local` admits its share of the limit), at once once Redis is known down; `/readyz`
//!   stays 200 while `/v1/store` says the store is down. Node B meanwhile stays exact: it counts
//!   its own decisions and A's from before the cut, nothing of A's during it. Healed, A rejoins
//!   within a bound and decides from the shared counter again: no burst.
//! - Node A cut off from its callers but not from Redis: a job leased through it, and a job its
//!   waiting long-poll took after the cut, come back when their leases end and are delivered
//!   again through B; a concurrency permit held through A expires.
//!
//! Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), `ip` and veth: where namespaces cannot be
//! made, each test says so on standard error and passes as skipped.

mod common;
#[path = "common/netns.rs"]
mod netns;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::{HttpResponse, Proc, config, http, post_json, spawn_command, wait_until};
use netns::{GRPC_PORT, HTTP_PORT, NsChild, Side, Topology, Unavailable};
use serde_json::{Value, json};
use tokio::time::Instant;

/// A decision's deadline on Redis: long enough that an answer that waited for it cannot pass
/// for one that did not, even on a busy machine.
const DEADLINE: Duration = Duration::from_millis(500);
/// Each rule's limit, in a window far longer than the test (sliding logs: exact, no boundary).
const LIMIT: usize = 10;
/// The nodes a `local` rule's limit is divided among.
const NODES: usize = 2;
/// What node A takes of each rule's key before the cut.
const BEFORE: usize = 3;
/// How soon a node finds Redis back once its link heals: its probe sends `PING` every 100 ms,
/// each within the deadline, and reconnects; well under a second, with room for a busy machine.
const REJOIN: Duration = Duration::from_secs(5);
/// The time to live of a queue lease and of a concurrency permit.
const TTL: Duration = Duration::from_secs(3);

const RULES: &str = r#"
domain = "pay"

[[rule]]
name = "open"
match = ["policy=open", "key"]
limit = "10/1h"
algorithm = "sliding_log"
failure = "open"

[[rule]]
name = "closed"
match = ["policy=closed", "key"]
limit = "10/1h"
algorithm = "sliding_log"
failure = "closed"

[[rule]]
name = "local"
match = ["policy=local", "key"]
limit = "10/1h"
algorithm = "sliding_log"
failure = "local"
nodes = 2

[[rule]]
name = "permits"
match = "permit"
limit = "1/3s"
algorithm = "concurrency"

[[queue]]
name = "jobs"
match = "queue=jobs"
rate = "100/s"
lease = "3s"
"#;

const POLICIES: [&str; 3] = ["open", "closed", "local"];

/// Redis and the two nodes, started in their namespaces; each node reaches Redis through its
/// store link, and the callers reach it through its caller link. Dropped: the processes are
/// killed, then the namespaces deleted.
struct Hosts {
    a: Proc,
    b: Proc,
    _redis: NsChild,
    _dirs: [tempfile::TempDir; 2],
    topo: Topology,
}

impl Hosts {
    /// The hosts, their stores up; or `None` after saying on standard error (which the test
    /// harness does not capture) why test `test` is skipped.
    async fn start(test: &str) -> Option<Hosts> {
        let topo = match Topology::make() {
            Ok(t) => t,
            Err(Unavailable(why)) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED partition::{test}: network namespaces cannot be made here ({why}); \
                     run as root, or with CAP_NET_ADMIN and CAP_SYS_ADMIN (docs/operating.md#partitions)"
                );
                return None;
            }
        };
        let data = tempfile::tempdir().unwrap();
        let redis = topo.start_redis(data.path());
        let (rules, path) = config(RULES);
        let hosts = Hosts {
            a: Self::node(&topo, 0, &path),
            b: Self::node(&topo, 1, &path),
            _redis: redis,
            _dirs: [data, rules],
            topo,
        };
        store_up(hosts.a.http, Duration::from_secs(10)).await;
        store_up(hosts.b.http, Duration::from_secs(10)).await;
        Some(hosts)
    }

    /// Starts node `i` in its namespace.
    fn node(topo: &Topology, i: usize, config: &Path) -> Proc {
        let addr = topo.node_addr(i);
        let mut cmd = Topology::command(&topo.node_ns[i], env!("CARGO_BIN_EXE_flowgate"));
        cmd.args(["serve", "--config"])
            .arg(config)
            .args(["--http-addr", &format!("{addr}:{HTTP_PORT}")])
            .args(["--grpc-addr", &format!("{addr}:{GRPC_PORT}")])
            .args(["--redis-url", &topo.redis_url_for(i)])
            .args(["--redis-deadline", &format!("{}ms", DEADLINE.as_millis())])
            .args(["--node-id", ["node-a", "node-b"][i]]);
        spawn_command(cmd)
    }
}

/// A POST that must be answered within 10 s.
async fn post(addr: SocketAddr, path: &str, body: Value) -> HttpResponse {
    tokio::time::timeout(Duration::from_secs(10), post_json(addr, path, body))
        .await
        .unwrap_or_else(|_| panic!("POST {path} on {addr}: no answer within 10 s"))
}

/// A GET that must be answered within 10 s.
async fn get(addr: SocketAddr, path: &str) -> HttpResponse {
    tokio::time::timeout(Duration::from_secs(10), http(addr, "GET", path, &[], ""))
        .await
        .unwrap_or_else(|_| panic!("GET {path} on {addr}: no answer within 10 s"))
}

/// A check of rule `policy`'s key `key` on `addr`: its answer and how long it took.
async fn check(addr: SocketAddr, policy: &str, key: &str) -> (HttpResponse, Duration) {
    let body = json!({"domain": "pay", "descriptors": [format!("policy={policy}, key={key}")]});
    let start = Instant::now();
    let r = post(addr, "/v1/check", body).await;
    assert!(r.status == 200 || r.status == 429, "{}", r.body);
    (r, start.elapsed())
}

/// How many of `n` checks of `policy`'s `key` on `addr` are admitted, and the slowest answer.
async fn admitted(addr: SocketAddr, policy: &str, key: &str, n: usize) -> (usize, Duration) {
    let mut yes = 0;
    let mut slowest = Duration::ZERO;
    for _ in 0..n {
        let (r, took) = check(addr, policy, key).await;
        yes += usize::from(r.status == 200);
        slowest = slowest.max(took);
    }
    (yes, slowest)
}

/// What remains of rule `policy`'s `key` at the shared counter, as node `addr` reads it (cost
/// 0 only looks).
async fn remaining(addr: SocketAddr, policy: &str, key: &str) -> u64 {
    let body =
        json!({"domain": "pay", "descriptors": [format!("policy={policy}, key={key}")], "cost": 0});
    let r = post(addr, "/v1/check", body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["statuses"][0]["remaining"].as_u64().unwrap()
}

/// Waits until `node`'s store answers (`GET /v1/store` 200), up to `within`; how long it took.
async fn store_up(node: SocketAddr, within: Duration) -> Duration {
    let start = Instant::now();
    let up = wait_until(within, || async {
        get(node, "/v1/store").await.status == 200
    })
    .await;
    assert!(
        up,
        "the store of {node} did not answer within {within:?}: {}",
        get(node, "/v1/store").await.body
    );
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_redis_follows_its_policies_and_rejoins_exactly() {
    let Some(hosts) =
        Hosts::start("a_node_cut_off_from_redis_follows_its_policies_and_rejoins_exactly").await
    else {
        return;
    };
    let a = hosts.a.http;
    for policy in POLICIES {
        assert_eq!(
            admitted(a, policy, "k1", BEFORE).await.0,
            BEFORE,
            "{policy}"
        );
    }
    hosts.topo.store[0].cut();
    let first = known_down(a).await;
    let log = Duration::from_secs(5);
    hosts.a.wait_logged("Redis is down", 0, log).await;
    decided_during_the_cut(a, hosts.b.http).await;
    hosts.topo.store[0].heal();
    rejoined(a, hosts.b.http, first).await;
    // The log says it once each way, not once per decision.
    hosts.a.wait_logged("Redis answers again", 0, log).await;
    assert_eq!(hosts.a.logged("Redis is down"), 1);
}

/// Node `a`, its link to Redis cut: the first decisions wait out the deadline (the open rule
/// admits them), three make Redis known down, and the operator sees the node ready, its store
/// down. How many decisions met the cut.
async fn known_down(a: SocketAddr) -> usize {
    let first = futures::future::join_all((0..3).map(|_| check(a, "open", "cut"))).await;
    for (r, took) in &first {
        assert_eq!(r.status, 200, "{}", r.body);
        // Waited for the deadline, and no longer than it (with room for a busy machine).
        let waited = DEADLINE - Duration::from_millis(50)..DEADLINE + Duration::from_secs(1);
        assert!(waited.contains(took), "{took:?}");
    }
    let down = wait_until(Duration::from_secs(10), || async {
        get(a, "/v1/store").await.json()["down"] == true
    })
    .await;
    let store = get(a, "/v1/store").await;
    assert!(down, "{}", store.body);
    assert_eq!(store.status, 503, "{}", store.body);
    assert_eq!(store.json()["up"], false, "{}", store.body);
    let ready = get(a, "/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.json()["store"]["down"], true, "{}", ready.body);
    first.len()
}

/// While Redis is known down to `a`: `a` decides by policy, at once; `b`, on the shared
/// counter at the same time, admits the limit less what `a` took before the cut.
async fn decided_during_the_cut(a: SocketAddr, b: SocketAddr) {
    let on_a = async {
        let open = admitted(a, "open", "k1", LIMIT + 5).await;
        assert_eq!(admitted(a, "open", "k4", 3).await.0, 3);
        let closed = admitted(a, "closed", "k1", 3).await;
        let local = admitted(a, "local", "k1", LIMIT).await;
        (open, closed, local)
    };
    let on_b = async {
        let mut seen = Vec::new();
        for policy in POLICIES {
            seen.push(admitted(b, policy, "k1", LIMIT).await.0);
        }
        seen
    };
    let ((open, closed, local), on_b) = tokio::join!(on_a, on_b);
    assert_eq!(open.0, LIMIT + 5, "open admits everything");
    assert_eq!(closed.0, 0, "closed rejects everything");
    assert_eq!(
        local.0,
        LIMIT / NODES,
        "local admits the limit divided among the nodes"
    );
    let slowest = open.1.max(closed.1).max(local.1);
    assert!(
        slowest < DEADLINE,
        "a decision waited {slowest:?} once Redis was known down (deadline {DEADLINE:?})"
    );
    assert_eq!(
        on_b,
        vec![LIMIT - BEFORE; 3],
        "B admits the limit less A's decisions before the cut, under every policy"
    );
    let r = check(a, "closed", "k2").await.0;
    let error = r.json()["statuses"][0]["error"].clone();
    assert!(
        error.as_str().is_some_and(|e| e.starts_with("the store")),
        "{}",
        r.body
    );
    assert_eq!(get(b, "/v1/store").await.status, 200);
}

/// Node `a`'s link to Redis healed: it finds Redis back within [`REJOIN`] and decides from the
/// shared counter again, with no burst; of its decisions, only the `first` that met the cut may
/// have been counted (late, at the heal).
async fn rejoined(a: SocketAddr, b: SocketAddr, first: usize) {
    let took = store_up(a, REJOIN).await;
    eprintln!("node A rejoined {took:?} after its link to Redis healed");
    // TCP delivers the decisions that met the cut when the link heals: Redis may count them.
    let late = LIMIT - remaining(b, "open", "cut").await as usize;
    eprintln!("{late} of the {first} decisions that met the cut were counted at the heal");
    assert!(late <= first, "{late}");
    // No burst: B spent what A had not, so A now rejects every k1, whatever it admitted during
    // the cut by policy or from its own memory.
    for policy in POLICIES {
        let (r, _) = check(a, policy, "k1").await;
        assert_eq!(r.status, 429, "{policy} after the heal: {}", r.body);
    }
    // Exact again: on a fresh key, A and B in turn admit the limit between them, no more.
    for policy in POLICIES {
        let mut yes = 0;
        for i in 0..LIMIT + 4 {
            let node = if i % 2 == 0 { a } else { b };
            yes += usize::from(check(node, policy, "k3").await.0.status == 200);
        }
        assert_eq!(yes, LIMIT, "{policy} after the heal");
    }
    // Decided while Redis was known down: never sent, never counted.
    assert_eq!(remaining(b, "open", "k4").await, LIMIT as u64);
}

/// The `jobs` queue's instance as `GET /v1/queues` on `node` shows it (`Null` before it exists).
async fn jobs(node: SocketAddr) -> Value {
    let r = get(node, "/v1/queues").await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["instances"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["queue"] == "jobs").cloned())
        .unwrap_or(Value::Null)
}

/// A lease of a `jobs` job on `node`, long-polling up to `wait_ms`.
async fn lease(node: SocketAddr, wait_ms: u64) -> HttpResponse {
    let body = json!({"domain": "pay", "descriptor": "queue=jobs", "wait_ms": wait_ms});
    let r = tokio::time::timeout(
        Duration::from_millis(wait_ms) + Duration::from_secs(10),
        post_json(node, "/v1/queues/lease", body),
    )
    .await
    .unwrap_or_else(|_| panic!("lease on {node}: no answer"));
    assert!(r.status == 200 || r.status == 204, "{}", r.body);
    r
}

async fn acquire(node: SocketAddr) -> HttpResponse {
    let r = post(
        node,
        "/v1/acquire",
        json!({"domain": "pay", "descriptors": ["permit=p"]}),
    )
    .await;
    assert!(r.status == 200 || r.status == 429, "{}", r.body);
    r
}

/// An HTTP/1.1 connection kept open, as a worker's pooled connection is.
struct KeptAlive {
    addr: SocketAddr,
    send: hyper::client::conn::http1::SendRequest<http_body_util::Full<hyper::body::Bytes>>,
}

impl KeptAlive {
    /// Connects to `addr` and makes one request on the connection (`GET /livez`).
    async fn open(addr: SocketAddr) -> KeptAlive {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let io = hyper_util::rt::TokioIo::new(stream);
        let (send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        let mut kept = KeptAlive { addr, send };
        let live = kept.request("GET", "/livez", String::new()).await;
        assert_eq!(live.map(|(s, _)| s), Some(200));
        kept
    }

    /// A request on the connection: its status and body, `None` if the connection failed.
    async fn request(&mut self, method: &str, path: &str, body: String) -> Option<(u16, String)> {
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string())
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(hyper::body::Bytes::from(body)))
            .unwrap();
        let resp = self.send.send_request(req).await.ok()?;
        let status = resp.status().as_u16();
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .ok()?;
        Some((
            status,
            String::from_utf8_lossy(&bytes.to_bytes()).into_owned(),
        ))
    }

    async fn post(mut self, path: &str, body: Value) -> Option<(u16, String)> {
        self.request("POST", path, body.to_string()).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_its_callers_holds_no_lease_or_job_for_ever() {
    let Some(hosts) =
        Hosts::start("a_node_cut_off_from_its_callers_holds_no_lease_or_job_for_ever").await
    else {
        return;
    };
    let (a, b) = (hosts.a.http, hosts.b.http);
    // A worker leases job 1 through A; a permit is taken through A, so B has none left.
    assert_eq!(submit(b, 1).await.status, 200);
    let first = lease(a, 2000).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let first = first.json();
    assert_eq!(
        (first["id"].as_u64(), first["attempt"].as_u64()),
        (Some(1), Some(1)),
        "{first}"
    );
    assert_eq!(acquire(a).await.status, 200);
    assert_eq!(acquire(b).await.status, 429);

    // A second worker has a connection to A. A's answers stop reaching the callers; the
    // worker's long-poll still reaches A, which leases it job 2 and answers into the cut.
    let worker = KeptAlive::open(a).await;
    hosts.topo.caller[0].cut_from(Side::B);
    assert_eq!(submit(b, 2).await.status, 200);
    let long_poll = tokio::spawn(async move {
        let body = json!({"domain": "pay", "descriptor": "queue=jobs", "wait_ms": 20_000});
        worker.post("/v1/queues/lease", body).await
    });
    let taken = wait_until(Duration::from_secs(10), || async {
        jobs(b).await["released_total"] == 2
    })
    .await;
    assert!(taken, "A's long-poll never took job 2: {}", jobs(b).await);

    // Now nothing passes either way: the first worker cannot ack, the permit stays held.
    hosts.topo.caller[0].cut();
    let ack = json!({"token": first["token"]});
    let ack = tokio::time::timeout(Duration::from_secs(1), post_json(a, "/v1/queues/ack", ack));
    assert!(
        ack.await.is_err(),
        "an ack through a node cut off from its callers was answered"
    );
    assert!(
        !long_poll.is_finished(),
        "A's long-poll was answered through the cut"
    );
    assert_eq!(acquire(b).await.status, 429);

    delivered_again(b, &first).await;
    let freed = wait_until(TTL + Duration::from_secs(5), || async {
        acquire(b).await.status == 200
    })
    .await;
    assert!(freed, "the permit held through A never expired");
    long_poll.abort();
}

/// Submits job `payload` to the `jobs` queue through `node`.
async fn submit(node: SocketAddr, payload: u64) -> HttpResponse {
    let body = json!({"domain": "pay", "descriptor": "queue=jobs", "payload": payload});
    post(node, "/v1/queues/submit", body).await
}

/// Jobs 1 and 2 come back when their leases through A end and are delivered again through
/// `b`, each a second attempt; the first worker's late ack is refused.
async fn delivered_again(b: SocketAddr, first: &Value) {
    let mut again = Vec::new();
    for _ in 0..2 {
        let r = lease(b, 10_000).await;
        assert_eq!(r.status, 200, "a job never came back: {}", jobs(b).await);
        let job = r.json();
        assert_eq!(job["attempt"], 2, "{job}");
        let ack = post(b, "/v1/queues/ack", json!({"token": job["token"]})).await;
        assert_eq!(ack.status, 200, "{}", ack.body);
        again.push(job);
    }
    again.sort_by_key(|j| j["id"].as_u64());
    assert_eq!(
        (again[0]["id"].as_u64(), again[1]["id"].as_u64()),
        (Some(1), Some(2))
    );
    assert!(
        again[0]["released_at_ms"].as_u64() >= first["lease_deadline_ms"].as_u64(),
        "job 1 delivered again before its lease ended: {first} {}",
        again[0]
    );
    let late = post(b, "/v1/queues/ack", json!({"token": first["token"]})).await;
    assert_eq!(late.status, 409, "{}", late.body);
    let state = jobs(b).await;
    assert_eq!(
        (state["depth"].as_u64(), state["in_flight"].as_u64()),
        (Some(0), Some(0)),
        "{state}"
    );
}
