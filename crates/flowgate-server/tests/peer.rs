//! `--tls-client-auth` end to end, with certificates made here (rcgen): a `flowgate serve`
//! process with `--tls-client-ca` and `--tls-client-auth optional` lets clients without a
//! certificate in on both ports, still refuses a certificate of another CA, and takes one the CA
//! issued; `optional` without `--tls-client-ca` is refused at start. (What a request sees of its
//! peer, the certificate's names and address, is tested inside the crate: `src/peer/tests`.)

mod common;
#[path = "common/tls.rs"]
mod tls_kit;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use tls_kit::{Pki, grpc_client, https_get, rules, run_serve, serve_tls, should};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optional_client_certificates_let_clients_without_one_in() {
    let pki = Pki::new();
    pki.write_leaf("server", &pki.server("flowgate"));
    let ca = pki.path("ca.pem");
    let p = serve_tls(
        &pki,
        &[
            "--tls-client-ca",
            ca.to_str().unwrap(),
            "--tls-client-auth",
            "optional",
        ],
    );

    // Without a certificate: answered on both ports.
    let anonymous = https_get(&pki.connector(None, &[b"http/1.1"]), p.http, "/healthz").await;
    assert_eq!(anonymous.unwrap().status, 200);
    let mut grpc = grpc_client(pki.connector(None, &[b"h2"]), p.grpc)
        .await
        .unwrap();
    assert_eq!(should(&mut grpc, "x").await.unwrap(), Code::Ok as i32);

    // A certificate of another CA: refused on both ports, not taken as none.
    let foreign = Pki::new().client("mallory");
    let r = https_get(
        &pki.connector(Some(&foreign), &[b"http/1.1"]),
        p.http,
        "/healthz",
    )
    .await;
    assert!(r.is_err(), "answered a certificate of another CA");
    let refused = async {
        let mut c = grpc_client(pki.connector(Some(&foreign), &[b"h2"]), p.grpc)
            .await
            .ok()?;
        should(&mut c, "x").await.ok()
    };
    assert_eq!(
        refused.await,
        None,
        "gRPC answered another CA's certificate"
    );

    // One the CA issued: answered on both ports.
    let envoy = pki.client("envoy");
    let a = https_get(
        &pki.connector(Some(&envoy), &[b"http/1.1"]),
        p.http,
        "/healthz",
    )
    .await;
    assert_eq!(a.unwrap().status, 200);
    let mut grpc = grpc_client(pki.connector(Some(&envoy), &[b"h2"]), p.grpc)
        .await
        .unwrap();
    assert_eq!(should(&mut grpc, "x").await.unwrap(), Code::Ok as i32);
}

#[test]
fn optional_client_auth_needs_a_client_ca() {
    let pki = Pki::new();
    let (cert, key) = pki.write_leaf("server", &pki.server("flowgate"));
    let cfg = rules(&pki);
    let (ok, err) = run_serve(&[
        "--config",
        cfg.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--tls-client-auth",
        "optional",
    ]);
    assert!(!ok, "started with --tls-client-auth optional and no CA");
    assert!(err.contains("--tls-client-ca"), "{err}");
    let (ok, err) = run_serve(&[
        "--config",
        cfg.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--tls-client-ca",
        pki.path("ca.pem").to_str().unwrap(),
        "--tls-client-auth",
        "sometimes",
    ]);
    assert!(!ok, "took --tls-client-auth sometimes");
    assert!(
        err.contains("required") && err.contains("optional"),
        "{err}"
    );
}
