//! The HTTP/JSON API: every endpoint, headers, 429, JSON errors, the admin token, hot reload,
//! and junk on both ports.

mod common;

use std::time::Duration;

use common::{TestServer, http, post_json, wait_until};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const RULES: &str = r#"
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
"#;

async fn server() -> TestServer {
    TestServer::start_with(&[("rules.toml", RULES)], |mut c| {
        c.credentials
            .add_token(
                "admin",
                flowgate_server::auth::Scope::Admin,
                "s3cret-0123456789abcdef0123456789abcdef",
            )
            .unwrap();
        c
    })
    .await
}

fn check(client: &str) -> serde_json::Value {
    json!({"domain": "api", "descriptors": [format!("client={client}")]})
}

/// `Server-Timing: decide;dur=<milliseconds, three decimals>` (the Java client's pipelining
/// reads it).
fn assert_server_timing(value: Option<&str>) {
    let dur = value
        .and_then(|v| v.strip_prefix("decide;dur="))
        .unwrap_or_else(|| panic!("no decide timing: {value:?}"));
    let (ms, frac) = dur
        .split_once('.')
        .expect("milliseconds to the microsecond");
    assert!(
        ms.parse::<u64>().is_ok() && frac.len() == 3 && frac.parse::<u16>().is_ok(),
        "{dur}"
    );
}

