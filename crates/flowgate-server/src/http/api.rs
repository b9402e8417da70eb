//! The HTTP handlers and their JSON.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use flowgate::{Request, Verdict};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use super::body::{self, DescriptorField};
use super::error::{DEFAULT_RETRY_AFTER, retry_after_secs};
use crate::limits;
use crate::state::{Api, AppState};

type Shared = State<Arc<AppState>>;

/// The body of a route that takes at most [`limits::MAX_BODY_BYTES`] (64 KiB).
pub(super) fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body_bytes_within(body, limits::MAX_BODY_BYTES)
}

/// The body of a route that takes at most `max` bytes (its `DefaultBodyLimit`): a body over it
/// is a 413 naming `max`.
pub(super) fn body_bytes_within(
    body: Result<Bytes, BytesRejection>,
    max: usize,
) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        let status = e.status();
        let kind = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "payload_too_large"
        } else {
            "bad_request"
        };
        ApiError::new(
            status,
            kind,
            format!(
                "{} (the largest body of this route is {})",
                e.body_text(),
                size(max)
            ),
        )
    })
}

/// A size in bytes, also in KiB or MiB when it is a whole number of them.
fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB ({b} bytes)", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB ({b} bytes)", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// A check or acquire body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckBody {
    domain: String,
    descriptors: Vec<DescriptorField>,
    /// Envoy's request cost: 0 or none means 1.
    #[serde(default)]
    hits_addend: Option<u64>,
    /// The cost, exactly (0 only looks).
    #[serde(default)]
    cost: Option<u64>,
    /// (acquire) Whether to answer only once the reserved slot comes.
    #[serde(default)]
    hold: Option<bool>,
}

/// A check or acquire body: the request (validated), and whether to hold the answer until the
/// slot.
fn parse_check(bytes: &[u8], allow_hold: bool) -> Result<(Request, bool), ApiError> {
    let b: CheckBody = body::parse(bytes)?;
    if b.hold.is_some() && !allow_hold {
        return Err(ApiError::bad_request(
            "unknown field `hold`: only /v1/acquire holds its answer",
        ));
    }
    let req = Request {
        domain: b.domain,
        descriptors: b.descriptors.into_iter().map(|d| d.0).collect(),
        cost: b
            .cost
            .unwrap_or_else(|| limits::request_cost(b.hits_addend)),
    };
    limits::validate(&req).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok((req, b.hold.unwrap_or(false)))
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

fn verdict_json(v: &Verdict) -> Value {
    let statuses: Vec<Value> = v
        .statuses
        .iter()
        .map(|s| {
            let d = &s.decision;
            let limited = s.is_limited();
            let rule = s.rule.as_ref();
            json!({
                "code": if s.over_limit() { "OVER_LIMIT" } else { "OK" },
                "rule": rule.map(|r| r.name.as_str()),
                "shadow": rule.is_some_and(|r| r.shadow),
                "quota_mode": s.quota,
                "over_limit": !d.allowed,
                "limit": limited.then_some(d.limit),
                "quota": s.limit.as_ref().map(|l| l.quota().to_string()),
                "remaining": limited.then_some(d.remaining),
                "reset_after_ms": limited.then(|| ms(d.reset_after)),
                "retry_after_ms": d.retry_after.map(ms),
                "wait_ms": ms(d.wait),
                "lease": d.lease,
                "error": s.error.as_ref().map(|e| e.to_string()),
                "breaker": s.breaker.as_ref().map(|b| b.name.as_str()),
                "circuit_open": s.breaker.as_ref().is_some_and(|b| b.open),
            })
        })
        .collect();
    let leases: Vec<Value> = v
        .statuses
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            s.decision
                .lease
                .map(|l| json!({"descriptor": i, "lease": l}))
        })
        .collect();
    // Half-open breakers' probe leases, to send back with the call's report.
    let probes: Vec<Value> = v
        .statuses
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let b = s.breaker.as_ref()?;
            b.probe
                .map(|p| json!({"descriptor": i, "breaker": b.name, "probe": p}))
        })
        .collect();
    let code = match (v.allowed, v.circuit_open()) {
        (true, _) => "OK",
        (false, Some(_)) => "circuit_open",
        (false, None) => "OVER_LIMIT",
    };
    let mut out = json!({
        "allowed": v.allowed,
        "code": code,
        "wait_ms": ms(v.wait),
        "retry_after_ms": v.retry_after().map(ms),
        "leases": leases,
        "statuses": statuses,
    });
    if !probes.is_empty() {
        out["probes"] = json!(probes);
    }
    if let Some(b) = v.circuit_open() {
        out["breaker"] = json!({"domain": b.domain, "name": b.name, "key": b.key});
    }
    out
}

