//! Fuzzing the server's inputs on stable Rust: structure-aware generators (proptest) of
//! well-formed-but-hostile documents and of mutations of valid ones, for
//!
//! - the HTTP API, against a real server on loopback: every route whose body is JSON and every
//!   GET route, both taken from the server's own OpenAPI document (`GET /openapi.json`), each
//!   body generated from its schema there, so that a new route or field is fuzzed as it is
//!   added; `PUT /v1/rules` with the configuration documents of `generate/`, whose readers
//!   `tests/fuzz_config.rs` fuzzes;
//! - (the gRPC API is fuzzed by `fuzz_grpc.rs`).
//!
//! Every target asserts that nothing panics and that every error is clear: an HTTP error is a
//! 4xx JSON `{error, detail}` that names the field at fault; a gRPC error is `INVALID_ARGUMENT` or
//! `OUT_OF_RANGE` with a message. `FUZZ_CASES=N` runs each target N cases (see
//! `docs/fuzzing.md`).

mod common;
mod fuzz_http;
mod fuzz_server;
mod generate;

use flowgate_testkit::fuzz::{self, hostile_number, hostile_text};
use fuzz_http::schema::{Route, Shape, json_routes};
use fuzz_http::values::{clean_value, json_str, valid_value, wrong_value};
use fuzz_server::{ADMIN, server};
use generate::{file_doc, mutated_seed, toml_seeds, yaml_doc, yaml_seeds};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// HTTP bodies

