//! Helpers for the integration tests: a server in-process on 127.0.0.1:0 with a manual clock,
//! an HTTP client, and an Envoy gRPC client.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use flowgate::clock::ManualClock;
use flowgate_server::{Server, ServerConfig};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use tonic::transport::Channel;

/// A time aligned to the second, minute and hour (2027-01-15T08:00:00Z).
pub const T0: u64 = 1_800_000_000_000_000;

pub struct TestServer {
    pub server: Server,
    pub clock: ManualClock,
    pub dir: tempfile::TempDir,
}

impl TestServer {
    /// Writes `files` (name, text) into a fresh directory and serves it.
    pub async fn start(files: &[(&str, &str)]) -> TestServer {
        Self::start_with(files, |c| c).await
    }

    pub async fn start_with(
        files: &[(&str, &str)],
        tweak: impl FnOnce(ServerConfig) -> ServerConfig,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let clock = ManualClock::new(T0);
        let mut cfg = ServerConfig::new(dir.path()).ephemeral();
        cfg.clock = Some(clock.clone());
        cfg.poll_interval = Duration::from_millis(200);
        cfg.data_dir = dir.path().join("data");
        let cfg = tweak(cfg);
        let server = Server::bind(cfg).await.unwrap();
        TestServer { server, clock, dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn http(&self) -> SocketAddr {
        self.server.http_addr()
    }

    pub async fn grpc(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.server.grpc_addr()))
            .await
            .unwrap()
    }
}

pub fn descriptor(pairs: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: pairs
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).to_owned(),
                value: (*v).to_owned(),
            })
            .collect(),
        ..Default::default()
    }
}

pub async fn should(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    descriptors: Vec<RateLimitDescriptor>,
    hits_addend: u32,
) -> RateLimitResponse {
    client
        .should_rate_limit(RateLimitRequest {
            domain: domain.to_owned(),
            descriptors,
            hits_addend,
        })
        .await
        .unwrap()
        .into_inner()
}

pub struct HttpResponse {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl HttpResponse {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Serves `app` (a webhook receiver, a stand-in downstream) on a free loopback port until the
/// test ends; its base URL, `http://127.0.0.1:port`.
pub async fn serve_app(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// One HTTP/1.1 request on a fresh connection, answered with its head (the body unread).
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> hyper::Response<hyper::body::Incoming> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
    send.send_request(req).await.unwrap()
}

/// The status and headers of one HTTP/1.1 request on a fresh connection, its body left unread
/// (the figures' event stream never ends); the body sent is `{}` unless the method is `GET`.
pub async fn head(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, http::HeaderMap) {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    let body = if method == "GET" { "" } else { "{}" };
    let resp = send(addr, method, path, &all, body).await;
    (resp.status().as_u16(), resp.headers().clone())
}

/// One HTTP/1.1 request on a fresh connection.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> HttpResponse {
    let resp = send(addr, method, path, headers, body).await;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    HttpResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

pub async fn post_json(addr: SocketAddr, path: &str, body: serde_json::Value) -> HttpResponse {
    http(
        addr,
        "POST",
        path,
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await
}

/// Polls `cond` every 50 ms until it holds or `deadline` passes.
pub async fn wait_until<F, Fut>(deadline: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The sum of the samples of metric `name` whose labels include every one of `labels` (each
/// written `key="value"`), as `GET /metrics` on `addr` shows them now; 0 when there are none.
pub async fn metric(addr: SocketAddr, name: &str, labels: &[&str]) -> f64 {
    let body = http(addr, "GET", "/metrics", &[], "").await.body;
    body.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labelset, value) = match rest.strip_prefix('{') {
                Some(r) => r.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let labelled = labels.iter().all(|l| labelset.split(',').any(|x| x == *l));
            labelled.then(|| value.trim().parse::<f64>().ok()).flatten()
        })
        .sum()
}

/// `text` as `flowgate.toml` in a fresh directory (kept while the `TempDir` lives).
pub fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flowgate.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

pub fn write(path: &Path, text: &str) {
    // Write then rename, as editors and ConfigMaps do.
    let tmp = path.with_extension("tmp-write");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A `flowgate serve` process, killed (SIGKILL) on drop.
pub struct Proc {
    pub child: Child,
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    /// Every line it has logged so far (`FLOWGATE_LOG=info`).
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The working directory (the embedded store's default data directory is under it).
    _cwd: tempfile::TempDir,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// How many lines it has logged so far contain `needle`.
    pub fn logged(&self, needle: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Waits (up to `within`) until more than `before` of its lines contain `needle`; panics,
    /// naming the line, if that never happens.
    pub async fn wait_logged(&self, needle: &str, before: usize, within: Duration) {
        let ok = wait_until(within, || async { self.logged(needle) > before }).await;
        assert!(
            ok,
            "server {} never logged {needle:?} within {within:?}",
            self.http
        );
    }
}

/// Starts `flowgate serve` on ephemeral ports in a fresh working directory and reads its
/// addresses from its log (kept in [`Proc::log`]).
pub fn spawn_server(config: &std::path::Path, extra: &[&str]) -> Proc {
    spawn_server_at(config, "127.0.0.1:0", "127.0.0.1:0", extra)
}

/// As [`spawn_server`], on the HTTP and gRPC addresses given (`127.0.0.1:0`: an ephemeral port).
pub fn spawn_server_at(config: &std::path::Path, http: &str, grpc: &str, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flowgate"));
    cmd.args(["serve", "--config"])
        .arg(config)
        .args(["--http-addr", http, "--grpc-addr", grpc])
        .args(extra);
    spawn_command(cmd)
}

/// Starts `cmd`, a `flowgate serve` command line (the binary, or a command that runs it, such as
/// `ip netns exec`), in a fresh working directory and reads its addresses from its log (kept in
/// [`Proc::log`]).
pub fn spawn_command(mut cmd: Command) -> Proc {
    let cwd = tempfile::tempdir().unwrap();
    let mut child = cmd
        .current_dir(cwd.path())
        .env("FLOWGATE_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("flowgate serving") {
                let _ = tx.send(line.clone());
            }
            kept.lock().unwrap().push(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("server start");
    let addr = |name: &str| -> SocketAddr {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
            .parse()
            .unwrap()
    };
    Proc {
        http: addr("http_addr="),
        grpc: addr("grpc_addr="),
        child,
        log,
        _cwd: cwd,
    }
}
