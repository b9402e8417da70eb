//! The envoyproxy/ratelimit compatibility suite (`tests/envoy_compat/`): every valid file starts
//! the server and answers as `cases.toml` says, over gRPC and over HTTP alike; every invalid one
//! is refused naming file, line and field. Then the global switches and the answer headers.

mod common;

use std::path::{Path, PathBuf};

use common::{TestServer, descriptor, http, post_json, should};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use flowgate_server::{Server, ServerConfig};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Cases {
    valid: Vec<Valid>,
    invalid: Vec<Invalid>,
}

#[derive(Deserialize)]
struct Valid {
    file: String,
    checks: Vec<Check>,
}

#[derive(Deserialize)]
struct Check {
    request: Vec<String>,
    #[serde(default)]
    times: Option<u32>,
    code: String,
    #[serde(default)]
    statuses: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Invalid {
    file: String,
    error: String,
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/envoy_compat")
}

fn cases() -> Cases {
    toml::from_str(&std::fs::read_to_string(dir().join("cases.toml")).unwrap()).unwrap()
}

fn code_name(c: i32) -> &'static str {
    if c == Code::OverLimit as i32 {
        "OVER_LIMIT"
    } else if c == Code::Ok as i32 {
        "OK"
    } else {
        "UNKNOWN"
    }
}

async fn serve(file: &str) -> TestServer {
    let text = std::fs::read_to_string(dir().join("valid").join(file)).unwrap();
    TestServer::start(&[(file, text.as_str())]).await
}

