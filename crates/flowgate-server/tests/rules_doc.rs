//! `GET /v1/rules` on a node following rules shared through Redis: what it shows is the whole
//! shared document (rules, queues, alerts, breakers, from TOML and envoyproxy/ratelimit YAML
//! files) and `PUT /v1/rules` takes it back unchanged; its URLs show their scheme and host alone
//! to a caller without the admin token and whole to an admin; a redacted URL sent back is
//! refused, naming its field.

mod common;

use common::{TestServer, http};
use flowgate_server::rules::RulesSource;
use flowgate_testkit::redis::RedisServer;
use serde_json::Value;

const PAY: &str = r#"
domain = "pay"
alert_webhooks = ["http://ops:hunter2@alerts.internal:9093/hook?token=abc123"]

[[rule]]
name = "per-client"
match = ["client"]
limit = "10/s"
algorithm = "token_bucket"
burst = 20
trial = { limit = 5, window = "1s" }

[[queue]]
name = "refunds"
match = ["biz=REFUND", "channel"]
rate = "1/s"
max_depth = 500
lease = "45s"

[[breaker]]
name = "backend"
match = ["dep=db"]
strategy = "error_count"
threshold = 3
window = "10s"
min_calls = 3
open_for = "60s"

[[alert]]
name = "refunds-waiting"
queue = "refunds"
oldest_age = "30s"

[[alert]]
name = "per-client-rejecting"
rule = "per-client"
rejection_ratio = 0.5
for = "10s"
webhooks = ["http://relay.internal/services/T0123ABCD/B0456EFGH/Xy7Zq9Lm2Np4Rs6Tu8Vw0Ab"]

[[alert]]
name = "backend-open"
breaker = "backend"
"#;

const ENVOY: &str = "domain: api
descriptors:
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 100}
";

const ADMIN: &str = "admin-secret-0123456789abcdef0123456789abcdef";

/// The secrets written in [`PAY`]'s URLs.
const SECRETS: [&str; 5] = [
    "hunter2",
    "abc123",
    "T0123ABCD",
    "B0456EFGH",
    "Xy7Zq9Lm2Np4",
];

async fn get(addr: std::net::SocketAddr, token: Option<&str>) -> Value {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let r = http(addr, "GET", "/v1/rules", &headers, "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

async fn put(addr: std::net::SocketAddr, body: &Value) -> common::HttpResponse {
    let auth = format!("Bearer {ADMIN}");
    http(
        addr,
        "PUT",
        "/v1/rules",
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        &body.to_string(),
    )
    .await
}

/// What a version holds, without what changes with every version.
fn content(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        for k in ["version", "author", "changed_at"] {
            m.remove(k);
        }
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_document_round_trips_and_its_secrets_are_an_admins() {
    let redis = RedisServer::start();
    let url = redis.url();
    let ts = TestServer::start_with(&[("pay.toml", PAY), ("api.yaml", ENVOY)], move |mut c| {
        c.redis_url = Some(url);
        c.rules_source = RulesSource::Redis;
        c.credentials
            .add_token("admin", flowgate_server::auth::Scope::Admin, ADMIN)
            .unwrap();
        c
    })
    .await;
    let addr = ts.http();

    // An admin sees everything the shared document holds, URLs whole.
    let whole = get(addr, Some(ADMIN)).await;
    assert_eq!(whole["version"], 1, "{whole}");
    let names = |k: &str| -> Vec<String> {
        whole[k]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(names("queue"), ["refunds"], "{whole}");
    // Its bounds as declared (the defaults left out).
    let q = &whole["queue"][0];
    assert_eq!(
        (&q["rate"], &q["max_depth"], &q["lease"], &q["match"]),
        (
            &Value::from("1/s"),
            &Value::from(500),
            &Value::from("45s"),
            &serde_json::json!(["biz=REFUND", "channel"])
        ),
        "{q}"
    );
    assert!(q.get("max_attempts").is_none(), "{q}");
    assert_eq!(names("breaker"), ["backend"], "{whole}");
    assert_eq!(
        names("alert"),
        ["refunds-waiting", "per-client-rejecting", "backend-open"]
    );
    assert_eq!(names("rule").len(), 2, "{whole}");
    let text = whole.to_string();
    for s in SECRETS {
        assert!(text.contains(s), "{s} is not shown to an admin: {text}");
    }

    // Without the token, or with a wrong one: the same document, its URLs' scheme and host alone.
    for token in [None, Some("wrong")] {
        let shown = get(addr, token).await;
        let text = shown.to_string();
        for s in SECRETS {
            assert!(!text.contains(s), "{s} is shown with {token:?}: {text}");
        }
        assert!(
            !text.contains("/hook") && !text.contains("/services"),
            "{text}"
        );
        assert_eq!(
            shown["alert"][0]["webhooks"][0],
            "http://alerts.internal:9093/<redacted>"
        );
        assert_eq!(
            shown["alert"][1]["webhooks"][0],
            "http://relay.internal/<redacted>"
        );
        assert_eq!(shown["queue"], whole["queue"]);
        assert_eq!(shown["rule"], whole["rule"]);
    }

    // Sent back by an admin as it was shown: accepted, and it changes none of what is in force.
    let r = put(addr, &whole).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let after = get(addr, Some(ADMIN)).await;
    assert_eq!(after["version"], 2, "{after}");
    assert_eq!(content(&after), content(&whole));
    // Again: the same rules, nothing stored.
    let r = put(addr, &after).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["unchanged"], true, "{}", r.body);

    // A redacted URL sent back is refused (never stored as the webhook), naming its field.
    let redacted = get(addr, None).await;
    let r = put(addr, &redacted).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let detail = r.json()["detail"].as_str().unwrap_or("").to_owned();
    assert!(
        detail
            .starts_with("the JSON body: field `alert[0].webhooks[0]`: this URL is shown redacted"),
        "{detail}"
    );
    assert_eq!(get(addr, Some(ADMIN)).await["version"], 2);

    // A change made to what GET shows, as the dashboard makes it: one new version.
    let mut changed = get(addr, Some(ADMIN)).await;
    changed["rule"][0]["limit"] = "12/s".into();
    let r = put(addr, &changed).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let now = get(addr, Some(ADMIN)).await;
    assert_eq!(now["version"], 3);
    assert_eq!(now["rule"][0]["in_force"]["limit"], "12/s");
    assert_eq!(now["queue"], whole["queue"]);
    assert_eq!(now["alert"], whole["alert"]);
    ts.server.shutdown().await.unwrap();
}
