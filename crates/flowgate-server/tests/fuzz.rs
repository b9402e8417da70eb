//! Fuzzing the server's inputs on stable Rust: structure-aware generators (proptest) of
//! well-formed-but-hostile documents and of mutations of valid ones, for
//!
//! - the HTTP API: every route's JSON body, against a real server on loopback (`PUT
//!   /v1/rules` with the configuration documents of `generate/`, whose readers
//!   `tests/fuzz_config.rs` fuzzes);
//! - the gRPC API: generated `RateLimitRequest`s against the real tonic service, and raw bytes
//!   as the protobuf message.
//!
//! Every target asserts that nothing panics and that every error is clear: an HTTP error is a
//! 4xx JSON `{error, detail}` that names the field at fault; a gRPC error is `INVALID_ARGUMENT` or
//! `OUT_OF_RANGE` with a message. `FUZZ_CASES=N` runs each target N cases (see
//! `docs/fuzzing.md`).

mod common;
mod generate;

use flowgate_testkit::fuzz::{self, hostile_number, hostile_text};
use generate::{file_doc, mutated_seed, opt, toml_seeds, yaml_doc, yaml_seeds};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

// ---------------------------------------------------------------------------------------------
// HTTP bodies

/// The server's rules and queue: every algorithm a body can reach, a delay-mode rule, a
/// concurrency rule (leases), and a queue.
const SERVER_RULES: &str = r#"
domain = "api"

[[rule]]
name = "per-client"
match = "client"
limit = "2/10s"
algorithm = "sliding_log"

[[rule]]
name = "shaped"
match = "channel=WPG"
limit = "10/s"
algorithm = "leaky_bucket"
mode = "delay"
max_wait = "150ms"

[[rule]]
name = "in-flight"
match = "export"
limit = "1/1m"
algorithm = "concurrency"

[[rule]]
name = "per-user"
match = "user"
limit = "100/s"
algorithm = "token_bucket"
burst = 10

[[rule]]
name = "per-ip"
match = "ip"
limit = "5/day"

[[rule]]
name = "paths"
match = "path=files/*"
limit = "20/m"
algorithm = "sliding_window"

[[queue]]
name = "jobs"
match = ["biz=JOB", "channel"]
rate = "1000/s"
burst = 100
max_payload = 4096
max_depth = 1000
"#;

const ADMIN: &str = "fuzz-admin-token";

/// What a body field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A string.
    Str,
    /// An unsigned integer.
    U64,
    /// A boolean.
    Bool,
    /// A descriptor: text or Envoy's object.
    Desc,
    /// A list of descriptors.
    Descs,
    /// A job's payload: any JSON.
    Payload,
    /// Base64 text.
    B64,
    /// A list of job ids.
    Ids,
    /// A list of jobs.
    Jobs,
    /// A long-poll wait (bounded here, so that a case never waits long).
    WaitMs,
}

/// A JSON route: its path, whether it takes the admin token, its fields (name, kind, required).
struct Route {
    path: &'static str,
    admin: bool,
    fields: &'static [(&'static str, Kind, bool)],
}

