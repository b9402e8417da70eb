//! The HTTP/JSON API.
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/check` | decide a request: 200 when admitted, 429 when over limit, with `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` and (on 429) `Retry-After` |
//! | `POST /v1/acquire` | as check; in `delay` mode the answer carries the `wait_ms` before the reserved slot (or, with `"hold": true`, is sent after it); 429 when the wait would exceed `max_wait`; concurrency leases are listed for `/v1/release` |
//! | `POST /v1/release` | release a concurrency lease: `{"domain", "descriptor", "lease"}` |
//! | `GET /v1/rules` | the rules in force, their version and origin |
//! | `PUT /v1/rules` | replace all rules, atomically (admin: `Authorization: Bearer <token>`); the body is Flowgate TOML (`application/toml`), envoyproxy/ratelimit YAML (`application/yaml`) or the TOML schema as JSON (`application/json`). Not persisted, and replaced by the next file reload: see [`crate::reload`] |
//! | `GET /healthz` | 200 while the process runs |
//! | `GET /readyz` | 200 when the store answers, else 503 |
//! | `GET /metrics` | Prometheus text format |
//!
//! Request body (check, acquire):
//! `{"domain": "api", "descriptors": ["client=42", {"entries": [{"key": "user", "value": "7"}], "hits_addend": 2}], "hits_addend": 1}`.
//! A descriptor is `"k=v, k2=v2"` text or Envoy's JSON form. `hits_addend` 0 (or absent) means
//! 1, as in Envoy; `cost` sets the units exactly (0 only looks).
//!
//! Every error is JSON, `{"error": "...", "detail": "..."}`, with 400 (malformed), 401/403
//! (admin token), 404, 405, 413 (body over 64 KiB), 415 (unknown content type) or 503.

mod api;
mod error;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post};

pub use self::error::ApiError;
use crate::limits::MAX_BODY_BYTES;
use crate::state::AppState;

/// The router of the HTTP API.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/check", post(api::check))
        .route("/v1/acquire", post(api::acquire))
        .route("/v1/release", post(api::release))
        .route("/v1/rules", get(api::get_rules).put(api::put_rules))
        .route("/healthz", get(api::healthz))
        .route("/readyz", get(api::readyz))
        .route("/metrics", get(api::metrics))
        .fallback(async || ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route"))
        .method_not_allowed_fallback(async || {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not accept that method",
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}
