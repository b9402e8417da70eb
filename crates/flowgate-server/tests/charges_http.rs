//! `POST /v1/report` with a cost, through the real `flowgate` binary on the embedded store and
//! on a real Redis: the answer per report and rule, batches checked whole, bad input refused
//! naming the field with nothing changed, and a store that cannot answer (503, nothing
//! charged, counted, never waiting for the deadline once Redis is known down).

#[path = "common/charges.rs"]
mod charges;
mod common;
#[path = "common/reservations.rs"]
mod reservations;

use std::time::Duration;

use charges::{OnStore, look, report_cost};
use common::{config, metric, post_json, wait_until};
use reservations::{commit, id_of, reserve};
use serde_json::json;

const RULES: &str = r#"
[[rule]]
domain = "llm"
name = "tokens"
match = ["api_key"]
limit = "1000/h"
algorithm = "fixed_window"
max_debt = 500

[[rule]]
domain = "llm"
name = "daily"
match = ["org"]
limit = "5000/d"
algorithm = "token_bucket"

[[rule]]
domain = "llm"
name = "inflight"
match = ["slot"]
limit = "4/m"
algorithm = "concurrency"

[[breaker]]
domain = "llm"
name = "upstream"
match = ["model"]
strategy = "error_ratio"
threshold = 0.5
min_calls = 100
window = "10s"
open_for = "10s"
"#;

async fn reports_with_costs(store: OnStore) {
    let (_dir, path) = config(RULES);
    let server = store.serve(&path, &[]);
    let http = server.http;
    // One report, two rules: each charged, the answer per rule.
    let (status, body) =
        report_cost(http, "llm", &["api_key=k1", "org=o1"], json!(1200), false).await;
    assert_eq!(status, 200, "{body}");
    let rules = &body["charges"][0]["rules"];
    assert_eq!(body["charges"][0]["report"], 0);
    assert_eq!(rules[0]["rule"], "tokens");
    assert_eq!(rules[0]["kind"], "charge");
    assert_eq!(
        (
            &rules[0]["applied"],
            &rules[0]["dropped"],
            &rules[0]["debt"],
            &rules[0]["over"]
        ),
        (&json!(1200), &json!(0), &json!(200), &json!(true)),
        "{body}"
    );
    assert!(rules[0]["retry_after_ms"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(rules[1]["rule"], "daily");
    assert_eq!(rules[1]["descriptor"], 1);
    assert_eq!(rules[1]["over"], false, "{body}");
    // Past max_debt: dropped, and said so.
    let (_, body) = report_cost(http, "llm", &["api_key=k1"], json!(400), false).await;
    let r = &body["charges"][0]["rules"][0];
    assert_eq!(
        (&r["applied"], &r["dropped"], &r["debt"]),
        (&json!(300), &json!(100), &json!(500)),
        "{body}"
    );
    // A refund, floored at empty.
    let (_, body) = report_cost(http, "llm", &["api_key=k1"], json!(600), true).await;
    let r = &body["charges"][0]["rules"][0];
    assert_eq!(
        (&r["kind"], &r["applied"], &r["debt"], &r["over"]),
        (&json!("refund"), &json!(600), &json!(0), &json!(false)),
        "{body}"
    );
    let (_, body) = report_cost(http, "llm", &["api_key=k1"], json!(5000), true).await;
    let r = &body["charges"][0]["rules"][0];
    assert_eq!(
        (&r["applied"], &r["dropped"], &r["remaining"]),
        (&json!(900), &json!(4100), &json!(1000)),
        "{body}"
    );
    // An outcome and a cost in one report; an outcome alone still answers as before.
    let both = json!({"domain": "llm", "descriptors": ["model=m1", "api_key=k2"], "outcome": "ok", "latency_ms": 12.5, "cost": 10});
    let r = post_json(http, "/v1/report", both).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(
        (&body["counted"], &body["charges"][0]["rules"][0]["applied"]),
        (&json!(1), &json!(10)),
        "{body}"
    );
    let outcome =
        json!({"domain": "llm", "descriptors": ["model=m1"], "outcome": "error", "latency_ms": 3});
    let r = post_json(http, "/v1/report", outcome).await;
    assert_eq!(
        r.json(),
        json!({"counted": 1, "no_breaker": 0, "dropped": 0})
    );
    // A batch: each report's charges, in order.
    let batch = json!({"reports": [
        {"domain": "llm", "descriptors": ["api_key=k3"], "cost": 5},
        {"domain": "llm", "descriptors": ["model=m1"], "outcome": "ok", "latency_ms": 1},
        {"domain": "llm", "descriptors": ["api_key=k3"], "cost": 7},
    ]});
    let body = post_json(http, "/v1/report", batch).await.json();
    assert_eq!(body["charges"].as_array().unwrap().len(), 2, "{body}");
    assert_eq!(
        (
            &body["charges"][1]["report"],
            &body["charges"][1]["rules"][0]["applied"]
        ),
        (&json!(2), &json!(7)),
        "{body}"
    );
    assert_eq!(look(http, "llm", &["api_key=k3"], "tokens").await, (0, 988));
    assert_eq!(
        metric(
            http,
            "flowgate_charge_units_total",
            &[
                r#"rule="tokens""#,
                r#"kind="refund""#,
                r#"result="dropped""#
            ]
        )
        .await,
        4100.0
    );
}

/// The keys of a JSON object, sorted.
fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort();
    k
}

/// The fields of message `name` in `proto` (its text), sorted.
fn proto_fields(proto: &str, name: &str) -> Vec<String> {
    let start = proto
        .find(&format!("message {name} {{"))
        .unwrap_or_else(|| panic!("no message {name}"));
    let body = &proto[start..start + proto[start..].find("\n}").unwrap()];
    let mut fields: Vec<String> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && l.ends_with(';') && l.contains('='))
        .filter_map(|l| {
            l.split('=')
                .next()?
                .split_whitespace()
                .last()
                .map(str::to_owned)
        })
        .collect();
    fields.sort();
    fields
}

