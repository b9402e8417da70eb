//! Circuit breakers through a real server (in process, on a manual clock): reported errors
//! open a breaker; checks then answer `circuit_open` over HTTP and gRPC with the time to
//! half-open; after `open_for` one probe passes and its success closes it; a probe that never
//! reports frees its place after its lease; bad report bodies are refused naming the field;
//! breakers follow a reload of the files, an unchanged one keeping its state.

mod common;

use std::time::Duration;

use common::{TestServer, descriptor, http, post_json, should, wait_until, write};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use serde_json::{Value, json};

const CONFIG: &str = r#"domain = "pay"

[[rule]]
name = "per-channel"
match = "channel"
limit = "1000/s"

[[breaker]]
name = "channel"
match = ["channel"]
strategy = "error_ratio"
threshold = 0.5
window = "10s"
min_calls = 4
open_for = "30s"
probes = 1
probe_timeout = "5s"
"#;

async fn server() -> TestServer {
    TestServer::start(&[("flowgate.toml", CONFIG)]).await
}

async fn check(s: &TestServer, channel: &str) -> common::HttpResponse {
    post_json(
        s.http(),
        "/v1/check",
        json!({"domain": "pay", "descriptors": [format!("channel={channel}")]}),
    )
    .await
}

async fn report(s: &TestServer, body: Value) -> common::HttpResponse {
    post_json(s.http(), "/v1/report", body).await
}

/// Reports four failures of channel WPG: enough to open its breaker.
async fn open(s: &TestServer) {
    let one = json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": "error", "latency_ms": 12.5});
    let r = report(s, json!({"reports": [one, one, one, one]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"counted": 4, "no_breaker": 0, "dropped": 0})
    );
}

async fn metrics(s: &TestServer) -> String {
    http(s.http(), "GET", "/metrics", &[], "").await.body
}

async fn stats_breakers(s: &TestServer) -> Value {
    http(s.http(), "GET", "/v1/stats?window=1", &[], "")
        .await
        .json()["breakers"]
        .clone()
}

#[tokio::test]
async fn reported_errors_open_the_breaker_over_http_and_grpc_until_a_probe_closes_it() {
    let s = server().await;
    assert_eq!(check(&s, "WPG").await.status, 200);
    open(&s).await;
    s.clock.advance(Duration::from_secs(1));

    let r = check(&s, "WPG").await;
    assert_eq!(r.status, 429, "{}", r.body);
    let body = r.json();
    assert_eq!(
        (&body["code"], &body["reason"]),
        (&"OVER_LIMIT".into(), &"circuit_open".into())
    );
    assert_eq!(body["breaker"]["name"], "channel");
    assert_eq!(body["breaker"]["key"], "pay:channel:channel=WPG");
    assert_eq!(body["retry_after_ms"], 29_000.0);
    assert_eq!(r.header("retry-after"), Some("29"));
    assert!(r.header("ratelimit-limit").is_none(), "no limit was asked");
    // Another channel is its own breaker, closed.
    assert_eq!(check(&s, "ALI").await.status, 200);

    let mut grpc = s.grpc().await;
    let g = should(&mut grpc, "pay", vec![descriptor(&[("channel", "WPG")])], 1).await;
    assert_eq!(g.overall_code, Code::OverLimit as i32);
    assert_eq!(g.statuses[0].code, Code::OverLimit as i32);
    assert_eq!(
        g.statuses[0].duration_until_reset.map(|d| d.seconds),
        Some(29)
    );
    let headers: Vec<(&str, &str)> = g
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert!(
        headers.contains(&("x-flowgate-reason", "circuit_open")),
        "{headers:?}"
    );
    assert!(headers.contains(&("retry-after", "29")), "{headers:?}");

    let m = metrics(&s).await;
    for line in [
        "flowgate_breaker_transitions_total{domain=\"pay\",breaker=\"channel\",to=\"open\"} 1",
        "flowgate_breaker_open{domain=\"pay\",breaker=\"channel\"} 1",
        "flowgate_breaker_rejections_total{domain=\"pay\",breaker=\"channel\"} 2",
        "flowgate_breaker_reports_total{result=\"counted\"} 4",
        // Per process: nothing to send to Redis.
        "flowgate_breaker_reports_total{result=\"unsent\"} 0",
        "flowgate_adaptive_reports_unsent_total 0",
    ] {
        assert!(m.contains(line), "{line} in\n{m}");
    }
    let b = stats_breakers(&s).await;
    assert_eq!(b[0]["phase"], "open", "{b}");
    assert_eq!(b[0]["key"], "pay:channel:channel=WPG");
    assert_eq!(b[0]["retry_after_ms"], 29_000.0);

    // After open_for: one probe, and only one.
    s.clock.advance(Duration::from_secs(29));
    let probe = check(&s, "WPG").await;
    assert_eq!(probe.status, 200, "{}", probe.body);
    let lease = probe.json()["probes"][0]["probe"].clone();
    assert!(lease.is_u64(), "{}", probe.body);
    let second = check(&s, "WPG").await;
    assert_eq!(second.json()["reason"], "circuit_open");
    assert_eq!(second.header("retry-after"), Some("5"), "the lease's time");
    let r = report(
        &s,
        json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": "ok", "latency_ms": 3, "probe": lease}),
    )
    .await;
    assert_eq!(r.json()["counted"], 1);
    assert_eq!(check(&s, "WPG").await.status, 200, "closed");
    let m = metrics(&s).await;
    for line in [
        "flowgate_breaker_transitions_total{domain=\"pay\",breaker=\"channel\",to=\"half_open\"} 1",
        "flowgate_breaker_transitions_total{domain=\"pay\",breaker=\"channel\",to=\"closed\"} 1",
        "flowgate_breaker_open{domain=\"pay\",breaker=\"channel\"} 0",
    ] {
        assert!(m.contains(line), "{line} in\n{m}");
    }
}