#[tokio::test]
async fn check_headers_and_429() {
    let t = server().await;
    let r = post_json(t.http(), "/v1/check", check("a")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("ratelimit-limit"), Some("2"));
    assert_eq!(r.header("ratelimit-remaining"), Some("1"));
    assert_eq!(r.header("ratelimit-reset"), Some("10"));
    assert_server_timing(r.header("server-timing"));
    let j = r.json();
    assert_eq!((&j["allowed"], &j["code"]), (&json!(true), &json!("OK")));
    assert!(
        j.get("reason").is_none(),
        "an admitted request has no reason: {j}"
    );
    assert_eq!(j["statuses"][0]["rule"], "per-client");
    assert_eq!(j["statuses"][0]["remaining"], 1);
    assert_eq!(j["statuses"][0]["quota"], "2/10s");
    post_json(t.http(), "/v1/check", check("a")).await;
    t.clock.advance(Duration::from_secs(4));
    let r = post_json(t.http(), "/v1/check", check("a")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("ratelimit-remaining"), Some("0"));
    assert_server_timing(r.header("server-timing"));
    assert_eq!(r.header("retry-after"), Some("6"));
    let j = r.json();
    assert_eq!(
        (j["allowed"].clone(), j["code"].clone(), j["reason"].clone()),
        (json!(false), json!("OVER_LIMIT"), json!("over_limit"))
    );
    assert_eq!(j["retry_after_ms"], 6000.0);
    // Envoy's JSON form, with hits_addend; cost 0 only looks.
    let body = json!({"domain": "api", "descriptors": [{"entries": [{"key": "client", "value": "b"}], "hits_addend": 2}]});
    let r = post_json(t.http(), "/v1/check", body).await;
    assert_eq!(
        (r.status, r.json()["statuses"][0]["remaining"].clone()),
        (200, json!(0))
    );
    let r = post_json(
        t.http(),
        "/v1/check",
        json!({"domain": "api", "descriptors": ["client=c"], "cost": 0}),
    )
    .await;
    assert_eq!(r.json()["statuses"][0]["remaining"], 2);
    // Unknown domain and descriptor: admitted, no headers.
    let r = post_json(
        t.http(),
        "/v1/check",
        json!({"domain": "zzz", "descriptors": ["x=1"]}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.header("ratelimit-limit").is_none());
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn acquire_waits_and_release_leases() {
    let t = server().await;
    let wpg = || json!({"domain": "api", "descriptors": ["channel=WPG"]});
    let mut waits = Vec::new();
    for _ in 0..2 {
        let r = post_json(t.http(), "/v1/acquire", wpg()).await;
        assert_eq!(r.status, 200, "{}", r.body);
        waits.push(r.json()["wait_ms"].as_f64().unwrap());
    }
    assert_eq!(waits, [0.0, 100.0]);
    // The third would wait 200 ms > max_wait 150 ms: the queue bound.
    let r = post_json(t.http(), "/v1/acquire", wpg()).await;
    assert_eq!(r.status, 429, "{}", r.body);

    // Concurrency: one lease; a second is refused until the first is released.
    let ex = || json!({"domain": "api", "descriptors": ["export=1"]});
    let r = post_json(t.http(), "/v1/acquire", ex()).await;
    assert_eq!(r.status, 200);
    let lease = r.json()["leases"][0]["lease"].as_u64().unwrap();
    assert_eq!(post_json(t.http(), "/v1/acquire", ex()).await.status, 429);
    let rel = json!({"domain": "api", "descriptor": "export=1", "lease": lease});
    let r = post_json(t.http(), "/v1/release", rel.clone()).await;
    assert_eq!((r.status, r.json()["released"].clone()), (200, json!(true)));
    assert_eq!(
        post_json(t.http(), "/v1/release", rel).await.json()["released"],
        false
    );
    assert_eq!(post_json(t.http(), "/v1/acquire", ex()).await.status, 200);
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn errors_are_json_and_say_what_is_wrong() {
    let t = server().await;
    let cases: Vec<(&str, &str, &str, u16, &str)> = vec![
        ("POST", "/v1/check", "{not json", 400, "not valid JSON"),
        ("POST", "/v1/check", "[]", 400, "JSON object"),
        (
            "POST",
            "/v1/check",
            r#"{"descriptors": ["a=1"]}"#,
            400,
            "missing field `domain`",
        ),
        (
            "POST",
            "/v1/check",
            r#"{"domain": "", "descriptors": ["a=1"]}"#,
            400,
            "domain must not be empty",
        ),
        (
            "POST",
            "/v1/check",
            r#"{"domain": "api", "descriptors": []}"#,
            400,
            "at least one descriptor",
        ),
        (
            "POST",
            "/v1/check",
            r#"{"domain": "api", "descriptors": ["nonsense"]}"#,
            400,
            "not a descriptor",
        ),
        (
            "POST",
            "/v1/check",
            r#"{"domain": "api", "descriptors": ["a=1"], "bogus": 1}"#,
            400,
            "unknown field `bogus`",
        ),
        (
            "POST",
            "/v1/check",
            r#"{"domain": "api", "descriptors": ["a=1"], "cost": -1}"#,
            400,
            "`cost`",
        ),
        (
            "POST",
            "/v1/check",
            r#"{"domain": "api", "descriptors": [{"entries": [{"key": 7}]}]}"#,
            400,
            "`descriptors[0].entries[0].key`: invalid type: integer `7`",
        ),
        (
            "POST",
            "/v1/check",
            r#"{"domain": "api", "descriptors": ["a=1", 3]}"#,
            400,
            "`descriptors[1]`: invalid type: integer `3`, expected \"key=value, ...\" text",
        ),
        ("GET", "/v1/nothing", "", 404, "no such route"),
        ("DELETE", "/v1/check", "", 405, "method"),
        (
            "POST",
            "/v1/release",
            r#"{"domain": "api", "descriptor": "export=1"}"#,
            400,
            "missing field `lease`",
        ),
        // A field of another route is refused, saying where it belongs.
        (
            "POST",
            "/v1/check",
            r#"{"domain": "api", "descriptors": ["a=1"], "hold": true}"#,
            400,
            "`hold`: only /v1/acquire holds its answer",
        ),
        (
            "POST",
            "/v1/queues/ack",
            r#"{"token": "t", "retry_after_ms": 5}"#,
            400,
            "`retry_after_ms` is for nack",
        ),
        (
            "POST",
            "/v1/queues/dead",
            r#"{"domain": "api", "descriptor": "a=1", "ids": [1]}"#,
            400,
            "`ids` is for requeue and purge",
        ),
    ];
    for (method, path, body, status, needle) in cases {
        let r = http(
            t.http(),
            method,
            path,
            &[("content-type", "application/json")],
            body,
        )
        .await;
        assert_eq!(r.status, status, "{method} {path} {body}: {}", r.body);
        let j = r.json();
        assert!(j["error"].is_string(), "{}", r.body);
        assert!(
            j["detail"].as_str().unwrap().contains(needle),
            "{needle}: {}",
            r.body
        );
    }
    let many: Vec<String> = (0..65).map(|i| format!("a={i}")).collect();
    let r = post_json(
        t.http(),
        "/v1/check",
        json!({"domain": "api", "descriptors": many}),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.json()["detail"].as_str().unwrap().contains("at most 64"));
    let huge = "x".repeat(100_000);
    let r = post_json(
        t.http(),
        "/v1/check",
        json!({"domain": "api", "descriptors": [format!("a={huge}")]}),
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.json()["error"], "payload_too_large");
    let long = "x".repeat(2000);
    let r = post_json(
        t.http(),
        "/v1/check",
        json!({"domain": "api", "descriptors": [format!("a={long}")]}),
    )
    .await;
    assert_eq!(r.status, 400);
    // A body is read whatever its content type (`curl -d` sends a form's).
    let r = http(
        t.http(),
        "POST",
        "/v1/check",
        &[("content-type", "application/x-www-form-urlencoded")],
        r#"{"domain": "api", "descriptors": ["client=form"]}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn junk_bytes_on_both_ports_do_not_stop_the_server() {
    let t = server().await;
    for addr in [t.http(), t.server.grpc_addr()] {
        for junk in [
            &b"\x00\xff\x16\x03\x01garbage\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x08\x00\x00\x00\x00\x00junkjunkjunk",
        ] {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let _ = s.write_all(junk).await;
            let mut buf = vec![0u8; 4096];
            let _ = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await;
        }
    }
    assert_eq!(
        post_json(t.http(), "/v1/check", check("j")).await.status,
        200
    );
    let mut c = t.grpc().await;
    let r = common::should(
        &mut c,
        "api",
        vec![common::descriptor(&[("client", "j")])],
        0,
    )
    .await;
    assert_eq!(r.overall_code, 1);
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn health_ready_metrics_and_rules() {
    let t = server().await;
    for path in ["/livez", "/healthz"] {
        let r = http(t.http(), "GET", path, &[], "").await;
        assert_eq!((r.status, r.json()["status"].clone()), (200, json!("ok")));
    }
    let r = http(t.http(), "GET", "/readyz", &[], "").await;
    assert_eq!(
        (r.status, r.json()["store"]["kind"].clone()),
        (200, json!("memory"))
    );
    let r = http(t.http(), "GET", "/v1/store", &[], "").await;
    assert_eq!((r.status, r.json()["up"].clone()), (200, json!(true)));
    post_json(t.http(), "/v1/check", check("m")).await;
    let m = http(t.http(), "GET", "/metrics", &[], "").await.body;
    assert!(
        m.contains(r#"flowgate_decisions_total{domain="api",rule="per-client",outcome="ok",descriptor=""} 1"#),
        "{m}"
    );
    assert!(
        m.contains("flowgate_decision_duration_seconds_bucket"),
        "{m}"
    );
    assert!(m.contains("flowgate_rules 3"), "{m}");
    let r = http(t.http(), "GET", "/v1/rules", &[], "").await;
    let j = r.json();
    assert_eq!(j["version"], 1);
    assert_eq!(j["source"], "file");
    assert_eq!(j["rule"].as_array().unwrap().len(), 3);
    assert_eq!(j["rule"][0]["limit"], "2/10s");
    assert_eq!(j["rule"][1]["max_wait"], "150ms");
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn admin_put_rules_token_refused_and_accepted() {
    let t = server().await;
    let new_rules =
        "domain = \"api\"\n[[rule]]\nname = \"tight\"\nmatch = \"client\"\nlimit = \"1/m\"\n";
    let toml = [("content-type", "application/toml")];
    let r = http(t.http(), "PUT", "/v1/rules", &toml, new_rules).await;
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (401, json!("unauthorized"))
    );
    let wrong = [
        ("content-type", "application/toml"),
        ("authorization", "Bearer nope"),
    ];
    assert_eq!(
        http(t.http(), "PUT", "/v1/rules", &wrong, new_rules)
            .await
            .status,
        401
    );
    let auth = [
        ("content-type", "application/toml"),
        (
            "authorization",
            "Bearer s3cret-0123456789abcdef0123456789abcdef",
        ),
    ];
    // Invalid rules are refused, naming line and field; the old ones stay.
    let r = http(
        t.http(),
        "PUT",
        "/v1/rules",
        &auth,
        "[[rule]]\ndomain = \"api\"\nname = \"x\"\nmatch = \"client\"\nlimit = \"many\"\n",
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let detail = r.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.contains("<api>:5: field `rule[0].limit`"),
        "{detail}"
    );
    assert_eq!(
        http(t.http(), "GET", "/v1/rules", &[], "").await.json()["rule"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let r = http(t.http(), "PUT", "/v1/rules", &auth, new_rules).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["rules"], 1);
    let j = http(t.http(), "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(
        (j["source"].clone(), j["version"].clone()),
        (json!("api"), json!(2))
    );
    assert_eq!(
        post_json(t.http(), "/v1/check", check("n")).await.status,
        200
    );
    assert_eq!(
        post_json(t.http(), "/v1/check", check("n")).await.status,
        429
    );
    // YAML and JSON bodies; GET's output can be sent back.
    let yaml = [
        ("content-type", "application/yaml"),
        (
            "authorization",
            "Bearer s3cret-0123456789abcdef0123456789abcdef",
        ),
    ];
    let r = http(t.http(), "PUT", "/v1/rules", &yaml, "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: second, requests_per_unit: 7}\n").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let got = http(t.http(), "GET", "/v1/rules", &[], "").await.body;
    let jsn = [
        ("content-type", "application/json"),
        (
            "authorization",
            "Bearer s3cret-0123456789abcdef0123456789abcdef",
        ),
    ];
    let r = http(t.http(), "PUT", "/v1/rules", &jsn, &got).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // An error in a JSON body names its field, not a line of the TOML it was turned into.
    let bad = r#"{"rule": [{"domain": "api", "name": "x", "match": ["client"], "limit": "fast"}]}"#;
    let r = http(t.http(), "PUT", "/v1/rules", &jsn, bad).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let detail = r.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.starts_with("the JSON body: field `rule[0].limit`"),
        "{detail}"
    );
    let r = http(
        t.http(),
        "PUT",
        "/v1/rules",
        &[
            ("content-type", "text/plain"),
            (
                "authorization",
                "Bearer s3cret-0123456789abcdef0123456789abcdef",
            ),
        ],
        "x",
    )
    .await;
    assert_eq!(r.status, 415);
    let m = http(t.http(), "GET", "/metrics", &[], "").await.body;
    assert!(
        m.contains(r#"flowgate_config_reloads_total{source="api",result="failure"} 2"#),
        "{m}"
    );
    assert!(
        m.contains(r#"flowgate_config_reloads_total{source="api",result="success"} 3"#),
        "{m}"
    );
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn admin_api_disabled_without_token() {
    let t = TestServer::start(&[("rules.toml", RULES)]).await;
    let r = http(
        t.http(),
        "PUT",
        "/v1/rules",
        &[("authorization", "Bearer x")],
        "",
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (403, json!("admin_disabled"))
    );
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn hot_reload_applies_valid_edits_and_refuses_invalid_ones() {
    let t = server().await;
    let path = t.path("rules.toml");
    let rules_count = |addr| async move {
        http(addr, "GET", "/v1/rules", &[], "").await.json()["rule"]
            .as_array()
            .map_or(0, Vec::len)
    };
    // A valid edit: one rule with a new limit.
    common::write(
        &path,
        "domain = \"api\"\n[[rule]]\nname = \"per-client\"\nmatch = \"client\"\nlimit = \"1/m\"\n",
    );
    let addr = t.http();
    assert!(
        wait_until(Duration::from_secs(10), || async move {
            rules_count(addr).await == 1
        })
        .await
    );
    assert_eq!(post_json(addr, "/v1/check", check("r")).await.status, 200);
    assert_eq!(post_json(addr, "/v1/check", check("r")).await.status, 429);
    // An invalid edit: refused, counted, the last good rules stay.
    common::write(
        &path,
        "domain = \"api\"\n[[rule]]\nname = \"per-client\"\nmatch = \"client\"\nlimit = \"1/fortnight\"\n",
    );
    let failed = || async move {
        http(addr, "GET", "/metrics", &[], "")
            .await
            .body
            .contains(r#"flowgate_config_reloads_total{source="file",result="failure"} 1"#)
    };
    assert!(wait_until(Duration::from_secs(10), failed).await);
    assert_eq!(rules_count(addr).await, 1);
    assert_eq!(post_json(addr, "/v1/check", check("r")).await.status, 429);
    assert_eq!(post_json(addr, "/v1/check", check("s")).await.status, 200);
    t.server.shutdown().await.unwrap();
}

/// The value of the series `line_prefix` (labels included) in `/metrics`, 0 when absent.
async fn series(addr: std::net::SocketAddr, line_prefix: &str) -> u64 {
    let m = http(addr, "GET", "/metrics", &[], "").await.body;
    m.lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Decisions are counted exactly per rule and outcome (the counters are cached per rule), also
/// for an unknown domain and no-rule descriptors, and a rule change counts under the new rules.
#[tokio::test]
async fn metrics_count_exactly_per_rule_and_outcome_across_rule_changes() {
    let t = server().await;
    let a = t.http();
    for _ in 0..5 {
        post_json(a, "/v1/check", check("x")).await;
    }
    post_json(
        a,
        "/v1/check",
        json!({"domain": "nowhere", "descriptors": ["k=v"]}),
    )
    .await;
    post_json(
        a,
        "/v1/check",
        json!({"domain": "api", "descriptors": ["other=1"]}),
    )
    .await;
    let ok =
        r#"flowgate_decisions_total{domain="api",rule="per-client",outcome="ok",descriptor=""} "#;
    let over = r#"flowgate_decisions_total{domain="api",rule="per-client",outcome="over_limit",descriptor=""} "#;
    assert_eq!((series(a, ok).await, series(a, over).await), (2, 3));
    let unknown =
        r#"flowgate_decisions_total{domain="_unknown",rule="",outcome="no_rule",descriptor=""} "#;
    let no_rule =
        r#"flowgate_decisions_total{domain="api",rule="",outcome="no_rule",descriptor=""} "#;
    assert_eq!((series(a, unknown).await, series(a, no_rule).await), (1, 1));
    let requests = |code: &str| format!("flowgate_requests_total{{api=\"http\",code=\"{code}\"}} ");
    assert_eq!(series(a, &requests("ok")).await, 4);
    assert_eq!(series(a, &requests("over_limit")).await, 3);
    // A new rule set: its rule counts under its own series; the old series keep their counts.
    let auth = [
        ("content-type", "application/toml"),
        (
            "authorization",
            "Bearer s3cret-0123456789abcdef0123456789abcdef",
        ),
    ];
    let renamed =
        "domain = \"api\"\n[[rule]]\nname = \"renamed\"\nmatch = \"client\"\nlimit = \"1/m\"\n";
    let r = http(a, "PUT", "/v1/rules", &auth, renamed).await;
    assert_eq!(r.status, 200, "{}", r.body);
    for _ in 0..3 {
        post_json(a, "/v1/check", check("y")).await;
    }
    let r_ok =
        r#"flowgate_decisions_total{domain="api",rule="renamed",outcome="ok",descriptor=""} "#;
    let r_over = r#"flowgate_decisions_total{domain="api",rule="renamed",outcome="over_limit",descriptor=""} "#;
    assert_eq!((series(a, r_ok).await, series(a, r_over).await), (1, 2));
    assert_eq!((series(a, ok).await, series(a, over).await), (2, 3));
    t.server.shutdown().await.unwrap();
}

/// The admin API and the file each replace the whole rule set, last writer wins: admin rules stay
/// while the file is unchanged (the poll alone does not reload), and the next file change
/// replaces them with the file's rules.
#[tokio::test]
async fn file_reload_replaces_rules_set_through_the_admin_api() {
    let t = server().await;
    let a = t.http();
    let auth = [
        ("content-type", "application/toml"),
        (
            "authorization",
            "Bearer s3cret-0123456789abcdef0123456789abcdef",
        ),
    ];
    let admin =
        "domain = \"api\"\n[[rule]]\nname = \"admin\"\nmatch = \"client\"\nlimit = \"9/m\"\n";
    assert_eq!(http(a, "PUT", "/v1/rules", &auth, admin).await.status, 200);
    let rules = || async move { http(a, "GET", "/v1/rules", &[], "").await.json() };
    // Several poll periods (200 ms here) with the file unchanged: the admin rules stay. A poll
    // leaves no trace to wait on, so 700 ms (three whole periods and more) are let pass.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let j = rules().await;
    assert_eq!(
        (j["source"].clone(), j["rule"][0]["name"].clone()),
        (json!("api"), json!("admin"))
    );
    common::write(
        &t.path("rules.toml"),
        "domain = \"api\"\n[[rule]]\nname = \"from-file\"\nmatch = \"client\"\nlimit = \"1/m\"\n",
    );
    assert!(
        wait_until(Duration::from_secs(10), || async move {
            rules().await["source"] == json!("file")
        })
        .await
    );
    let j = rules().await;
    assert_eq!(j["rule"].as_array().map(Vec::len), Some(1), "{j}");
    assert_eq!(j["rule"][0]["name"], "from-file", "{j}");
    t.server.shutdown().await.unwrap();
}

/// A calendar window's time zone is shown by `GET /v1/rules` (UTC is the default, not shown), and
/// `PUT /v1/rules` takes it back in JSON.
#[tokio::test]
async fn rules_show_and_take_a_time_zone() {
    let t = server().await;
    let auth = [
        ("content-type", "application/toml"),
        (
            "authorization",
            "Bearer s3cret-0123456789abcdef0123456789abcdef",
        ),
    ];
    let rules = "domain = \"sms\"\n[[rule]]\nname = \"daily\"\nmatch = \"user\"\nlimit = \"500/day\"\ntime_zone = \"Asia/Shanghai\"\n[[rule]]\nname = \"monthly\"\nmatch = \"carrier\"\nlimit = \"1000/month\"\n";
    let r = http(t.http(), "PUT", "/v1/rules", &auth, rules).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let got = http(t.http(), "GET", "/v1/rules", &[], "").await;
    let j = got.json();
    assert_eq!(j["rule"][0]["limit"], "500/day");
    assert_eq!(j["rule"][0]["algorithm"], "fixed_window");
    assert_eq!(j["rule"][0]["time_zone"], "Asia/Shanghai");
    assert_eq!(j["rule"][1]["limit"], "1000/month");
    assert!(j["rule"][1].get("time_zone").is_none(), "{j}");
    let jsn = [
        ("content-type", "application/json"),
        (
            "authorization",
            "Bearer s3cret-0123456789abcdef0123456789abcdef",
        ),
    ];
    let r = http(t.http(), "PUT", "/v1/rules", &jsn, &got.body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let again = http(t.http(), "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(again["rule"], j["rule"]);
    // An unknown zone is refused, naming the field.
    let bad = json!({"rule": [{"domain": "sms", "name": "d", "match": ["user"],
        "limit": "5/day", "time_zone": "Mars/Olympus"}]});
    let r = http(t.http(), "PUT", "/v1/rules", &jsn, &bad.to_string()).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let detail = r.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.contains("rule[0].time_zone") && detail.contains("Mars/Olympus"),
        "{detail}"
    );
    t.server.shutdown().await.unwrap();
}

/// `GET /v1/rules` shows each rule's limit in force now and, for a scheduled rule, its next
/// change (in the rule's time zone); its output goes back through `PUT` unchanged.
#[tokio::test]
async fn rules_show_the_limit_in_force_and_the_next_change() {
    let t = server().await;
    let auth = [
        ("content-type", "application/toml"),
        (
            "authorization",
            "Bearer s3cret-0123456789abcdef0123456789abcdef",
        ),
    ];
    // The clock starts at 2027-01-15T16:00+08:00, a Friday.
    let rules = r#"
domain = "pay"
[[rule]]
name = "channel"
match = ["channel"]
limit = "20/s"
algorithm = "token_bucket"
time_zone = "Asia/Shanghai"
[[rule.schedule]]
limit = "100/s"
dates = "2027-01-15..2027-01-15"
[[rule.schedule]]
limit = "40/s"
days = ["sat", "sun"]
hours = "22:00-06:00"
[[rule]]
name = "plain"
match = ["user"]
limit = "5/s"
"#;
    let r = http(t.http(), "PUT", "/v1/rules", &auth, rules).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let got = http(t.http(), "GET", "/v1/rules", &[], "").await;
    let j = got.json();
    let channel = &j["rule"][0];
    assert_eq!(channel["limit"], "20/s");
    assert_eq!(
        channel["in_force"],
        json!({"limit": "100/s", "algorithm": "token_bucket", "burst": 100})
    );
    assert_eq!(
        channel["next_change"],
        json!({"at": "2027-01-16T00:00:00+08:00", "limit": "40/s", "algorithm": "token_bucket", "burst": 40})
    );
    assert_eq!(
        channel["schedule"],
        json!([
            {"limit": "100/s", "algorithm": "token_bucket", "burst": 100, "dates": "2027-01-15..2027-01-15"},
            {"limit": "40/s", "algorithm": "token_bucket", "burst": 40, "days": ["sat", "sun"], "hours": "22:00-06:00"},
        ])
    );
    let plain = &j["rule"][1];
    assert_eq!(
        plain["in_force"],
        json!({"limit": "5/s", "algorithm": "sliding_window"})
    );
    assert!(plain.get("next_change").is_none(), "{plain}");
    // Eight hours on: Saturday 00:00 in Shanghai, the night rate until 06:00.
    t.clock.advance(Duration::from_secs(8 * 3600));
    let j = http(t.http(), "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(j["rule"][0]["in_force"]["limit"], "40/s");
    assert_eq!(
        j["rule"][0]["next_change"]["at"],
        "2027-01-16T06:00:00+08:00"
    );
    assert_eq!(j["rule"][0]["next_change"]["limit"], "20/s");
    // The output goes back in.
    let jsn = [
        ("content-type", "application/json"),
        (
            "authorization",
            "Bearer s3cret-0123456789abcdef0123456789abcdef",
        ),
    ];
    let r = http(t.http(), "PUT", "/v1/rules", &jsn, &got.body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let again = http(t.http(), "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(again["rule"][0]["schedule"], channel["schedule"]);
    t.server.shutdown().await.unwrap();
}