/// A report's and a commit's per-rule objects have the same keys, every one present (nulls
/// included), which are the OpenAPI component `RuleCharge` both routes reference, all required,
/// and the fields of the gRPC `RuleCharged` (which keeps `refund` beside `kind`).
#[tokio::test]
async fn a_report_and_a_commit_answer_the_same_per_rule_object() {
    let (_dir, path) = config(RULES);
    let server = OnStore::memory().serve(&path, &[]);
    let http = server.http;
    let (status, report) = report_cost(http, "llm", &["api_key=k1"], json!(10), false).await;
    assert_eq!(status, 200, "{report}");
    let reported = &report["charges"][0]["rules"][0];
    let id = id_of(&reserve(http, "llm", &["api_key=k1"], 100, None).await);
    let r = commit(http, json!({"id": id, "cost": 1200})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let commit = r.json();
    let committed = &commit["rules"][0];
    assert_eq!(
        keys(reported),
        keys(committed),
        "{reported} against {committed}"
    );
    assert_eq!(
        (
            &committed["descriptor"],
            &committed["kind"],
            &committed["released"]
        ),
        (&json!(null), &json!("charge"), &json!(100)),
        "{committed}"
    );
    assert_eq!(
        (
            &committed["over"],
            &committed["debt"],
            &committed["remaining"]
        ),
        (&json!(true), &json!(210), &json!(0)),
        "{committed}"
    );
    assert!(
        committed["retry_after_ms"].as_u64().unwrap() > 0,
        "{committed}"
    );
    assert_eq!(
        (&reported["released"], &reported["retry_after_ms"]),
        (&json!(0), &json!(null)),
        "{reported}"
    );
    let doc = common::http(http, "GET", "/openapi.json", &[], "")
        .await
        .json();
    let schemas = &doc["components"]["schemas"];
    let component = &schemas["RuleCharge"];
    let mut required: Vec<String> = serde_json::from_value(component["required"].clone()).unwrap();
    required.sort();
    assert_eq!(required, keys(&component["properties"]), "all required");
    assert_eq!(keys(reported), required, "the answer is the component");
    let reference = json!("#/components/schemas/RuleCharge");
    assert_eq!(
        schemas["ReportCharges"]["properties"]["rules"]["items"]["$ref"],
        reference
    );
    assert_eq!(
        schemas["CommitAnswer"]["properties"]["rules"]["items"]["$ref"],
        reference
    );
    let proto = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../proto/flowgate/v1/reports.proto"),
    )
    .unwrap();
    let mut grpc = proto_fields(&proto, "RuleCharged");
    grpc.retain(|f| f != "refund");
    assert_eq!(grpc, required, "gRPC's RuleCharged has the same fields");
}

#[tokio::test]
async fn reports_with_costs_on_the_embedded_store() {
    reports_with_costs(OnStore::memory()).await;
}

#[tokio::test]
async fn reports_with_costs_on_redis() {
    reports_with_costs(OnStore::redis()).await;
}