#[tokio::test]
async fn a_probe_that_never_reports_frees_its_place_after_its_lease() {
    let s = server().await;
    open(&s).await;
    s.clock.advance(Duration::from_secs(30));
    assert_eq!(check(&s, "WPG").await.status, 200, "the lost probe");
    let mut grpc = s.grpc().await;
    let g = should(&mut grpc, "pay", vec![descriptor(&[("channel", "WPG")])], 1).await;
    assert_eq!(g.overall_code, Code::OverLimit as i32, "no probe free");
    s.clock.advance(Duration::from_millis(4_999));
    assert_eq!(check(&s, "WPG").await.status, 429);
    s.clock.advance(Duration::from_millis(1));
    let g = should(&mut grpc, "pay", vec![descriptor(&[("channel", "WPG")])], 1).await;
    assert_eq!(
        g.overall_code,
        Code::Ok as i32,
        "the expired lease freed its place"
    );
}

#[tokio::test]
async fn bad_report_bodies_are_refused_naming_the_field() {
    let s = server().await;
    let ok =
        json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": "ok", "latency_ms": 1});
    let with = |k: &str, v: Value| {
        let mut b = ok.clone();
        b[k] = v;
        b
    };
    let without = |k: &str| {
        let mut b = ok.clone();
        b.as_object_mut().unwrap().remove(k);
        b
    };
    let cases: Vec<(Value, &str)> = vec![
        (without("latency_ms"), "field `latency_ms`: missing"),
        (
            with("latency_ms", json!(-1)),
            "field `latency_ms`: -1 is not a latency",
        ),
        (
            with("latency_ms", json!(86_400_001)),
            "field `latency_ms`: 86400001 is not a latency",
        ),
        (with("latency_ms", json!("5")), "`latency_ms`: invalid type"),
        (
            with("outcome", json!("timeout")),
            "field `outcome`: unknown outcome `timeout`",
        ),
        (without("outcome"), "field `outcome`: missing"),
        (without("domain"), "field `domain`: missing"),
        (without("descriptors"), "field `descriptors`: missing"),
        (with("latency", json!(1)), "unknown field `latency`"),
        (
            json!({"reports": [ok, with("latency_ms", json!(-0.5))]}),
            "field `reports[1].latency_ms`",
        ),
        (
            json!({"reports": [ok], "domain": "pay"}),
            "field `reports`: a body is one report or a batch",
        ),
        (
            json!({"reports": vec![json!({}); 1001]}),
            "1001 reports: at most 1000",
        ),
    ];
    for (body, words) in cases {
        let r = report(&s, body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let detail = r.json()["detail"].as_str().unwrap_or("").to_owned();
        assert!(detail.contains(words), "{body}: {detail}");
    }
    // A batch with a bad report counts none of them.
    let r = report(&s, json!({"reports": [ok, with("outcome", json!("?"))]})).await;
    assert_eq!(r.status, 400);
    assert!(
        metrics(&s)
            .await
            .contains("flowgate_breaker_reports_total{result=\"counted\"} 0")
    );
    // A report for no breaker is counted and dropped.
    let r = report(
        &s,
        json!({"domain": "other", "descriptors": ["channel=WPG"], "outcome": "error", "latency_ms": 0}),
    )
    .await;
    assert_eq!(
        r.json(),
        json!({"counted": 0, "no_breaker": 1, "dropped": 0})
    );
    assert!(
        metrics(&s)
            .await
            .contains("flowgate_breaker_reports_total{result=\"no_breaker\"} 1")
    );
}

#[tokio::test]
async fn breakers_follow_the_files_an_unchanged_one_keeping_its_state() {
    let s = server().await;
    open(&s).await;
    assert_eq!(check(&s, "WPG").await.status, 429);
    // Another rule added: the breaker is unchanged, and stays open.
    let more =
        format!("{CONFIG}\n[[rule]]\nname = \"per-user\"\nmatch = \"user\"\nlimit = \"5/s\"\n");
    write(&s.path("flowgate.toml"), &more);
    let rules = || async {
        http(s.http(), "GET", "/v1/rules", &[], "").await.json()["rule"]
            .as_array()
            .map_or(0, Vec::len)
    };
    assert!(wait_until(Duration::from_secs(10), || async { rules().await == 2 }).await);
    assert_eq!(check(&s, "WPG").await.status, 429, "kept open");
    let shown = http(s.http(), "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(shown["breaker"][0]["name"], "channel", "{shown}");
    assert_eq!(shown["breaker"][0]["probe_timeout"], "5s");
    // Its threshold changed: a new breaker, closed.
    write(&s.path("flowgate.toml"), &more.replace("0.5", "0.9"));
    assert!(
        wait_until(Duration::from_secs(10), || async {
            check(&s, "WPG").await.status == 200
        })
        .await
    );
    // Removed: reports match no breaker.
    write(
        &s.path("flowgate.toml"),
        &more[..more.find("[[breaker]]").unwrap_or(0)],
    );
    assert!(
        wait_until(Duration::from_secs(10), || async {
            http(s.http(), "GET", "/v1/rules", &[], "").await.json()["breaker"].is_null()
        })
        .await
    );
    let r = report(
        &s,
        json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": "error", "latency_ms": 0}),
    )
    .await;
    assert_eq!(r.json()["no_breaker"], 1);
}

/// Sends `reports` to `flowgate.v1.Reports/Report` on the gRPC port.
async fn grpc_report(
    s: &TestServer,
    reports: Vec<flowgate_server::grpc_report::Report>,
) -> Result<flowgate_server::grpc_report::ReportResponse, tonic::Status> {
    use flowgate_server::grpc_report::{REPORT_PATH, ReportRequest, ReportResponse};
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", s.server.grpc_addr()))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(ReportRequest { reports }),
        http::uri::PathAndQuery::from_static(REPORT_PATH),
        tonic_prost::ProstCodec::<ReportRequest, ReportResponse>::default(),
    )
    .await
    .map(tonic::Response::into_inner)
}

fn grpc_one(
    outcome: flowgate_server::grpc_report::Outcome,
    latency_ms: f64,
) -> flowgate_server::grpc_report::Report {
    use flowgate_server::grpc_report::{Descriptor, Entry, Report};
    Report {
        domain: "pay".into(),
        descriptors: vec![Descriptor {
            entries: vec![Entry {
                key: "channel".into(),
                value: "WPG".into(),
            }],
        }],
        outcome: outcome as i32,
        latency_ms,
        probe: None,
        cost: None,
        refund: false,
    }
}

#[tokio::test]
async fn reports_over_grpc_open_the_breaker_and_bad_ones_name_their_field() {
    use flowgate_server::grpc_report::Outcome;
    let s = server().await;
    // A bad report anywhere in the batch: nothing counts.
    let e = grpc_report(
        &s,
        vec![
            grpc_one(Outcome::Error, 3.0),
            grpc_one(Outcome::Error, -1.0),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("reports[1].latency_ms"),
        "{}",
        e.message()
    );
    let e = grpc_report(&s, vec![grpc_one(Outcome::Unspecified, 3.0)])
        .await
        .unwrap_err();
    assert!(
        e.message().contains("reports[0].outcome"),
        "{}",
        e.message()
    );
    assert_eq!(check(&s, "WPG").await.status, 200);

    let r = grpc_report(&s, vec![grpc_one(Outcome::Error, 12.5); 4])
        .await
        .unwrap();
    assert_eq!((r.counted, r.no_breaker, r.dropped), (4, 0, 0));
    s.clock.advance(Duration::from_secs(1));
    let r = check(&s, "WPG").await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.json()["reason"], "circuit_open");
}
