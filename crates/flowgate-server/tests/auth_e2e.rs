//! Scoped credentials end to end, on real `flowgate serve` processes: client certificates that
//! name credentials (mutual TLS, by URI SAN, DNS SAN or Common Name) on both ports; bearer tokens
//! in gRPC metadata for `ShouldRateLimit` and `flowgate.v1.Reports/Report`; `flowgate tokens`
//! making a line a server takes; a credentials file rotated under a running server (SIGHUP) and a
//! broken one left unused; a source guessing tokens slowed without touching decisions. Each
//! refusal is seen in the log and the metrics, never with a token.

mod common;
#[path = "common/credentials.rs"]
mod credentials;
#[path = "common/tls.rs"]
mod tls_kit;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use flowgate_server::grpc_report::{
    Descriptor, Entry, Outcome, Report, ReportRequest, ReportsClient,
};
use serde_json::json;
use tls_kit::{Pki, grpc_client, https, run_serve, should};
use tokio_rustls::TlsConnector;

use common::{Proc, descriptor, http, metric, spawn_server, write};
use credentials::{hangup, rotate};

const RULES: &str = r#"
domain = "api"

[[rule]]
name = "per-user"
match = "user"
limit = "1000/s"

[[queue]]
name = "jobs"
match = ["biz=JOB", "channel"]
rate = "100/s"
"#;

const ADMIN: &str = "admin-token-0123456789abcdef0123456789abcdef";
const WORKER: &str = "worker-token-0123456789abcdef0123456789abcdef";
const DECIDE: &str = "decide-token-0123456789abcdef0123456789abcdef";
const REPORTER: &str = "reporter-token-0123456789abcdef0123456789abcdef";

const TOKEN_A: &str = "rotation-token-A-0123456789abcdef0123456789";
const TOKEN_B: &str = "rotation-token-B-0123456789abcdef0123456789";

const BIN: &str = env!("CARGO_BIN_EXE_flowgate");

/// How long a server may take to notice a change.
const WITHIN: Duration = Duration::from_secs(15);

fn check_body() -> String {
    json!({"domain": "api", "descriptors": ["user=a"]}).to_string()
}

fn lease_body() -> String {
    json!({"domain": "api", "descriptor": "biz=JOB, channel=A", "wait_ms": 0}).to_string()
}

/// `POST /v1/queues/lease` with `token`, if given.
async fn lease(p: &Proc, token: Option<&str>) -> common::HttpResponse {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    http(p.http, "POST", "/v1/queues/lease", &headers, &lease_body()).await
}

/// The status of `POST /v1/check` (no credential).
async fn check(p: &Proc) -> u16 {
    http(
        p.http,
        "POST",
        "/v1/check",
        &[("content-type", "application/json")],
        &check_body(),
    )
    .await
    .status
}

/// A server on `RULES` with the credentials file `creds`, written into `dir`.
fn serve(dir: &Path, creds: &str) -> Proc {
    let cfg = dir.join("flowgate.toml");
    write(&cfg, RULES);
    let path = dir.join("credentials");
    write(&path, creds);
    spawn_server(&cfg, &["--credentials-file", path.to_str().unwrap()])
}

/// Asserts no line `p` logged contains one of `secrets`.
fn assert_never_logged(p: &Proc, secrets: &[&str]) {
    for s in secrets {
        assert_eq!(p.logged(s), 0, "the log shows the token {s}");
    }
}

/// The status of `POST path` over HTTPS as `connector`'s client, with `bearer` if given.
async fn https_post(
    connector: &TlsConnector,
    addr: SocketAddr,
    path: &str,
    body: &str,
    bearer: Option<&str>,
) -> u16 {
    let auth = bearer.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    let a = https(connector, addr, "POST", path, &headers, body)
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    a.status
}