/// The document, read from a running server.
fn document(rt: &tokio::runtime::Runtime, t: &common::TestServer) -> Value {
    let r = rt.block_on(send(t, "GET", "/openapi.json", "text/plain", false, ""));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

#[test]
fn every_json_route_of_the_document_is_fuzzed() {
    let (rt, t) = server();
    let routes = json_routes(&document(&rt, &t));
    let paths: Vec<&str> = routes.iter().map(|r| r.path.as_str()).collect();
    // The routes the hand-written table of before missed, and one of each kind.
    for path in [
        "/v1/check",
        "/v1/report",
        "/v1/rules/versions",
        "/v1/rules/rollback",
        "/v1/queues/submit",
        "/v1/queues/purge",
    ] {
        assert!(paths.contains(&path), "{path} is not among {paths:?}");
    }
    let check = routes.iter().find(|r| r.path == "/v1/check");
    let shapes: Vec<(&str, &Shape, bool)> = check
        .map(|r| {
            r.fields
                .iter()
                .map(|f| (f.name.as_str(), &f.shape, f.required))
                .collect()
        })
        .unwrap_or_default();
    assert!(shapes.contains(&("descriptors", &Shape::List(Box::new(Shape::Desc)), true)));
    assert!(shapes.contains(&("hits_addend", &Shape::U64 { max: None }, false)));
    let lease = routes.iter().find(|r| r.path == "/v1/queues/lease");
    assert!(lease.is_some_and(|r| {
        r.fields
            .iter()
            .any(|f| f.name == "wait_ms" && f.shape == Shape::U64 { max: Some(60_000) })
    }));
    assert!(
        routes
            .iter()
            .filter(|r| r.path.contains("/purge") || r.path.starts_with("/v1/rules"))
            .all(|r| r.admin)
    );
}

/// How a generated body departs from a well-typed one.
#[derive(Clone, Debug)]
enum Fault {
    /// Well typed.
    None,
    /// Field `i` holds a value of a type it never takes.
    WrongType(usize, String),
    /// Required field `i` is left out.
    Missing(usize),
    /// A field the route does not know.
    Unknown(String),
    /// The JSON text itself mutated (truncated, nested, junk inserted, ...).
    Text(fuzz::Mutation),
}

/// A case: a route, its fields' values (`None`: left out), clean values, and a fault.
#[derive(Clone, Debug)]
struct Case {
    route: Route,
    values: Vec<Option<String>>,
    clean: Vec<String>,
    fault: Fault,
}

fn case(routes: Vec<Route>) -> impl Strategy<Value = Case> {
    prop::sample::select(routes).prop_flat_map(|route| {
        let values: Vec<BoxedStrategy<Option<String>>> = route
            .fields
            .iter()
            .map(|f| {
                if f.required {
                    valid_value(&f.shape).prop_map(Some).boxed()
                } else {
                    prop::option::weighted(0.4, valid_value(&f.shape)).boxed()
                }
            })
            .collect();
        let n = route.fields.len();
        let wrong: Vec<BoxedStrategy<Fault>> = (0..n)
            .filter_map(|i| {
                let w = wrong_value(&route.fields[i].shape)?;
                Some(w.prop_map(move |v| Fault::WrongType(i, v)).boxed())
            })
            .collect();
        let mut faults: Vec<(u32, BoxedStrategy<Fault>)> = vec![
            (3, Just(Fault::None).boxed()),
            (
                1,
                prop_oneof![Just("zzz"), Just("Domain"), Just(""), Just("\u{0}")]
                    .prop_map(|k| Fault::Unknown(k.to_owned()))
                    .boxed(),
            ),
            (2, fuzz::mutation().prop_map(Fault::Text).boxed()),
        ];
        if !wrong.is_empty() {
            faults.push((3, prop::strategy::Union::new(wrong).boxed()));
        }
        if n > 0 {
            faults.push((1, (0..n).prop_map(Fault::Missing).boxed()));
        }
        let clean: Vec<BoxedStrategy<String>> =
            route.fields.iter().map(|f| clean_value(&f.shape)).collect();
        (
            Just(route),
            values,
            clean,
            prop::strategy::Union::new_weighted(faults),
        )
            .prop_map(|(route, values, clean, fault)| Case {
                route,
                values,
                clean,
                fault,
            })
    })
}

impl Case {
    /// The body's text, and the field whose name the error must give (none when the fault says
    /// nothing about a field, or when the body may be valid).
    fn body(&self) -> (String, Option<String>) {
        let mut fields: Vec<(String, String)> = Vec::new();
        let mut named = None;
        // A field at fault among clean fields: its error is the first, and must name it.
        let field_fault = matches!(
            self.fault,
            Fault::WrongType(..) | Fault::Missing(_) | Fault::Unknown(_)
        );
        let values: Vec<Option<String>> = if field_fault {
            self.clean.iter().cloned().map(Some).collect()
        } else {
            self.values.clone()
        };
        for (i, (f, v)) in self.route.fields.iter().zip(&values).enumerate() {
            let v = match &self.fault {
                Fault::WrongType(j, w) if *j == i => {
                    named = Some(f.name.clone());
                    Some(w.clone())
                }
                Fault::Missing(j) if *j == i => {
                    if f.required {
                        named = Some(f.name.clone());
                    }
                    None
                }
                _ => v.clone(),
            };
            if let Some(v) = v {
                fields.push((json_str(&f.name), v));
            }
        }
        // `POST /v1/report` takes one report (its fields at the top) or a batch (`reports`), not
        // both (the document says so in words): a body is kept one or the other, the batch
        // dropped, unless the fault is the batch's.
        if self.route.path == "/v1/report" && named.as_deref() != Some("reports") {
            let batch = json_str("reports");
            if fields.iter().any(|(k, _)| *k != batch) {
                fields.retain(|(k, _)| *k != batch);
            }
        }
        if let Fault::Unknown(k) = &self.fault {
            fields.push((json_str(k), "1".to_owned()));
            named = Some(k.clone());
        }
        let text = format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        match &self.fault {
            Fault::Text(m) => (fuzz::apply(&text, m), None),
            _ => (text, named),
        }
    }
}

/// A body's answer is clear: never a 5xx; an error is a JSON object `{error, detail}` with a
/// detail; a 2xx with a body is JSON.
fn clear_answer(
    what: &str,
    body: &str,
    r: &common::HttpResponse,
) -> Result<Option<String>, TestCaseError> {
    prop_assert!(
        r.status < 500,
        "{what}: {} for {body:?}: {}",
        r.status,
        r.body
    );
    let is_json = r
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/json"));
    if r.status == 204 || (r.status < 400 && !is_json) {
        return Ok(None);
    }
    if r.status < 400 {
        // JSON by its grammar: a payload is answered as submitted, and JSON numbers have no
        // range (`1e400` is JSON, which serde_json's `Value` cannot hold).
        let raw: Result<Box<serde_json::value::RawValue>, _> = serde_json::from_str(&r.body);
        prop_assert!(
            raw.is_ok(),
            "{what}: {} answer is not JSON ({:?}) for {body:?}: {}",
            r.status,
            raw.err(),
            r.body
        );
        return Ok(None);
    }
    let json: serde_json::Value = serde_json::from_str(&r.body).map_err(|e| {
        TestCaseError::fail(format!(
            "{what}: {} answer is not JSON ({e}) for {body:?}: {}",
            r.status, r.body
        ))
    })?;
    // (a 429 of check and acquire is a verdict, not an error)
    if r.status >= 400 && json.get("allowed").is_none() {
        let error = json["error"].as_str().unwrap_or("");
        let detail = json["detail"].as_str().unwrap_or("");
        prop_assert!(
            !error.is_empty() && !detail.trim().is_empty(),
            "{what}: {} without error and detail for {body:?}: {}",
            r.status,
            r.body
        );
        return Ok(Some(detail.to_owned()));
    }
    Ok(None)
}

async fn send(
    t: &common::TestServer,
    method: &str,
    path: &str,
    content_type: &str,
    admin: bool,
    body: &str,
) -> common::HttpResponse {
    let auth = format!("Bearer {ADMIN}");
    let mut headers = vec![("content-type", content_type)];
    if admin {
        headers.push(("authorization", auth.as_str()));
    }
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        common::http(t.http(), method, path, &headers, body),
    )
    .await
    .unwrap_or_else(|_| panic!("{method} {path}: no answer within 10 s for {body:?}"))
}

