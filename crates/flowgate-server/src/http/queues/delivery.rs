//! A delivery: `POST /v1/queues/lease` (the next released job, a long poll), `/v1/queues/ack`
//! and `/v1/queues/nack` (by the lease's token).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use flowgate::queue::MAX_DELAY;
use flowgate::queue::Nacked;
use serde::Deserialize;
use serde::de::IgnoredAny;
use utoipa::ToSchema;

use super::answers::{Acked, Leased, NackAnswer};
use super::{days, instance_of, now_us, queue_error};
use crate::http::ApiError;
use crate::http::body::DescriptorField;
use crate::http::doc::CredentialErrors;
use crate::http::doc::{BodyErrors, Unavailable};
use crate::http::error::ErrorBody;
use crate::http::extract::{Caller, JsonBody, RequestBody, Worker};
use crate::state::AppState;

type Shared = State<Arc<AppState>>;

/// The longest a lease may wait (`wait_ms`).
const MAX_WAIT: Duration = Duration::from_secs(60);
/// A lease: the next released job of an instance.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::http) struct LeaseBody {
    /// The queue's domain.
    domain: String,
    /// The descriptor of the queue instance.
    descriptor: DescriptorField,
    /// How long to wait for a job (a long poll), at most 60,000.
    #[serde(default)]
    #[schema(maximum = 60_000)]
    wait_ms: u64,
}

impl RequestBody for LeaseBody {}

/// The next released job (200), or 204 when none came within `wait_ms`.
#[utoipa::path(post, path = "/v1/queues/lease", tag = "queues", security(("worker" = [])), request_body = LeaseBody,
    responses(CredentialErrors,
        (status = 200, description = "A job, as submitted, held until `lease_deadline_ms`.", body = Leased),
        (status = 204, description = "No job came within `wait_ms`."),
        (status = 404, description = "No declared queue matches (`unknown_queue`).", body = ErrorBody),
        BodyErrors,
        Unavailable,
    ),
)]
pub(in crate::http) async fn lease(
    State(state): Shared,
    _: Caller<Worker>,
    JsonBody(b): JsonBody<LeaseBody>,
) -> Result<Response, ApiError> {
    let descriptor = instance_of(b.descriptor)?;
    let wait = Duration::from_millis(b.wait_ms);
    if wait > MAX_WAIT {
        return Err(ApiError::bad_request(format!(
            "`wait_ms` {} is above the maximum of {}",
            b.wait_ms,
            MAX_WAIT.as_millis()
        )));
    }
    let got = state
        .queue
        .lease(&b.domain, &descriptor, wait)
        .await
        .map_err(|e| queue_error(&state, "lease", e))?;
    match got {
        Some(d) => {
            state.metrics.queue_op("lease", "ok");
            Ok(Json(Leased::of(&d)).into_response())
        }
        None => {
            state.metrics.queue_op("lease", "empty");
            Ok(StatusCode::NO_CONTENT.into_response())
        }
    }
}

/// An ack: a delivery done.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::http) struct AckBody {
    /// The delivery's token (the lease's `token`).
    token: String,
    /// (nack's, refused here naming where it belongs)
    #[serde(default)]
    #[schema(ignore)]
    retry_after_ms: Option<IgnoredAny>,
}

impl RequestBody for AckBody {}

/// A nack: a delivery to retry.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::http) struct NackBody {
    /// The delivery's token (the lease's `token`).
    token: String,
    /// Retry after this long (default: the queue's backoff), at most 30 days.
    #[serde(default)]
    #[schema(maximum = 2_592_000_000_u64)]
    retry_after_ms: Option<u64>,
}

impl RequestBody for NackBody {}

/// The refusals of a delivery's token.
#[derive(utoipa::IntoResponses)]
#[allow(
    dead_code,
    reason = "a description for the document: the route answers an ApiError"
)]
pub(in crate::http) enum TokenErrors {
    /// The token is not one this server gave (`bad_token`), or the body is malformed.
    #[response(status = 400)]
    Bad(ErrorBody),
    /// The delivery is no longer held by this token (`not_held`: acked, nacked, or its lease
    /// expired).
    #[response(status = 409)]
    NotHeld(ErrorBody),
    /// No declared queue is the token's (`unknown_queue`).
    #[response(status = 404)]
    Unknown(ErrorBody),
    /// The body is over 64 KiB.
    #[response(status = 413)]
    TooLarge(ErrorBody),
}

/// The job is done.
#[utoipa::path(post, path = "/v1/queues/ack", tag = "queues", security(("worker" = [])), request_body = AckBody,
    responses(CredentialErrors,
        (status = 200, description = "Done.", body = Acked),
        TokenErrors,
        Unavailable,
    ),
)]
pub(in crate::http) async fn ack(
    State(state): Shared,
    _: Caller<Worker>,
    JsonBody(b): JsonBody<AckBody>,
) -> Result<Json<Acked>, ApiError> {
    if b.retry_after_ms.is_some() {
        return Err(ApiError::bad_request(
            "`retry_after_ms` is for nack: an acked job is done",
        ));
    }
    state
        .queue
        .ack(&b.token)
        .await
        .map_err(|e| queue_error(&state, "ack", e))?;
    state.metrics.queue_op("ack", "ok");
    Ok(Json(Acked { acked: true }))
}

/// Retry the job later, or dead letters after its last attempt.
#[utoipa::path(post, path = "/v1/queues/nack", tag = "queues", security(("worker" = [])), request_body = NackBody,
    responses(CredentialErrors,
        (status = 200, description = "Retried later, or dead.", body = NackAnswer),
        TokenErrors,
        Unavailable,
    ),
)]
pub(in crate::http) async fn nack(
    State(state): Shared,
    _: Caller<Worker>,
    JsonBody(b): JsonBody<NackBody>,
) -> Result<Json<NackAnswer>, ApiError> {
    if let Some(after) = b.retry_after_ms
        && Duration::from_millis(after) > MAX_DELAY
    {
        return Err(ApiError::bad_request(format!(
            "`retry_after_ms` {after} is above the longest delay of {} ({} ms)",
            days(MAX_DELAY),
            MAX_DELAY.as_millis()
        )));
    }
    let out = state
        .queue
        .nack(&b.token, b.retry_after_ms.map(Duration::from_millis))
        .await
        .map_err(|e| queue_error(&state, "nack", e))?;
    state.metrics.queue_op("nack", "ok");
    Ok(Json(match out {
        Nacked::Retry { at } => NackAnswer::retry(at, now_us()),
        Nacked::Dead => NackAnswer::Dead,
    }))
}
