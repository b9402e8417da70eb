//! The files in `deploy/` for teams on Prometheus and Grafana, and envoyproxy/ratelimit's metric
//! names:
//! - `deploy/prometheus/alerts.yml` passes `promtool check rules`, and its unit tests
//!   (`alerts_test.yml`: each alert fires on the series that should fire it, not on the others)
//!   pass `promtool test rules`; every rule has a `for`, a severity, a summary and a description;
//! - `deploy/grafana/flowgate.json` is a dashboard whose queries parse as PromQL (checked by
//!   promtool, with Grafana's variables replaced), all on the `${DS_PROMETHEUS}` input;
//! - every metric that the dashboard and the alerts name is exported by a running server, with
//!   series, after a little traffic (checks admitted and rejected, a shadow rule, a queue, a
//!   circuit breaker opened by a reported error and a request it refused, an alert on it);
//! - with `envoy_metric_names`, `/metrics` has envoyproxy/ratelimit's series with the counts of
//!   known traffic; without it, none.
//!
//! promtool comes from Debian's `prometheus` package; `scripts/test.sh` installs it when missing.
//! Without it these tests fail, saying how to install it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{TestServer, descriptor, http, post_json, should, wait_until};
use serde::Deserialize;
use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Runs `promtool args` in `dir`; fails the test, saying how to install promtool, when it is
/// missing.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let out = match Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "promtool is not installed: `sudo apt-get install -y prometheus` (Debian's package; \
             scripts/test.sh installs it when missing), or put a promtool from \
             https://prometheus.io/download/ on the PATH"
        ),
        Err(e) => panic!("promtool: {e}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {} failed:\n{text}",
        args.join(" ")
    );
    text
}

#[derive(Deserialize)]
struct RuleFile {
    groups: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    rules: Vec<AlertRule>,
}

#[derive(Deserialize)]
struct AlertRule {
    alert: String,
    expr: String,
    #[serde(rename = "for")]
    for_: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

fn alert_rules() -> Vec<AlertRule> {
    let file: RuleFile = serde_saphyr::from_str(&read("deploy/prometheus/alerts.yml"))
        .unwrap_or_else(|e| panic!("alerts.yml: {e}"));
    file.groups.into_iter().flat_map(|g| g.rules).collect()
}

fn dashboard() -> Value {
    serde_json::from_str(&read("deploy/grafana/flowgate.json"))
        .unwrap_or_else(|e| panic!("flowgate.json: {e}"))
}

/// Every query of the dashboard: the panels' targets (`expr`), and the metric selectors of its
/// variables' `label_values(selector, label)`.
fn dashboard_queries(d: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(t["expr"].as_str().expect("a target's expr").to_owned());
        }
    }
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"]["query"]
            .as_str()
            .or_else(|| v["query"].as_str())
            .expect("a variable's query");
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.rsplit_once(','))
            .map(|(sel, _)| sel.trim())
            .unwrap_or_else(|| panic!("variable query {q:?} is not label_values(selector, label)"));
        out.push(inner.to_owned());
    }
    out
}

/// The query with Grafana's variables replaced by values Prometheus accepts.
fn without_variables(q: &str) -> String {
    q.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$domain", ".*")
        .replace("$rule", ".*")
        .replace("$node", ".*")
}

