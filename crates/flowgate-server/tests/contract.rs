//! The published contract against the code, so that neither drifts:
//!
//! - `docs/openapi.json` is the OpenAPI document the server serves at `GET /openapi.json`
//!   (generated from the routes' types);
//! - `src/grpc_report/flowgate.v1.rs` is the Rust that `proto/flowgate/v1/*.proto` generate
//!   (protox and tonic-prost-build, no `protoc`);
//! - every error code of the document is listed in `docs/operating.md`.
//!
//! When a change is meant, `FLOWGATE_REGENERATE=1 cargo test -p flowgate-server --test
//! contract` writes both files anew; the tests then pass, and the diff is the change to review.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether the run rewrites the generated files instead of failing on a difference.
fn regenerate() -> bool {
    std::env::var_os("FLOWGATE_REGENERATE").is_some_and(|v| v == "1")
}

/// Compares `made` with the file at `path` (relative to the repository), or writes it there
/// when regenerating.
fn same_as_kept(path: &str, made: &str) {
    let file = root().join(path);
    if regenerate() {
        std::fs::write(&file, made).unwrap_or_else(|e| panic!("{path}: {e}"));
        return;
    }
    let kept = std::fs::read_to_string(&file).unwrap_or_default();
    if kept != made {
        let first = kept
            .lines()
            .zip(made.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| kept.lines().count().min(made.lines().count()));
        panic!(
            "{path} differs from what the code generates (first at line {}: kept {:?}, made {:?}); \
             run `FLOWGATE_REGENERATE=1 cargo test -p flowgate-server --test contract` and review \
             the diff",
            first + 1,
            kept.lines().nth(first).unwrap_or("<end>"),
            made.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

const RULES: &str = "domain = \"api\"\n[[rule]]\nname = \"r\"\nmatch = \"k\"\nlimit = \"1/s\"\n";

async fn served_document() -> String {
    let t = common::TestServer::start(&[("rules.toml", RULES)]).await;
    let r = common::http(t.http(), "GET", "/openapi.json", &[], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    r.body
}

#[tokio::test]
async fn the_served_openapi_document_is_the_one_kept_in_docs() {
    let served = served_document().await;
    let doc: Value = serde_json::from_str(&served).expect("the document is JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    same_as_kept("docs/openapi.json", &served);
}

/// The protos, compiled by protox, as tonic-prost-build writes them.
fn generated_grpc_code() -> String {
    let protos = root().join("proto");
    let fds = protox::compile(
        ["flowgate/v1/reports.proto", "flowgate/v1/decisions.proto"],
        [&protos],
    )
    .unwrap_or_else(|e| panic!("proto/: {e:?}"));
    let out = tempfile::tempdir().expect("a temporary directory");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .out_dir(out.path())
        .compile_fds(fds)
        .expect("tonic-prost-build generates the code");
    std::fs::read_to_string(out.path().join("flowgate.v1.rs")).expect("flowgate.v1.rs generated")
}

#[test]
fn the_grpc_code_is_generated_from_the_protos() {
    same_as_kept(
        "crates/flowgate-server/src/grpc_report/flowgate.v1.rs",
        &generated_grpc_code(),
    );
}

#[tokio::test]
async fn every_error_code_is_in_the_document_and_the_operating_page() {
    let doc: Value = serde_json::from_str(&served_document().await).expect("JSON");
    let listed: Vec<String> = doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .expect("ErrorCode is an enum of the document")
        .iter()
        .map(|c| c.as_str().unwrap_or_default().to_owned())
        .collect();
    let ours: Vec<&str> = flowgate_server::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(listed, ours, "ErrorCode::ALL lists every code, in order");
    let page = std::fs::read_to_string(root().join("docs/operating.md")).expect("the page");
    for code in ours {
        assert!(
            page.contains(&format!("| `{code}` |")),
            "docs/operating.md has no row for the error code `{code}`"
        );
    }
}
