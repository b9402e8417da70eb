//! The decision routes (`POST /v1/check`, `/v1/acquire`, `/v1/release`) and the node's health
//! and figures for machines (`GET /livez` and `/healthz`, `/readyz`, `/v1/store`, `/metrics`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use flowgate::{Request, Verdict};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::body::DescriptorField;
use super::doc::{BodyErrors, Unavailable};
use super::doc::{CredentialErrors, DecideErrors};
use super::error::{DEFAULT_RETRY_AFTER, retry_after_secs};
use super::extract::{Caller, Decide, JsonBody, Reader, RequestBody};
use super::verdict::VerdictAnswer;
use super::{ApiError, ErrorCode};
use crate::limits;
use crate::probes::{Phase, StoreView};
use crate::state::{Api, AppState};

type Shared = State<Arc<AppState>>;

/// A check: the request to decide.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckBody {
    /// The domain of the rules (at most 1024 bytes).
    domain: String,
    /// The request's descriptors, each `"k=v, k2=v2"` text or Envoy's object (at most 64).
    descriptors: Vec<DescriptorField>,
    /// Envoy's request cost: 0 or none means 1.
    #[serde(default)]
    hits_addend: Option<u64>,
    /// The cost, exactly (0 only looks); over `hits_addend`.
    #[serde(default)]
    cost: Option<u64>,
    /// (acquire's, refused here naming where it belongs)
    #[serde(default)]
    #[schema(ignore)]
    hold: Option<IgnoredAny>,
}

impl RequestBody for CheckBody {}

/// An acquire: a check that, in `delay` mode, may hold its answer until the slot reserved.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AcquireBody {
    /// The domain of the rules (at most 1024 bytes).
    domain: String,
    /// The request's descriptors, each `"k=v, k2=v2"` text or Envoy's object (at most 64).
    descriptors: Vec<DescriptorField>,
    /// Envoy's request cost: 0 or none means 1.
    #[serde(default)]
    hits_addend: Option<u64>,
    /// The cost, exactly (0 only looks); over `hits_addend`.
    #[serde(default)]
    cost: Option<u64>,
    /// Answer only once the reserved slot comes, rather than with its `wait_ms`.
    #[serde(default)]
    hold: Option<bool>,
}

impl RequestBody for AcquireBody {}

/// A request from a body's parts, validated.
pub(super) fn request(
    domain: String,
    descriptors: Vec<DescriptorField>,
    hits_addend: Option<u64>,
    cost: Option<u64>,
) -> Result<Request, ApiError> {
    let req = Request {
        domain,
        descriptors: descriptors.into_iter().map(|d| d.0).collect(),
        cost: limits::check_cost(hits_addend, cost),
    };
    limits::validate(&req).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(req)
}