const ROUTES: &[Route] = &[
    Route {
        path: "/v1/check",
        admin: false,
        fields: &[
            ("domain", Kind::Str, true),
            ("descriptors", Kind::Descs, true),
            ("hits_addend", Kind::U64, false),
            ("cost", Kind::U64, false),
        ],
    },
    Route {
        path: "/v1/acquire",
        admin: false,
        fields: &[
            ("domain", Kind::Str, true),
            ("descriptors", Kind::Descs, true),
            ("hits_addend", Kind::U64, false),
            ("cost", Kind::U64, false),
            ("hold", Kind::Bool, false),
        ],
    },
    Route {
        path: "/v1/release",
        admin: false,
        fields: &[
            ("domain", Kind::Str, true),
            ("descriptor", Kind::Desc, true),
            ("lease", Kind::U64, true),
        ],
    },
    Route {
        path: "/v1/queues/submit",
        admin: false,
        fields: &[
            ("domain", Kind::Str, true),
            ("descriptor", Kind::Desc, true),
            ("payload", Kind::Payload, false),
            ("payload_base64", Kind::B64, false),
            ("key", Kind::Str, false),
            ("not_before_ms", Kind::U64, false),
            ("jobs", Kind::Jobs, false),
        ],
    },
    Route {
        path: "/v1/queues/lease",
        admin: false,
        fields: &[
            ("domain", Kind::Str, true),
            ("descriptor", Kind::Desc, true),
            ("wait_ms", Kind::WaitMs, false),
        ],
    },
    Route {
        path: "/v1/queues/ack",
        admin: false,
        fields: &[("token", Kind::Str, true)],
    },
    Route {
        path: "/v1/queues/nack",
        admin: false,
        fields: &[
            ("token", Kind::Str, true),
            ("retry_after_ms", Kind::U64, false),
        ],
    },
    Route {
        path: "/v1/queues/dead",
        admin: false,
        fields: &[
            ("domain", Kind::Str, true),
            ("descriptor", Kind::Desc, true),
            ("offset", Kind::U64, false),
            ("limit", Kind::U64, false),
        ],
    },
    Route {
        path: "/v1/queues/dead/requeue",
        admin: true,
        fields: &[
            ("domain", Kind::Str, true),
            ("descriptor", Kind::Desc, true),
            ("ids", Kind::Ids, false),
        ],
    },
    Route {
        path: "/v1/queues/dead/purge",
        admin: true,
        fields: &[
            ("domain", Kind::Str, true),
            ("descriptor", Kind::Desc, true),
            ("ids", Kind::Ids, false),
        ],
    },
    Route {
        path: "/v1/queues/purge",
        admin: true,
        fields: &[
            ("domain", Kind::Str, true),
            ("descriptor", Kind::Desc, true),
        ],
    },
];

/// A JSON string of `s`.
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Any JSON text: scalars with hostile numbers and strings, nested arrays and objects, and
/// (raw) nesting thousands deep.
fn any_json() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        hostile_number(),
        Just("1e400".to_owned()),
        Just("-0.0".to_owned()),
        hostile_text().prop_map(|t| json_str(&t)),
    ];
    let nested = leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((hostile_text(), inner), 0..4).prop_map(|v| {
                let fields: Vec<String> = v
                    .iter()
                    .map(|(k, x)| format!("{}:{x}", json_str(k)))
                    .collect();
                format!("{{{}}}", fields.join(","))
            }),
        ]
    });
    prop_oneof![
        8 => nested,
        1 => (1usize..5000).prop_map(|d| format!("{}{}", "[".repeat(d), "]".repeat(d))),
        1 => (1usize..5000).prop_map(|d| format!("{}1{}", "{\"a\":".repeat(d), "}".repeat(d))),
    ]
}

