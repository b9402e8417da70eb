//! The HTTP/JSON API.
//!
//! Its routes, bodies, answers and statuses are its OpenAPI 3.1 document ([`doc`], served at
//! `GET /openapi.json`, kept at `docs/openapi.json`), built with the router in [`routes`] from
//! each handler's `#[utoipa::path]`; `docs/operating.md` says what each route is for.
//!
//! - Input goes through the extractors of [`extract`]: a typed JSON body read within its type's
//!   bound (413 naming it) and parsed by serde (400 naming the field, [`body::parse`]), a typed
//!   query, an admin or dashboard token.
//! - Answers are `Serialize` types, borrowed from the values they show where they are on the
//!   request path ([`verdict`]).
//! - Every error is an [`ApiError`]: `{"error": <ErrorCode>, "detail": "..."}`, with
//!   `Retry-After` on a 429 or 503 (seconds, rounded up, at least 1).
//!
//! A check's body: `{"domain": "api", "descriptors": ["client=42", {"entries": [{"key": "user",
//! "value": "7"}], "hits_addend": 2}], "hits_addend": 1}`. A descriptor is `"k=v, k2=v2"` text or
//! Envoy's JSON form. `hits_addend` 0 (or absent) means 1, as in Envoy; `cost` sets the units
//! exactly (0 only looks).

mod api;
mod body;
mod charged;
mod dashboard;
mod doc;
mod error;
mod extract;
mod openai;
mod payload;
mod queues;
mod report;
mod reserve;
mod rules;
mod stats;
mod verdict;
mod versions;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) use self::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// The routes and their OpenAPI document, built together: a route is added here with its
/// handler's `#[utoipa::path]`, so it cannot be served without being documented.
fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::with_openapi(doc::head())
        .routes(routes!(api::check))
        .routes(routes!(api::acquire))
        .routes(routes!(api::release))
        .routes(routes!(report::report))
        .routes(routes!(reserve::reserve))
        .routes(routes!(reserve::commit))
        .routes(routes!(rules::get_rules, rules::put_rules))
        .routes(routes!(versions::push))
        .routes(routes!(versions::version))
        .routes(routes!(versions::history))
        .routes(routes!(versions::rollback))
        .routes(routes!(queues::submit::submit))
        .routes(routes!(queues::delivery::lease))
        .routes(routes!(queues::delivery::ack))
        .routes(routes!(queues::delivery::nack))
        .routes(routes!(queues::list))
        .routes(routes!(queues::dead::dead))
        .routes(routes!(queues::dead::requeue))
        .routes(routes!(queues::dead::purge_dead))
        .routes(routes!(queues::dead::purge))
        .routes(routes!(api::livez))
        .routes(routes!(api::healthz))
        .routes(routes!(api::readyz))
        .routes(routes!(api::store))
        .routes(routes!(api::metrics))
        .routes(routes!(stats::stats))
        .routes(routes!(stats::stream))
        .routes(routes!(dashboard::page))
        .routes(routes!(dashboard::slash))
        .routes(routes!(dashboard::asset))
        .routes(routes!(doc::serve))
}

/// The router of the HTTP API.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    let (router, _) = routes().split_for_parts();
    router
        .fallback(async || {
            ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, "no such route")
        })
        .method_not_allowed_fallback(async || {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorCode::MethodNotAllowed,
                "this route does not accept that method",
            )
        })
        .with_state(state)
}

/// `X-Content-Type-Options: nosniff`, on every answer (errors, fallbacks, the dashboard, the
/// metrics, the event stream): a browser never runs an answer as another type than it says.
const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");

/// Sets [`NOSNIFF`] on `response` (a static value: one header insert per answer). Applied where
/// each connection's service is made (`server.rs`), around the router rather than as one of its
/// layers, which would box every route's future once more.
pub(crate) fn nosniff<B>(mut response: axum::http::Response<B>) -> axum::http::Response<B> {
    response
        .headers_mut()
        .insert(header::X_CONTENT_TYPE_OPTIONS, NOSNIFF);
    response
}
