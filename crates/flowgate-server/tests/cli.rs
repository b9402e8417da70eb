//! The `flowgate` binary: help, version, bad configuration, clean shutdown on SIGTERM (also with
//! requests in flight), two server processes sharing limits exactly through one Redis, and a
//! server on a 3-master Redis Cluster.

mod common;

use common::spawn_server;

use std::net::SocketAddr;
use std::process::Command;
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
    // A reservation's longest TTL of zero would expire every reservation at once.
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(examples().join("flowgate.toml"))
        .args(["--reserve-max-ttl", "0s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--reserve-max-ttl") && err.contains("must be longer than zero"),
        "{err}"
    );
}

#[tokio::test]
async fn sigterm_exits_zero() {
    let mut p = spawn_server(&examples().join("flowgate.toml"), &[]);
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

/// Whether process `pid` handles SIGTERM now (its `SigCgt` mask in `/proc` has signal 15).
#[cfg(target_os = "linux")]
fn handles_sigterm(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
}

fn sigterm(pid: u32) {
    let ok = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// The exit status of `child`, which must come within 20 s.
async fn exit_of(child: &mut std::process::Child) -> std::process::ExitStatus {
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(tokio::time::Instant::now() < end, "no exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `flowgate serve` on the example rules in `cwd`, on ephemeral ports, its output discarded.
#[cfg(target_os = "linux")]
fn serve_quietly(cwd: &std::path::Path) -> std::process::Child {
    Command::new(BIN)
        .current_dir(cwd)
        .args(["serve", "--config"])
        .arg(examples().join("flowgate.toml"))
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// SIGTERM right after the process is spawned, five times: from the instant the process handles
/// the signal (its first statements, before any port opens) it exits 0. A signal that lands
/// before the process could handle one at all (while the system loads the binary) kills it by
/// the default action, as for any program; that is accepted only when `/proc` showed no handler
/// just before the signal was sent.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn sigterm_right_after_spawn_exits_zero() {
    let mut handled = 0;
    for _ in 0..5 {
        let cwd = tempfile::tempdir().unwrap();
        let mut child = serve_quietly(cwd.path());
        let pid = child.id();
        let before = handles_sigterm(pid);
        sigterm(pid);
        let status = exit_of(&mut child).await;
        if before {
            handled += 1;
            assert!(status.success(), "{status:?}");
        } else {
            use std::os::unix::process::ExitStatusExt as _;
            assert!(
                status.success() || status.signal() == Some(15),
                "{status:?}"
            );
        }
    }
    eprintln!("{handled} of 5 signals sent after the handler was seen installed");
}

/// SIGTERM as soon as the process handles it (seen in `/proc`), five times: it exits 0.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn sigterm_at_the_first_instant_it_is_handled_exits_zero() {
    for _ in 0..5 {
        let cwd = tempfile::tempdir().unwrap();
        let mut child = serve_quietly(cwd.path());
        let pid = child.id();
        let end = tokio::time::Instant::now() + Duration::from_secs(20);
        while !handles_sigterm(pid) {
            assert!(tokio::time::Instant::now() < end, "SIGTERM never handled");
            std::thread::yield_now();
        }
        sigterm(pid);
        let status = exit_of(&mut child).await;
        assert!(status.success(), "{status:?}");
    }
}

/// SIGTERM right after the ports open (the server's "serving" line), five times: the handler was
/// installed before, and the process exits 0.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn sigterm_right_after_the_ports_open_exits_zero() {
    for _ in 0..5 {
        let mut p = spawn_server(&examples().join("flowgate.toml"), &[]);
        let pid = p.child.id();
        assert!(handles_sigterm(pid), "serving before SIGTERM is handled");
        sigterm(pid);
        let status = exit_of(&mut p.child).await;
        assert!(status.success(), "{status:?}");
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
    // A deadline for a loaded CI machine: past 25 ms the rule's failure policy (open) would
    // decide, and this test is about exactness, not the policy (tested in crates/flowgate).
    let a = spawn_server(&cfg, &["--redis-url", &url, "--redis-deadline", "5s"]);
    let b = spawn_server(&cfg, &["--redis-url", &url, "--redis-deadline", "5s"]);
    let r = common::http(a.http, "GET", "/readyz", &[], "").await;
    assert_eq!(
        (r.status, r.json()["store"]["kind"].clone()),
        (200, json!("redis"))
    );
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

/// The `flowgate_requests_total` count for `api`/`code` in the server's `/metrics`.
async fn requests_total(http: SocketAddr, api: &str, code: &str) -> u64 {
    let r = common::http(http, "GET", "/metrics", &[], "").await;
    let prefix = format!("flowgate_requests_total{{api=\"{api}\",code=\"{code}\"}} ");
    r.body
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether a TCP connection to `addr` is refused (nobody listening).
async fn refused(addr: SocketAddr) -> bool {
    match tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await {
        Ok(Err(e)) => e.kind() == std::io::ErrorKind::ConnectionRefused,
        _ => false,
    }
}

/// A gRPC message frame (uncompressed, big-endian length) holding Envoy's `RateLimitRequest`
/// `{domain, descriptors: [{entries: [{key, value}]}]}`, encoded by hand (protobuf wire format).
fn rls_request_frame(domain: &str, key: &str, value: &str) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
        out.push(tag);
        let mut n = bytes.len();
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out.extend_from_slice(bytes);
    }
    let mut entry = Vec::new();
    field(&mut entry, 0x0a, key.as_bytes());
    field(&mut entry, 0x12, value.as_bytes());
    let mut descriptor = Vec::new();
    field(&mut descriptor, 0x0a, &entry);
    let mut request = Vec::new();
    field(&mut request, 0x0a, domain.as_bytes());
    field(&mut request, 0x12, &descriptor);
    let mut frame = vec![0];
    frame.extend_from_slice(&u32::try_from(request.len()).unwrap().to_be_bytes());
    frame.extend(request);
    frame
}

/// `ShouldRateLimit` over a fresh HTTP/2 connection whose request headers are sent at once and
/// whose message is sent only when `send_body` fires: a gRPC call in flight for as long as the
/// test wants. Answers the `grpc-status` and the response message's bytes.
async fn slow_should_rate_limit(
    addr: SocketAddr,
    frame: Vec<u8>,
    send_body: tokio::sync::oneshot::Receiver<()>,
) -> (Option<String>, Vec<u8>) {
    use http_body_util::BodyExt as _;
    use hyper::body::{Bytes, Frame};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let body = http_body_util::StreamBody::new(futures::stream::once(Box::pin(async move {
        let _ = send_body.await;
        Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(frame)))
    })));
    let req = hyper::Request::post(format!(
        "http://{addr}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(body)
    .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let header_status = resp
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let collected = resp.into_body().collect().await.unwrap();
    let status = collected
        .trailers()
        .and_then(|t| t.get("grpc-status"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(header_status);
    let data = collected.to_bytes();
    (status, data.get(5..).unwrap_or_default().to_vec())
}

/// SIGTERM with two `/v1/acquire` requests held for their delay-mode slots (~1 s and ~2 s):
/// and a gRPC call whose message the client has not sent yet: both listeners close at once (new
/// connections refused on both ports) while the held requests are still waiting; both complete
/// with 200 after their full wait; the process then still waits for the open gRPC call, which
/// completes with OK once its message is sent; and the process exits 0.
#[tokio::test]
async fn sigterm_finishes_requests_in_flight_refuses_new_ones_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("held.toml");
    std::fs::write(
        &cfg,
        "[[rule]]\ndomain = \"d\"\nname = \"held\"\nmatch = \"queue\"\nlimit = \"1/s\"\n\
         algorithm = \"leaky_bucket\"\nmode = \"delay\"\nmax_wait = \"10s\"\n",
    )
    .unwrap();
    let mut p = spawn_server(&cfg, &[]);
    // The gRPC call goes out first: its stream is open well before the SIGTERM below.
    let (send_body, body_gate) = tokio::sync::oneshot::channel();
    let grpc_call = tokio::spawn(slow_should_rate_limit(
        p.grpc,
        rls_request_frame("d", "queue", "grpc"),
        body_gate,
    ));
    let acquire = json!({"domain": "d", "descriptors": ["queue=a"], "hold": true});
    // The first takes the slot now; the next two are spaced 1 s and 2 s later.
    let r = common::post_json(p.http, "/v1/acquire", acquire.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(requests_total(p.http, "http", "ok").await, 1);
    let mut held = Vec::new();
    for n in 2..=3u64 {
        let (addr, body) = (p.http, acquire.clone());
        let started = tokio::time::Instant::now();
        held.push(tokio::spawn(async move {
            let r = common::post_json(addr, "/v1/acquire", body).await;
            (r.status, r.json(), started.elapsed())
        }));
        // Decided (and counted) before the server starts holding it.
        let http = p.http;
        assert!(
            common::wait_until(Duration::from_secs(10), || async move {
                requests_total(http, "http", "ok").await == n
            })
            .await,
            "held request {n} not decided"
        );
    }
    assert!(held.iter().all(|h| !h.is_finished()));
    let ok = Command::new("kill")
        .args(["-TERM", &p.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    // Both listeners close promptly; the process is still draining the held requests.
    let (http, grpc) = (p.http, p.grpc);
    assert!(
        common::wait_until(Duration::from_secs(5), || async move {
            refused(http).await && refused(grpc).await
        })
        .await,
        "new connections still accepted after SIGTERM"
    );
    assert!(
        p.child.try_wait().unwrap().is_none(),
        "exited before the held requests were answered"
    );
    assert!(held.iter().any(|h| !h.is_finished()));
    let mut waits = Vec::new();
    for h in held {
        let (status, body, elapsed) = tokio::time::timeout(Duration::from_secs(15), h)
            .await
            .expect("held request answered in time")
            .unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["allowed"], json!(true), "{body}");
        let wait = body["statuses"][0]["wait_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("no wait_ms: {body}"));
        assert!(wait >= 500.0, "{body}");
        // Held for its whole wait, not cut short by the shutdown.
        assert!(
            elapsed >= Duration::from_secs_f64(wait / 1000.0),
            "{elapsed:?} < {wait} ms"
        );
        waits.push(wait);
    }
    assert!(waits[1] > waits[0] + 500.0, "{waits:?}");
    // Only the open gRPC call is left: the process waits for it. A process that did not would
    // exit as soon as the held requests were answered; 300 ms of watching shows it still runs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        p.child.try_wait().unwrap().is_none(),
        "exited with a gRPC call in flight"
    );
    assert!(!grpc_call.is_finished());
    send_body.send(()).unwrap();
    let (status, message) = tokio::time::timeout(Duration::from_secs(10), grpc_call)
        .await
        .expect("gRPC call answered in time")
        .unwrap();
    assert_eq!(status.as_deref(), Some("0"), "{message:?}");
    // RateLimitResponse.overall_code (field 1, varint) = OK (1).
    assert_eq!(message.get(..2), Some(&[0x08, 0x01][..]), "{message:?}");
    let end = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = p.child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(tokio::time::Instant::now() < end, "no exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Which of the cluster's nodes holds `key` (the others answer MOVED).
fn owner(cluster: &flowgate_testkit::redis::RedisCluster, key: &str) -> Option<usize> {
    cluster.nodes().iter().position(|n| {
        flowgate_testkit::redis::raw_command(n.port(), &format!("EXISTS {key}"))
            .is_ok_and(|r| r.starts_with(":1"))
    })
}

/// `flowgate serve --redis-url redis+cluster://h:p,h:p,h:p` on a 3-master cluster: exact counts
/// and all-or-nothing over Envoy's gRPC API, with a request's descriptors on different masters.
#[tokio::test]
async fn redis_cluster_through_the_binary_exact_and_all_or_nothing() {
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
    use flowgate::{Algorithm, Descriptor};

    let cluster = flowgate_testkit::redis::RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(
        &cfg,
        "domain = \"c\"\n\
         [[rule]]\nname = \"a\"\nmatch = \"a\"\nlimit = \"5/1h\"\nalgorithm = \"fixed_window\"\n\
         [[rule]]\nname = \"b\"\nmatch = \"b\"\nlimit = \"3/1h\"\nalgorithm = \"fixed_window\"\n\
         [[rule]]\nname = \"c\"\nmatch = \"c\"\nlimit = \"10/1h\"\nalgorithm = \"sliding_log\"\n\
         [[rule]]\nname = \"d\"\nmatch = \"d\"\nlimit = \"100/1h\"\nalgorithm = \"fixed_window\"\n",
    )
    .unwrap();
    // Values whose state keys hash to slots in different thirds of the slot space (the three
    // masters' ranges after `redis-cli --cluster create`); checked against the nodes below.
    let key_of = |rule: &str, value: &str| {
        let d = Descriptor::new([(rule, value)]);
        let algorithm = if rule == "c" {
            Algorithm::SlidingLog
        } else {
            Algorithm::FixedWindow
        };
        // Every rule's window is 1h; the limit does not change the key.
        let quota = flowgate::Quota::from_micros(1, 3_600_000_000).unwrap();
        flowgate_redis::keys::redis_key(
            &flowgate::store::state_key("c", rule, &d),
            &flowgate::Limit::new(algorithm, quota).unwrap(),
        )
    };
    let third = |k: &str| usize::from(flowgate_redis::keys::slot(k.as_bytes())) * 3 / 16384;
    let pick = |rule: &str, want: usize| {
        (0..10_000)
            .map(|i| format!("v{i}"))
            .find(|v| third(&key_of(rule, v)) == want)
            .unwrap()
    };
    let (va, vb, vc, vd) = (pick("a", 0), pick("b", 1), pick("c", 2), pick("d", 0));
    let nodes = cluster
        .nodes()
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect::<Vec<_>>()
        .join(",");
    let url = format!("redis+cluster://{nodes}");
    let p = spawn_server(&cfg, &["--redis-url", &url, "--redis-deadline", "5s"]);
    let r = common::http(p.http, "GET", "/readyz", &[], "").await;
    assert_eq!(
        (r.status, r.json()["store"]["kind"].clone()),
        (200, json!("redis"))
    );
    let mut client = envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient::connect(format!("http://{}", p.grpc))
        .await
        .unwrap();
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    let a = || common::descriptor(&[("a", va.as_str())]);
    let b = || common::descriptor(&[("b", vb.as_str())]);

    // a (5/h) and b (3/h) together, on different masters: 3 admitted, counted on both.
    for remaining in [(4, 2), (3, 1), (2, 0)] {
        let r = common::should(&mut client, "c", vec![a(), b()], 0).await;
        assert_eq!(r.overall_code, ok, "{r:?}");
        let got = (r.statuses[0].limit_remaining, r.statuses[1].limit_remaining);
        assert_eq!(got, remaining, "{r:?}");
    }
    // b is spent: the request is rejected and takes nothing from a.
    for _ in 0..3 {
        let r = common::should(&mut client, "c", vec![a(), b()], 0).await;
        assert_eq!(r.overall_code, over, "{r:?}");
        assert_eq!(r.statuses[1].code, over, "{r:?}");
    }
    for remaining in [1, 0] {
        let r = common::should(&mut client, "c", vec![a()], 0).await;
        assert_eq!(
            (r.overall_code, r.statuses[0].limit_remaining),
            (ok, remaining),
            "{r:?}"
        );
    }
    let r = common::should(&mut client, "c", vec![a()], 0).await;
    assert_eq!(r.overall_code, over, "{r:?}");

    // 30 concurrent requests for c (10/h) with d (100/h) on another master: exactly 10 admitted,
    // and d counts exactly those 10 (the 20 rejected are refunded on d's master).
    let c = common::descriptor(&[("c", vc.as_str())]);
    let d = common::descriptor(&[("d", vd.as_str())]);
    let mut tasks = Vec::new();
    for _ in 0..30 {
        let mut client = client.clone();
        let descriptors = vec![c.clone(), d.clone()];
        tasks.push(tokio::spawn(async move {
            common::should(&mut client, "c", descriptors, 0)
                .await
                .overall_code
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        let code = t.await.unwrap();
        assert!(code == ok || code == over, "{code}");
        admitted += usize::from(code == ok);
    }
    assert_eq!(admitted, 10);
    let r = common::should(&mut client, "c", vec![d.clone()], 0).await;
    assert_eq!(
        (r.overall_code, r.statuses[0].limit_remaining),
        (ok, 89),
        "{r:?}"
    );

    // The four limits really live on different masters (a and d share one).
    let owners: Vec<Option<usize>> = [("a", &va), ("b", &vb), ("c", &vc), ("d", &vd)]
        .iter()
        .map(|(rule, v)| owner(&cluster, &key_of(rule, v)))
        .collect();
    assert!(owners.iter().all(Option::is_some), "{owners:?}");
    assert_ne!(owners[0], owners[1], "{owners:?}");
    assert_ne!(owners[1], owners[2], "{owners:?}");
    assert_ne!(owners[0], owners[2], "{owners:?}");
    assert_ne!(owners[2], owners[3], "{owners:?}");
    // Every decision above was Redis's: no store error, so no failure policy decided.
    let m = common::http(p.http, "GET", "/metrics", &[], "").await.body;
    assert!(
        !m.lines()
            .any(|l| l.starts_with("flowgate_store_errors_total{") && !l.ends_with(" 0")),
        "{m}"
    );
    assert!(m.contains("flowgate_decisions_total{"), "{m}");
}
