//! A `tower` layer that limits an HTTP service (axum, hyper, tonic) by a key extracted from each
//! request.
//!
//! The layer holds the limiter in an [`Arc`](std::sync::Arc), so every clone of the service — and
//! axum clones it per request — shares one limit (tower's own `RateLimit` keeps its state per
//! service instance and silently stops limiting when cloned). A rejected request is answered by a
//! [`Reject`] policy: [`HttpReject`] (429 with a JSON body and `RateLimit-*` / `Retry-After`
//! headers) or [`GrpcReject`] (gRPC `RESOURCE_EXHAUSTED`). An admitted request waits its slot in
//! `delay` mode, and its `concurrency` leases are held until the inner service has answered.
//!
//! A request matching circuit breakers ([`crate::breakers`]) is refused while its breaker is
//! open (the same 429 or `RESOURCE_EXHAUSTED`, with `Retry-After` the time to half-open, and
//! `"error": "circuit_open"` in [`HttpReject`]'s body), and an admitted one reports its outcome
//! by itself: a 5xx response or an error of the inner service is a failure, and the latency is
//! the inner service's, from the call to the response.
//!
//! For a cost known only when the response ends (LLM tokens, SMS segments, bytes),
//! [`ReserveLayer`] reserves each request's estimate before the inner service runs and commits
//! the actual cost from a response header or trailer, answering `RateLimit-*` and, as an
//! option, OpenAI's `x-ratelimit-*-tokens` headers.
//!
//! # Examples
//! ```
//! use std::sync::Arc;
//! use axum::{Router, routing::get};
//! use flowgate::layer::RateLimitLayer;
//! use flowgate::{Descriptor, Limiter, MemoryStore, Request, RuleSet};
//!
//! let limiter = Arc::new(Limiter::new(RuleSet::default(), MemoryStore::new()));
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(limiter, |req: &http::Request<axum::body::Body>| {
//!         let client = req.headers().get("x-client")?.to_str().ok()?;
//!         Some(Request::new("api", vec![Descriptor::new([("client", client)])]))
//!     }));
//! ```

mod commit_body;
mod future;
#[allow(clippy::module_inception)]
mod layer;
mod reject;
mod reserve;
mod reserve_service;
mod service;

pub use commit_body::CommitBody;
pub use future::ResponseFuture;
pub use layer::RateLimitLayer;
pub use reject::{GrpcReject, HttpReject, Reject};
pub use reserve::{ESTIMATE_HEADER, Estimate, ReserveLayer, USAGE_HEADER};
pub use reserve_service::ReserveService;
pub use service::RateLimitService;
