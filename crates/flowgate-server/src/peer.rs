//! Who is at the other end of a connection. (Replaced by the `peer` branch's module.)

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

/// Who is at the other end of a connection: its address and, with mutual TLS, the names of the
/// verified client certificate.
#[derive(Clone, Debug, Default)]
pub(crate) struct Peer {
    addr: Option<SocketAddr>,
    names: Arc<OnceLock<Vec<String>>>,
}

impl Peer {
    /// The source address.
    pub(crate) fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The verified client certificate's names; empty without one.
    pub(crate) fn cert_names(&self) -> &[String] {
        self.names.get().map_or(&[], Vec::as_slice)
    }
}