/// `flowgate serve` over TLS with optional client certificates of `pki`'s CA and the credentials
/// file `creds`.
fn serve_mtls(pki: &Pki, creds: &str) -> Proc {
    pki.write_leaf("server", &pki.server("flowgate"));
    let cfg = pki.write("flowgate.toml", RULES);
    let creds = pki.write("credentials", creds);
    let path = |name: &str| pki.path(name).to_str().unwrap().to_owned();
    spawn_server(
        &cfg,
        &[
            "--tls-cert",
            &path("server.pem"),
            "--tls-key",
            &path("server.key"),
            "--tls-client-ca",
            &path("ca.pem"),
            "--tls-client-auth",
            "optional",
            "--credentials-file",
            creds.to_str().unwrap(),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_name_credentials_on_both_ports() {
    let pki = Pki::new();
    let p = serve_mtls(
        &pki,
        &format!(
            "envoy:decide:subject:spiffe://test/envoy\n\
             worker-cert:worker:subject:worker.internal\n\
             ops:admin:{ADMIN}\n\
             refunds:worker:{WORKER}\n"
        ),
    );
    let h1: &[&[u8]] = &[b"http/1.1"];

    // The SPIFFE ID (a URI SAN) is `envoy`: decide on both ports, without a token; not worker.
    let envoy = pki.client_with("edge-proxy", &["spiffe://test/envoy"]);
    let mut grpc = grpc_client(pki.connector(Some(&envoy), &[b"h2"]), p.grpc)
        .await
        .unwrap();
    assert_eq!(should(&mut grpc, "a").await.unwrap(), Code::Ok as i32);
    let as_envoy = pki.connector(Some(&envoy), h1);
    let check = check_body();
    let lease = lease_body();
    assert_eq!(
        https_post(&as_envoy, p.http, "/v1/check", &check, None).await,
        200
    );
    assert_eq!(
        https_post(&as_envoy, p.http, "/v1/queues/lease", &lease, None).await,
        403
    );

    // `worker.internal` as the Common Name, and as a DNS SAN: may lease without a token.
    for worker in [
        pki.client_with("worker.internal", &[]),
        pki.client_with("some-host", &["worker.internal"]),
    ] {
        let c = pki.connector(Some(&worker), h1);
        let s = https_post(&c, p.http, "/v1/queues/lease", &lease, None).await;
        assert!([200, 204].contains(&s), "a worker certificate's lease: {s}");
        assert_eq!(https_post(&c, p.http, "/v1/check", &check, None).await, 403);
    }

    // No certificate: refused on both ports, let in by the worker token.
    let anonymous = pki.connector(None, h1);
    assert_eq!(
        https_post(&anonymous, p.http, "/v1/check", &check, None).await,
        401
    );
    assert_eq!(
        https_post(&anonymous, p.http, "/v1/queues/lease", &lease, None).await,
        401
    );
    let s = https_post(&anonymous, p.http, "/v1/queues/lease", &lease, Some(WORKER)).await;
    assert!([200, 204].contains(&s), "the worker token's lease: {s}");
    let mut grpc = grpc_client(pki.connector(None, &[b"h2"]), p.grpc)
        .await
        .unwrap();
    let e = should(&mut grpc, "a").await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");

    // A certificate the CA issued whose names no credential maps: no credential.
    let stranger = pki.client_with("stranger", &["spiffe://test/stranger"]);
    let c = pki.connector(Some(&stranger), h1);
    assert_eq!(https_post(&c, p.http, "/v1/check", &check, None).await, 401);
}

/// A request with `authorization: Bearer <token>` metadata if `token` is given.
fn with_bearer<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    if let Some(t) = token {
        r.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    r
}

/// The gRPC code of `ShouldRateLimit` on `addr` with `token`.
async fn should_code(addr: SocketAddr, token: Option<&str>) -> tonic::Code {
    let mut c = RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let req = RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![descriptor(&[("user", "a")])],
        hits_addend: 1,
    };
    match c.should_rate_limit(with_bearer(req, token)).await {
        Ok(r) => {
            assert_eq!(r.into_inner().overall_code, Code::Ok as i32);
            tonic::Code::Ok
        }
        Err(e) => e.code(),
    }
}

/// The gRPC code of `flowgate.v1.Reports/Report` on `addr` with `token`.
async fn report_code(addr: SocketAddr, token: Option<&str>) -> tonic::Code {
    let mut c = ReportsClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let report = Report {
        domain: "api".into(),
        descriptors: vec![Descriptor {
            entries: vec![Entry {
                key: "user".into(),
                value: "a".into(),
            }],
        }],
        outcome: Outcome::Ok as i32,
        latency_ms: 1.0,
        probe: None,
        cost: None,
        refund: false,
    };
    let req = ReportRequest {
        reports: vec![report],
    };
    match c.report(with_bearer(req, token)).await {
        Ok(_) => tonic::Code::Ok,
        Err(e) => e.code(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_methods_take_bearer_tokens_of_their_scope() {
    let dir = tempfile::tempdir().unwrap();
    let p = serve(
        dir.path(),
        &format!("envoy:decide:{DECIDE}\nrefunds:worker:{WORKER}\nprobe:reporter:{REPORTER}\n"),
    );
    use tonic::Code::{Ok, PermissionDenied, Unauthenticated};
    assert_eq!(should_code(p.grpc, None).await, Unauthenticated);
    assert_eq!(should_code(p.grpc, Some(DECIDE)).await, Ok);
    assert_eq!(should_code(p.grpc, Some(WORKER)).await, PermissionDenied);
    assert_eq!(should_code(p.grpc, Some(REPORTER)).await, PermissionDenied);
    assert_eq!(report_code(p.grpc, None).await, Unauthenticated);
    assert_eq!(report_code(p.grpc, Some(REPORTER)).await, Ok);
    assert_eq!(report_code(p.grpc, Some(WORKER)).await, PermissionDenied);
    assert_eq!(report_code(p.grpc, Some(DECIDE)).await, PermissionDenied);
}

/// `flowgate tokens <args>` with `stdin`: whether it succeeded, its output and its error.
fn tokens(args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(BIN)
        .arg("tokens")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_from_flowgate_tokens_opens_its_scopes() {
    let (ok, out, err) = tokens(&["new", "ops", "--scopes", "admin,reader"], "");
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let [token, line] = lines[..] else {
        panic!("expected two lines: {out}")
    };
    assert_eq!(token.len(), 43, "{token}");
    let hex = line
        .strip_prefix("ops:admin,reader:sha256:")
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "{line}"
    );

    let dir = tempfile::tempdir().unwrap();
    let p = serve(dir.path(), &format!("{line}\n"));
    let bearer = format!("Bearer {token}");
    let json = ("content-type", "application/json");
    let purge = json!({"domain": "api", "descriptor": "biz=JOB, channel=A"}).to_string();
    let r = http(p.http, "POST", "/v1/queues/purge", &[json], &purge).await;
    assert_eq!(r.status, 401, "{}", r.body);
    let with = [json, ("authorization", bearer.as_str())];
    let r = http(p.http, "POST", "/v1/queues/purge", &with, &purge).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http(p.http, "GET", "/v1/stats", &[], "").await.status, 401);
    let r = http(p.http, "GET", "/v1/stats", &with[1..], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn short_tokens_are_refused_without_being_echoed() {
    let short = "short-token-xyz";
    let (ok, out, err) = tokens(&["hash", "x", "--scopes", "worker"], &format!("{short}\n"));
    assert!(!ok, "hashed a short token: {out}");
    assert!(err.contains("at least 32"), "{err}");
    assert!(!err.contains(short) && !out.contains(short), "{err}{out}");

    let (_dir, cfg) = common::config(RULES);
    let cfg = cfg.to_str().unwrap();
    let (ok, err) = run_serve(&["--config", cfg, "--admin-token", short]);
    assert!(!ok, "started with a short admin token");
    assert!(
        err.contains("--admin-token") && err.contains("at least 32"),
        "{err}"
    );
    assert!(!err.contains(short), "{err}");
}

#[test]
fn an_admin_token_on_the_command_line_is_warned_about() {
    let (_dir, cfg) = common::config(RULES);
    let p = spawn_server(&cfg, &["--admin-token", ADMIN]);
    assert_eq!(p.logged("a secret on the command line is visible"), 1);
    assert_eq!(p.logged(ADMIN), 0, "the log shows the token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_credentials_file_is_taken_on_sighup_and_a_broken_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let p = serve(dir.path(), &format!("refunds:worker:{TOKEN_A}\n"));
    let creds = dir.path().join("credentials");
    assert_eq!(lease(&p, Some(TOKEN_A)).await.status, 204);

    // Rotated to B: waits on the server's own word that SIGHUP made it read the file, so that no
    // guess with a token not yet in force is spent from this source's budget.
    rotate(&p, &creds, &format!("refunds:worker:{TOKEN_B}\n")).await;
    assert_eq!(lease(&p, Some(TOKEN_B)).await.status, 204);
    assert_eq!(lease(&p, Some(TOKEN_A)).await.status, 401);

    // A line with an unknown scope: the file is not used, B stays in force.
    let refused = p.logged("credentials file not used");
    write(
        &creds,
        &format!("refunds:worker:{TOKEN_B}\nintruder:root:{TOKEN_A}\n"),
    );
    hangup(&p);
    p.wait_logged("credentials file not used", refused, WITHIN)
        .await;
    assert_eq!(p.logged("unknown scope `root`"), 1);
    assert_eq!(lease(&p, Some(TOKEN_B)).await.status, 204);
    assert_eq!(lease(&p, Some(TOKEN_A)).await.status, 401);
    assert_never_logged(&p, &[TOKEN_A, TOKEN_B]);
}

/// Sends wrong worker tokens (`guess(i)`) until the source is slowed, a decision after each
/// answered 200; the number of tokens read (401) before the first refusal (429).
async fn guess_until_slowed(p: &Proc, guess: &dyn Fn(usize) -> String) -> usize {
    let budget = flowgate_server::auth::attempts::BUDGET as usize;
    // A source gets one attempt back every 3 s: on a machine slow enough to take that long
    // over the first guesses, a guess or two more are read before the refusals begin.
    let mut read = 0;
    let mut slowed_at = None;
    for i in 0..budget + 10 {
        let r = lease(p, Some(&guess(i))).await;
        assert_eq!(check(p).await, 200, "a decision after guess {i}");
        if r.status == 401 {
            assert!(
                slowed_at.is_none(),
                "guess {i} read after a refusal: {}",
                r.body
            );
            read += 1;
            continue;
        }
        assert_eq!(r.status, 429, "guess {i}: {}", r.body);
        assert!(
            r.header("retry-after").is_some(),
            "guess {i}: no Retry-After"
        );
        assert_eq!(r.json()["error"], "too_many_failed_credentials");
        slowed_at = Some(i);
        break;
    }
    assert!(
        slowed_at.is_some(),
        "{read} wrong tokens read, never slowed"
    );
    assert!(read >= budget, "slowed after {read} wrong tokens");
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guessing_source_is_slowed_and_decisions_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let p = serve(dir.path(), &format!("refunds:worker:{WORKER}\n"));
    let guess = |i: usize| format!("guess-{i:02}-0123456789abcdef0123456789abcdef");
    let budget = flowgate_server::auth::attempts::BUDGET as usize;
    let read = guess_until_slowed(&p, &guess).await;
    let r = lease(&p, Some(WORKER)).await;
    assert_eq!(r.status, 429, "the right token, unread: {}", r.body);

    let failures = "flowgate_auth_failures_total";
    let wrong = metric(
        p.http,
        failures,
        &[r#"scope="worker""#, r#"reason="wrong""#],
    )
    .await;
    assert_eq!(wrong, read as f64);
    let slowed = metric(p.http, failures, &[r#"reason="slowed""#]).await;
    assert!(slowed >= 2.0, "slowed: {slowed}");

    let lines = p.log.lock().unwrap().clone();
    let refused: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("credential refused"))
        .collect();
    assert!(!refused.is_empty(), "no refusal logged");
    for l in &refused {
        assert!(
            l.contains(r#"source="127.0.0.1""#) && l.contains(r#"route="/v1/queues/lease""#),
            "{l}"
        );
    }
    let guesses: Vec<String> = (0..budget + 10).map(guess).collect();
    let secrets: Vec<&str> = guesses.iter().map(String::as_str).collect();
    assert_never_logged(&p, &secrets);
    assert_never_logged(&p, &[WORKER]);
}

/// A server started with no credential tells its requests nothing of their source; once a
/// reload brings one, it does: a guesser is slowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_added_to_a_server_without_any_see_their_sources() {
    let dir = tempfile::tempdir().unwrap();
    let p = serve(dir.path(), "# none yet\n");
    let creds = dir.path().join("credentials");
    assert_eq!(lease(&p, None).await.status, 204, "worker is open");
    rotate(&p, &creds, &format!("refunds:worker:{WORKER}\n")).await;
    let guess = |i: usize| format!("late-guess-{i:02}-0123456789abcdef0123456789");
    let read = guess_until_slowed(&p, &guess).await;
    assert!(read >= flowgate_server::auth::attempts::BUDGET as usize);
}
