//! Dead letters: listing them, and (admin) requeueing or deleting them; and (admin) purging an
//! instance.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use flowgate::Descriptor;
use serde::Deserialize;
use serde::de::IgnoredAny;
use utoipa::ToSchema;

use super::answers::{DeadLetter, DeadLetters, Purged, Requeued};
use super::{instance_of, queue_error};
use crate::http::ApiError;
use crate::http::body::DescriptorField;
use crate::http::doc::{BodyErrors, CredentialErrors, Unavailable};
use crate::http::error::ErrorBody;
use crate::http::extract::{Admin, Caller, JsonBody, Reader, RequestBody};
use crate::state::AppState;

type Shared = State<Arc<AppState>>;

/// A dead letters' listing: the instance, and a page.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::http) struct DeadBody {
    /// The queue's domain.
    domain: String,
    /// The descriptor of the queue instance.
    descriptor: DescriptorField,
    /// Dead letters to skip, oldest first.
    #[serde(default)]
    offset: usize,
    /// How many to list (default 100, at most 1,000).
    #[serde(default)]
    limit: Option<usize>,
    /// (requeue's and purge's, refused here naming where it belongs)
    #[serde(default)]
    #[schema(ignore)]
    ids: Option<IgnoredAny>,
}

impl RequestBody for DeadBody {}

/// The most dead letters listed at once.
const MAX_DEAD_LIST: usize = 1_000;

/// An instance's dead letters, oldest first (`offset`, `limit` up to 1,000).
#[utoipa::path(post, path = "/v1/queues/dead", tag = "queues", security(("reader" = [])), request_body = DeadBody,
    responses(CredentialErrors,
        (status = 200, description = "The dead letters.", body = DeadLetters),
        (status = 404, description = "No declared queue matches (`unknown_queue`).", body = ErrorBody),
        BodyErrors,
        Unavailable,
    ),
)]
pub(in crate::http) async fn dead(
    State(state): Shared,
    _: Caller<Reader>,
    JsonBody(b): JsonBody<DeadBody>,
) -> Result<Response, ApiError> {
    if b.ids.is_some() {
        return Err(ApiError::bad_request("`ids` is for requeue and purge"));
    }
    let descriptor = instance_of(b.descriptor)?;
    let limit = b.limit.unwrap_or(100).min(MAX_DEAD_LIST);
    let list = state
        .queue
        .dead(&b.domain, &descriptor, b.offset, limit)
        .await
        .map_err(|e| queue_error(&state, "dead", e))?;
    let jobs = list.iter().map(DeadLetter::of).collect();
    Ok(Json(DeadLetters { jobs }).into_response())
}

/// Dead letters of an instance: those of `ids`, or all.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::http) struct DeadIdsBody {
    /// The queue's domain.
    domain: String,
    /// The descriptor of the queue instance.
    descriptor: DescriptorField,
    /// The dead letters (none: all).
    #[serde(default)]
    ids: Option<Vec<u64>>,
    /// (the listing's, refused here naming where they belong)
    #[serde(default)]
    #[schema(ignore)]
    offset: Option<IgnoredAny>,
    /// (the same)
    #[serde(default)]
    #[schema(ignore)]
    limit: Option<IgnoredAny>,
}

impl DeadIdsBody {
    /// The listing's fields are refused, naming where they belong.
    fn no_listing(&self) -> Result<(), ApiError> {
        if self.offset.is_some() || self.limit.is_some() {
            return Err(ApiError::bad_request(
                "`offset` and `limit` are for listing",
            ));
        }
        Ok(())
    }
}

impl RequestBody for DeadIdsBody {}

/// A queue instance.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::http) struct InstanceBody {
    /// The queue's domain.
    domain: String,
    /// The descriptor of the queue instance.
    descriptor: DescriptorField,
    /// (the dead letters' and the listing's, refused here naming where they belong)
    #[serde(default)]
    #[schema(ignore)]
    ids: Option<IgnoredAny>,
    /// (the same)
    #[serde(default)]
    #[schema(ignore)]
    offset: Option<IgnoredAny>,
    /// (the same)
    #[serde(default)]
    #[schema(ignore)]
    limit: Option<IgnoredAny>,
}

