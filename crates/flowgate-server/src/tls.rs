//! TLS on the HTTP and gRPC ports: rustls on the `ring` provider, certificates from PEM files,
//! optional client certificates (mutual TLS), and certificate rotation without a restart.
//!
//! - **One certificate in force** ([`CurrentCert`], rustls's `ResolvesServerCert`): every
//!   handshake on either port takes the pair in force at that moment, so a reload changes new
//!   connections at once and leaves established ones as they are.
//! - **Reload** ([`Reloader`]): the certificate and key files are read again every
//!   [`TlsFiles::reload`] and on `SIGHUP`; when their bytes changed, the new pair is parsed and
//!   its key checked against its certificate. A pair that does not parse or match (a file half
//!   written, a key of another certificate) is logged once and the previous pair stays in force:
//!   a reload never stops a listener and never panics. Rotate by writing both files (each
//!   written whole, e.g. by rename); a pair caught between the two writes is refused and the next
//!   read takes the complete one.
//! - **ALPN**: `h2` and `http/1.1` on the HTTP port, `h2` on the gRPC port.
//! - **Client certificates** (`--tls-client-ca`): verified against that CA bundle on both ports
//!   (read at start; a new CA takes a restart). [`ClientAuth`] (`--tls-client-auth`) says whether
//!   a client must present one (`required`, the default) or may connect without
//!   (`optional`: it then names itself with a bearer token where a route needs it); a
//!   certificate presented is verified in both modes, and one that does not chain to the CA
//!   ends the handshake. Only a verified certificate names a peer (`peer.rs`).
//!
//! The handshakes run in each connection's own task, bounded by the header timeout (see
//! `server.rs` and `grpc_conn.rs`), so a client that never finishes one cannot hold a place.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// How often the certificate files are read again by default.
pub const DEFAULT_TLS_RELOAD: Duration = Duration::from_secs(5);

/// The files of the ports' TLS (PEM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's certificate first (`--tls-cert`).
    pub cert: PathBuf,
    /// The certificate's private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC) (`--tls-key`).
    pub key: PathBuf,
    /// The CA certificates that clients' certificates must chain to (mutual TLS)
    /// (`--tls-client-ca`).
    pub client_ca: Option<PathBuf>,
    /// Whether a client must present a certificate, with `client_ca` (`--tls-client-auth`);
    /// without `client_ca`, no certificate is asked for and `Optional` is refused.
    pub client_auth: ClientAuth,
    /// How often the certificate and key files are read again (a changed pair is taken for new
    /// connections).
    pub reload: Duration,
}

impl TlsFiles {
    /// The certificate and key files, no client certificates, read again every
    /// [`DEFAULT_TLS_RELOAD`].
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
            client_auth: ClientAuth::Required,
            reload: DEFAULT_TLS_RELOAD,
        }
    }
}

/// Whether a client must present a certificate on the ports (`--tls-client-auth`). A
/// certificate presented is verified against `--tls-client-ca` either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum ClientAuth {
    /// Every client presents a certificate the CA issued; a client without one is refused.
    #[default]
    Required,
    /// A client may connect without a certificate (and then name itself with a bearer token
    /// where a route needs one); one it presents must still chain to the CA.
    Optional,
}

/// Why the ports' TLS cannot be set up; the message names the flag and the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file cannot be read.
    #[error("cannot read {flag} {}: {source}", path.display())]
    Read {
        /// The flag that names the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file does not hold what it must.
    #[error("{flag} {}: {detail}", path.display())]
    Invalid {
        /// The flag that names the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// `--tls-client-auth optional` without `--tls-client-ca`: no certificate could be verified.
    #[error(
        "--tls-client-auth optional needs --tls-client-ca (the CA a certificate presented is verified against)"
    )]
    OptionalWithoutCa,
}

/// The crypto of every TLS session here.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(flag: &'static str, path: &Path, detail: impl Into<String>) -> TlsError {
    TlsError::Invalid {
        flag,
        path: path.to_owned(),
        detail: detail.into(),
    }
}

/// The certificates of a PEM bundle (none is an error).
fn certificates(
    flag: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(flag, path, format!("unreadable PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(
            flag,
            path,
            "holds no certificate (a PEM `BEGIN CERTIFICATE` block)",
        ));
    }
    Ok(certs)
}

/// The pair of `files` as read: the chain of `cert`, the key of `key`, the key checked against
/// the chain's first certificate.
fn certified_key(files: &TlsFiles, cert: &[u8], key: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain = certificates("--tls-cert", &files.cert, cert)?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
        invalid(
            "--tls-key",
            &files.key,
            format!("no usable PEM private key: {e}"),
        )
    })?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|e| {
        invalid(
            "--tls-key",
            &files.key,
            format!("does not go with the certificate of --tls-cert: {e}"),
        )
    })
}

/// The certificate and key in force, which every new handshake takes.
#[derive(Debug)]
pub(crate) struct CurrentCert(ArcSwap<CertifiedKey>);

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// The ports' TLS: one acceptor per port over one certificate in force, and what reloads it.
pub(crate) struct Tls {
    /// The HTTP port's (ALPN `h2`, `http/1.1`).
    pub(crate) http: TlsAcceptor,
    /// The gRPC port's (ALPN `h2`).
    pub(crate) grpc: TlsAcceptor,
    /// What keeps the certificate in force up to date with the files.
    pub(crate) reloader: Reloader,
}

async fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| TlsError::Read {
            flag,
            path: path.to_owned(),
            source,
        })
}

impl Tls {
    /// Reads `files` and builds both ports' TLS.
    ///
    /// # Errors
    /// [`TlsError`] naming the flag and file that cannot be read or used.
    pub(crate) async fn load(files: &TlsFiles) -> Result<Self, TlsError> {
        let cert = read("--tls-cert", &files.cert).await?;
        let key = read("--tls-key", &files.key).await?;
        let pair = certified_key(files, &cert, &key)?;
        let current = Arc::new(CurrentCert(ArcSwap::from_pointee(pair)));
        let verifier = match &files.client_ca {
            None if files.client_auth == ClientAuth::Optional => {
                return Err(TlsError::OptionalWithoutCa);
            }
            None => None,
            Some(path) => {
                let pem = read("--tls-client-ca", path).await?;
                let mut roots = rustls::RootCertStore::empty();
                for c in certificates("--tls-client-ca", path, &pem)? {
                    roots.add(c).map_err(|e| {
                        invalid(
                            "--tls-client-ca",
                            path,
                            format!("not a CA certificate: {e}"),
                        )
                    })?;
                }
                let builder =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
                let builder = match files.client_auth {
                    ClientAuth::Required => builder,
                    ClientAuth::Optional => builder.allow_unauthenticated(),
                };
                let verifier = builder
                    .build()
                    .map_err(|e| invalid("--tls-client-ca", path, e.to_string()))?;
                Some(verifier)
            }
        };
        let config = |alpn: &[&[u8]]| -> Result<TlsAcceptor, TlsError> {
            let builder = rustls::ServerConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| invalid("--tls-cert", &files.cert, e.to_string()))?;
            let builder = match &verifier {
                Some(v) => builder.with_client_cert_verifier(Arc::clone(v)),
                None => builder.with_no_client_auth(),
            };
            let mut config = builder.with_cert_resolver(Arc::clone(&current) as _);
            config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            Ok(TlsAcceptor::from(Arc::new(config)))
        };
        Ok(Self {
            http: config(&[b"h2", b"http/1.1"])?,
            grpc: config(&[b"h2"])?,
            reloader: Reloader {
                files: files.clone(),
                current: Arc::clone(&current),
                seen: (cert, key),
                failed: None,
            },
        })
    }
}

/// Reads the certificate files again and puts a changed, usable pair in force.
pub(crate) struct Reloader {
    files: TlsFiles,
    current: Arc<CurrentCert>,
    /// The bytes of the certificate and key files last read.
    seen: (Vec<u8>, Vec<u8>),
    /// The last failure logged (logged again only when it changes).
    failed: Option<String>,
}

impl Reloader {
    /// Reads both files; when they differ from the last read, parses them and puts the pair in
    /// force, or logs why it cannot and keeps the one in force.
    pub(crate) async fn check(&mut self) {
        let read_both = async {
            let cert = read("--tls-cert", &self.files.cert).await?;
            let key = read("--tls-key", &self.files.key).await?;
            Ok::<_, TlsError>((cert, key))
        };
        let (cert, key) = match read_both.await {
            Ok(pair) => pair,
            Err(e) => return self.fail(&e),
        };
        if (&cert, &key) == (&self.seen.0, &self.seen.1) {
            return;
        }
        let outcome = certified_key(&self.files, &cert, &key);
        self.seen = (cert, key);
        match outcome {
            Ok(pair) => {
                self.current.0.store(Arc::new(pair));
                self.failed = None;
                tracing::info!(
                    cert = %self.files.cert.display(),
                    key = %self.files.key.display(),
                    "TLS certificate reloaded: new connections use it"
                );
            }
            Err(e) => self.fail(&e),
        }
    }

    fn fail(&mut self, e: &TlsError) {
        let message = e.to_string();
        if self.failed.as_deref() != Some(message.as_str()) {
            tracing::error!(error = %message, "TLS certificate files cannot be used: the certificate in force stays");
            self.failed = Some(message);
        }
    }

    /// Checks the files every [`TlsFiles::reload`] and on `SIGHUP`, until `shutdown`.
    pub(crate) fn spawn(mut self, mut shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
        // Listening now, not in the task: a SIGHUP that came before the task first ran would
        // find no handler, and end the process (its default action).
        let mut hangup = Hangup::listen();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(self.files.reload.max(Duration::from_millis(10)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = shutdown.changed() => {}
                    _ = tick.tick() => {}
                    () = hangup.recv() => {
                        tracing::info!("SIGHUP: reading the TLS certificate files");
                    }
                }
                if *shutdown.borrow() {
                    return;
                }
                self.check().await;
            }
        })
    }
}

/// `SIGHUP`, where there is one (and its handler could be installed): what makes the TLS files
/// and the credentials file be read again at once.
pub(crate) struct Hangup {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangup {
    pub(crate) fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let signal = signal(SignalKind::hangup())
                .inspect_err(|e| tracing::warn!(error = %e, "cannot handle SIGHUP: the TLS and credentials files are only polled"))
                .ok();
            Self { signal }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// Until the next `SIGHUP` (never, without one).
    pub(crate) async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = self.signal.as_mut()
            && s.recv().await.is_some()
        {
            return;
        }
        std::future::pending::<()>().await;
    }
}
