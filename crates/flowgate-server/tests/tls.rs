//! TLS end to end, with certificates made here (rcgen): `flowgate serve` processes with
//! `--tls-cert`/`--tls-key` answer HTTPS and gRPC over TLS, refuse clear text, require client
//! certificates with `--tls-client-ca`, take rotated certificate files without a restart and
//! keep the last good pair when the new one is broken; and they reach a TLS-only
//! `redis-server` (single and cluster, with and without client certificates) through
//! `rediss://` URLs. Everything on loopback, every wait bounded.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::{Proc, descriptor, spawn_server, wait_until};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use flowgate_testkit::redis::{RedisCluster, RedisServer, ServerTls};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

const RULES: &str = r#"
domain = "api"

[[rule]]
name = "per-user"
match = "user"
limit = "3/1m"
"#;

/// How long any one network step of these tests may take.
const STEP: Duration = Duration::from_secs(10);

/// A certificate and its key, as PEM, and the certificate's DER (to recognise it).
struct Leaf {
    cert: String,
    key: String,
    der: CertificateDer<'static>,
}

/// A private CA in a temporary directory, issuing certificates for 127.0.0.1 and localhost.
struct Pki {
    dir: tempfile::TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "flowgate test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let pki = Self {
            dir: tempfile::tempdir().unwrap(),
            ca,
        };
        pki.write("ca.pem", &pki.ca.pem());
        pki
    }

    /// A certificate named `cn` for 127.0.0.1 and localhost, for `usages`.
    fn leaf(&self, cn: &str, usages: &[ExtendedKeyUsagePurpose]) -> Leaf {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = usages.to_vec();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    fn server(&self, cn: &str) -> Leaf {
        self.leaf(cn, &[ExtendedKeyUsagePurpose::ServerAuth])
    }

    fn client(&self, cn: &str) -> Leaf {
        self.leaf(cn, &[ExtendedKeyUsagePurpose::ClientAuth])
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `text` to `name` whole (write, then rename, as a certificate manager does).
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        common::write(&path, text);
        path
    }

    /// Writes `leaf` as `<name>.pem` and `<name>.key`.
    fn write_leaf(&self, name: &str, leaf: &Leaf) -> (PathBuf, PathBuf) {
        (
            self.write(&format!("{name}.pem"), &leaf.cert),
            self.write(&format!("{name}.key"), &leaf.key),
        )
    }

    /// A client trusting this CA, with `client` as its certificate, offering `alpn`.
    fn connector(&self, client: Option<&Leaf>, alpn: &[&[u8]]) -> TlsConnector {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let mut config = match client {
            Some(c) => builder
                .with_client_auth_cert(
                    vec![c.der.clone()],
                    PrivateKeyDer::from_pem_slice(c.key.as_bytes()).unwrap(),
                )
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }
}

/// A TLS connection to `addr` as `localhost`.
async fn connect(
    connector: &TlsConnector,
    addr: SocketAddr,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = tokio::time::timeout(STEP, TcpStream::connect(addr)).await??;
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(STEP, connector.connect(name, tcp)).await?
}

/// The outcome of one HTTPS request: the status and body, the server's certificate, and the
/// protocol ALPN chose.
struct Answer {
    status: u16,
    body: String,
    server_cert: CertificateDer<'static>,
    alpn: Option<Vec<u8>>,
}

/// `GET path` over HTTPS/1.1 (ALPN `http/1.1`) on a fresh connection.
async fn https_get(
    connector: &TlsConnector,
    addr: SocketAddr,
    path: &str,
) -> Result<Answer, String> {
    let tls = connect(connector, addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (_, session) = tls.get_ref();
    let server_cert = session
        .peer_certificates()
        .and_then(|c| c.first())
        .cloned()
        .ok_or("no server certificate")?;
    let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = tokio::time::timeout(STEP, send.send_request(req))
        .await
        .map_err(|_| "no answer in time".to_owned())?
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok(Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
        server_cert,
        alpn,
    })
}

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

/// An Envoy rate-limit client over TLS (ALPN `h2`), through tonic's channel.
async fn grpc_client(
    connector: TlsConnector,
    addr: SocketAddr,
) -> Result<RateLimitServiceClient<tonic::transport::Channel>, tonic::transport::Error> {
    let connect = tower::service_fn(move |_: http::Uri| {
        let connector = connector.clone();
        async move {
            connect(&connector, addr)
                .await
                .map(hyper_util::rt::TokioIo::new)
        }
    });
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://localhost:{}", addr.port()))?
            .connect_timeout(STEP)
            .timeout(STEP)
            .connect_with_connector(connect)
            .await?;
    Ok(RateLimitServiceClient::new(channel))
}

async fn should(
    client: &mut RateLimitServiceClient<tonic::transport::Channel>,
    user: &str,
) -> Result<i32, tonic::Status> {
    let r = client
        .should_rate_limit(RateLimitRequest {
            domain: "api".into(),
            descriptors: vec![descriptor(&[("user", user)])],
            hits_addend: 1,
        })
        .await?;
    Ok(r.into_inner().overall_code)
}

/// A rules file in the PKI's directory.
fn rules(pki: &Pki) -> PathBuf {
    pki.write("flowgate.toml", RULES)
}

/// `flowgate serve` with TLS on `server.pem`/`server.key`, and `extra` flags.
fn serve_tls(pki: &Pki, extra: &[&str]) -> Proc {
    let cfg = rules(pki);
    let cert = pki.path("server.pem");
    let key = pki.path("server.key");
    let mut args = vec![
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    spawn_server(&cfg, &args)
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

/// `flowgate serve` with `args`: its exit status and standard error, within a bound.
fn run_serve(args: &[&str]) -> (bool, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flowgate"))
        .arg("serve")
        .args(args)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pause = Duration::from_millis(20);
    let mut waited = Duration::ZERO;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return (status.success(), err);
        }
        waited += pause;
        if waited > STEP {
            let _ = child.kill();
            let _ = child.wait();
            panic!("flowgate serve {args:?} did not exit");
        }
        std::thread::sleep(pause);
    }
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
