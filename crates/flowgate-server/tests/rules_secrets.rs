//! Through the real server: a reader's `GET /v1/rules` shows each webhook and Alertmanager URL
//! of the shared document as its scheme and host alone, an admin's whole; no figure a reader
//! gets (`/v1/stats`) names one; what a reader was shown, sent back by an admin, is refused.

mod common;

use common::{TestServer, http};
use flowgate_server::auth::Scope;
use flowgate_server::rules::RulesSource;
use flowgate_testkit::redis::RedisServer;
use serde_json::Value;

/// Webhooks are POSTed over plain `http://` (an `https://` one is refused at load), so the
/// Slack-shaped hook is written with `http://`.
const HOOK: &str = "http://user:pw@hooks.slack.com/services/T000/B000/XXXX?x=1";
const MANAGER: &str = "http://admin:am-pass@am.internal:9093/prefix";

const RULES: &str = r#"
domain = "pay"
alertmanagers = ["http://admin:am-pass@am.internal:9093/prefix"]

[[rule]]
name = "per-client"
match = ["client"]
limit = "10/s"

[[alert]]
name = "store-down"
store = "degraded"
webhooks = ["http://user:pw@hooks.slack.com/services/T000/B000/XXXX?x=1"]
"#;

const ADMIN: &str = "admin-secret-0123456789abcdef0123456789abcdef";
const READER: &str = "reader-secret-0123456789abcdef0123456789abcdef";

/// What the URLs hold beyond their scheme and host.
const SECRETS: [&str; 7] = [
    "user", "pw", "services", "T000", "XXXX", "am-pass", "prefix",
];

async fn get(addr: std::net::SocketAddr, path: &str, token: &str) -> common::HttpResponse {
    let auth = format!("Bearer {token}");
    http(addr, "GET", path, &[("authorization", &auth)], "").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_sees_a_webhooks_scheme_and_host_alone() {
    let redis = RedisServer::start();
    let url = redis.url();
    let ts = TestServer::start_with(&[("rules.toml", RULES)], move |mut c| {
        c.redis_url = Some(url);
        c.rules_source = RulesSource::Redis;
        c.credentials.add_token("a", Scope::Admin, ADMIN).unwrap();
        c.credentials.add_token("r", Scope::Reader, READER).unwrap();
        c
    })
    .await;
    let addr = ts.http();

    let r = get(addr, "/v1/rules", READER).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let shown: Value = r.json();
    let alert = &shown["alert"][0];
    assert_eq!(
        alert["webhooks"][0], "http://hooks.slack.com/<redacted>",
        "{shown}"
    );
    assert_eq!(
        alert["alertmanagers"][0], "http://am.internal:9093/<redacted>",
        "{shown}"
    );
    for s in SECRETS {
        assert!(!r.body.contains(s), "{s} is shown to a reader: {}", r.body);
    }

    let whole: Value = get(addr, "/v1/rules", ADMIN).await.json();
    assert_eq!(whole["alert"][0]["webhooks"][0], HOOK, "{whole}");
    assert_eq!(whole["alert"][0]["alertmanagers"][0], MANAGER, "{whole}");

    // No figure a reader gets names a URL.
    let stats = get(addr, "/v1/stats", READER).await;
    assert_eq!(stats.status, 200, "{}", stats.body);
    assert!(stats.body.contains("store-down"), "{}", stats.body);
    for s in SECRETS.iter().chain(&["hooks.slack.com", "am.internal"]) {
        assert!(!stats.body.contains(s), "{s} in /v1/stats: {}", stats.body);
    }

    // What the reader was shown, sent back by an admin: refused, nothing stored.
    let auth = format!("Bearer {ADMIN}");
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let r = http(addr, "PUT", "/v1/rules", &headers, &shown.to_string()).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let detail = r.json()["detail"].as_str().unwrap_or("").to_owned();
    assert!(detail.contains("this URL is shown redacted"), "{detail}");
    assert!(
        !detail.contains("T000") && !detail.contains("pw"),
        "{detail}"
    );
    let after: Value = get(addr, "/v1/rules", ADMIN).await.json();
    assert_eq!(after["version"], whole["version"], "{after}");
    assert_eq!(after["alert"], whole["alert"], "{after}");
    ts.server.shutdown().await.unwrap();
}
