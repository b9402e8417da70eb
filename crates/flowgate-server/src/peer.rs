//! Who is at the other end of a connection, on either port: its address and, with mutual TLS,
//! the names of the client certificate that rustls verified.
//!
//! Every request carries its connection's [`Peer`] in its extensions: on the HTTP port
//! `server.rs` inserts it (`Extension<Peer>` in an axum handler, or
//! `parts.extensions.get::<Peer>()` in an extractor); on the gRPC port it is the connection's
//! tonic `ConnectInfo` (`grpc_conn.rs`), which tonic inserts into each request
//! (`request.extensions().get::<Peer>()`).
//!
//! Invariants:
//! - **Only verified certificates name a peer.** The names are taken after a TLS handshake
//!   succeeded, from the certificate chain rustls verified against `--tls-client-ca`; without
//!   one (no TLS, no client CA, or a client that presented none under
//!   `--tls-client-auth optional`) a peer has no names, never names from elsewhere.
//! - **Set once, before any request.** On the gRPC port tonic takes a connection's
//!   `ConnectInfo` when it accepts it, before the (lazy) handshake: the names are filled in
//!   when the handshake completes, which is before any byte of a request can be read.
//! - **Cheap per request**: a `Peer` is one `Arc`; a request costs a clone of it.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;

/// Who is at the other end of a connection: its address and, with mutual TLS, the names of the
/// verified client certificate.
#[derive(Clone, Debug)]
pub(crate) struct Peer(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    addr: Option<SocketAddr>,
    /// The verified certificate's names; unset until a handshake verified one.
    names: OnceLock<Box<[String]>>,
}

impl Peer {
    /// A peer at `addr` (None where the transport has no address), with no certificate yet.
    pub(crate) fn new(addr: Option<SocketAddr>) -> Self {
        Self(Arc::new(Inner {
            addr,
            names: OnceLock::new(),
        }))
    }

    /// The peer's address.
    pub(crate) fn addr(&self) -> Option<SocketAddr> {
        self.0.addr
    }

    /// The verified client certificate's names: its subject's Common Name, then its DNS and URI
    /// subject alternative names (e.g. a SPIFFE ID `spiffe://cluster.local/ns/payments/sa/envoy`),
    /// in that order; empty without a verified certificate.
    pub(crate) fn cert_names(&self) -> &[String] {
        self.0.names.get().map_or(&[], |n| n)
    }

    /// Takes the names of the client certificate of `session`, a TLS session whose handshake
    /// succeeded (so rustls verified the certificate, if there is one). Called once per
    /// connection; a second call changes nothing.
    pub(crate) fn handshake_done(&self, session: &rustls::ServerConnection) {
        if let Some(leaf) = session.peer_certificates().and_then(|c| c.first()) {
            let _ = self.0.names.set(cert_names(leaf, self.0.addr).into());
        }
    }
}

/// The names of `leaf` (see [`Peer::cert_names`]); none if it cannot be parsed, which is
/// logged (rustls verified it, so this is a certificate x509-parser reads otherwise).
fn cert_names(leaf: &CertificateDer<'_>, addr: Option<SocketAddr>) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let cert = match x509_parser::parse_x509_certificate(leaf) {
        Ok((_, cert)) => cert,
        Err(e) => {
            tracing::warn!(peer = ?addr, error = %e, "a verified client certificate cannot be parsed: it names no one");
            return Vec::new();
        }
    };
    let mut names: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .map(str::to_owned)
        .collect();
    let alt = match cert.subject_alternative_name() {
        Ok(alt) => alt.map(|a| a.value.general_names.as_slice()).unwrap_or(&[]),
        Err(e) => {
            tracing::warn!(peer = ?addr, error = %e, "a verified client certificate's subject alternative names cannot be read: only its Common Name names it");
            &[]
        }
    };
    let dns = alt.iter().filter_map(|n| match n {
        GeneralName::DNSName(d) => Some(*d),
        _ => None,
    });
    let uri = alt.iter().filter_map(|n| match n {
        GeneralName::URI(u) => Some(*u),
        _ => None,
    });
    names.extend(dns.chain(uri).map(str::to_owned));
    names
}

#[cfg(test)]
mod tests;
