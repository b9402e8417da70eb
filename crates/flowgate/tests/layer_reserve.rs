//! The reserving tower layer in front of an axum router: estimates from a request header,
//! actual costs from a response header or a streamed body's trailer, the estimate committed by
//! a body that ends without one or is dropped, 400s and 429s, and the budget headers.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::{Router, extract::Query};
use bytes::Bytes;
use flowgate::clock::ManualClock;
use flowgate::layer::{Estimate, ReserveLayer};
use flowgate::{
    Algorithm, Descriptor, Limit, Limiter, Matcher, MemoryStore, Quota, Request, Rule, RuleSet,
};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use tower::ServiceExt;

type Shared = Arc<Limiter<MemoryStore<ManualClock>>>;

const LIMIT: u64 = 1_000;

#[derive(serde::Deserialize)]
struct Usage {
    usage: Option<u64>,
}

/// Answers with the usage in a response header, as `?usage=` asks.
async fn fixed(Query(q): Query<Usage>) -> http::Response<Body> {
    let mut res = http::Response::new(Body::from("done"));
    if let Some(n) = q.usage {
        res.headers_mut()
            .insert("x-flowgate-usage", n.to_string().parse().unwrap());
    }
    res
}

/// Streams two chunks, then the usage in a trailer, as `?usage=` asks.
async fn streamed(Query(q): Query<Usage>) -> http::Response<Body> {
    let mut frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![
        Ok(Frame::data(Bytes::from_static(b"one "))),
        Ok(Frame::data(Bytes::from_static(b"two"))),
    ];
    if let Some(n) = q.usage {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-flowgate-usage", n.to_string().parse().unwrap());
        frames.push(Ok(Frame::trailers(trailers)));
    }
    http::Response::new(Body::new(StreamBody::new(futures::stream::iter(frames))))
}

fn app() -> (Router, Shared, ManualClock) {
    let limit = Limit::new(Algorithm::FixedWindow, "1000/m".parse::<Quota>().unwrap()).unwrap();
    let rules = RuleSet::new(vec![Rule::new(
        "llm",
        "tokens",
        vec![Matcher::parse("key")],
        Some(limit),
    )])
    .unwrap();
    // The start of a minute: a fixed window ends 60 s later.
    let clock = ManualClock::new(1_699_999_980_000_000);
    let limiter = Arc::new(Limiter::new(rules, MemoryStore::with_clock(clock.clone())));
    let key = |req: &http::Request<Body>| {
        let key = req.headers().get("x-key")?.to_str().ok()?;
        Some(Request::new("llm", vec![Descriptor::new([("key", key)])]))
    };
    let app = Router::new()
        .route("/fixed", get(fixed))
        .route("/stream", get(streamed))
        .layer(
            ReserveLayer::new(Arc::clone(&limiter), Estimate::default_header(), key)
                .openai_headers(true),
        );
    (app, limiter, clock)
}

fn get_req(uri: &str, key: &str, estimate: Option<&str>) -> http::Request<Body> {
    let mut b = http::Request::get(uri).header("x-key", key);
    if let Some(e) = estimate {
        b = b.header("x-flowgate-estimate", e);
    }
    b.body(Body::empty()).unwrap()
}

async fn remaining(l: &Shared, key: &str) -> u64 {
    let r = Request::new("llm", vec![Descriptor::new([("key", key)])]).with_cost(0);
    l.check(&r).await.statuses[0].decision.remaining
}

async fn until_remaining(l: &Shared, key: &str, want: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = remaining(l, key).await;
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{got} left, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_usage_header_commits_before_the_answer_and_a_full_budget_refuses() {
    let (app, limiter, _) = app();
    let res = app
        .clone()
        .oneshot(get_req("/fixed?usage=300", "a", Some("400")))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers();
    assert_eq!(h["ratelimit-limit"], "1000");
    assert_eq!(h["ratelimit-remaining"], "700", "after the commit");
    assert_eq!(h["x-ratelimit-limit-tokens"], "1000");
    assert_eq!(h["x-ratelimit-remaining-tokens"], "700");
    assert_eq!(h["x-ratelimit-reset-tokens"], "1m0s");
    assert_eq!(remaining(&limiter, "a").await, 700);
    // 700 more, committed over the estimate, fill the window.
    let res = app
        .clone()
        .oneshot(get_req("/fixed?usage=700", "a", Some("100")))
        .await
        .unwrap();
    assert_eq!(res.headers()["ratelimit-remaining"], "0");
    let res = app
        .clone()
        .oneshot(get_req("/fixed?usage=1", "a", Some("1")))
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    let h = res.headers();
    assert_eq!(h["retry-after"], "60");
    assert_eq!(h["ratelimit-remaining"], "0");
    assert_eq!(h["x-ratelimit-remaining-tokens"], "0");
    let body = res.into_body().collect().await.unwrap().to_bytes();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["error"], "rate_limited");
    assert_eq!(json["rule"], "tokens");
}

#[tokio::test]
async fn bad_estimates_are_answered_400_and_take_nothing() {
    let (app, limiter, _) = app();
    for (estimate, error, needle) in [
        (None, "bad_estimate", "x-flowgate-estimate is required"),
        (Some("ten"), "bad_estimate", "whole number"),
        (Some("-3"), "bad_estimate", "whole number"),
        (Some("501"), "estimate_over_clamp", ""),
    ] {
        let res = app
            .clone()
            .oneshot(get_req("/fixed?usage=1", "b", estimate))
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{estimate:?}");
        let body = res.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["error"], error);
        assert!(json.to_string().contains(needle), "{json}");
        if error == "estimate_over_clamp" {
            assert_eq!(
                (json["rule"].as_str(), json["max"].as_u64()),
                (Some("llm/tokens"), Some(500))
            );
        }
    }
    assert_eq!(remaining(&limiter, "b").await, LIMIT);
    // A request the key function does not limit passes without an estimate.
    let anonymous = http::Request::get("/fixed").body(Body::empty()).unwrap();
    assert_eq!(app.oneshot(anonymous).await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_trailer_commits_when_the_streamed_body_ends() {
    let (app, limiter, _) = app();
    let res = app
        .oneshot(get_req("/stream?usage=50", "c", Some("400")))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["ratelimit-remaining"],
        "600",
        "the estimate taken"
    );
    assert_eq!(res.headers()["x-ratelimit-remaining-tokens"], "600");
    assert_eq!(remaining(&limiter, "c").await, 600);
    let collected = res.into_body().collect().await.unwrap();
    assert_eq!(collected.trailers().unwrap()["x-flowgate-usage"], "50");
    assert_eq!(collected.to_bytes(), "one two");
    until_remaining(&limiter, "c", LIMIT - 50).await;
}

/// A body ending without the trailer, and one dropped before its end, commit the estimate:
/// the window after the one they were reserved in counts it.
#[tokio::test]
async fn a_body_without_usage_or_dropped_commits_the_estimate() {
    let (app, limiter, clock) = app();
    let ended = app
        .clone()
        .oneshot(get_req("/stream", "d", Some("300")))
        .await
        .unwrap();
    let dropped = app
        .oneshot(get_req("/stream?usage=5", "e", Some("200")))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(60));
    assert_eq!(remaining(&limiter, "d").await, LIMIT);
    let body = ended.into_body().collect().await.unwrap();
    assert!(body.trailers().is_none());
    until_remaining(&limiter, "d", LIMIT - 300).await;
    let mut body = dropped.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "one ");
    drop(body);
    until_remaining(&limiter, "e", LIMIT - 200).await;
}
