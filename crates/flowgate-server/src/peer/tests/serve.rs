//! The `Peer` every request carries, seen by handlers on servers started through the server's
//! own `serve_http` and `serve_grpc` (with `Tls::load` from files, as `Server::bind` does), on
//! loopback: an HTTP route and an Envoy rate-limit service that echo their request's `Peer`,
//! reached over HTTP/1.1, HTTP/2 and gRPC by rustls clients with and without certificates.
//!
//! These run inside the crate because `Peer` is the crate's own: no public route shows it yet.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Extension;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::ExtendedKeyUsagePurpose;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsConnector;

use super::{Ca, Leaf, dns, uri};
use crate::listen::{serve_grpc, serve_http};
use crate::peer::Peer;
use crate::tls::{ClientAuth, Tls, TlsFiles};

/// How long any one network step may take.
const STEP: Duration = Duration::from_secs(10);

/// What a request's `Peer` said, as echoed: its address, then its names, one a line.
fn echo(peer: &Peer) -> String {
    let addr = peer.addr().map(|a| a.to_string()).unwrap_or_default();
    std::iter::once(addr)
        .chain(peer.cert_names().iter().cloned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the servers saw of a client: its address and its certificate's names.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    addr: String,
    names: Vec<String>,
}

impl Seen {
    fn parse(echo: &str) -> Self {
        let mut lines = echo.split('\n');
        Self {
            addr: lines.next().unwrap_or_default().to_owned(),
            names: lines.map(str::to_owned).collect(),
        }
    }
}

/// `GET /peer`: the request's `Peer`, as an axum handler takes it.
fn http_app() -> axum::Router {
    axum::Router::new().route(
        "/peer",
        axum::routing::get(|Extension(peer): Extension<Peer>| async move { echo(&peer) }),
    )
}

/// An Envoy rate-limit service answering with the request's `Peer` in its raw body.
struct Echo;

#[tonic::async_trait]
impl RateLimitService for Echo {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let peer = request
            .extensions()
            .get::<Peer>()
            .ok_or_else(|| tonic::Status::internal("no Peer in the request's extensions"))?;
        Ok(tonic::Response::new(RateLimitResponse {
            raw_body: echo(peer).into_bytes(),
            ..RateLimitResponse::default()
        }))
    }
}

