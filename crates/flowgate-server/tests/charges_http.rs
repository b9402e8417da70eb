//! `POST /v1/report` with a cost, through the real `flowgate` binary on the embedded store and
//! on a real Redis: the answer per report and rule, batches checked whole, bad input refused
//! naming the field with nothing changed, and a store that cannot answer (503, nothing
//! charged, counted, never waiting for the deadline once Redis is known down).

#[path = "common/charges.rs"]
mod charges;
mod common;

use std::time::Duration;

use charges::{OnStore, look, report_cost};
use common::{config, metric, post_json, wait_until};
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
