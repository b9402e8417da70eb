//! A private CA for TLS tests (rcgen), in a temporary directory: the CA certificate, a
//! certificate for 127.0.0.1 and localhost that Redis processes serve and also present as
//! clients (replication, sentinels), and a client certificate for Flowgate, all PEM files.

use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tempfile::TempDir;

use crate::redis::ServerTls;

/// A CA and the certificates it signed, as files; removed on drop.
pub struct TestPki {
    dir: TempDir,
}

/// Turns rcgen's error into an I/O one.
fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl TestPki {
    /// Makes a CA, Redis's certificate (`redis.pem`, `redis.key`: server and client use) and a
    /// client certificate (`client.pem`, `client.key`).
    ///
    /// # Panics
    /// When the certificates cannot be made or written.
    pub fn new() -> Self {
        Self::try_new().unwrap_or_else(|e| panic!("cannot make test certificates: {e}"))
    }

    fn try_new() -> io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("flowgate-pki-").tempdir()?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "flowgate test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().map_err(other)?)
            .map_err(other)?;
        std::fs::write(dir.path().join("ca.pem"), ca.pem())?;
        let both = [
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        for (name, usages) in [
            ("redis", &both[..]),
            ("client", &[ExtendedKeyUsagePurpose::ClientAuth][..]),
        ] {
            let mut params =
                CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                    .map_err(other)?;
            params.distinguished_name.push(DnType::CommonName, name);
            params.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            params.extended_key_usages = usages.to_vec();
            let key = KeyPair::generate().map_err(other)?;
            let cert = params.signed_by(&key, &ca).map_err(other)?;
            std::fs::write(dir.path().join(format!("{name}.pem")), cert.pem())?;
            std::fs::write(dir.path().join(format!("{name}.key")), key.serialize_pem())?;
        }
        Ok(Self { dir })
    }

    /// The file `name` of this PKI (`ca.pem`, `redis.pem`, `redis.key`, `client.pem`,
    /// `client.key`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The files of a TLS-only Redis process; with `mutual`, clients must present a certificate
    /// (`tls-auth-clients yes`), and `client.pem` is the one probes present.
    pub fn server_tls(&self, mutual: bool) -> ServerTls {
        ServerTls {
            cert: self.path("redis.pem"),
            key: self.path("redis.key"),
            ca: self.path("ca.pem"),
            client: mutual.then(|| (self.path("client.pem"), self.path("client.key"))),
        }
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}