async fn bad_charges_change_nothing(store: OnStore) {
    let (_dir, path) = config(RULES);
    let server = store.serve(&path, &[]);
    let http = server.http;
    let one = |cost: serde_json::Value, descriptors: &[&str]| json!({"domain": "llm", "descriptors": descriptors, "cost": cost});
    let cases = [
        (
            one(json!(-5), &["api_key=k"]),
            "field `cost`: -5 is negative",
        ),
        (
            one(json!(2.5), &["api_key=k"]),
            "field `cost`: 2.5 is not a whole number",
        ),
        (
            one(json!(4_294_967_296_u64), &["api_key=k"]),
            "field `cost`: 4294967296 units is more than a limit can count",
        ),
        (
            one(json!(1e30), &["api_key=k"]),
            "field `cost`: 1e+30 units is more than a limit can count",
        ),
        (
            one(json!(10), &["nothing=here"]),
            "field `descriptors`: cannot take the cost: the descriptors match no rule of domain `llm`",
        ),
        (
            one(json!(10), &["slot=s1"]),
            "rule `inflight` takes no charges: concurrency",
        ),
        (
            json!({"domain": "llm", "descriptors": ["api_key=k"], "refund": true}),
            "field `refund`: needs a `cost`",
        ),
        (
            json!({"domain": "llm", "descriptors": ["api_key=k"]}),
            "field `outcome`: missing",
        ),
        // One bad report refuses the batch whole: the good one before it is not charged.
        (
            json!({"reports": [
                {"domain": "llm", "descriptors": ["api_key=k"], "cost": 10},
                {"domain": "llm", "descriptors": ["api_key=k"], "cost": 1.5},
            ]}),
            "field `reports[1].cost`: 1.5 is not a whole number",
        ),
    ];
    for (body, says) in cases {
        let r = post_json(http, "/v1/report", body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let e = r.json();
        assert_eq!(e["error"], "bad_request", "{body}");
        assert!(e["detail"].as_str().unwrap().contains(says), "{body}: {e}");
    }
    assert_eq!(
        look(http, "llm", &["api_key=k"], "tokens").await,
        (0, 1000),
        "nothing changed"
    );
    // A whole number written as a float, as clients counting in doubles send it: that number.
    for cost in [json!(100.0), json!(1e2)] {
        let r = post_json(http, "/v1/report", one(cost.clone(), &["api_key=k"])).await;
        assert_eq!(r.status, 200, "{cost}: {}", r.body);
        assert_eq!(
            r.json()["charges"][0]["rules"][0]["applied"],
            100,
            "{}",
            r.body
        );
    }
}

#[tokio::test]
async fn bad_charges_are_refused_naming_the_field_on_the_embedded_store() {
    bad_charges_change_nothing(OnStore::memory()).await;
}

#[tokio::test]
async fn bad_charges_are_refused_naming_the_field_on_redis() {
    bad_charges_change_nothing(OnStore::redis()).await;
}

#[tokio::test]
async fn a_charge_while_redis_is_down_is_refused_whole_and_counted() {
    let mut store = OnStore::redis();
    let (_dir, path) = config(RULES);
    // A long deadline: once Redis is known down, charges must not wait for it.
    let server = store.serve(
        &path,
        &["--redis-deadline", "20s", "--redis-probe-every", "100ms"],
    );
    let http = server.http;
    let (status, _) = report_cost(http, "llm", &["api_key=k"], json!(100), false).await;
    assert_eq!(status, 200);
    let OnStore::Redis(redis) = &mut store else {
        unreachable!()
    };
    redis.stop();
    let down = wait_until(Duration::from_secs(20), || async {
        let _ = report_cost(http, "llm", &["api_key=k"], json!(1), false).await;
        metric(http, "flowgate_store_down", &[]).await == 1.0
    })
    .await;
    assert!(down, "Redis known down");
    let before = metric(http, "flowgate_charges_failed_total", &[]).await;
    let started = tokio::time::Instant::now();
    let (status, body) = report_cost(http, "llm", &["api_key=k"], json!(100), false).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered without waiting for the 20 s deadline"
    );
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "store_unavailable");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("(unavailable): nothing was charged"),
        "{body}"
    );
    assert_eq!(
        metric(http, "flowgate_charges_failed_total", &[]).await,
        before + 1.0
    );
    let mut c = charges::envoy(server.grpc).await;
    let toml_report = charges::tokens_of("api_key", "k", 10);
    let e = charges::ask(&mut c, "llm", vec![toml_report]).await;
    assert!(
        e.is_ok(),
        "a rule without charge = \"report\" is decided by its failure policy: {e:?}"
    );
    redis.restart();
    let back = wait_until(Duration::from_secs(20), || async {
        report_cost(http, "llm", &["api_key=k"], json!(0), false)
            .await
            .0
            == 200
    })
    .await;
    assert!(back, "charges go through again once Redis is back");
    // (Redis restarted empty.)
    let (status, _) = report_cost(http, "llm", &["api_key=k"], json!(100), false).await;
    assert_eq!(status, 200);
    assert_eq!(look(http, "llm", &["api_key=k"], "tokens").await, (0, 900));
}
