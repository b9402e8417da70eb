//! Envoy's rate-limit service through a client generated from Envoy's proto.

mod common;

use std::time::Duration;

use common::{TestServer, descriptor, should};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::google::protobuf::UInt64Value;

const ENVOY: &str = r#"
domain: test
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: api
    value: search
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: global
    rate_limit: {unit: second, requests_per_unit: 100, name: global}
  - key: vip
    value: gold
    rate_limit:
      unit: second
      requests_per_unit: 1000
      replaces: [{name: global}]
  - key: source
    value: proxy
    descriptors:
      - key: dest
        value: bar
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: dest
        rate_limit: {unit: minute, requests_per_unit: 2}
"#;

const TOML: &str = r#"
[[rule]]
domain = "t2"
name = "half-minute"
match = "client"
limit = "5/30s"
algorithm = "fixed_window"
"#;

async fn server() -> TestServer {
    TestServer::start(&[("envoy.yaml", ENVOY), ("own.toml", TOML)]).await
}

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

#[tokio::test]
async fn exact_counts_remaining_reset_and_units() {
    let t = server().await;
    let mut c = t.grpc().await;
    let alice = || vec![descriptor(&[("user", "alice")])];
    for remaining in [2, 1, 0] {
        let r = should(&mut c, "test", alice(), 0).await;
        assert_eq!(r.overall_code, OK);
        let s = &r.statuses[0];
        assert_eq!(s.code, OK);
        assert_eq!(s.limit_remaining, remaining);
        let l = s.current_limit.as_ref().unwrap();
        assert_eq!((l.requests_per_unit, l.unit), (3, Unit::Minute as i32));
        assert_eq!(l.name, "user");
        let reset = s.duration_until_reset.unwrap();
        assert_eq!((reset.seconds, reset.nanos), (60, 0));
    }
    t.clock.advance(Duration::from_secs(15));
    let r = should(&mut c, "test", alice(), 0).await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(r.statuses[0].code, OVER);
    assert_eq!(r.statuses[0].limit_remaining, 0);
    assert_eq!(r.statuses[0].duration_until_reset.unwrap().seconds, 45);
    // Another user has its own counter.
    let r = should(&mut c, "test", vec![descriptor(&[("user", "bob")])], 0).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 2));
    // The next window admits again.
    t.clock.advance(Duration::from_secs(45));
    let r = should(&mut c, "test", alice(), 0).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 2));
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn all_or_nothing_across_descriptors() {
    let t = server().await;
    let mut c = t.grpc().await;
    let r = should(
        &mut c,
        "test",
        vec![
            descriptor(&[("user", "carol")]),
            descriptor(&[("blocked", "x")]),
        ],
        0,
    )
    .await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(r.statuses[0].code, OK);
    assert_eq!(r.statuses[1].code, OVER);
    assert_eq!(
        r.statuses[1]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        0
    );
    // Nothing was taken from carol's limit.
    let r = should(&mut c, "test", vec![descriptor(&[("user", "carol")])], 3).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 0));
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn hits_addend_request_and_descriptor() {
    let t = server().await;
    let mut c = t.grpc().await;
    let d = || descriptor(&[("api", "search")]);
    let r = should(&mut c, "test", vec![d()], 2).await;
    assert_eq!(r.statuses[0].limit_remaining, 3);
    // 0 means 1.
    let r = should(&mut c, "test", vec![d()], 0).await;
    assert_eq!(r.statuses[0].limit_remaining, 2);
    // Over by cost: 3 requested, 2 left: rejected, nothing taken.
    let r = should(&mut c, "test", vec![d()], 3).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OVER, 2));
    // A descriptor's own hits_addend overrides the request's.
    let mut own = d();
    own.hits_addend = Some(UInt64Value { value: 1 });
    let r = should(&mut c, "test", vec![own], 50).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 1));
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn shadow_unlimited_unknown_and_nested() {
    let t = server().await;
    let mut c = t.grpc().await;
    let sh = || vec![descriptor(&[("shadow", "x")])];
    assert_eq!(
        should(&mut c, "test", sh(), 0).await.statuses[0].limit_remaining,
        0
    );
    let r = should(&mut c, "test", sh(), 0).await;
    assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK));
    let metrics = common::http(t.http(), "GET", "/metrics", &[], "")
        .await
        .body;
    assert!(
        metrics.contains("flowgate_shadow_hits_total{domain=\"test\",rule=\"shadow\"} 1"),
        "{metrics}"
    );

    let r = should(&mut c, "test", vec![descriptor(&[("free", "x")])], 0).await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(r.statuses[0].limit_remaining, u32::MAX);
    assert!(r.statuses[0].current_limit.is_none());

    // No rule, and a domain with no config: OK.
    let r = should(&mut c, "test", vec![descriptor(&[("nope", "x")])], 0).await;
    assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK));
    assert!(r.statuses[0].current_limit.is_none());
    let r = should(
        &mut c,
        "no-such-domain",
        vec![descriptor(&[("user", "x")])],
        0,
    )
    .await;
    assert_eq!(r.overall_code, OK);

    // Nested: value-specific beats key-only; depth must match.
    let bar = || vec![descriptor(&[("source", "proxy"), ("dest", "bar")])];
    let r = should(&mut c, "test", bar(), 0).await;
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        1
    );
    assert_eq!(should(&mut c, "test", bar(), 0).await.overall_code, OVER);
    let foo = vec![descriptor(&[("source", "proxy"), ("dest", "foo")])];
    let r = should(&mut c, "test", foo, 0).await;
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        2
    );
    let short = vec![descriptor(&[("source", "proxy")])];
    assert!(
        should(&mut c, "test", short, 0).await.statuses[0]
            .current_limit
            .is_none()
    );

    // `replaces`: the vip rule drops the global one from the request.
    let r = should(
        &mut c,
        "test",
        vec![
            descriptor(&[("global", "all")]),
            descriptor(&[("vip", "gold")]),
        ],
        0,
    )
    .await;
    assert!(r.statuses[0].current_limit.is_none());
    assert_eq!(
        r.statuses[1]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        1000
    );
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn windows_envoy_cannot_express_are_scaled() {
    let t = server().await;
    let mut c = t.grpc().await;
    let r = should(&mut c, "t2", vec![descriptor(&[("client", "1")])], 0).await;
    let l = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!((l.requests_per_unit, l.unit), (10, Unit::Minute as i32));
    assert_eq!(r.statuses[0].limit_remaining, 4);
    assert_eq!(r.statuses[0].duration_until_reset.unwrap().seconds, 30);
    t.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn invalid_requests_are_invalid_argument_and_the_server_goes_on() {
    let t = server().await;
    let mut c = t.grpc().await;
    let bad = |domain: &str, descriptors| RateLimitRequest {
        domain: domain.to_owned(),
        descriptors,
        hits_addend: 0,
    };
    let e = c
        .should_rate_limit(bad("", vec![descriptor(&[("user", "x")])]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("domain"), "{}", e.message());
    let e = c.should_rate_limit(bad("test", vec![])).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let many = (0..65)
        .map(|i| descriptor(&[("user", &i.to_string())]))
        .collect();
    let e = c.should_rate_limit(bad("test", many)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("65 descriptors"), "{}", e.message());
    let huge = "v".repeat(2000);
    let e = c
        .should_rate_limit(bad("test", vec![descriptor(&[("user", &huge)])]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // A message over 64 KiB is refused by the transport.
    let big = "v".repeat(1000);
    let lots = (0..60)
        .map(|_| descriptor(&[("user", &big), ("k", &big)]))
        .collect();
    let e = c.should_rate_limit(bad("test", lots)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::OutOfRange, "{e}");
    // Still answering.
    let r = should(&mut c, "test", vec![descriptor(&[("user", "z")])], 0).await;
    assert_eq!(r.overall_code, OK);
    t.server.shutdown().await.unwrap();
}