/// Both ports, echoing, until dropped.
struct Ports {
    http: SocketAddr,
    grpc: SocketAddr,
    stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Drop for Ports {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// The ports over TLS with a certificate `ca` issued for localhost; `client_ca`: whether
/// clients' certificates are asked for (verified against `ca`), and how.
async fn start(ca: &Ca, client_ca: Option<ClientAuth>) -> Ports {
    let dir = tempfile::tempdir().unwrap();
    let server = ca.issue(
        Some("flowgate"),
        vec![dns("localhost")],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let mut files = TlsFiles::new(
        write("server.pem", &server.cert),
        write("server.key", &server.key),
    );
    if let Some(auth) = client_ca {
        files.client_ca = Some(write("ca.pem", &ca.pem()));
        files.client_auth = auth;
    }
    let tls = Tls::load(&files).await.unwrap();
    serve(Some(tls), dir).await
}

/// The ports, over TLS with `tls`.
async fn serve(tls: Option<Tls>, dir: tempfile::TempDir) -> Ports {
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (http_addr, grpc_addr) = (http.local_addr().unwrap(), grpc.local_addr().unwrap());
    let (stop, shutdown) = watch::channel(false);
    let (http_tls, grpc_tls) = match &tls {
        Some(t) => (Some(t.http.clone()), Some(t.grpc.clone())),
        None => (None, None),
    };
    let peers = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    serve_http(
        http,
        http_app(),
        crate::listen::HttpConns {
            peers,
            lifecycle: crate::probes::Lifecycle::default(),
        },
        shutdown.clone(),
        16,
        STEP,
        http_tls,
    );
    let services = tonic::service::Routes::new(RateLimitServiceServer::new(Echo));
    serve_grpc(grpc, services, shutdown, 16, STEP, grpc_tls);
    Ports {
        http: http_addr,
        grpc: grpc_addr,
        stop,
        _dir: dir,
    }
}

/// How a client reaches a port.
#[derive(Clone, Copy, Debug)]
enum Proto {
    Http1,
    Http2,
    Grpc,
}

const PROTOS: [Proto; 3] = [Proto::Http1, Proto::Http2, Proto::Grpc];

/// A client trusting `ca`, presenting `client` (if any), offering the ALPN of `proto`.
fn connector(ca: &Ca, client: Option<&Leaf>, proto: Proto) -> TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
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
    config.alpn_protocols = match proto {
        Proto::Http1 => vec![b"http/1.1".to_vec()],
        Proto::Http2 | Proto::Grpc => vec![b"h2".to_vec()],
    };
    TlsConnector::from(Arc::new(config))
}

/// A connection to `addr`, over TLS with `tls`; and its local address (what the server sees).
async fn connect(
    tls: Option<&TlsConnector>,
    addr: SocketAddr,
) -> io::Result<(Box<dyn Io>, SocketAddr)> {
    let tcp = tokio::time::timeout(STEP, TcpStream::connect(addr)).await??;
    let local = tcp.local_addr()?;
    let Some(tls) = tls else {
        return Ok((Box::new(tcp), local));
    };
    let name = ServerName::try_from("localhost").unwrap();
    let stream = tokio::time::timeout(STEP, tls.connect(name, tcp)).await??;
    Ok((Box::new(stream), local))
}

/// A client's transport.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// What the port of `proto` saw of a client with `tls` (clear text without), on two requests
/// of one connection (which must agree), and the client's address; an error when refused.
async fn ask(ports: &Ports, tls: Option<&TlsConnector>, proto: Proto) -> Result<Seen, String> {
    let (first, second, local) = match proto {
        Proto::Http1 | Proto::Http2 => http_twice(ports.http, tls, proto).await?,
        Proto::Grpc => grpc_twice(ports.grpc, tls).await?,
    };
    let (first, second) = (Seen::parse(&first), Seen::parse(&second));
    assert_eq!(first, second, "{proto:?}: two requests of one connection");
    assert_eq!(
        first.addr,
        local.to_string(),
        "{proto:?}: the client's address"
    );
    Ok(first)
}

/// Two `GET /peer`s on one HTTP/1.1 or HTTP/2 connection: their bodies and the client's
/// address.
async fn http_twice(
    addr: SocketAddr,
    tls: Option<&TlsConnector>,
    proto: Proto,
) -> Result<(String, String, SocketAddr), String> {
    let (io, local) = connect(tls, addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let io = TokioIo::new(io);
    let mut bodies = Vec::new();
    if let Proto::Http2 = proto {
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(conn);
        for _ in 0..2 {
            send.ready().await.map_err(|e| format!("ready: {e}"))?;
            let req = hyper::Request::get("https://localhost/peer").body(Empty::<Bytes>::new());
            bodies.push(body(send.send_request(req.unwrap())).await?);
        }
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(conn);
        for _ in 0..2 {
            // Ready again once the previous answer is read whole (on the connection's task).
            send.ready().await.map_err(|e| format!("ready: {e}"))?;
            let req = hyper::Request::get("/peer").header("host", "localhost");
            bodies.push(body(send.send_request(req.body(Empty::<Bytes>::new()).unwrap())).await?);
        }
    }
    let second = bodies.pop().unwrap_or_default();
    let first = bodies.pop().unwrap_or_default();
    Ok((first, second, local))
}

/// The body of a 200 answer.
async fn body(
    answer: impl Future<Output = hyper::Result<hyper::Response<hyper::body::Incoming>>>,
) -> Result<String, String> {
    let resp = tokio::time::timeout(STEP, answer)
        .await
        .map_err(|_| "no answer in time".to_owned())?
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if status != 200 {
        return Err(format!("{status}: {text}"));
    }
    Ok(text)
}

/// Two `ShouldRateLimit` calls on one gRPC channel: the echoed bodies and the client's address.
async fn grpc_twice(
    addr: SocketAddr,
    tls: Option<&TlsConnector>,
) -> Result<(String, String, SocketAddr), String> {
    let local = Arc::new(Mutex::new(None));
    let connect = {
        let (tls, local) = (tls.cloned(), Arc::clone(&local));
        tower::service_fn(move |_: http::Uri| {
            let (tls, local) = (tls.clone(), Arc::clone(&local));
            async move {
                let (io, at) = connect(tls.as_ref(), addr).await?;
                *local.lock().unwrap() = Some(at);
                Ok::<_, io::Error>(TokioIo::new(io))
            }
        })
    };
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://localhost:{}", addr.port()))
            .unwrap()
            .connect_timeout(STEP)
            .timeout(STEP)
            .connect_with_connector(connect)
            .await
            .map_err(|e| format!("connect: {e}"))?;
    let mut client = RateLimitServiceClient::new(channel);
    let mut bodies = Vec::new();
    for _ in 0..2 {
        let answer = client
            .should_rate_limit(RateLimitRequest::default())
            .await
            .map_err(|e| format!("call: {e}"))?;
        bodies.push(String::from_utf8_lossy(&answer.into_inner().raw_body).into_owned());
    }
    let local = local.lock().unwrap().ok_or("no connection was made")?;
    let second = bodies.pop().unwrap_or_default();
    let first = bodies.pop().unwrap_or_default();
    Ok((first, second, local))
}

/// Envoy's certificate: a Common Name and a SPIFFE ID.
fn envoy_cert(ca: &Ca) -> Leaf {
    ca.client(Some("envoy"), vec![uri("spiffe://test/envoy")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_client_certificates_name_every_request() {
    let ca = Ca::new("flowgate peer CA");
    let ports = start(&ca, Some(ClientAuth::Required)).await;
    let envoy = envoy_cert(&ca);
    let stranger = envoy_cert(&Ca::new("another CA"));
    for proto in PROTOS {
        let seen = ask(&ports, Some(&connector(&ca, Some(&envoy), proto)), proto).await;
        assert_eq!(
            seen.unwrap().names,
            ["envoy", "spiffe://test/envoy"],
            "{proto:?}"
        );
        let anonymous = ask(&ports, Some(&connector(&ca, None, proto)), proto).await;
        assert!(
            anonymous.is_err(),
            "{proto:?}: answered without a certificate: {anonymous:?}"
        );
        let foreign = ask(&ports, Some(&connector(&ca, Some(&stranger), proto)), proto).await;
        assert!(
            foreign.is_err(),
            "{proto:?}: answered another CA's certificate: {foreign:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optional_client_certificates_name_the_requests_that_present_one() {
    let ca = Ca::new("flowgate peer CA");
    let ports = start(&ca, Some(ClientAuth::Optional)).await;
    let envoy = envoy_cert(&ca);
    let stranger = envoy_cert(&Ca::new("another CA"));
    for proto in PROTOS {
        let seen = ask(&ports, Some(&connector(&ca, Some(&envoy), proto)), proto).await;
        assert_eq!(
            seen.unwrap().names,
            ["envoy", "spiffe://test/envoy"],
            "{proto:?}"
        );
        // Without a certificate: let in, known by its address only.
        let anonymous = ask(&ports, Some(&connector(&ca, None, proto)), proto).await;
        assert_eq!(anonymous.unwrap().names, Vec::<String>::new(), "{proto:?}");
        // A certificate presented must still verify: another CA's is refused, not ignored.
        let foreign = ask(&ports, Some(&connector(&ca, Some(&stranger), proto)), proto).await;
        assert!(
            foreign.is_err(),
            "{proto:?}: answered another CA's certificate: {foreign:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_ca_no_certificate_names_a_peer() {
    let ca = Ca::new("flowgate peer CA");
    let ports = start(&ca, None).await;
    // The client holds a certificate, but the server asks for none: no names.
    let envoy = envoy_cert(&ca);
    for proto in PROTOS {
        let seen = ask(&ports, Some(&connector(&ca, Some(&envoy), proto)), proto).await;
        assert_eq!(seen.unwrap().names, Vec::<String>::new(), "{proto:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_text_requests_carry_the_address() {
    let ports = serve(None, tempfile::tempdir().unwrap()).await;
    // HTTP/2 in clear text is prior knowledge: the gRPC client speaks it.
    for proto in [Proto::Http1, Proto::Grpc] {
        let seen = ask(&ports, None, proto).await;
        assert_eq!(seen.unwrap().names, Vec::<String>::new(), "{proto:?}");
    }
}

#[tokio::test]
async fn optional_client_auth_without_a_client_ca_is_refused() {
    let ca = Ca::new("flowgate peer CA");
    let dir = tempfile::tempdir().unwrap();
    let server = ca.issue(
        Some("flowgate"),
        vec![dns("localhost")],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (cert, key) = (dir.path().join("s.pem"), dir.path().join("s.key"));
    std::fs::write(&cert, &server.cert).unwrap();
    std::fs::write(&key, &server.key).unwrap();
    let mut files = TlsFiles::new(cert, key);
    files.client_auth = ClientAuth::Optional;
    let err = Tls::load(&files).await.err().expect("loaded");
    assert!(err.to_string().contains("--tls-client-ca"), "{err}");
}