/// The verdict's status and headers: 200 or 429, the `RateLimit-*` headers, OpenAI's token
/// headers when `openai` ([`super::openai`]), and, on 429, `Retry-After`.
pub(super) fn verdict_head(v: &Verdict, openai: bool) -> (StatusCode, HeaderMap) {
    let status = if v.allowed {
        StatusCode::OK
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    // Room for every header the answer ends with (the three `RateLimit-*`, `Retry-After`,
    // `Server-Timing`, `content-type`, `content-length`, `x-content-type-options`), so that none
    // grows the map.
    let mut headers = HeaderMap::with_capacity(if openai { 12 } else { 9 });
    for (name, value) in v.headers() {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    if openai {
        super::openai::insert(v, &mut headers);
    }
    if !v.allowed {
        // Every 429 says when to retry, at least 1 s ahead: a rejection with no known retry
        // time (a store failure decided closed, a concurrency limit) or one due within the
        // second would otherwise invite an immediate retry.
        let secs = v.retry_after().map_or(1, retry_after_secs);
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    (status, headers)
}

/// The verdict as HTTP: [`verdict_head`], how long it took to decide (`Server-Timing`), and the
/// verdict's answer.
fn verdict_response(v: &Verdict, openai: bool, decided_in: std::time::Duration) -> Response {
    let (status, mut headers) = verdict_head(v, openai);
    headers.insert(SERVER_TIMING, server_timing(decided_in));
    (status, headers, Json(VerdictAnswer::of(v))).into_response()
}

/// Decides `req`, counted as invalid when it could not be read; holds the answer until the
/// slot when `hold`.
async fn decide(
    state: &AppState,
    req: Result<(Request, bool), ApiError>,
) -> Result<Response, ApiError> {
    let (req, hold) = req.inspect_err(|_| state.invalid(Api::Http))?;
    let started = tokio::time::Instant::now();
    let verdict = state.decide(Api::Http, &req).await;
    let decided_in = started.elapsed();
    if hold && verdict.allowed && !verdict.wait.is_zero() {
        tokio::time::sleep(verdict.wait).await;
    }
    Ok(verdict_response(&verdict, state.openai_headers, decided_in))
}

/// `Server-Timing` (W3C): how long the decision took (`decide;dur=` in milliseconds, to the
/// microsecond), the store's round trip included and the body's reading and a `hold` not. The
/// Java client pipelines checks only behind answers decided in microseconds (docs/clients.md).
const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

fn server_timing(took: std::time::Duration) -> HeaderValue {
    const PREFIX: &[u8] = b"decide;dur=";
    let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
    let mut ms = itoa::Buffer::new();
    let ms = ms.format(us / 1000).as_bytes();
    let frac = us % 1000;
    // Written in place, without formatting machinery: this is on every decision's path.
    let mut buf = [0u8; PREFIX.len() + 20 + 4];
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut at = PREFIX.len();
    buf[at..at + ms.len()].copy_from_slice(ms);
    at += ms.len();
    buf[at..at + 4].copy_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
    at += 4;
    HeaderValue::from_bytes(&buf[..at]).unwrap_or_else(|_| HeaderValue::from_static("decide"))
}

/// Decide a request: 200 when admitted, 429 when refused.
#[utoipa::path(
    post,
    path = "/v1/check",
    tag = "decisions",
    security(("decide" = [])), request_body = CheckBody,
    responses(DecideErrors,
        (status = 200, description = "Admitted.", body = VerdictAnswer, headers(
            ("RateLimit-Limit" = Option<u64>, description = "The binding limit's units."),
            ("RateLimit-Remaining" = Option<u64>, description = "Its units left."),
            ("RateLimit-Reset" = Option<u64>, description = "Seconds until it resets, rounded up."),
            ("Server-Timing" = String, description = "`decide;dur=` the decision's time in milliseconds."),
        )),
        (status = 429, description = "Refused: over a limit, or by a circuit breaker (`reason`).", body = VerdictAnswer, headers(
            ("Retry-After" = u64, description = "Seconds, rounded up, at least 1."),
            ("Server-Timing" = String, description = "`decide;dur=` the decision's time in milliseconds."),
        )),
        BodyErrors,
    )
)]
pub(super) async fn check(
    State(state): Shared,
    _: Caller<Decide>,
    body: Result<JsonBody<CheckBody>, ApiError>,
) -> Result<Response, ApiError> {
    let req = body.and_then(|JsonBody(b)| {
        if b.hold.is_some() {
            return Err(ApiError::bad_request(
                "unknown field `hold`: only /v1/acquire holds its answer",
            ));
        }
        Ok((
            request(b.domain, b.descriptors, b.hits_addend, b.cost)?,
            false,
        ))
    });
    decide(&state, req).await
}

/// As check; in `delay` mode the answer carries the `wait_ms` before the reserved slot (or, with
/// `"hold": true`, is sent after it); 429 when the wait would exceed `max_wait`.
#[utoipa::path(
    post,
    path = "/v1/acquire",
    tag = "decisions",
    security(("decide" = [])), request_body = AcquireBody,
    responses(DecideErrors,
        (status = 200, description = "Admitted (in `delay` mode, after `wait_ms`).", body = VerdictAnswer, headers(
            ("RateLimit-Limit" = Option<u64>, description = "The binding limit's units."),
            ("RateLimit-Remaining" = Option<u64>, description = "Its units left."),
            ("RateLimit-Reset" = Option<u64>, description = "Seconds until it resets, rounded up."),
            ("Server-Timing" = String, description = "`decide;dur=` the decision's time in milliseconds."),
        )),
        (status = 429, description = "Refused.", body = VerdictAnswer, headers(
            ("Retry-After" = u64, description = "Seconds, rounded up, at least 1."),
            ("Server-Timing" = String, description = "`decide;dur=` the decision's time in milliseconds."),
        )),
        BodyErrors,
    )
)]
pub(super) async fn acquire(
    State(state): Shared,
    _: Caller<Decide>,
    body: Result<JsonBody<AcquireBody>, ApiError>,
) -> Result<Response, ApiError> {
    let req = body.and_then(|JsonBody(b)| {
        Ok((
            request(b.domain, b.descriptors, b.hits_addend, b.cost)?,
            b.hold.unwrap_or(false),
        ))
    });
    decide(&state, req).await
}

/// A release: a concurrency lease given back.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReleaseBody {
    /// The domain of the request that took the lease.
    domain: String,
    /// The descriptor that took it.
    descriptor: DescriptorField,
    /// The lease (a check's `leases[].lease`).
    lease: u64,
}

impl RequestBody for ReleaseBody {}

/// The answer to a release.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Released {
    /// Whether the lease was held (false: already released, or expired).
    released: bool,
}

/// Release a concurrency lease.
#[utoipa::path(
    post,
    path = "/v1/release",
    tag = "decisions",
    security(("decide" = [])), request_body = ReleaseBody,
    responses(CredentialErrors,
        (status = 200, description = "Released, or nothing to release.", body = Released),
        BodyErrors,
        Unavailable,
    )
)]
pub(super) async fn release(
    State(state): Shared,
    _: Caller<Decide>,
    JsonBody(b): JsonBody<ReleaseBody>,
) -> Result<Json<Released>, ApiError> {
    let probe = Request::new(b.domain, vec![b.descriptor.0]);
    limits::validate(&probe).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let released = state
        .limiter
        .release(&probe.domain, &probe.descriptors[0], b.lease)
        .await
        .map_err(|e| ApiError::store("POST /v1/release", &e))?;
    Ok(Json(Released { released }))
}

