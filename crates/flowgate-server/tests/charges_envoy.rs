//! Charges as Envoy sends them, through the real `flowgate` binary on the embedded store and
//! on a real Redis, with the envoy-types gRPC client as Envoy AI Gateway calls: a check of cost
//! 0 at request time, the answer's tokens charged at stream end (`hits_addend`), refunds
//! (`is_negative_hits`); debt paid back by time; `--charge-domains` for envoyproxy/ratelimit
//! YAML rules.

#[path = "common/charges.rs"]
mod charges;
mod common;
#[path = "common/stats.rs"]
mod stats;

use std::time::Duration;

use charges::{OnStore, ask, envoy, look, tokens};
use common::{config, metric, wait_until};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

const RULES: &str = r#"
[[rule]]
domain = "ai-gateway"
name = "tokens"
match = ["api_key"]
limit = "1000/h"
algorithm = "fixed_window"
max_debt = 500
charge = "report"

[[rule]]
domain = "ai-gateway"
name = "fast"
match = ["tenant"]
limit = "20/s"
algorithm = "token_bucket"
charge = "report"

[[rule]]
domain = "ai-gateway"
name = "window"
match = ["team"]
limit = "10/s"
algorithm = "fixed_window"
charge = "report"

[[rule]]
domain = "ai-gateway"
name = "calls"
match = ["user"]
limit = "5/h"

[[alert]]
domain = "ai-gateway"
name = "tokens-owed"
rule = "tokens"
debt = 400

[[rule]]
domain = "ai-gateway"
name = "inflight"
match = ["slot"]
limit = "4/m"
algorithm = "concurrency"
"#;

/// One descriptor asked of domain `ai-gateway`: the overall code and the descriptor's.
async fn gateway(c: &mut RateLimitServiceClient<Channel>, d: RateLimitDescriptor) -> (Code, Code) {
    ask(c, "ai-gateway", vec![d]).await.unwrap()
}