fn verdict_response(v: &Verdict) -> Response {
    let status = if v.allowed {
        StatusCode::OK
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    let mut headers = HeaderMap::new();
    for (name, value) in v.headers() {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    if !v.allowed {
        // Every 429 says when to retry, at least 1 s ahead: a rejection with no known retry
        // time (a store failure decided closed, a concurrency limit) or one due within the
        // second would otherwise invite an immediate retry.
        let secs = v.retry_after().map_or(1, retry_after_secs);
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    (status, headers, Json(verdict_json(v))).into_response()
}

async fn decide(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    allow_hold: bool,
) -> Result<Response, ApiError> {
    let parsed = body_bytes(body).and_then(|b| parse_check(&b, allow_hold));
    let (req, hold) = match parsed {
        Ok(p) => p,
        Err(e) => {
            state.invalid(Api::Http);
            return Err(e);
        }
    };
    let verdict = state.decide(Api::Http, &req).await;
    if hold && verdict.allowed && !verdict.wait.is_zero() {
        tokio::time::sleep(verdict.wait).await;
    }
    Ok(verdict_response(&verdict))
}

/// `POST /v1/check`.
pub(super) async fn check(
    State(state): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    decide(&state, body, false).await
}

/// `POST /v1/acquire`.
pub(super) async fn acquire(
    State(state): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    decide(&state, body, true).await
}

/// A release body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {
    domain: String,
    descriptor: DescriptorField,
    lease: u64,
}

/// `POST /v1/release`.
pub(super) async fn release(
    State(state): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let b: ReleaseBody = body::parse(&body_bytes(body)?)?;
    let probe = Request::new(b.domain, vec![b.descriptor.0]);
    limits::validate(&probe).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let lease = b.lease;
    let released = state
        .limiter
        .release(&probe.domain, &probe.descriptors[0], lease)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                e.to_string(),
            )
        })?;
    Ok(Json(json!({ "released": released })).into_response())
}

/// The name of the admin token presented (`Authorization: Bearer <token>`).
pub(super) fn authorized(state: &AppState, headers: &HeaderMap) -> Result<String, ApiError> {
    if state.admin.is_empty() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "admin_disabled",
            "the admin API is disabled: start the server with --admin-token (FLOWGATE_ADMIN_TOKEN) or --admin-tokens-file (FLOWGATE_ADMIN_TOKENS_FILE)",
        ));
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    state
        .admin
        .authenticate(given)
        .map(str::to_owned)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing or wrong admin token: send `Authorization: Bearer <token>`",
            )
        })
}

/// `GET /livez` (and `GET /healthz`): 200 while the process runs and answers HTTP.
pub(super) async fn livez() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

/// `GET /readyz`: 200 while the node can answer decisions, the store down included (the rules'
/// failure policies then decide); 503 while it starts or drains. The body also says what the
/// rules follow, their version and whether the node may be behind (`rules`), the store's health
/// (`store`), and what may go wrong (`warnings`).
pub(super) async fn readyz(State(state): Shared) -> Response {
    let info = state.rules.info();
    let rules = json!({
        "follows": info.follows(),
        "version": info.version,
        "in_sync": info.problem().is_none(),
        "problem": info.problem(),
    });
    let warnings: Vec<String> = state.eviction.warning().into_iter().collect();
    let store = crate::probes::store_view(state.limiter.store());
    let why = match state.lifecycle.phase() {
        crate::probes::Phase::Serving => {
            return Json(json!({
                "status": "ready",
                "store": store,
                "rules": rules,
                "warnings": warnings,
            }))
            .into_response();
        }
        crate::probes::Phase::Starting => "starting: the node is not serving yet",
        crate::probes::Phase::Draining => "draining: the node is shutting down",
    };
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(
            header::RETRY_AFTER,
            HeaderValue::from(retry_after_secs(DEFAULT_RETRY_AFTER)),
        )],
        Json(json!({
            "error": "not_ready",
            "detail": why,
            "store": store,
            "rules": rules,
        })),
    )
        .into_response()
}

/// `GET /v1/store`: the store's health; 200 while it answers (a `PING` within the decisions'
/// deadline, unless it is known down), 503 while it fails or is known down (decisions then
/// follow the rules' failure policies).
pub(super) async fn store(State(state): Shared) -> Response {
    // The PING is counted as a call: it clears the degraded flag, or adds a failure.
    let pinged = state.limiter.store().ready().await;
    let mut view = crate::probes::refresh(&state);
    if let Err(e) = pinged {
        view.up = false;
        view.failure = Some(crate::probes::failure_kind(&e));
    }
    if view.up {
        return Json(view).into_response();
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(
            header::RETRY_AFTER,
            HeaderValue::from(retry_after_secs(DEFAULT_RETRY_AFTER)),
        )],
        Json(view),
    )
        .into_response()
}

/// `GET /metrics`.
pub(super) async fn metrics(State(state): Shared) -> Response {
    crate::probes::refresh(&state);
    if let Some(stats) = state.limiter.store().memory_stats() {
        state.metrics.memory_store(stats);
    }
    state
        .metrics
        .breakers
        .open_instances(&state.limiter.breakers().views().1);
    state
        .metrics
        .breakers
        .shared(state.limiter.breakers().shared());
    state
        .metrics
        .breakers
        .unsent(state.limiter.breakers().unsent());
    state
        .metrics
        .breakers
        .adaptive_unsent(state.limiter.adaptive().unsent());
    state
        .metrics
        .queue_degraded
        .set(i64::from(state.queue.store_failing()));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}
