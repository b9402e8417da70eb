//! The names of client certificates made here (rcgen), and, in `serve`, the `Peer` each request
//! carries on both ports, over real sockets and TLS.

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::CertificateDer;

use super::{Peer, cert_names};

mod serve;

/// A certificate and its key (PEM), and the certificate's DER.
struct Leaf {
    cert: String,
    key: String,
    der: CertificateDer<'static>,
}

/// A private CA.
struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Self(CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap())
    }

    fn pem(&self) -> String {
        self.0.pem()
    }

    fn der(&self) -> CertificateDer<'static> {
        self.0.der().clone()
    }

    /// A certificate for `usage`, its subject's Common Name `cn` (none: a subject without one),
    /// with `sans` as its subject alternative names.
    fn issue(&self, cn: Option<&str>, sans: Vec<SanType>, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params.subject_alt_names = sans;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.0).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// A client certificate named `cn` with `sans`.
    fn client(&self, cn: Option<&str>, sans: Vec<SanType>) -> Leaf {
        self.issue(cn, sans, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

fn dns(name: &str) -> SanType {
    SanType::DnsName(name.try_into().unwrap())
}

fn uri(name: &str) -> SanType {
    SanType::URI(name.try_into().unwrap())
}

#[test]
fn names_are_the_common_name_then_dns_then_uri_names() {
    let ca = Ca::new("names CA");
    // SANs written mixed, with an IP address and an e-mail address, which name no one here.
    let leaf = ca.client(
        Some("envoy"),
        vec![
            uri("spiffe://cluster.local/ns/payments/sa/envoy"),
            dns("envoy.payments.svc"),
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            SanType::Rfc822Name("ops@example.com".try_into().unwrap()),
            uri("urn:example:envoy"),
            dns("envoy.local"),
        ],
    );
    assert_eq!(
        cert_names(&leaf.der, None),
        [
            "envoy",
            "envoy.payments.svc",
            "envoy.local",
            "spiffe://cluster.local/ns/payments/sa/envoy",
            "urn:example:envoy",
        ]
    );
}

#[test]
fn a_certificate_without_a_common_name_is_named_by_its_alternative_names() {
    let ca = Ca::new("names CA");
    let leaf = ca.client(None, vec![uri("spiffe://test/worker"), dns("worker.test")]);
    assert_eq!(
        cert_names(&leaf.der, None),
        ["worker.test", "spiffe://test/worker"]
    );
}

#[test]
fn a_certificate_without_alternative_names_is_named_by_its_common_name() {
    let ca = Ca::new("names CA");
    let leaf = ca.client(Some("reporter"), Vec::new());
    assert_eq!(cert_names(&leaf.der, None), ["reporter"]);
    let nameless = ca.client(None, Vec::new());
    assert!(cert_names(&nameless.der, None).is_empty());
}

#[test]
fn bytes_that_are_not_a_certificate_name_no_one() {
    let junk = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x01]);
    assert!(cert_names(&junk, None).is_empty());
}

#[test]
fn a_peer_without_a_handshake_has_its_address_and_no_names() {
    let addr = "192.0.2.7:4242".parse().unwrap();
    let peer = Peer::new(Some(addr));
    assert_eq!(peer.addr(), Some(addr));
    assert!(peer.cert_names().is_empty());
    assert!(Peer::new(None).addr().is_none());
}