/// The debt the AI Gateway pattern leaves (500 of `tokens`, 700 units dropped), seen in
/// `/metrics`, `/v1/stats` and the debt alert.
async fn debt_seen(http: std::net::SocketAddr) {
    let dropped = [
        r#"rule="tokens""#,
        r#"kind="charge""#,
        r#"result="dropped""#,
    ];
    assert_eq!(
        metric(http, "flowgate_charge_units_total", &dropped).await,
        700.0
    );
    let applied = [
        r#"rule="tokens""#,
        r#"kind="charge""#,
        r#"result="applied""#,
    ];
    assert_eq!(
        metric(http, "flowgate_charge_units_total", &applied).await,
        1500.0
    );
    assert_eq!(
        metric(http, "flowgate_rule_debt", &[r#"rule="tokens""#]).await,
        500.0,
        "the rule's debt in /metrics"
    );
    assert_eq!(
        stats::rule_debt(http, "tokens").await,
        Some(500),
        "the rule's debt in /v1/stats"
    );
    assert!(
        alert_is(http, "firing").await,
        "the debt alert fires while the debt is above 400"
    );
}

async fn ai_gateway_pattern(store: OnStore) {
    let (_dir, path) = config(RULES);
    let server = store.serve(&path, &[]);
    let mut c = envoy(server.grpc).await;
    let at = |code: Code| (code, code);
    let k1 = || look(server.http, "ai-gateway", &["api_key=k1"], "tokens");
    // Request time: cost 0 passes; stream end: the tokens are charged, counted even when large.
    assert_eq!(gateway(&mut c, tokens("k1", 0, false)).await, at(Code::Ok));
    assert_eq!(
        gateway(&mut c, tokens("k1", 600, false)).await,
        at(Code::Ok)
    );
    assert_eq!(gateway(&mut c, tokens("k1", 0, false)).await, at(Code::Ok));
    // Past the limit: counted, not lost (1,200 of 1,000), and the key is now over.
    assert_eq!(
        gateway(&mut c, tokens("k1", 600, false)).await,
        at(Code::OverLimit),
        "the charge's answer says the key is now over"
    );
    assert_eq!(k1().await, (200, 0));
    assert_eq!(
        gateway(&mut c, tokens("k1", 0, false)).await,
        at(Code::OverLimit),
        "the next request's check is refused"
    );
    // Another key is untouched.
    assert_eq!(gateway(&mut c, tokens("k2", 0, false)).await, at(Code::Ok));
    // Up to max_debt (500): the rest is dropped, and counted as dropped.
    assert_eq!(
        gateway(&mut c, tokens("k1", 1000, false)).await,
        at(Code::OverLimit)
    );
    assert_eq!(k1().await, (500, 0));
    debt_seen(server.http).await;
    // is_negative_hits: a refund; 400 back leaves 100 of debt (still over), then floored at 0.
    assert_eq!(
        gateway(&mut c, tokens("k1", 400, true)).await,
        at(Code::OverLimit)
    );
    assert_eq!(k1().await, (100, 0));
    assert_eq!(
        gateway(&mut c, tokens("k1", 5000, true)).await,
        at(Code::Ok)
    );
    assert_eq!(
        k1().await,
        (0, 1000),
        "refunds are floored at empty: the whole limit is free again, no more"
    );
    assert_eq!(gateway(&mut c, tokens("k1", 0, false)).await, at(Code::Ok));
    // A rule without charge = "report" keeps Envoy's all-or-nothing cost.
    let user = |hits| charges::tokens_of("user", "u1", hits);
    assert_eq!(gateway(&mut c, user(9)).await, at(Code::OverLimit));
    assert_eq!(
        look(server.http, "ai-gateway", &["user=u1"], "calls").await,
        (0, 5)
    );
}

/// Whether the alert `tokens-owed` reaches `state` in `/v1/stats` within 10 s.
async fn alert_is(http: std::net::SocketAddr, state: &str) -> bool {
    stats::alert_reaches(http, "tokens-owed", state, Duration::from_secs(10)).await
}

#[tokio::test]
async fn the_ai_gateway_pattern_on_the_embedded_store() {
    ai_gateway_pattern(OnStore::memory()).await;
}

#[tokio::test]
async fn the_ai_gateway_pattern_on_redis() {
    ai_gateway_pattern(OnStore::redis()).await;
}

/// A key in debt is refused until time pays the debt back, on a bucket and on a window.
async fn debt_paid_back_by_time(store: OnStore) {
    let (_dir, path) = config(RULES);
    let server = store.serve(&path, &[]);
    let mut c = envoy(server.grpc).await;
    for (entry, rule, charge) in [("tenant", "fast", 30), ("team", "window", 15)] {
        let d = |hits| charges::tokens_of(entry, "t1", hits);
        let (code, _) = ask(&mut c, "ai-gateway", vec![d(charge)]).await.unwrap();
        assert_eq!(
            code,
            Code::OverLimit,
            "{rule}: {charge} charged past the limit"
        );
        let (debt, _) = look(server.http, "ai-gateway", &[&format!("{entry}=t1")], rule).await;
        assert!(
            debt > 0 && debt <= 10,
            "{rule}: in debt, within max_debt: {debt}"
        );
        let paid = wait_until(Duration::from_secs(15), || async {
            let mut c = envoy(server.grpc).await;
            ask(&mut c, "ai-gateway", vec![d(0)]).await.unwrap().0 == Code::Ok
        })
        .await;
        assert!(
            paid,
            "{rule}: the debt is paid back by time, and checks pass again"
        );
        let (debt, _) = look(server.http, "ai-gateway", &[&format!("{entry}=t1")], rule).await;
        assert_eq!(debt, 0, "{rule}");
    }
}

#[tokio::test]
async fn debt_is_paid_back_by_time_on_the_embedded_store() {
    debt_paid_back_by_time(OnStore::memory()).await;
}

#[tokio::test]
async fn debt_is_paid_back_by_time_on_redis() {
    debt_paid_back_by_time(OnStore::redis()).await;
}

const YAML: &str = r#"
domain: llm
descriptors:
  - key: api_key
    rate_limit:
      unit: hour
      requests_per_unit: 100
"#;

#[tokio::test]
async fn charge_domains_make_envoy_yaml_rules_take_charges() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    std::fs::write(&path, YAML).unwrap();
    for (flags, charged) in [
        (&["--charge-domains", "ai-gateway,llm"][..], true),
        (&[][..], false),
    ] {
        let server = OnStore::memory().serve(&path, flags);
        let mut c = envoy(server.grpc).await;
        let (code, _) = ask(&mut c, "llm", vec![tokens("k", 150, false)])
            .await
            .unwrap();
        assert_eq!(code, Code::OverLimit, "{flags:?}");
        let (debt, remaining) = look(server.http, "llm", &["api_key=k"], "api_key").await;
        if charged {
            assert_eq!(
                (debt, remaining),
                (50, 0),
                "a charge: counted past the limit"
            );
        } else {
            assert_eq!(
                (debt, remaining),
                (0, 100),
                "a check: over the limit, nothing taken"
            );
        }
    }
}

#[tokio::test]
async fn refunds_and_report_costs_over_grpc() {
    use flowgate_server::grpc_report::{
        ChargeKind, Descriptor, Entry, Report, ReportRequest, ReportsClient,
    };
    let (_dir, path) = config(RULES);
    let server = OnStore::memory().serve(&path, &[]);
    let mut c = envoy(server.grpc).await;
    // A refund to a rule that takes none is refused, naming the rule; nothing is charged.
    let slot = charges::tokens_of("slot", "s1", 1);
    let refund = envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor {
        is_negative_hits: true,
        ..slot
    };
    let e = ask(&mut c, "ai-gateway", vec![tokens("k", 50, false), refund])
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("rule `inflight` takes no charges"),
        "{e:?}"
    );
    assert_eq!(
        look(server.http, "ai-gateway", &["api_key=k"], "tokens").await,
        (0, 1000)
    );
    // flowgate.v1.Reports/Report: a cost alone, then a refund, answered per rule.
    let mut reports = ReportsClient::connect(format!("http://{}", server.grpc))
        .await
        .unwrap();
    let report = |cost, refund| Report {
        domain: "ai-gateway".into(),
        descriptors: vec![Descriptor {
            entries: vec![Entry {
                key: "api_key".into(),
                value: "k".into(),
            }],
        }],
        cost: Some(cost),
        refund,
        ..Report::default()
    };
    let r = reports
        .report(ReportRequest {
            reports: vec![report(1100, false), report(30, true)],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.charges.len(), 2);
    let (charged, refunded) = (&r.charges[0].rules[0], &r.charges[1].rules[0]);
    assert_eq!(
        (
            charged.rule.as_str(),
            charged.applied,
            charged.debt,
            charged.over
        ),
        ("tokens", 1100, 100, true)
    );
    assert_eq!(
        (
            charged.domain.as_str(),
            charged.key.as_str(),
            charged.descriptor,
            charged.kind(),
            charged.released,
            charged.remaining,
        ),
        (
            "ai-gateway",
            "ai-gateway:tokens:api_key=k",
            Some(0),
            ChargeKind::Charge,
            0,
            0
        )
    );
    assert!(
        charged.retry_after_ms.is_some_and(|ms| ms > 0),
        "{charged:?}"
    );
    assert_eq!(
        (
            refunded.kind(),
            refunded.refund,
            refunded.applied,
            refunded.debt
        ),
        (ChargeKind::Refund, true, 30, 70)
    );
    let bad = reports
        .report(ReportRequest {
            reports: vec![report(5, false), report(5_000_000_000, false)],
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert!(bad.message().contains("reports[1].cost"), "{bad:?}");
    assert_eq!(
        look(server.http, "ai-gateway", &["api_key=k"], "tokens").await,
        (70, 0),
        "the refused batch changed nothing"
    );
}

/// A charge past a token bucket's limit (`fast`: 20/s; 30 charged, 10 of them owed): its
/// answer and the next cost-0 check's agree on when the key admits again (once the debt is
/// paid, 0.5 s, long before the bucket is full again, 1.5 s), and with `--response-headers`
/// the charge's answer carries the rate-limit headers, as a check's does.
#[tokio::test]
async fn a_charge_and_the_next_check_agree_on_when_the_key_admits_again() {
    use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
    let (_dir, path) = config(RULES);
    let server = OnStore::memory().serve(&path, &["--response-headers"]);
    let mut c = envoy(server.grpc).await;
    let request = |hits| RateLimitRequest {
        domain: "ai-gateway".to_owned(),
        descriptors: vec![charges::tokens_of("tenant", "t9", hits)],
        hits_addend: 0,
    };
    let charge = c.should_rate_limit(request(30)).await.unwrap().into_inner();
    let check = c.should_rate_limit(request(0)).await.unwrap().into_inner();
    let until = |r: &RateLimitResponse| {
        let d = r.statuses[0].duration_until_reset.unwrap_or_default();
        Duration::new(d.seconds.unsigned_abs(), d.nanos.unsigned_abs())
    };
    let half = Duration::from_millis(500);
    for (what, r) in [("charge", &charge), ("check", &check)] {
        assert_eq!(r.statuses[0].code, Code::OverLimit as i32, "{what}: {r:?}");
        assert!(
            until(r) > Duration::ZERO && until(r) <= half,
            "{what}: admitted again once the debt is paid, within 0.5 s: {r:?}"
        );
    }
    let headers: Vec<(&str, &str)> = charge
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(
        headers,
        [
            ("ratelimit-limit", "20"),
            ("ratelimit-remaining", "0"),
            ("ratelimit-reset", "2"),
            ("retry-after", "1"),
        ],
        "{charge:?}"
    );
}