#[test]
fn http_bodies_of_every_json_route() {
    let (rt, t) = server();
    let routes = json_routes(&document(&rt, &t));
    let mut runner = TestRunner::new(fuzz::config(400));
    let result = runner.run(&case(routes), |c| {
        let route = &c.route;
        let (body, named) = c.body();
        let r = rt.block_on(send(
            &t,
            "POST",
            &route.path,
            "application/json",
            route.admin,
            &body,
        ));
        let detail = clear_answer(&route.path, &body, &r)?;
        if let Some(field) = named {
            prop_assert_eq!(r.status, 400, "{} {:?}: {}", route.path, body, r.body);
            let detail = detail.unwrap_or_default();
            prop_assert!(
                detail.contains(&field),
                "{}: the error does not name `{field}` for {body:?}: {detail}",
                route.path
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The server goes on answering.
    let r = rt.block_on(send(&t, "GET", "/healthz", "text/plain", false, ""));
    assert_eq!(r.status, 200);
}

/// A `PUT /v1/rules` body: TOML or YAML text (generated or mutated) or the schema as JSON.
fn rules_body() -> impl Strategy<Value = (&'static str, String)> {
    prop_oneof![
        file_doc().prop_map(|d| (
            "application/json",
            serde_json::to_string(&d).unwrap_or_default()
        )),
        file_doc()
            .prop_flat_map(|d| fuzz::mutated(serde_json::to_string(&d).unwrap_or_default(), 2))
            .prop_map(|b| ("application/json", b)),
        file_doc().prop_map(|d| ("application/toml", toml::to_string(&d).unwrap_or_default())),
        mutated_seed(toml_seeds(), 3).prop_map(|b| ("application/toml", b)),
        yaml_doc().prop_map(|b| ("application/yaml", b)),
        mutated_seed(yaml_seeds(), 3).prop_map(|b| ("application/yaml", b)),
        hostile_text().prop_map(|b| ("application/x-unknown", b)),
    ]
}

#[test]
fn http_rules_put_in_every_format() {
    let (rt, t) = server();
    let mut runner = TestRunner::new(fuzz::config(200));
    let result = runner.run(&rules_body(), |(ctype, body)| {
        let r = rt.block_on(send(&t, "PUT", "/v1/rules", ctype, true, &body));
        clear_answer("PUT /v1/rules", &body, &r)?;
        prop_assert!(
            matches!(r.status, 200 | 400 | 415),
            "{ctype} {body:?}: {} {}",
            r.status,
            r.body
        );
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Every GET operation of the document: its path (a template) and its query's parameters.
fn get_operations(doc: &Value) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        let Some(op) = item.get("get") else {
            continue;
        };
        let query: Vec<String> = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "query")
            .filter_map(|p| Some(p["name"].as_str()?.to_owned()))
            .collect();
        out.push((path.clone(), query));
    }
    out
}

/// A GET request of one of `operations`, with hostile path parameters and queries.
fn get_request(operations: Vec<(String, Vec<String>)>) -> impl Strategy<Value = String> {
    let junk = prop_oneof![hostile_text(), hostile_number()]
        .prop_map(|t| t.bytes().map(|b| format!("%{b:02X}")).collect::<String>());
    let op = prop::sample::select(operations).prop_flat_map(move |(path, query)| {
        let names: Vec<String> = query.into_iter().chain(["zzz".to_owned()]).collect();
        (
            Just(path),
            junk.clone(),
            prop::option::weighted(0.5, (prop::sample::select(names), junk.clone())),
        )
            .prop_map(|(path, value, query)| {
                // Each `{parameter}` of the path takes the hostile value.
                let mut out = String::new();
                let mut rest = path.as_str();
                while let Some((before, after)) = rest.split_once('{') {
                    out.push_str(before);
                    out.push_str(&value);
                    rest = after.split_once('}').map_or("", |(_, a)| a);
                }
                out.push_str(rest);
                match query {
                    Some((name, v)) => format!("{out}?{name}={v}"),
                    None => out,
                }
            })
    });
    let junk = prop_oneof![hostile_text(), hostile_number()]
        .prop_map(|t| t.bytes().map(|b| format!("%{b:02X}")).collect::<String>());
    prop_oneof![4 => op, 1 => junk.prop_map(|j| format!("/v1/{j}"))]
}

/// One GET on a fresh connection: the answer's status, headers and body; an event stream's
/// body is not read (it lasts while the server runs).
async fn get(addr: std::net::SocketAddr, path: &str) -> common::HttpResponse {
    use http_body_util::BodyExt as _;
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    tokio::spawn(conn);
    let auth = format!("Bearer {ADMIN}");
    let req = hyper::Request::get(path)
        .header("host", addr.to_string())
        .header("authorization", auth)
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let resp = sender
        .send_request(req)
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let streaming = headers
        .get("content-type")
        .is_some_and(|c| c.as_bytes().starts_with(b"text/event-stream"));
    let body = if streaming {
        String::new()
    } else {
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    common::HttpResponse {
        status,
        headers,
        body,
    }
}

#[test]
fn http_get_routes_with_hostile_paths_and_queries() {
    let (rt, t) = server();
    let operations = get_operations(&document(&rt, &t));
    let mut runner = TestRunner::new(fuzz::config(200));
    let result = runner.run(&get_request(operations), |path| {
        let r = rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(10), get(t.http(), &path))
                .await
                .unwrap_or_else(|_| panic!("GET {path}: no answer within 10 s"))
        });
        clear_answer("GET", &path, &r)?;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Found by the fuzzer: a number out of range (`1e400`) was refused as "not valid JSON at line
/// 1 column 52", naming no field.
#[test]
fn a_number_out_of_range_is_refused_naming_its_field() {
    let (rt, t) = server();
    let body = r#"{"domain":"api","descriptors":[],"hits_addend":1e400}"#;
    let r = rt.block_on(send(
        &t,
        "POST",
        "/v1/check",
        "application/json",
        false,
        body,
    ));
    assert_eq!(r.status, 400, "{}", r.body);
    let detail = r.json()["detail"].as_str().unwrap_or("").to_owned();
    assert!(detail.contains("`hits_addend`"), "{detail}");
}

/// Found by the fuzzer: a bad query of `/v1/rules/history` and a path of
/// `/v1/rules/versions/{n}` that is not UTF-8 were answered in plain text, not JSON.
#[test]
fn bad_queries_and_paths_of_the_rules_routes_answer_json() {
    let (rt, t) = server();
    for path in [
        "/v1/rules/history?limit=",
        "/v1/rules/history?limit=-1",
        "/v1/rules/versions/%FF",
    ] {
        let r = rt.block_on(send(&t, "GET", path, "text/plain", true, ""));
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        let j = r.json();
        assert_eq!(j["error"], "bad_request", "{path}: {}", r.body);
        assert!(!j["detail"].as_str().unwrap_or("").is_empty(), "{}", r.body);
    }
}
