//! The HTTP/JSON API.
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/check` | decide a request: 200 when admitted, 429 when over limit, with `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` and (on 429) `Retry-After` |
//! | `POST /v1/acquire` | as check; in `delay` mode the answer carries the `wait_ms` before the reserved slot (or, with `"hold": true`, is sent after it); 429 when the wait would exceed `max_wait`; concurrency leases are listed for `/v1/release` |
//! | `POST /v1/release` | release a concurrency lease: `{"domain", "descriptor", "lease"}` |
//! | `POST /v1/report` | report protected calls' outcomes to the circuit breakers: `{"domain", "descriptors", "outcome": "ok"\|"error", "latency_ms", "probe"}` or `{"reports": [...]}` (up to 1,000); see `docs/breakers.md` |
//! | `GET /v1/rules` | the rules in force, their version, what the node follows (`files` or `redis`) and, following Redis, the version's author and time and whether the node is in sync |
//! | `PUT /v1/rules` | replace all rules, atomically (admin: `Authorization: Bearer <token>`); the body is Flowgate TOML (`application/toml`), envoyproxy/ratelimit YAML (`application/yaml`) or the TOML schema as JSON (`application/json`). Following Redis: a new shared version (see [`crate::rules`]). Following files: not persisted, and replaced by the next file reload (see [`crate::reload`]) |
//! | `POST /v1/rules/versions` | (admin, following Redis) a new version from files: `{"files": [{"name": "pay.toml", "text": "..."}], "base_version": 7}` (409 if another version came after `base_version`) |
//! | `GET /v1/rules/history` | (admin, following Redis) the newest versions (`?limit=50`): number, author, time, action, summary |
//! | `GET /v1/rules/versions/{n}` | (admin, following Redis) one version: its files and its diff from the version before |
//! | `POST /v1/rules/rollback` | (admin, following Redis) `{"version": 3}`: version 3's rules stored as a new version |
//! | `POST /v1/queues/submit` | submit one job (`payload` or `payload_base64`, `key`, `not_before_ms` at most 30 days ahead) or a batch (`jobs`, up to 10,000; body up to 32 MiB) to the queue instance of `domain` + `descriptor`: `id`, `position`, `release_at_ms` per job; 429 `queue_full` stores nothing |
//! | `POST /v1/queues/lease` | the next released job (`wait_ms` long-poll, up to 60 s): `id`, `payload` (or `payload_base64`) as submitted, `token`, `attempt`, `lease_deadline_ms`; 204 when none |
//! | `POST /v1/queues/ack` | `{"token"}`: the job is done |
//! | `POST /v1/queues/nack` | `{"token", "retry_after_ms"}`: retry later (default: the queue's backoff; at most 30 days), or dead letters after the last attempt |
//! | `GET /v1/queues` | the declared queues and every instance's depth, in flight, dead letters, oldest age, release rate and time to drain |
//! | `POST /v1/queues/dead` | list an instance's dead letters (`offset`, `limit`) |
//! | `POST /v1/queues/dead/requeue`, `/v1/queues/dead/purge` | (admin) requeue or delete dead letters (`ids`, or all) |
//! | `POST /v1/queues/purge` | (admin) delete every job of an instance |
//! | `GET /livez` (also `/healthz`) | 200 while the process runs and answers HTTP: for a liveness probe |
//! | `GET /readyz` | 200 while the node can answer decisions, a store outage included (the failure policies decide); 503 while it starts or drains: for a readiness probe. `store`: the store's health; `rules`: what the node follows, its version, and whether it may be behind (`in_sync`, `problem`); `warnings`: what may go wrong (an evicting Redis allowed to run) |
//! | `GET /v1/store` | the store's health (`up`, `down`, `down_since_ms`, `consecutive_failures`, `failure`): 200 while it answers, 503 while it fails or is known down |
//! | `GET /metrics` | Prometheus text format |
//! | `GET /v1/stats` | the dashboard's figures (`?window=` seconds, 1–900, default 900; `?scope=node` for this node's own on a cluster): per rule, admitted and rejected per second, rejection ratio, heaviest keys; queues; the store; alerts |
//! | `GET /v1/stats/stream` | the same as Server-Sent Events: an event `stats` each second (`?window=`, default 1: the newest second) |
//! | `GET /dashboard` | the dashboard: a page (and its files under `/dashboard/`) that shows the figures of `/v1/stats` live (see [`dashboard`]); with `--dashboard-token`, the two routes above need it or an admin token |
//!
//! Request body (check, acquire):
//! `{"domain": "api", "descriptors": ["client=42", {"entries": [{"key": "user", "value": "7"}], "hits_addend": 2}], "hits_addend": 1}`.
//! A descriptor is `"k=v, k2=v2"` text or Envoy's JSON form. `hits_addend` 0 (or absent) means
//! 1, as in Envoy; `cost` sets the units exactly (0 only looks).
//!
//! Every error is JSON, `{"error": "...", "detail": "..."}`, with 400 (malformed), 401/403
//! (admin token), 404, 405, 413 (body over its route's bound, stated: 64 KiB, 16 MiB for rules,
//! 32 MiB for a queue submit), 415 (unknown content type), 429 or 503. Every 429 and 503
//! carries `Retry-After` (seconds, rounded up, at least 1).

mod api;
mod body;
mod dashboard;
mod doc;
mod error;
mod extract;
mod payload;
mod queues;
mod report;
mod rules;
mod stats;
mod verdict;
mod versions;

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
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