/// The liveness answer.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Live {
    /// Always `ok`.
    #[schema(value_type = String, pattern = "^ok$")]
    status: &'static str,
}

async fn live() -> Json<Live> {
    Json(Live { status: "ok" })
}

/// 200 while the process runs and answers HTTP: the liveness probe.
#[utoipa::path(get, path = "/livez", tag = "probes",
    security(()), responses((status = 200, description = "The process runs.", body = Live)))]
pub(super) async fn livez() -> Json<Live> {
    live().await
}

/// The same as `/livez`.
#[utoipa::path(get, path = "/healthz", tag = "probes",
    security(()), responses((status = 200, description = "The process runs.", body = Live)))]
pub(super) async fn healthz() -> Json<Live> {
    live().await
}

/// What the node's rules follow, and whether it may be behind.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RulesState<'a> {
    /// `files` or `redis`.
    follows: &'static str,
    /// The version in force.
    version: u64,
    /// Whether the node is on the version in force (false: see `problem`).
    in_sync: bool,
    /// Why the node may be behind; `null` when in sync.
    problem: Option<&'a str>,
}

/// The readiness answer while the node serves.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Ready<'a> {
    /// Always `ready`.
    #[schema(value_type = String, pattern = "^ready$")]
    status: &'static str,
    /// The store's health (its outage does not make the node unready).
    store: StoreView,
    /// The rules.
    rules: RulesState<'a>,
    /// What may go wrong (an evicting Redis allowed by `--redis-allow-eviction`).
    warnings: Vec<String>,
}

/// The readiness answer while the node starts or drains.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct NotReady<'a> {
    /// `not_ready`.
    error: ErrorCode,
    /// Starting or draining.
    detail: &'static str,
    /// The store's health.
    store: StoreView,
    /// The rules.
    rules: RulesState<'a>,
}

/// 200 while the node can answer decisions, a store outage included (the failure policies
/// decide); 503 while it starts or drains: the readiness probe.
#[utoipa::path(get, path = "/readyz", tag = "probes", security(()), responses(
    (status = 200, description = "Ready.", body = Ready),
    (status = 503, description = "Starting or draining.", body = NotReady, headers(
        ("Retry-After" = u64, description = "Seconds."),
    )),
))]
pub(super) async fn readyz(State(state): Shared) -> Response {
    let info = state.rules.info();
    let rules = RulesState {
        follows: info.follows(),
        version: info.version,
        in_sync: info.problem().is_none(),
        problem: info.problem(),
    };
    let store = crate::probes::store_view(state.limiter.store());
    let detail = match state.lifecycle.phase() {
        Phase::Serving => {
            let warnings = state.eviction.warning().into_iter().collect();
            return Json(Ready {
                status: "ready",
                store,
                rules,
                warnings,
            })
            .into_response();
        }
        Phase::Starting => "starting: the node is not serving yet",
        Phase::Draining => "draining: the node is shutting down",
    };
    unavailable(NotReady {
        error: ErrorCode::NotReady,
        detail,
        store,
        rules,
    })
}

/// A 503 with `body` and `Retry-After`.
fn unavailable(body: impl Serialize) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(
            header::RETRY_AFTER,
            HeaderValue::from(retry_after_secs(DEFAULT_RETRY_AFTER)),
        )],
        Json(body),
    )
        .into_response()
}

/// The store's health: 200 while it answers (a `PING` within the decisions' deadline, unless it
/// is known down), 503 while it fails or is known down (decisions then follow the rules'
/// failure policies).
#[utoipa::path(get, path = "/v1/store", tag = "probes", security(()), responses(
    (status = 200, description = "The store answers.", body = StoreView),
    (status = 503, description = "The store fails or is known down.", body = StoreView, headers(
        ("Retry-After" = u64, description = "Seconds."),
    )),
))]
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
    unavailable(view)
}

/// The metrics, in Prometheus's OpenMetrics text format.
#[utoipa::path(get, path = "/metrics", tag = "probes", security(("reader" = [])), responses(CredentialErrors,
    (status = 200, description = "OpenMetrics text.", body = String,
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8"),
))]
pub(super) async fn metrics(State(state): Shared, _: Caller<Reader>) -> Response {
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
    state.metrics.reservations.set(&state.reserve.outstanding());
    state
        .metrics
        .queue_degraded
        .set(i64::from(state.queue.store_failing()));
    state
        .metrics
        .charges
        .refresh(flowgate::store::Store::now(state.limiter.store()));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::server_timing;

    #[test]
    fn server_timing_is_milliseconds_to_the_microsecond() {
        let cases = [
            (Duration::ZERO, "decide;dur=0.000"),
            (Duration::from_nanos(12_999), "decide;dur=0.012"),
            (Duration::from_micros(1_234), "decide;dur=1.234"),
            (Duration::from_millis(1_500), "decide;dur=1500.000"),
            (Duration::MAX, "decide;dur=18446744073709551.615"),
        ];
        for (took, want) in cases {
            assert_eq!(server_timing(took).to_str().unwrap(), want);
        }
    }
}