/// The metric names a PromQL query uses: its identifiers named `flowgate_*` or `ratelimit_*`,
/// outside quoted strings (label values).
fn metric_names(q: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut chars = q.chars().peekable();
    let mut word = String::new();
    let flush = |word: &mut String, names: &mut BTreeSet<String>| {
        if word.starts_with("flowgate_") || word.starts_with("ratelimit_") {
            names.insert(word.clone());
        }
        word.clear();
    };
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' || c == '`' {
            flush(&mut word, &mut names);
            let mut escaped = false;
            for d in chars.by_ref() {
                match d {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    d if d == c => break,
                    _ => {}
                }
            }
        } else if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            flush(&mut word, &mut names);
        }
    }
    flush(&mut word, &mut names);
    names
}

#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    let dir = root().join("deploy/prometheus");
    let checked = promtool(&dir, &["check", "rules", "alerts.yml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool(&dir, &["test", "rules", "alerts_test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");

    let rules = alert_rules();
    let names: BTreeSet<&str> = rules.iter().map(|r| r.alert.as_str()).collect();
    for wanted in [
        "FlowgateRuleRejectionRatioHigh",
        "FlowgateStoreDegraded",
        "FlowgateQueueOldestJobTooOld",
        "FlowgateQueueDeadLettersGrowing",
        "FlowgateConfigReloadFailed",
        "FlowgateRedisEvictionRisk",
        "FlowgateBreakerOpenLong",
        "FlowgateBreakerFlapping",
        "FlowgateAlertFiring",
        "FlowgateAlertNotificationsLost",
        "FlowgateAlertsEvaluatedLocally",
    ] {
        assert!(names.contains(wanted), "no alert {wanted} in {names:?}");
    }
    for r in &rules {
        assert!(r.for_.is_some(), "{}: no `for`", r.alert);
        assert!(
            matches!(
                r.labels.get("severity").map(String::as_str),
                Some("critical" | "warning" | "info")
            ),
            "{}: severity {:?}",
            r.alert,
            r.labels.get("severity")
        );
        for a in ["summary", "description"] {
            assert!(
                r.annotations.get(a).is_some_and(|t| !t.is_empty()),
                "{}: no {a}",
                r.alert
            );
        }
    }
}

#[test]
fn dashboard_queries_parse_as_promql_on_the_datasource_input() {
    let d = dashboard();
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 39));
    assert_eq!(d["__inputs"][0]["name"], "DS_PROMETHEUS");
    assert_eq!(d["__inputs"][0]["pluginId"], "prometheus");
    let mut ids = BTreeSet::new();
    for p in d["panels"].as_array().expect("panels") {
        assert!(ids.insert(p["id"].as_u64().expect("id")), "duplicate id");
        if p["type"] != "row" {
            assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}", "{}", p["title"]);
            for t in p["targets"].as_array().expect("targets") {
                assert_eq!(t["datasource"]["uid"], "${DS_PROMETHEUS}", "{}", p["title"]);
            }
        }
    }

    // promtool parses each query as the expression of a recording rule.
    let queries = dashboard_queries(&d);
    assert!(queries.len() >= 20, "{} queries", queries.len());
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, q) in queries.iter().enumerate() {
        let expr = serde_json::to_string(&without_variables(q)).expect("a JSON string");
        rules.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: {expr}\n"
        ));
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("dashboard.yml"), rules).expect("written");
    let checked = promtool(dir.path(), &["check", "rules", "dashboard.yml"]);
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", queries.len())),
        "{checked}"
    );
}

const CONFIG: &str = r#"
domain = "api"

[[rule]]
name = "per-client"
match = "client"
limit = "10/1m"
algorithm = "fixed_window"

[[rule]]
name = "trial"
match = "job"
limit = "2/1m"
algorithm = "fixed_window"
shadow = true

[[rule]]
name = "bulk"
match = "batch"
limit = "10/1m"
algorithm = "fixed_window"

[[rule]]
name = "gold"
match = ["plan=gold", "user"]
limit = "5/1m"
algorithm = "fixed_window"
detailed_metric = true

[[rule]]
name = "internal"
match = "internal"
limit = "unlimited"

[[queue]]
name = "exports"
match = "export"
rate = "1/min"

[[breaker]]
name = "upstream"
match = "upstream"
strategy = "error_count"
threshold = 1
window = "10s"
min_calls = 1
open_for = "1h"

[[alert]]
name = "upstream-cut-off"
breaker = "upstream"
"#;

/// Known traffic: `client=a` 13 times (10 admitted, 3 rejected; the 9th and 10th past 80 %),
/// `job=x` 3 times under a shadow rule of 2 (the 3rd over, admitted), `batch=b` 4 times with
/// `hits_addend` 3 over gRPC (3 admitted: 9 hits, the third's last one past 8; the 4th
/// rejected: 3 hits over), `plan=gold, user=u1` twice, `internal=i` once (unlimited), and a job
/// submitted to a queue.
async fn drive(s: &TestServer) {
    let check = |d: &str| json!({"domain": "api", "descriptors": [d]});
    for i in 0..13 {
        let r = post_json(s.http(), "/v1/check", check("client=a")).await;
        assert_eq!(r.status, if i < 10 { 200 } else { 429 }, "client=a #{i}");
    }
    for _ in 0..3 {
        let r = post_json(s.http(), "/v1/check", check("job=x")).await;
        assert_eq!(r.status, 200, "a shadow rule admits");
    }
    let mut grpc = s.grpc().await;
    for i in 0..4 {
        let r = should(&mut grpc, "api", vec![descriptor(&[("batch", "b")])], 3).await;
        assert_eq!(r.overall_code == 2, i == 3, "batch=b #{i}: {r:?}");
    }
    for _ in 0..2 {
        let r = post_json(s.http(), "/v1/check", check("plan=gold, user=u1")).await;
        assert_eq!(r.status, 200);
    }
    let r = post_json(s.http(), "/v1/check", check("internal=i")).await;
    assert_eq!(r.status, 200);
    let r = post_json(
        s.http(),
        "/v1/queues/submit",
        json!({"domain": "api", "descriptor": "export=e1", "payload": "x"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

async fn metrics(s: &TestServer) -> String {
    let r = http(s.http(), "GET", "/metrics", &[], "").await;
    assert_eq!(r.status, 200);
    r.body
}

/// Whether `name` is something Prometheus would find after scraping `text`: a sample of that
/// name, or a declared family whose samples take that name (`_total` of a counter; `_bucket`,
/// `_sum`, `_count` of a histogram; a gauge's own name).
fn has_series(text: &str, name: &str) -> bool {
    text.lines().any(|l| {
        l.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
    })
}

fn declared(text: &str, name: &str) -> bool {
    text.lines().any(|l| {
        let Some(decl) = l.strip_prefix("# TYPE ") else {
            return false;
        };
        let Some((family, kind)) = decl.split_once(' ') else {
            return false;
        };
        match kind {
            "counter" => name.strip_suffix("_total") == Some(family),
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name.strip_suffix(s) == Some(family)),
            _ => name == family,
        }
    })
}

#[tokio::test]
async fn every_metric_of_the_dashboard_and_the_alerts_is_exported() {
    let mut named = BTreeSet::new();
    for q in dashboard_queries(&dashboard()) {
        named.extend(metric_names(&q));
    }
    let from_dashboard = named.len();
    for r in alert_rules() {
        named.extend(metric_names(&r.expr));
    }
    assert!(from_dashboard >= 20, "{named:?}");
    assert!(named.contains("flowgate_decision_duration_seconds_bucket"));

    let s = TestServer::start(&[("flowgate.toml", CONFIG)]).await;
    drive(&s).await;
    // A reported error opens the breaker, which refuses the next request.
    let r = post_json(
        s.http(),
        "/v1/report",
        json!({"domain": "api", "descriptors": ["upstream=u"], "outcome": "error", "latency_ms": 1}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = post_json(
        s.http(),
        "/v1/check",
        json!({"domain": "api", "descriptors": ["upstream=u"]}),
    )
    .await;
    assert_eq!(r.json()["reason"], "circuit_open", "{}", r.body);
    // The queue gauges come from a state read, the alerts from an evaluation, once a second.
    let ready = wait_until(Duration::from_secs(10), || async {
        let text = metrics(&s).await;
        has_series(&text, "flowgate_queue_oldest_age_seconds")
            && has_series(&text, "flowgate_alerts_firing")
    })
    .await;
    assert!(ready, "no queue or alert series within 10 s");
    let text = metrics(&s).await;

    // Every name is a family's sample, with series (the counters of rare events, store
    // errors, reload failures, alert messages and breakers' transitions, are exported at 0
    // from the start).
    for name in &named {
        assert!(
            declared(&text, name),
            "{name} is named by deploy/ but not exported:\n{text}"
        );
        assert!(
            has_series(&text, name),
            "{name} is exported with no series:\n{text}"
        );
    }
    // The counters the alerts take `increase()` of exist at 0 before their first event: one
    // that first appears at 1 shows no increase, and the first failure would page no one.
    for series in [
        r#"flowgate_alert_notifications_total{result="failed"}"#,
        r#"flowgate_alert_notifications_total{result="dropped"}"#,
        r#"flowgate_breaker_transitions_total{domain="api",breaker="upstream",to="closed"}"#,
    ] {
        assert_eq!(value(&text, series), Some(0), "{series}:\n{text}");
    }
    // Names are checked, not merely found: a misspelt one is caught.
    assert!(!declared(&text, "flowgate_decisions"));
    assert!(!declared(&text, "flowgate_store_degraded_total"));
    assert!(!text.contains("ratelimit_service"), "only with the flag");
}

/// The value of the series `series` (its name and labels, as exposed) in `text`.
fn value(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn envoy_metric_names_count_known_traffic_as_envoyproxy_ratelimit() {
    let s = TestServer::start_with(&[("flowgate.toml", CONFIG)], |mut c| {
        c.envoy_metric_names = true;
        c
    })
    .await;
    drive(&s).await;
    let text = metrics(&s).await;
    let series = |stat: &str, labels: &str| {
        value(
            &text,
            &format!("ratelimit_service_rate_limit_{stat}{{{labels}}}"),
        )
    };
    // (labels, total_hits, over_limit, near_limit, within_limit, shadow_mode)
    let expected = [
        (r#"domain="api",key1="client""#, [13, 3, 2, 10, 0]),
        (r#"domain="api",key1="job""#, [3, 1, 1, 2, 1]),
        (r#"domain="api",key1="batch""#, [12, 3, 1, 9, 0]),
        (
            r#"domain="api",key1="plan_gold",key2="user_u1""#,
            [2, 0, 0, 2, 0],
        ),
    ];
    for (labels, counts) in expected {
        let stats = [
            "total_hits",
            "over_limit",
            "near_limit",
            "within_limit",
            "shadow_mode",
        ];
        for (stat, want) in stats.iter().zip(counts) {
            assert_eq!(
                series(stat, labels),
                Some(want),
                "{stat}{{{labels}}}:\n{text}"
            );
        }
    }
    // An unlimited rule has no series, as in envoyproxy/ratelimit; every family is declared.
    assert!(!text.contains(r#"key1="internal""#), "{text}");
    for stat in [
        "total_hits",
        "over_limit",
        "near_limit",
        "within_limit",
        "shadow_mode",
    ] {
        assert!(
            text.contains(&format!(
                "# TYPE ratelimit_service_rate_limit_{stat} unknown\n"
            )),
            "{text}"
        );
    }
    // The OpenMetrics text still ends with its EOF marker, after these families.
    assert!(text.ends_with("# EOF\n"), "{text}");
    // Flowgate's own series are unchanged beside them.
    assert_eq!(
        value(
            &text,
            r#"flowgate_decisions_total{domain="api",rule="per-client",outcome="over_limit",descriptor=""}"#
        ),
        Some(3)
    );
}

#[test]
fn metric_names_skip_label_values_and_keywords() {
    let names = metric_names(
        r#"sum by (domain) (rate(flowgate_decisions_total{outcome="flowgate_not_a_metric"}[5m])) / on() flowgate_rules"#,
    );
    assert_eq!(
        names,
        BTreeSet::from([
            "flowgate_decisions_total".to_owned(),
            "flowgate_rules".to_owned()
        ])
    );
}
