//! The tower layer in front of an axum router: 429 with headers, a shared limit across clones.

use std::sync::Arc;

use axum::body::Body;
use axum::{Router, routing::get};
use flowgate::clock::ManualClock;
use flowgate::layer::RateLimitLayer;
use flowgate::{
    Algorithm, Descriptor, Limit, Limiter, Matcher, MemoryStore, Quota, Request, Rule, RuleSet,
};
use http_body_util::BodyExt;
use tower::ServiceExt;

fn app() -> Router {
    let limit = Limit::new(Algorithm::FixedWindow, "2/s".parse::<Quota>().unwrap()).unwrap();
    let rules = RuleSet::new(vec![Rule::new(
        "api",
        "per-client",
        vec![Matcher::parse("client")],
        Some(limit),
    )])
    .unwrap();
    let store = MemoryStore::with_clock(ManualClock::new(1_700_000_000_500_000));
    let limiter = Arc::new(Limiter::new(rules, store));
    Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(RateLimitLayer::new(limiter, |req: &http::Request<Body>| {
            let client = req.headers().get("x-client")?.to_str().ok()?;
            Some(Request::new(
                "api",
                vec![Descriptor::new([("client", client)])],
            ))
        }))
}

fn get_as(client: &str) -> http::Request<Body> {
    http::Request::get("/")
        .header("x-client", client)
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn rejects_with_429_and_standard_headers() {
    let app = app();
    // Each oneshot clones the router: the limit must be shared.
    for remaining in ["1", "0"] {
        let res = app.clone().oneshot(get_as("a")).await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["ratelimit-limit"], "2");
        assert_eq!(res.headers()["ratelimit-remaining"], remaining);
        assert_eq!(res.headers()["ratelimit-reset"], "1");
    }
    let res = app.clone().oneshot(get_as("a")).await.unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(res.headers()["content-type"], "application/json");
    let body = res.into_body().collect().await.unwrap().to_bytes();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["error"], "rate_limited");
    assert_eq!(json["rule"], "per-client");
    assert_eq!(json["retry_after_ms"], 500);
    // Another client, and a request without the header, pass.
    assert_eq!(
        app.clone().oneshot(get_as("b")).await.unwrap().status(),
        200
    );
    let anonymous = http::Request::get("/").body(Body::empty()).unwrap();
    assert_eq!(app.oneshot(anonymous).await.unwrap().status(), 200);
}