impl RequestBody for InstanceBody {}

/// The refusals of an admin operation on an instance.
#[derive(utoipa::IntoResponses)]
#[allow(
    dead_code,
    reason = "a description for the document: the route answers an ApiError"
)]
pub(in crate::http) enum InstanceErrors {
    /// No declared queue matches (`unknown_queue`).
    #[response(status = 404)]
    Unknown(ErrorBody),
    /// A job of `ids` is not a dead letter (`not_dead`).
    #[response(status = 409)]
    NotDead(ErrorBody),
}

/// Logs an admin operation's count, and records it.
fn done(state: &AppState, op: &'static str, domain: &str, descriptor: &Descriptor, n: u64) {
    state.metrics.queue_op(op, "ok");
    tracing::info!(op, domain = %domain, descriptor = %descriptor, jobs = n, "queue admin operation");
}

/// (Admin) Dead letters (`ids`, or all) back in line.
#[utoipa::path(post, path = "/v1/queues/dead/requeue", tag = "queues", security(("admin" = [])), request_body = DeadIdsBody,
    responses(CredentialErrors,
        (status = 200, description = "Requeued.", body = Requeued),
        InstanceErrors,
        BodyErrors,
        Unavailable,
    ),
)]
pub(in crate::http) async fn requeue(
    State(state): Shared,
    _: Caller<Admin>,
    JsonBody(b): JsonBody<DeadIdsBody>,
) -> Result<Json<Requeued>, ApiError> {
    b.no_listing()?;
    let descriptor = instance_of(b.descriptor)?;
    let n = state
        .queue
        .requeue_dead(&b.domain, &descriptor, b.ids.as_deref())
        .await
        .map_err(|e| queue_error(&state, "requeue", e))?;
    done(&state, "requeue", &b.domain, &descriptor, n);
    Ok(Json(Requeued { requeued: n }))
}

/// (Admin) Delete dead letters (`ids`, or all).
#[utoipa::path(post, path = "/v1/queues/dead/purge", tag = "queues", security(("admin" = [])), request_body = DeadIdsBody,
    responses(CredentialErrors,
        (status = 200, description = "Deleted.", body = Purged),
        InstanceErrors,
        BodyErrors,
        Unavailable,
    ),
)]
pub(in crate::http) async fn purge_dead(
    State(state): Shared,
    _: Caller<Admin>,
    JsonBody(b): JsonBody<DeadIdsBody>,
) -> Result<Json<Purged>, ApiError> {
    b.no_listing()?;
    let descriptor = instance_of(b.descriptor)?;
    let n = state
        .queue
        .purge_dead(&b.domain, &descriptor, b.ids.as_deref())
        .await
        .map_err(|e| queue_error(&state, "purge_dead", e))?;
    done(&state, "purge_dead", &b.domain, &descriptor, n);
    Ok(Json(Purged { purged: n }))
}

/// (Admin) Delete every job of an instance.
#[utoipa::path(post, path = "/v1/queues/purge", tag = "queues", security(("admin" = [])), request_body = InstanceBody,
    responses(CredentialErrors,
        (status = 200, description = "Deleted.", body = Purged),
        (status = 404, description = "No declared queue matches (`unknown_queue`).", body = ErrorBody),
        BodyErrors,
        Unavailable,
    ),
)]
pub(in crate::http) async fn purge(
    State(state): Shared,
    _: Caller<Admin>,
    JsonBody(b): JsonBody<InstanceBody>,
) -> Result<Json<Purged>, ApiError> {
    if b.offset.is_some() || b.limit.is_some() {
        return Err(ApiError::bad_request(
            "`offset` and `limit` are for listing",
        ));
    }
    if b.ids.is_some() {
        return Err(ApiError::bad_request(
            "`ids` is for the dead letters: a purge deletes every job of the instance",
        ));
    }
    let descriptor = instance_of(b.descriptor)?;
    let n = state
        .queue
        .purge(&b.domain, &descriptor)
        .await
        .map_err(|e| queue_error(&state, "purge", e))?;
    done(&state, "purge", &b.domain, &descriptor, n);
    Ok(Json(Purged { purged: n }))
}