/// A descriptor as a body gives it: valid text, hostile text, or Envoy's object with hostile
/// entries.
fn descriptor_json() -> impl Strategy<Value = String> + Clone {
    let text = prop_oneof![
        4 => prop::sample::select(&[
            "client=a",
            "biz=JOB, channel=x",
            "channel=WPG",
            "export=1",
            "user=u",
            "ip=1.2.3.4",
            "path=files/a",
        ][..])
        .prop_map(str::to_owned),
        1 => hostile_text(),
    ];
    let entry = (
        prop_oneof![3 => Just("client".to_owned()), 1 => hostile_text()],
        opt(hostile_text()),
    )
        .prop_map(|(k, v)| match v {
            Some(v) => format!(r#"{{"key":{},"value":{}}}"#, json_str(&k), json_str(&v)),
            None => format!(r#"{{"key":{}}}"#, json_str(&k)),
        });
    prop_oneof![
        3 => text.clone().prop_map(|t| json_str(&t)),
        1 => (prop::collection::vec(entry, 0..4), opt(hostile_number())).prop_map(|(es, h)| {
            match h {
                Some(h) => format!(r#"{{"entries":[{}],"hits_addend":{h}}}"#, es.join(",")),
                None => format!(r#"{{"entries":[{}]}}"#, es.join(",")),
            }
        }),
    ]
}

/// A well-typed value of `kind` (its content may still be refused: hostile strings, numbers
/// out of range, too many descriptors).
fn valid_value(kind: Kind) -> BoxedStrategy<String> {
    match kind {
        Kind::Str => prop_oneof![
            3 => Just("api".to_owned()),
            1 => hostile_text(),
        ]
        .prop_map(|s| json_str(&s))
        .boxed(),
        Kind::U64 => prop_oneof![0u64..100, any::<u64>()]
            .prop_map(|n| n.to_string())
            .boxed(),
        Kind::Bool => any::<bool>().prop_map(|b| b.to_string()).boxed(),
        Kind::Desc => descriptor_json().boxed(),
        Kind::Descs => prop_oneof![
            8 => prop::collection::vec(descriptor_json(), 0..4),
            1 => prop::collection::vec(descriptor_json(), 60..70),
        ]
        .prop_map(|v| format!("[{}]", v.join(",")))
        .boxed(),
        Kind::Payload => any_json().boxed(),
        Kind::B64 => prop_oneof![
            Just("aGVsbG8=".to_owned()),
            Just("".to_owned()),
            hostile_text(),
        ]
        .prop_map(|s| json_str(&s))
        .boxed(),
        Kind::Ids => prop::collection::vec(any::<u64>(), 0..4)
            .prop_map(|v| serde_json::to_string(&v).unwrap_or_default())
            .boxed(),
        Kind::Jobs => prop::collection::vec(
            (
                any_json(),
                opt(hostile_text()),
                opt(0u64..2_000_000_000_000),
            ),
            0..4,
        )
        .prop_map(|jobs| {
            let jobs: Vec<String> = jobs
                .into_iter()
                .map(|(p, k, t)| {
                    let mut f = vec![format!(r#""payload":{p}"#)];
                    if let Some(k) = k {
                        f.push(format!(r#""key":{}"#, json_str(&k)));
                    }
                    if let Some(t) = t {
                        f.push(format!(r#""not_before_ms":{t}"#));
                    }
                    format!("{{{}}}", f.join(","))
                })
                .collect();
            format!("[{}]", jobs.join(","))
        })
        .boxed(),
        // Up to 30 ms, or above the 60 s maximum: a case never long-polls.
        Kind::WaitMs => prop_oneof![0u64..30, 60_001u64..u64::MAX]
            .prop_map(|n| n.to_string())
            .boxed(),
    }
}

/// A value no field of `kind` takes (a wrong JSON type, or a number out of range).
fn wrong_value(kind: Kind) -> BoxedStrategy<String> {
    let not_string = prop_oneof![
        Just("7".to_owned()),
        Just("true".to_owned()),
        Just("[]".to_owned()),
        Just("{\"x\":1}".to_owned()),
        Just("-1.5e3".to_owned()),
    ];
    let not_number = prop_oneof![
        Just("-1".to_owned()),
        Just("1.5".to_owned()),
        Just("1e400".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("\"5\"".to_owned()),
        Just("true".to_owned()),
        Just("[1]".to_owned()),
        Just("{}".to_owned()),
    ];
    match kind {
        Kind::Str | Kind::B64 => not_string.boxed(),
        Kind::U64 | Kind::WaitMs => not_number.boxed(),
        Kind::Bool => prop_oneof![Just("1".to_owned()), Just("\"yes\"".to_owned())].boxed(),
        Kind::Desc => prop_oneof![
            Just("7".to_owned()),
            Just("true".to_owned()),
            Just("[\"a=b\"]".to_owned()),
            Just("\"no equals sign\"".to_owned()),
            Just("{\"entries\":7}".to_owned()),
            Just("{\"entries\":[],\"extra\":1}".to_owned()),
        ]
        .boxed(),
        Kind::Descs | Kind::Ids | Kind::Jobs => prop_oneof![
            Just("7".to_owned()),
            Just("\"a=b\"".to_owned()),
            Just("{}".to_owned()),
            Just("[true]".to_owned()),
        ]
        .boxed(),
        // Every JSON value is a payload.
        Kind::Payload => Just("null".to_owned()).boxed(),
    }
}

/// A value of `kind` that its route takes: the other fields of a body with a field at fault,
/// so that the fault is the first error.
fn clean_value(kind: Kind) -> BoxedStrategy<String> {
    match kind {
        Kind::Str => Just("\"api\"".to_owned()).boxed(),
        Kind::U64 => (0u64..5).prop_map(|n| n.to_string()).boxed(),
        Kind::WaitMs => Just("0".to_owned()).boxed(),
        Kind::Bool => any::<bool>().prop_map(|b| b.to_string()).boxed(),
        Kind::Desc => prop::sample::select(&["\"client=a\"", "\"biz=JOB, channel=x\""][..])
            .prop_map(str::to_owned)
            .boxed(),
        Kind::Descs => Just("[\"client=a\", \"user=u\"]".to_owned()).boxed(),
        Kind::Payload => Just("{\"n\":1}".to_owned()).boxed(),
        Kind::B64 => Just("\"aGVsbG8=\"".to_owned()).boxed(),
        Kind::Ids => Just("[1, 2]".to_owned()).boxed(),
        Kind::Jobs => Just("[{\"payload\": 1}]".to_owned()).boxed(),
    }
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
    route: usize,
    values: Vec<Option<String>>,
    clean: Vec<String>,
    fault: Fault,
}

fn case() -> impl Strategy<Value = Case> {
    (0..ROUTES.len()).prop_flat_map(|r| {
        let route = &ROUTES[r];
        let values: Vec<BoxedStrategy<Option<String>>> = route
            .fields
            .iter()
            .map(|&(_, kind, required)| {
                if required {
                    valid_value(kind).prop_map(Some).boxed()
                } else {
                    prop::option::weighted(0.4, valid_value(kind)).boxed()
                }
            })
            .collect();
        let n = route.fields.len();
        let wrong: Vec<BoxedStrategy<Fault>> = (0..n)
            .filter(|&i| route.fields[i].1 != Kind::Payload)
            .map(|i| {
                wrong_value(route.fields[i].1)
                    .prop_map(move |v| Fault::WrongType(i, v))
                    .boxed()
            })
            .collect();
        let fault = prop_oneof![
            3 => Just(Fault::None),
            3 => prop::strategy::Union::new(wrong),
            1 => (0..n).prop_map(Fault::Missing),
            1 => prop_oneof![Just("zzz"), Just("Domain"), Just(""), Just("\u{0}")]
                .prop_map(|k| Fault::Unknown(k.to_owned())),
            2 => fuzz::mutation().prop_map(Fault::Text),
        ];
        let clean: Vec<BoxedStrategy<String>> = route
            .fields
            .iter()
            .map(|&(_, k, _)| clean_value(k))
            .collect();
        (Just(r), values, clean, fault).prop_map(|(route, values, clean, fault)| Case {
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
        let route = &ROUTES[self.route];
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
        for (i, ((name, _, required), v)) in route.fields.iter().zip(&values).enumerate() {
            let v = match &self.fault {
                Fault::WrongType(j, w) if *j == i => {
                    named = Some((*name).to_owned());
                    Some(w.clone())
                }
                Fault::Missing(j) if *j == i => {
                    if *required {
                        named = Some((*name).to_owned());
                    }
                    None
                }
                _ => v.clone(),
            };
            if let Some(v) = v {
                fields.push((json_str(name), v));
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

/// A runtime and a server for the HTTP and gRPC targets.
fn server() -> (tokio::runtime::Runtime, common::TestServer) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let t = rt.block_on(common::TestServer::start_with(
        &[("rules.toml", SERVER_RULES)],
        |mut c| {
            c.admin_token = Some(ADMIN.into());
            c
        },
    ));
    (rt, t)
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
    let mut runner = TestRunner::new(fuzz::config(400));
    let result = runner.run(&case(), |c| {
        let route = &ROUTES[c.route];
        let (body, named) = c.body();
        let r = rt.block_on(send(
            &t,
            "POST",
            route.path,
            "application/json",
            route.admin,
            &body,
        ));
        let detail = clear_answer(route.path, &body, &r)?;
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

/// The routes read with GET, with hostile paths and queries.
fn get_request() -> impl Strategy<Value = String> {
    let junk = prop_oneof![hostile_text(), hostile_number()]
        .prop_map(|t| t.bytes().map(|b| format!("%{b:02X}")).collect::<String>());
    prop_oneof![
        prop::sample::select(
            &[
                "/v1/rules",
                "/v1/queues",
                "/healthz",
                "/readyz",
                "/metrics",
                "/v1/rules/history",
            ][..]
        )
        .prop_map(str::to_owned),
        junk.clone().prop_map(|j| format!("/v1/rules/versions/{j}")),
        junk.clone()
            .prop_map(|j| format!("/v1/rules/history?limit={j}")),
        junk.clone().prop_map(|j| format!("/v1/rules/history?{j}")),
        junk.prop_map(|j| format!("/v1/{j}")),
    ]
}

#[test]
fn http_get_routes_with_hostile_paths_and_queries() {
    let (rt, t) = server();
    let mut runner = TestRunner::new(fuzz::config(200));
    let result = runner.run(&get_request(), |path| {
        let r = rt.block_on(send(&t, "GET", &path, "text/plain", true, ""));
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

// ---------------------------------------------------------------------------------------------
// gRPC messages

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;
use prost::Message as _;

fn grpc_text(valid: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        4 => prop::sample::select(valid).prop_map(str::to_owned),
        1 => hostile_text(),
        1 => (1000usize..1100).prop_map(|n| "k".repeat(n)),
    ]
}

fn grpc_descriptor() -> impl Strategy<Value = RateLimitDescriptor> {
    let entry = (
        grpc_text(&["client", "user", "channel", "export", "path", "ip", ""]),
        grpc_text(&["a", "WPG", "files/x", "1", ""]),
    )
        .prop_map(|(key, value)| Entry { key, value });
    (
        prop_oneof![
            8 => prop::collection::vec(entry.clone(), 0..4),
            1 => prop::collection::vec(entry, 30..40),
        ],
        opt((any::<u32>(), any::<i32>())),
        opt(prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::from(u32::MAX) + 1),
            any::<u64>()
        ]),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(entries, limit, hits, negative)| RateLimitDescriptor {
            entries,
            limit: limit.map(|(requests_per_unit, unit)| RateLimitOverride {
                requests_per_unit,
                unit,
            }),
            hits_addend: hits.map(|value| UInt64Value { value }),
            is_negative_hits: negative,
        })
}

/// A generated request: hostile domains, keys and values, huge addends, many descriptors.
fn grpc_request() -> impl Strategy<Value = RateLimitRequest> {
    (
        grpc_text(&["api", "mongo_cps", ""]),
        prop_oneof![
            8 => prop::collection::vec(grpc_descriptor(), 0..4),
            1 => prop::collection::vec(grpc_descriptor(), 60..70),
        ],
        prop_oneof![Just(0u32), Just(1), Just(u32::MAX), any::<u32>()],
    )
        .prop_map(|(domain, descriptors, hits_addend)| RateLimitRequest {
            domain,
            descriptors,
            hits_addend,
        })
}

/// The answer to `req` is a status per descriptor, or `INVALID_ARGUMENT` / `OUT_OF_RANGE` with
/// a message.
async fn grpc_answer(
    client: &mut envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient<tonic::transport::Channel>,
    req: RateLimitRequest,
) -> Result<(), TestCaseError> {
    let n = req.descriptors.len();
    let shown = format!("{req:?}");
    let shown: String = shown.chars().take(2000).collect();
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client.should_rate_limit(req),
    )
    .await
    .map_err(|_| TestCaseError::fail(format!("no answer within 10 s to {shown}")))?;
    match answer {
        Ok(r) => prop_assert_eq!(r.into_inner().statuses.len(), n, "{}", shown),
        Err(s) => {
            prop_assert!(
                matches!(
                    s.code(),
                    tonic::Code::InvalidArgument | tonic::Code::OutOfRange
                ),
                "{:?} {:?} for {}",
                s.code(),
                s.message(),
                shown
            );
            prop_assert!(!s.message().trim().is_empty(), "no message for {shown}");
        }
    }
    Ok(())
}

#[test]
fn grpc_generated_requests() {
    let (rt, t) = server();
    let client = rt.block_on(t.grpc());
    let mut runner = TestRunner::new(fuzz::config(300));
    let result = runner.run(&grpc_request(), |req| {
        rt.block_on(grpc_answer(&mut client.clone(), req))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Bytes as the protobuf: mutations of a valid request's encoding, and arbitrary bytes.
fn protobuf_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        (
            grpc_request(),
            prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            any::<prop::sample::Index>(),
        )
            .prop_map(|(req, flips, cut)| {
                let mut b = req.encode_to_vec();
                for (i, x) in flips {
                    if !b.is_empty() {
                        let at = i.index(b.len());
                        b[at] = x;
                    }
                }
                let keep = cut.index(b.len() + 1);
                b.truncate(keep.max(b.len() / 2));
                b
            }),
    ]
}

/// Sends `bytes` as one gRPC message of `ShouldRateLimit` over HTTP/2: the gRPC status and
/// message.
async fn raw_grpc(addr: std::net::SocketAddr, bytes: &[u8]) -> (Option<String>, String) {
    use http_body_util::{BodyExt as _, Full};
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap_or_else(|e| panic!("handshake: {e}"));
    tokio::spawn(conn);
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(bytes);
    let req = hyper::Request::builder()
        .method("POST")
        .uri(format!(
            "http://{addr}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(hyper::body::Bytes::from(frame)))
        .unwrap_or_else(|e| panic!("request: {e}"));
    let resp = send
        .send_request(req)
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    let header =
        |h: &http::HeaderMap, k: &str| h.get(k).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let (parts, body) = resp.into_parts();
    if let Some(status) = header(&parts.headers, "grpc-status") {
        let message = header(&parts.headers, "grpc-message").unwrap_or_default();
        return (Some(status), message);
    }
    let collected = body.collect().await.unwrap_or_else(|e| panic!("body: {e}"));
    let trailers = collected.trailers().cloned().unwrap_or_default();
    (
        header(&trailers, "grpc-status"),
        header(&trailers, "grpc-message").unwrap_or_default(),
    )
}

#[test]
fn grpc_raw_bytes_as_the_protobuf() {
    let (rt, t) = server();
    let mut client = rt.block_on(t.grpc());
    let addr = t.server.grpc_addr();
    let mut runner = TestRunner::new(fuzz::config(200));
    let result = runner.run(&protobuf_bytes(), |bytes| {
        match RateLimitRequest::decode(bytes.as_slice()) {
            // What decodes is a request like any other.
            Ok(req) => rt.block_on(grpc_answer(&mut client.clone(), req))?,
            // What does not is refused by the service's decoder, which says so (over the
            // message bound: OUT_OF_RANGE, naming the bound).
            Err(_) => {
                let (status, message) = rt.block_on(raw_grpc(addr, &bytes));
                match status.as_deref() {
                    Some("13") => prop_assert!(message.contains("decode"), "{message}"),
                    Some("11") => prop_assert!(message.contains("65536"), "{message}"),
                    other => prop_assert!(false, "{other:?} {message}"),
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The server goes on answering.
    let ok = rt.block_on(client.should_rate_limit(RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![common::descriptor(&[("user", "u")])],
        hits_addend: 1,
    }));
    assert!(ok.is_ok(), "{ok:?}");
}
