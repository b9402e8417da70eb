//! TLS helpers shared by `tls.rs`, `peer.rs` and `auth_e2e.rs` (included by `#[path]`): a private CA and its
//! certificates (rcgen), rustls clients with and without a client certificate, HTTPS and gRPC
//! requests over them, and `flowgate serve` over TLS.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::common::{self, Proc, descriptor, spawn_server};

pub const RULES: &str = r#"
domain = "api"

[[rule]]
name = "per-user"
match = "user"
limit = "3/1m"
"#;

/// How long any one network step of these tests may take.
pub const STEP: Duration = Duration::from_secs(10);

/// A certificate and its key, as PEM, and the certificate's DER (to recognise it).
pub struct Leaf {
    pub cert: String,
    pub key: String,
    pub der: CertificateDer<'static>,
}

/// A private CA in a temporary directory, issuing certificates for 127.0.0.1 and localhost.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    pub fn new() -> Self {
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
    pub fn leaf(&self, cn: &str, usages: &[ExtendedKeyUsagePurpose]) -> Leaf {
        self.leaf_with(cn, &[], usages)
    }

    /// A client certificate named `cn` with the subject alternative names `alt` besides
    /// 127.0.0.1 and localhost: a name with `://` is a URI (a SPIFFE ID), any other a DNS name.
    pub fn client_with(&self, cn: &str, alt: &[&str]) -> Leaf {
        self.leaf_with(cn, alt, &[ExtendedKeyUsagePurpose::ClientAuth])
    }

    fn leaf_with(&self, cn: &str, alt: &[&str], usages: &[ExtendedKeyUsagePurpose]) -> Leaf {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        for name in alt {
            let ia5 = (*name).try_into().unwrap();
            params.subject_alt_names.push(if name.contains("://") {
                SanType::URI(ia5)
            } else {
                SanType::DnsName(ia5)
            });
        }
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

    pub fn server(&self, cn: &str) -> Leaf {
        self.leaf(cn, &[ExtendedKeyUsagePurpose::ServerAuth])
    }

    pub fn client(&self, cn: &str) -> Leaf {
        self.leaf(cn, &[ExtendedKeyUsagePurpose::ClientAuth])
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `text` to `name` whole (write, then rename, as a certificate manager does).
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        common::write(&path, text);
        path
    }

    /// Writes `leaf` as `<name>.pem` and `<name>.key`.
    pub fn write_leaf(&self, name: &str, leaf: &Leaf) -> (PathBuf, PathBuf) {
        (
            self.write(&format!("{name}.pem"), &leaf.cert),
            self.write(&format!("{name}.key"), &leaf.key),
        )
    }

    /// A client trusting this CA, with `client` as its certificate, offering `alpn`.
    pub fn connector(&self, client: Option<&Leaf>, alpn: &[&[u8]]) -> TlsConnector {
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
pub async fn connect(
    connector: &TlsConnector,
    addr: SocketAddr,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = tokio::time::timeout(STEP, TcpStream::connect(addr)).await??;
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(STEP, connector.connect(name, tcp)).await?
}

/// The outcome of one HTTPS request: the status and body, the server's certificate, and the
/// protocol ALPN chose.
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub server_cert: CertificateDer<'static>,
    pub alpn: Option<Vec<u8>>,
}

/// `GET path` over HTTPS/1.1 (ALPN `http/1.1`) on a fresh connection.
pub async fn https_get(
    connector: &TlsConnector,
    addr: SocketAddr,
    path: &str,
) -> Result<Answer, String> {
    https(connector, addr, "GET", path, &[], "").await
}

/// `method path` with `headers` and `body` over HTTPS/1.1 on a fresh connection.
pub async fn https(
    connector: &TlsConnector,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
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
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
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

/// An Envoy rate-limit client over TLS (ALPN `h2`), through tonic's channel.
pub async fn grpc_client(
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

pub async fn should(
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
pub fn rules(pki: &Pki) -> PathBuf {
    pki.write("flowgate.toml", RULES)
}

/// `flowgate serve` with TLS on `server.pem`/`server.key`, and `extra` flags.
pub fn serve_tls(pki: &Pki, extra: &[&str]) -> Proc {
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

/// `flowgate serve` with `args`: its exit status and standard error, within a bound.
pub fn run_serve(args: &[&str]) -> (bool, String) {
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
