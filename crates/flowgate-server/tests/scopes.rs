//! Every route against every scope, from the route list itself (the server's own OpenAPI
//! document, which the router is built with): a route that declares no scope fails here, and so
//! does one whose handler does not ask for the scope its document declares.
//!
//! The server has one credential per scope, so every scope is closed. For each operation and
//! each caller (no credential, and one token per scope), the expected answer is derived from the
//! operation's `security`: `{}` is public (never 401 or 403); a scope lets in its own credential
//! (and `admin` for `reader`), answers 401 without a credential and 403 with another one.

mod common;

use std::net::SocketAddr;

use flowgate_server::auth::Scope;
use serde_json::Value;

const RULES: &str = r#"
domain = "api"

[[rule]]
name = "per-client"
match = "client"
limit = "100/s"

[[queue]]
name = "jobs"
match = ["biz=JOB", "channel"]
rate = "100/s"

[[breaker]]
name = "downstream"
match = ["service"]
strategy = "error_ratio"
threshold = 0.5
window = "10s"
min_calls = 3
open_for = "10s"
"#;

/// One token per scope.
fn token(scope: Scope) -> String {
    format!("{}-token-0123456789abcdef0123456789abcdef", scope.name())
}

async fn server() -> common::TestServer {
    common::TestServer::start_with(&[("rules.toml", RULES)], |mut c| {
        for scope in Scope::ALL {
            c.credentials
                .add_token(scope.name(), scope, &token(scope))
                .unwrap();
        }
        c
    })
    .await
}

/// The status of one request, without reading its body (the figures' stream never ends).
async fn status(addr: SocketAddr, method: &str, path: &str, bearer: Option<&str>) -> u16 {
    let auth = bearer.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    common::head(addr, method, path, &headers).await.0
}

/// Every operation of the document: method, path (parameters filled in) and the scope its
/// `security` names (`None`: public). Panics on an operation that declares nothing.
fn operations(doc: &Value) -> Vec<(String, String, Option<Scope>)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let security = op["security"].as_array().unwrap_or_else(|| {
                panic!("{method} {path} declares no `security`: give it a scope, or `()` for a public route")
            });
            let names: Vec<&str> = security
                .iter()
                .flat_map(|req| req.as_object().unwrap().keys().map(String::as_str))
                .collect();
            let scope = match names.as_slice() {
                [] => None,
                [one] => Some(Scope::parse(one).unwrap()),
                many => panic!("{method} {path}: one scope per route, not {many:?}"),
            };
            let concrete = path.replace("{n}", "1").replace("{file}", "app.js");
            out.push((method.to_uppercase(), concrete, scope));
        }
    }
    out
}

#[tokio::test]
async fn every_route_answers_each_scope_as_its_document_says() {
    let t = server().await;
    let doc = common::http(t.http(), "GET", "/openapi.json", &[], "")
        .await
        .json();
    let ops = operations(&doc);
    assert!(ops.len() >= 29, "{} operations", ops.len());
    let mut checked = 0;
    for (method, path, scope) in &ops {
        let anonymous = status(t.http(), method, path, None).await;
        match scope {
            None => assert!(
                ![401, 403].contains(&anonymous),
                "{method} {path} is public but answered {anonymous}"
            ),
            Some(_) => assert_eq!(anonymous, 401, "{method} {path} without a credential"),
        }
        for caller in Scope::ALL {
            let got = status(t.http(), method, path, Some(&token(caller))).await;
            let allowed = match scope {
                None => true,
                Some(need) => caller == *need || (*need == Scope::Reader && caller == Scope::Admin),
            };
            if allowed {
                assert!(
                    ![401, 403].contains(&got),
                    "{method} {path} refused `{caller}` ({got}), which it documents as allowed"
                );
            } else {
                assert_eq!(got, 403, "{method} {path} let `{caller}` in ({got})");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, ops.len() * Scope::ALL.len());
    // Each refusal is counted once: a route that asked twice would count its refusals twice.
    let closed = ops.iter().filter(|(_, _, s)| s.is_some()).count() as f64;
    let readers = ops
        .iter()
        .filter(|(_, _, s)| *s == Some(Scope::Reader))
        .count() as f64;
    let reader = format!("Bearer {}", token(Scope::Reader));
    let text = common::http(
        t.http(),
        "GET",
        "/metrics",
        &[("authorization", &reader)],
        "",
    )
    .await
    .body;
    let counted = |reason: &str| -> f64 {
        text.lines()
            .filter(|l| {
                l.starts_with("flowgate_auth_failures_total{")
                    && l.contains(&format!("reason=\"{reason}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(counted("missing"), closed, "one `missing` per closed route");
    assert_eq!(
        counted("forbidden"),
        closed * (Scope::ALL.len() - 1) as f64 - readers,
        "one `forbidden` per closed route and other scope (admin reads `reader` routes)"
    );
}

#[tokio::test]
async fn the_scope_table_of_the_operating_page_is_the_documents() {
    let t = server().await;
    let doc = common::http(t.http(), "GET", "/openapi.json", &[], "")
        .await
        .json();
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/operating.md"
    ))
    .unwrap();
    for (method, path, scope) in operations(&doc) {
        let path = path.replace("/1", "/{n}").replace("app.js", "{file}");
        let want = format!(
            "| `{method} {path}` | {} |",
            scope.map_or("none", Scope::name)
        );
        assert!(
            page.contains(&want),
            "docs/operating.md lacks the row {want}"
        );
    }
}