fn pairs(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .map(|e| {
            let (k, v) = e.trim().split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn every_valid_file_answers_as_documented_over_grpc_and_http() {
    for case in cases().valid {
        let domain = {
            let text = std::fs::read_to_string(dir().join("valid").join(&case.file)).unwrap();
            text.lines()
                .find_map(|l| l.strip_prefix("domain: "))
                .unwrap()
                .trim()
                .to_owned()
        };
        let (g, h) = (serve(&case.file).await, serve(&case.file).await);
        let mut grpc = g.grpc().await;
        for (n, check) in case.checks.iter().enumerate() {
            for t in 0..check.times.unwrap_or(1) {
                let at = format!(
                    "{} check {} (#{}): {:?}",
                    case.file,
                    n + 1,
                    t + 1,
                    check.request
                );
                let descriptors = check
                    .request
                    .iter()
                    .map(|d| {
                        let p = pairs(d);
                        let refs: Vec<(&str, &str)> =
                            p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                        descriptor(&refs)
                    })
                    .collect();
                let r = should(&mut grpc, &domain, descriptors, 0).await;
                let overall = code_name(r.overall_code);
                let statuses: Vec<&str> = r.statuses.iter().map(|s| code_name(s.code)).collect();
                let hr = post_json(
                    h.http(),
                    "/v1/check",
                    json!({"domain": domain, "descriptors": check.request}),
                )
                .await
                .json();
                let http_statuses: Vec<String> = hr["statuses"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["code"].as_str().unwrap().to_owned())
                    .collect();
                assert_eq!(overall, check.code, "gRPC, {at}");
                assert_eq!(hr["code"].as_str(), Some(check.code.as_str()), "HTTP, {at}");
                assert_eq!(statuses, http_statuses, "gRPC and HTTP statuses, {at}");
                if let Some(want) = &check.statuses
                    && t + 1 == check.times.unwrap_or(1)
                {
                    assert_eq!(&statuses, want, "statuses, {at}");
                }
            }
        }
    }
}

#[tokio::test]
async fn every_invalid_file_is_refused_naming_file_line_and_field() {
    for case in cases().invalid {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(&case.file);
        std::fs::copy(dir().join("invalid").join(&case.file), &path).unwrap();
        let mut cfg = ServerConfig::new(&path).ephemeral();
        cfg.data_dir = tmp.path().join("data");
        let Err(e) = Server::bind(cfg).await else {
            panic!("{} was accepted", case.file);
        };
        let e = e.to_string();
        let shown = e.replace(&format!("{}/", tmp.path().display()), "");
        assert!(shown.contains(&case.error), "{}: {shown}", case.file);
    }
}

#[tokio::test]
async fn metadata_and_the_new_keys_are_shown_in_the_rules() {
    let s = serve("metadata.yaml").await;
    let rules = http(s.http(), "GET", "/v1/rules", &[], "").await.json();
    let sub = rules["rule"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "key1_value1.subkey1")
        .unwrap()
        .clone();
    assert_eq!(
        sub["metadata"],
        json!({"name": "service_1", "tags": ["a", "b"], "owner": {"team": "payments"}})
    );
    // value_to_metric is the child entry's own flag, not the parent's.
    assert_eq!(
        sub["match"],
        json!(["key1=value1", {"entry": "subkey1", "value_to_metric": true}])
    );
    let s = serve("share_threshold.yaml").await;
    let rules = http(s.http(), "GET", "/v1/rules", &[], "").await.json();
    assert!(
        rules["rule"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["share_threshold"] == true && r["match"] == json!(["files=files/*"]))
    );
    let s = serve("quota_mode.yaml").await;
    let rules = http(s.http(), "GET", "/v1/rules", &[], "").await.json();
    assert!(
        rules["rule"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["quota_mode"] == true)
    );
}

#[tokio::test]
async fn value_to_metric_and_detailed_metric_label_the_decisions() {
    let s = serve("metadata.yaml").await;
    let mut grpc = s.grpc().await;
    should(
        &mut grpc,
        "metadata",
        vec![descriptor(&[("key1", "value1"), ("subkey1", "abc")])],
        0,
    )
    .await;
    should(&mut grpc, "metadata", vec![descriptor(&[("key2", "x")])], 0).await;
    let m = http(s.http(), "GET", "/metrics", &[], "").await.body;
    assert!(
        m.contains(r#"descriptor="key1=value1, subkey1=abc""#),
        "{m}"
    );
    assert!(m.contains(r#"descriptor="key2=x""#), "{m}");
}

async fn start_with(file: &str, tweak: impl FnOnce(ServerConfig) -> ServerConfig) -> TestServer {
    let text = std::fs::read_to_string(dir().join("valid").join(file)).unwrap();
    TestServer::start_with(&[(file, text.as_str())], tweak).await
}

#[tokio::test]
async fn global_shadow_mode_admits_and_reports() {
    let s = start_with("basic.yaml", |mut c| {
        c.shadow_mode = true;
        c
    })
    .await;
    let mut grpc = s.grpc().await;
    let r = should(&mut grpc, "basic", vec![descriptor(&[("key3", "x")])], 0).await;
    assert_eq!(code_name(r.overall_code), "OK");
    assert_eq!(code_name(r.statuses[0].code), "OVER_LIMIT");
    let h = post_json(
        s.http(),
        "/v1/check",
        json!({"domain": "basic", "descriptors": ["key3=x"]}),
    )
    .await;
    assert_eq!(h.status, 200);
    let m = http(s.http(), "GET", "/metrics", &[], "").await.body;
    assert!(m.contains(r#"outcome="shadow_over_limit""#), "{m}");
}

#[tokio::test]
async fn global_quota_mode_rejects_only_when_every_descriptor_is_over() {
    let s = start_with("basic.yaml", |mut c| {
        c.quota_mode = true;
        c
    })
    .await;
    let mut grpc = s.grpc().await;
    // key3 (0/hour) is over, key2 is not: admitted; key2 counted.
    for _ in 0..3 {
        let r = should(
            &mut grpc,
            "basic",
            vec![descriptor(&[("key3", "x")]), descriptor(&[("key2", "q")])],
            0,
        )
        .await;
        assert_eq!(code_name(r.overall_code), "OK");
        assert_eq!(code_name(r.statuses[0].code), "OVER_LIMIT");
    }
    let r = should(
        &mut grpc,
        "basic",
        vec![descriptor(&[("key3", "x")]), descriptor(&[("key2", "q")])],
        0,
    )
    .await;
    assert_eq!(code_name(r.overall_code), "OVER_LIMIT");
}

#[tokio::test]
async fn answer_headers_follow_the_most_restrictive_descriptor_and_are_off_by_default() {
    let on = start_with("basic.yaml", |mut c| {
        c.response_headers = true;
        c
    })
    .await;
    let off = serve("basic.yaml").await;
    let request = || {
        vec![
            descriptor(&[("key2", "h")]),
            descriptor(&[("key1", "value1"), ("subkey1", "x")]),
        ]
    };
    let mut grpc = on.grpc().await;
    let r = should(&mut grpc, "basic", request(), 0).await;
    let headers: Vec<(String, String)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    // key2: 3 per minute, 2 left; key1/subkey1: 5 per second, 4 left: key2 binds.
    assert_eq!(
        headers,
        vec![
            ("ratelimit-limit".to_owned(), "3".to_owned()),
            ("ratelimit-remaining".to_owned(), "2".to_owned()),
            ("ratelimit-reset".to_owned(), "60".to_owned()),
        ]
    );
    // Over the limit, the descriptor over binds.
    let r = should(
        &mut grpc,
        "basic",
        vec![descriptor(&[("key3", "x")]), descriptor(&[("key2", "h")])],
        0,
    )
    .await;
    let remaining = r
        .response_headers_to_add
        .iter()
        .find(|h| h.key == "ratelimit-remaining")
        .unwrap();
    let limit = r
        .response_headers_to_add
        .iter()
        .find(|h| h.key == "ratelimit-limit")
        .unwrap();
    assert_eq!((limit.value.as_str(), remaining.value.as_str()), ("0", "0"));
    // Over a limit that frees up: `retry-after` too, as over HTTP.
    for _ in 0..2 {
        should(&mut grpc, "basic", vec![descriptor(&[("key2", "h")])], 0).await;
    }
    let r = should(&mut grpc, "basic", vec![descriptor(&[("key2", "h")])], 0).await;
    assert_eq!(code_name(r.overall_code), "OVER_LIMIT");
    let retry = r
        .response_headers_to_add
        .iter()
        .find(|h| h.key == "retry-after")
        .and_then(|h| h.value.parse::<u64>().ok());
    assert!(
        matches!(retry, Some(1..=60)),
        "{:?}",
        r.response_headers_to_add
    );
    let mut grpc = off.grpc().await;
    let r = should(&mut grpc, "basic", request(), 0).await;
    assert!(r.response_headers_to_add.is_empty());
    // HTTP answers always carry the standard headers.
    let h = post_json(
        off.http(),
        "/v1/check",
        json!({"domain": "basic", "descriptors": ["key2=z"]}),
    )
    .await;
    assert_eq!(h.header("ratelimit-limit"), Some("3"));
    let _: Value = h.json();
}
