//! TLS end to end, with certificates made here (rcgen): `flowgate serve` processes with
//! `--tls-cert`/`--tls-key` answer HTTPS and gRPC over TLS, refuse clear text, require client
//! certificates with `--tls-client-ca`, take rotated certificate files without a restart and
//! keep the last good pair when the new one is broken; and they reach a TLS-only
//! `redis-server` (single and cluster, with and without client certificates) through
//! `rediss://` URLs. Everything on loopback, every wait bounded.

mod common;
#[path = "common/tls.rs"]
mod tls_kit;

use std::net::SocketAddr;
use std::time::Duration;

use common::{spawn_server, wait_until};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use flowgate_testkit::redis::{RedisCluster, RedisServer, ServerTls};
use http_body_util::Full;
use hyper::body::Bytes;
use rcgen::ExtendedKeyUsagePurpose;
use rustls::pki_types::CertificateDer;
use tls_kit::{
    Leaf, Pki, RULES, STEP, connect, grpc_client, https_get, rules, run_serve, serve_tls, should,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// `POST /v1/check` for `user` over HTTPS: the status.
async fn https_check(connector: &TlsConnector, addr: SocketAddr, user: &str) -> u16 {
    let tls = connect(connector, addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let body = serde_json::json!({"domain": "api", "descriptors": [format!("user={user}")]});
    let req = hyper::Request::post("/v1/check")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = tokio::time::timeout(STEP, send.send_request(req))
        .await
        .unwrap()
        .unwrap();
    resp.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_and_grpc_over_tls_and_clear_text_refused() {
    let pki = Pki::new();
    let leaf = pki.server("flowgate-a");
    pki.write_leaf("server", &leaf);
    let p = serve_tls(&pki, &[]);
    let client = pki.connector(None, &[b"http/1.1"]);

    let a = https_get(&client, p.http, "/healthz").await.unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.server_cert, leaf.der);
    assert_eq!(a.alpn.as_deref(), Some(&b"http/1.1"[..]));
    // Limits decided over HTTPS.
    for _ in 0..3 {
        assert_eq!(https_check(&client, p.http, "ann").await, 200);
    }
    assert_eq!(https_check(&client, p.http, "ann").await, 429);

    // ALPN offers h2 on the HTTP port.
    let h2 = connect(&pki.connector(None, &[b"h2", b"http/1.1"]), p.http)
        .await
        .unwrap();
    assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));

    // gRPC over TLS, ALPN h2.
    let grpc_tls = connect(&pki.connector(None, &[b"h2"]), p.grpc)
        .await
        .unwrap();
    assert_eq!(grpc_tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut grpc = grpc_client(pki.connector(None, &[b"h2"]), p.grpc)
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(should(&mut grpc, "bob").await.unwrap(), Code::Ok as i32);
    }
    assert_eq!(
        should(&mut grpc, "bob").await.unwrap(),
        Code::OverLimit as i32
    );

    // A client that does not trust the CA is refused.
    let stranger = Pki::new();
    assert!(
        https_get(&stranger.connector(None, &[]), p.http, "/healthz")
            .await
            .is_err()
    );

    // Clear text to either TLS port gets no HTTP answer, and the connection ends.
    for addr in [p.http, p.grpc] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(STEP, s.read_to_end(&mut buf))
            .await
            .expect("a clear-text connection stayed open");
        assert!(
            !buf.starts_with(b"HTTP/"),
            "{}",
            String::from_utf8_lossy(&buf)
        );
    }
    // The server goes on answering.
    assert_eq!(
        https_get(&client, p.http, "/healthz").await.unwrap().status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshakes_are_closed_and_cannot_take_every_place() {
    let pki = Pki::new();
    pki.write_leaf("server", &pki.server("flowgate"));
    let p = serve_tls(
        &pki,
        &[
            "--http-header-timeout",
            "1s",
            "--http-max-connections",
            "4",
            "--grpc-max-connections",
            "4",
        ],
    );
    for addr in [p.http, p.grpc] {
        // Every place taken by a client that sends half a TLS record header, then nothing.
        let mut stalled = Vec::new();
        for _ in 0..4 {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&[0x16, 0x03]).await.unwrap();
            stalled.push(s);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A real client waits for a place, and gets one when the stalled ones are closed.
        let started = tokio::time::Instant::now();
        let tls = connect(&pki.connector(None, &[b"h2"]), addr)
            .await
            .expect("no place freed");
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(500),
            "connected after {waited:?}: no cap"
        );
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        for mut s in stalled {
            let mut buf = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf))
                .await
                .expect("a stalled handshake was not closed");
        }
    }
    // The ports answer as before.
    let client = pki.connector(None, &[b"http/1.1"]);
    assert_eq!(
        https_get(&client, p.http, "/healthz").await.unwrap().status,
        200
    );
    let mut grpc = grpc_client(pki.connector(None, &[b"h2"]), p.grpc)
        .await
        .unwrap();
    assert_eq!(should(&mut grpc, "x").await.unwrap(), Code::Ok as i32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_with_a_client_ca() {
    let pki = Pki::new();
    pki.write_leaf("server", &pki.server("flowgate"));
    let ca = pki.path("ca.pem");
    let p = serve_tls(&pki, &["--tls-client-ca", ca.to_str().unwrap()]);

    // Without a client certificate: refused on both ports.
    let anonymous = pki.connector(None, &[b"http/1.1"]);
    let r = https_get(&anonymous, p.http, "/healthz").await;
    assert!(
        r.is_err(),
        "answered without a client certificate: {}",
        r.map(|a| a.status).unwrap_or(0)
    );
    let refused = async {
        let mut c = grpc_client(pki.connector(None, &[b"h2"]), p.grpc)
            .await
            .ok()?;
        should(&mut c, "x").await.ok()
    };
    assert_eq!(
        refused.await,
        None,
        "gRPC answered without a client certificate"
    );

    // A certificate from another CA: refused.
    let stranger = Pki::new();
    let foreign = stranger.client("mallory");
    let r = https_get(
        &pki.connector(Some(&foreign), &[b"http/1.1"]),
        p.http,
        "/healthz",
    )
    .await;
    assert!(r.is_err(), "answered a certificate of another CA");

    // With one the CA issued: accepted on both ports.
    let cert = pki.client("envoy");
    let a = https_get(
        &pki.connector(Some(&cert), &[b"http/1.1"]),
        p.http,
        "/healthz",
    )
    .await
    .unwrap();
    assert_eq!(a.status, 200);
    let mut grpc = grpc_client(pki.connector(Some(&cert), &[b"h2"]), p.grpc)
        .await
        .unwrap();
    assert_eq!(should(&mut grpc, "x").await.unwrap(), Code::Ok as i32);
}

/// What the server logs when the certificate files on disk cannot be put in force.
const REFUSED: &str = "TLS certificate files cannot be used";

/// The server certificate a new HTTPS connection sees (None when it cannot connect).
async fn seen(pki: &Pki, addr: SocketAddr) -> Option<CertificateDer<'static>> {
    https_get(&pki.connector(None, &[b"http/1.1"]), addr, "/healthz")
        .await
        .ok()
        .filter(|a| a.status == 200)
        .map(|a| a.server_cert)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificates_are_taken_and_broken_ones_refused() {
    let pki = Pki::new();
    let first = pki.server("flowgate-1");
    pki.write_leaf("server", &first);
    let p = serve_tls(&pki, &["--tls-reload-interval", "100ms"]);
    assert_eq!(seen(&pki, p.http).await, Some(first.der.clone()));
    // A connection made before the rotation goes on after it.
    let mut kept = grpc_client(pki.connector(None, &[b"h2"]), p.grpc)
        .await
        .unwrap();

    // Rotation: a new certificate and key.
    let second = pki.server("flowgate-2");
    pki.write_leaf("server", &second);
    assert!(
        wait_until(STEP, || async {
            seen(&pki, p.http).await == Some(second.der.clone())
        })
        .await,
        "the new certificate was not taken"
    );
    assert_eq!(should(&mut kept, "k").await.unwrap(), Code::Ok as i32);
    let mut fresh = grpc_client(pki.connector(None, &[b"h2"]), p.grpc)
        .await
        .unwrap();
    assert_eq!(should(&mut fresh, "k").await.unwrap(), Code::Ok as i32);

    // Broken replacements: a certificate that is not PEM, then a key of another certificate.
    // Each is checked once the server has logged why it cannot use the files (each failure
    // differs from the one before, so each is logged).
    let refusals = || p.logged(REFUSED);
    let before = refusals();
    pki.write("server.pem", "-----BEGIN CERTIFICATE-----\nnot base64\n");
    p.wait_logged(REFUSED, before, STEP).await;
    assert_eq!(seen(&pki, p.http).await, Some(second.der.clone()));
    let third = pki.server("flowgate-3");
    let before = refusals();
    pki.write("server.pem", &third.cert); // with the second's key
    p.wait_logged(REFUSED, before, STEP).await;
    assert_eq!(seen(&pki, p.http).await, Some(second.der.clone()));
    // A missing key file, as during a careless rotation.
    let before = refusals();
    std::fs::remove_file(pki.path("server.key")).unwrap();
    p.wait_logged(REFUSED, before, STEP).await;
    assert_eq!(seen(&pki, p.http).await, Some(second.der.clone()));

    // The key arrives: the third pair is taken.
    pki.write("server.key", &third.key);
    assert!(
        wait_until(STEP, || async {
            seen(&pki, p.http).await == Some(third.der.clone())
        })
        .await,
        "the repaired pair was not taken"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_certificate_at_once() {
    let pki = Pki::new();
    let first = pki.server("flowgate-1");
    pki.write_leaf("server", &first);
    let p = serve_tls(&pki, &["--tls-reload-interval", "1h"]);
    assert_eq!(seen(&pki, p.http).await, Some(first.der.clone()));
    let second = pki.server("flowgate-2");
    pki.write_leaf("server", &second);
    // Nothing marks a reload that did not happen: the new files are given 300 ms to be
    // (wrongly) taken.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        seen(&pki, p.http).await,
        Some(first.der.clone()),
        "reloaded without SIGHUP"
    );
    let status = std::process::Command::new("kill")
        .args(["-HUP", &p.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        wait_until(STEP, || async {
            seen(&pki, p.http).await == Some(second.der.clone())
        })
        .await,
        "SIGHUP did not reload the certificate"
    );
}

#[test]
fn bad_tls_flags_are_refused_naming_the_flag() {
    let pki = Pki::new();
    let cfg = rules(&pki);
    let cfg = cfg.to_str().unwrap();
    let leaf = pki.server("flowgate");
    let (cert, key) = pki.write_leaf("server", &leaf);
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());

    let (ok, err) = run_serve(&["--config", cfg, "--tls-cert", cert]);
    assert!(!ok && err.contains("--tls-key"), "{err}");
    let (ok, err) = run_serve(&["--config", cfg, "--tls-key", key]);
    assert!(!ok && err.contains("--tls-cert"), "{err}");
    // A key that is not the certificate's.
    let other = pki.write("other.key", &pki.server("other").key);
    let (ok, err) = run_serve(&[
        "--config",
        cfg,
        "--tls-cert",
        cert,
        "--tls-key",
        other.to_str().unwrap(),
    ]);
    assert!(
        !ok && err.contains("--tls-key") && err.contains("other.key"),
        "{err}"
    );
    // A certificate file that holds none.
    let junk = pki.write("junk.pem", "hello");
    let (ok, err) = run_serve(&[
        "--config",
        cfg,
        "--tls-cert",
        junk.to_str().unwrap(),
        "--tls-key",
        key,
    ]);
    assert!(
        !ok && err.contains("--tls-cert") && err.contains("junk.pem"),
        "{err}"
    );
    // Redis certificates for a Redis URL without TLS.
    let ca = pki.path("ca.pem");
    let (ok, err) = run_serve(&[
        "--config",
        cfg,
        "--redis-deadline",
        "2s",
        "--redis-url",
        "redis://127.0.0.1:1/",
        "--redis-ca-cert",
        ca.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("rediss://"), "{err}");
    let (ok, err) = run_serve(&["--config", cfg, "--redis-ca-cert", ca.to_str().unwrap()]);
    assert!(!ok && err.contains("--redis-url"), "{err}");
}

/// The TLS files of a TLS-only redis-server (its certificate also serves as the cluster bus's
/// client certificate), requiring `client` certificates if given.
fn redis_tls(pki: &Pki, client: Option<&Leaf>) -> ServerTls {
    let leaf = pki.leaf(
        "redis",
        &[
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    );
    let (cert, key) = pki.write_leaf("redis", &leaf);
    ServerTls {
        cert,
        key,
        ca: pki.path("ca.pem"),
        client: client.map(|c| pki.write_leaf("redis-probe", c)),
    }
}

/// Decides `user` over plain HTTP until it is rejected: the number admitted (at most 10).
async fn admitted_until_limited(addr: SocketAddr, user: &str) -> usize {
    for n in 0..10 {
        let body = serde_json::json!({"domain": "api", "descriptors": [format!("user={user}")]});
        let r = common::post_json(addr, "/v1/check", body).await;
        if r.status == 429 {
            return n;
        }
        assert_eq!(r.status, 200, "{}", r.body);
    }
    10
}

/// Whether the node's store answers (`GET /v1/store`; `/readyz` stays 200 either way, the
/// failure policies deciding).
async fn ready(addr: SocketAddr) -> bool {
    common::http(addr, "GET", "/v1/store", &[], "").await.status == 200
}

fn keys(redis: &RedisServer) -> u64 {
    redis
        .cli(&["DBSIZE"])
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("DBSIZE: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_shared_rules_through_a_tls_redis() {
    let pki = Pki::new();
    let redis = RedisServer::start_tls(redis_tls(&pki, None));
    assert!(redis.url().starts_with("rediss://"));
    let cfg = rules(&pki);
    let ca = pki.path("ca.pem");
    let p = spawn_server(
        &cfg,
        &[
            "--redis-deadline",
            "2s",
            "--redis-url",
            &redis.url(),
            "--redis-ca-cert",
            ca.to_str().unwrap(),
            "--rules-source",
            "redis",
            "--admin-token",
            "s3cret-0123456789abcdef0123456789abcdef",
        ],
    );
    assert!(
        wait_until(STEP, || ready(p.http)).await,
        "not ready on a TLS Redis"
    );
    assert_eq!(admitted_until_limited(p.http, "ann").await, 3);
    assert!(keys(&redis) >= 2, "no limit state in Redis");
    // The shared rules were seeded through the same TLS connection layer.
    assert_eq!(
        redis
            .cli(&["GET", "flowgate:{rules}:version"])
            .unwrap()
            .trim(),
        "1"
    );
    // A second node that checks the version only hourly takes a change at once: it is
    // notified through its subscription, over TLS too.
    let subscribers = || {
        redis
            .cli(&["PUBSUB", "NUMSUB", "flowgate:rules"])
            .ok()
            .and_then(|out| out.lines().last()?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = subscribers();
    let follower = spawn_server(
        &cfg,
        &[
            "--redis-deadline",
            "2s",
            "--redis-url",
            &redis.url(),
            "--redis-ca-cert",
            ca.to_str().unwrap(),
            "--rules-source",
            "redis",
            "--rules-check",
            "1h",
        ],
    );
    assert!(wait_until(STEP, || ready(follower.http)).await);
    assert!(
        wait_until(STEP, || async { subscribers() > before }).await,
        "the follower never subscribed to the rules' channel"
    );
    let changed = RULES.replace("3/1m", "1/1m");
    let r = common::http(
        p.http,
        "PUT",
        "/v1/rules",
        &[
            ("content-type", "application/toml"),
            (
                "authorization",
                "Bearer s3cret-0123456789abcdef0123456789abcdef",
            ),
        ],
        &changed,
    )
    .await;
    assert_eq!(r.json()["version"], 2, "{}", r.body);
    let version = || async {
        common::http(follower.http, "GET", "/v1/rules", &[], "")
            .await
            .json()["version"]
            .as_u64()
    };
    assert!(
        wait_until(Duration::from_secs(5), || async {
            version().await == Some(2)
        })
        .await,
        "the change was not notified to the follower"
    );

    // Without the private CA, Redis's certificate is not trusted: never ready, limits open.
    let untrusting = spawn_server(
        &cfg,
        &["--redis-deadline", "2s", "--redis-url", &redis.url()],
    );
    // Never ready: no event marks a handshake refused, so the node is given 500 ms (its first
    // connection attempt is immediate) before it is asked.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !ready(untrusting.http).await,
        "ready on an untrusted Redis certificate"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_to_redis() {
    let pki = Pki::new();
    let client = pki.client("flowgate");
    let redis = RedisServer::start_tls(redis_tls(&pki, Some(&client)));
    let cfg = rules(&pki);
    let ca = pki.path("ca.pem");
    let (cert, key) = pki.write_leaf("flowgate-client", &client);

    // Without a client certificate, Redis refuses the connection.
    let anonymous = spawn_server(
        &cfg,
        &[
            "--redis-deadline",
            "2s",
            "--redis-url",
            &redis.url(),
            "--redis-ca-cert",
            ca.to_str().unwrap(),
        ],
    );
    // Never ready: no event marks a handshake refused, so the node is given 500 ms (its first
    // connection attempt is immediate) before it is asked.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !ready(anonymous.http).await,
        "ready without a client certificate"
    );

    let p = spawn_server(
        &cfg,
        &[
            "--redis-deadline",
            "2s",
            "--redis-url",
            &redis.url(),
            "--redis-ca-cert",
            ca.to_str().unwrap(),
            "--redis-client-cert",
            cert.to_str().unwrap(),
            "--redis-client-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(
        wait_until(STEP, || ready(p.http)).await,
        "not ready with a client certificate"
    );
    assert_eq!(admitted_until_limited(p.http, "ann").await, 3);
    assert!(keys(&redis) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_through_a_tls_redis_cluster() {
    let pki = Pki::new();
    let cluster = RedisCluster::start_tls(3, redis_tls(&pki, None));
    let url = cluster.url();
    assert!(url.starts_with("rediss+cluster://"), "{url}");
    let cfg = rules(&pki);
    let ca = pki.path("ca.pem");
    let p = spawn_server(
        &cfg,
        &[
            "--redis-deadline",
            "2s",
            "--redis-url",
            &url,
            "--redis-ca-cert",
            ca.to_str().unwrap(),
        ],
    );
    assert!(
        wait_until(STEP, || ready(p.http)).await,
        "not ready on a TLS cluster"
    );
    // Users spread over the slots of every node.
    for user in ["ann", "bob", "cy", "dee", "eve", "fay"] {
        assert_eq!(admitted_until_limited(p.http, user).await, 3, "{user}");
    }
    let total: u64 = cluster.nodes().iter().map(keys).sum();
    assert!(total >= 6, "{total} keys in the cluster");
}
