//! An axum service limited per client by Flowgate: 5 requests per second per `x-client` header
//! (token bucket, burst 5), answering 429 with `RateLimit-*` and `Retry-After` headers.
//!
//! ```text
//! cargo run -p flowgate --example axum
//! for i in $(seq 7); do curl -s -o /dev/null -w '%{http_code} ' -H 'x-client: alice' localhost:3000/; done
//! # 200 200 200 200 200 429 429
//! ```

use std::sync::Arc;

use axum::body::Body;
use axum::{Router, routing::get};
use flowgate::layer::RateLimitLayer;
use flowgate::{
    Algorithm, Descriptor, Limit, Limiter, Matcher, MemoryStore, Quota, Request, Rule, RuleSet,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let per_client = Limit::builder(Algorithm::TokenBucket, Quota::per_second(5)?)
        .burst(5)
        .build()?;
    let rules = RuleSet::new(vec![Rule::new(
        "api",
        "per-client",
        vec![Matcher::parse("client")],
        Some(per_client),
    )])?;
    let limiter = Arc::new(Limiter::new(rules, MemoryStore::new()));
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(RateLimitLayer::new(limiter, |req: &http::Request<Body>| {
            let client = req.headers().get("x-client")?.to_str().ok()?;
            Some(Request::new(
                "api",
                vec![Descriptor::new([("client", client)])],
            ))
        }));
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{addr}");
    axum::serve(listener, app).await?;
    Ok(())
}
