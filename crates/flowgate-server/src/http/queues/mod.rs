//! The queue endpoints: submit, lease, ack, nack, the queues' state, dead letters and purge.
//!
//! Bodies are JSON objects parsed by serde; an error names the field at fault
//! (`jobs[3].not_before_ms: invalid type: string "x", expected u64`). A queue is addressed by
//! `domain` and `descriptor` (`"biz=REFUND, channel=WPG"`, or Envoy's
//! `{"entries": [{"key": …, "value": …}]}`); a delivery by its `token`. A payload is stored and
//! answered byte-exact (see [`super::payload`]).

mod answers;

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use flowgate::Descriptor;
use flowgate::queue::{Nacked, NewJob, QueueError};
use flowgate_core::queue::MAX_DELAY;
use serde::Deserialize;
use serde::de::IgnoredAny;
use utoipa::ToSchema;

use self::answers::{
    Acked, DeadLetter, DeadLetters, InstanceAnswer, Leased, NackAnswer, Purged, QueueInfo,
    QueuesAnswer, Requeued, SubmitAnswer, SubmittedJob,
};
use super::body::DescriptorField;
use super::doc::{AdminErrors, BodyErrors, Unavailable};
use super::error::ErrorBody;
use super::extract::{Admin, JsonBody, RequestBody, Token};
use super::payload::{self, Form};
use super::{ApiError, ErrorCode};
use crate::limits;
use crate::state::AppState;

type Shared = State<Arc<AppState>>;

/// The longest a lease may wait (`wait_ms`).
const MAX_WAIT: Duration = Duration::from_secs(60);
/// The most jobs in one submit.
const MAX_BATCH: usize = 10_000;
/// The largest submit body (the other routes take at most 64 KiB).
const MAX_SUBMIT_BYTES: usize = 32 << 20;

/// The queue instance a body names: its descriptor, validated (a queue's descriptor takes no
/// `hits_addend`).
fn instance_of(d: DescriptorField) -> Result<Descriptor, ApiError> {
    if d.0.cost.is_some() {
        return Err(ApiError::bad_request(
            "`descriptor.hits_addend`: a queue's descriptor has no cost",
        ));
    }
    let probe = flowgate::Request::new("q", vec![d.0]);
    limits::validate(&probe).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(probe.descriptors.into_iter().next().unwrap_or_default())
}

/// One job of a batch.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct JobField {
    /// The payload: any JSON, stored and answered as its text exactly.
    #[serde(default)]
    #[schema(value_type = Option<serde_json::Value>)]
    payload: Option<Box<serde_json::value::RawValue>>,
    /// The payload as bytes, in base64 (instead of `payload`).
    #[serde(default)]
    #[schema(content_encoding = "base64")]
    payload_base64: Option<String>,
    /// A key: a second submit of the same key within the queue's `key_retention` is the same
    /// job (1 to 1024 bytes).
    #[serde(default)]
    key: Option<String>,
    /// Not released before this instant (Unix milliseconds, at most 30 days ahead).
    #[serde(default)]
    not_before_ms: Option<u64>,
}

/// A submit: one job (its fields at the top) or a batch (`jobs`, up to 10,000; a body up to
/// 32 MiB), to the queue instance of `domain` and `descriptor`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SubmitBody {
    /// The queue's domain.
    domain: String,
    /// The descriptor that picks the queue and its instance.
    descriptor: DescriptorField,
    /// One job's payload: any JSON, stored and answered as its text exactly.
    #[serde(default)]
    #[schema(value_type = Option<serde_json::Value>)]
    payload: Option<Box<serde_json::value::RawValue>>,
    /// One job's payload as bytes, in base64 (instead of `payload`).
    #[serde(default)]
    #[schema(content_encoding = "base64")]
    payload_base64: Option<String>,
    /// One job's key (1 to 1024 bytes).
    #[serde(default)]
    key: Option<String>,
    /// One job's earliest release (Unix milliseconds, at most 30 days ahead).
    #[serde(default)]
    not_before_ms: Option<u64>,
    /// A batch of jobs (instead of one job's fields), at most 10,000.
    #[serde(default)]
    #[schema(max_items = 10_000)]
    jobs: Option<Vec<JobField>>,
}

impl RequestBody for SubmitBody {
    const MAX_BYTES: usize = MAX_SUBMIT_BYTES;
}

/// A job as the store takes it, and the form its payload came in; `now_ms` bounds
/// `not_before_ms`.
fn new_job(j: JobField, at: &str, now_ms: u64) -> Result<(NewJob, Form), ApiError> {
    let (payload, form) = match (j.payload, j.payload_base64) {
        (Some(p), None) => (payload::from_json(&p), Form::Json),
        (None, Some(b)) => {
            let bytes = BASE64
                .decode(b.as_bytes())
                .map_err(|e| ApiError::bad_request(format!("`{at}payload_base64`: {e}")))?;
            (payload::from_bytes(&bytes), Form::Base64)
        }
        (None, None) => {
            return Err(ApiError::bad_request(format!(
                "missing `{at}payload` (any JSON) or `{at}payload_base64` (bytes)"
            )));
        }
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(format!(
                "`{at}payload` and `{at}payload_base64` are both given: send one"
            )));
        }
    };
    if let Some(k) = &j.key
        && (k.is_empty() || k.len() > limits::MAX_TEXT_BYTES)
    {
        return Err(ApiError::bad_request(format!(
            "`{at}key` must be 1 to {} bytes",
            limits::MAX_TEXT_BYTES
        )));
    }
    if let Some(t) = j.not_before_ms {
        let latest = now_ms.saturating_add(MAX_DELAY.as_millis() as u64);
        if t > latest {
            return Err(ApiError::bad_request(format!(
                "`{at}not_before_ms` {t} is more than the longest delay of {} after now: at most {latest} now",
                days(MAX_DELAY)
            )));
        }
    }
    let job = NewJob {
        payload,
        key: j.key,
        not_before: j.not_before_ms.map(|ms| ms.saturating_mul(1000)),
    };
    Ok((job, form))
}

/// A whole number of days, as text (`30 days`).
fn days(d: Duration) -> String {
    format!("{} days", d.as_secs() / 86_400)
}

/// A queue error as HTTP.
fn queue_error(state: &AppState, op: &'static str, e: QueueError) -> ApiError {
    let (status, code) = match &e {
        QueueError::UnknownQueue { .. } => (StatusCode::NOT_FOUND, ErrorCode::UnknownQueue),
        QueueError::PayloadTooLarge { .. } => {
            (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge)
        }
        QueueError::QueueFull { .. } => (StatusCode::TOO_MANY_REQUESTS, ErrorCode::QueueFull),
        QueueError::BadToken(_) => (StatusCode::BAD_REQUEST, ErrorCode::BadToken),
        QueueError::NotHeld { .. } => (StatusCode::CONFLICT, ErrorCode::NotHeld),
        QueueError::NotDead { .. } => (StatusCode::CONFLICT, ErrorCode::NotDead),
        QueueError::KeyConflict { .. } => (StatusCode::CONFLICT, ErrorCode::KeyConflict),
        QueueError::Invalid(_) => (StatusCode::BAD_REQUEST, ErrorCode::BadRequest),
        QueueError::Store(_) | _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::StoreUnavailable,
        ),
    };
    state.metrics.queue_op(op, code.as_str());
    ApiError::new(status, code, e.to_string())
}

/// The current time on this node, for `*_in_ms` fields.
fn now_us() -> u64 {
    flowgate_core::Clock::now(&flowgate_core::SystemClock::new())
}

/// A submit, read and validated.
struct Submit {
    domain: String,
    descriptor: Descriptor,
    jobs: Vec<(NewJob, Form)>,
    batch: bool,
}

/// A submit's queue instance and jobs, checked.
fn read_submit(b: SubmitBody) -> Result<Submit, ApiError> {
    let descriptor = instance_of(b.descriptor)?;
    let now_ms = now_us() / 1000;
    let single = JobField {
        payload: b.payload,
        payload_base64: b.payload_base64,
        key: b.key,
        not_before_ms: b.not_before_ms,
    };
    let has_single = single.payload.is_some()
        || single.payload_base64.is_some()
        || single.key.is_some()
        || single.not_before_ms.is_some();
    let (jobs, batch) = match (b.jobs, has_single) {
        (Some(_), true) => {
            return Err(ApiError::bad_request(
                "give one job (`payload`, `key`, `not_before_ms`) or a batch (`jobs`), not both",
            ));
        }
        (Some(list), false) => {
            if list.len() > MAX_BATCH {
                return Err(ApiError::bad_request(format!(
                    "`jobs` has {} jobs: at most {MAX_BATCH} in one submit",
                    list.len()
                )));
            }
            let jobs = list
                .into_iter()
                .enumerate()
                .map(|(i, j)| new_job(j, &format!("jobs[{i}]."), now_ms))
                .collect::<Result<Vec<_>, _>>()?;
            (jobs, true)
        }
        (None, _) => (vec![new_job(single, "", now_ms)?], false),
    };
    Ok(Submit {
        domain: b.domain,
        descriptor,
        jobs,
        batch,
    })
}

/// Submit one job (`payload` or `payload_base64`, `key`, `not_before_ms`) or a batch (`jobs`).
#[utoipa::path(post, path = "/v1/queues/submit", tag = "queues", request_body = SubmitBody,
    responses(
        (status = 200, description = "Stored (or, for a `key` known, the job already there).", body = SubmitAnswer),
        (status = 404, description = "No declared queue matches (`unknown_queue`).", body = ErrorBody),
        (status = 409, description = "A job's `key` is used by a job of another payload (`key_conflict`).", body = ErrorBody),
        (status = 429, description = "The queue is full (`queue_full`): nothing was stored.", body = ErrorBody, headers(
            ("Retry-After" = u64, description = "Seconds: the queue's spacing, at least 1."),
        )),
        BodyErrors,
        Unavailable,
    ),
)]
pub(super) async fn submit(
    State(state): Shared,
    JsonBody(body): JsonBody<SubmitBody>,
) -> Result<Json<SubmitAnswer>, ApiError> {
    // (a batch of 10,000 jobs is checked on a blocking thread, as its body was parsed)
    let read = if body.jobs.as_ref().is_some_and(|j| j.len() > 1_000) {
        tokio::task::spawn_blocking(move || read_submit(body))
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::Internal,
                    format!("the submit's checks failed: {e}"),
                )
            })?
    } else {
        read_submit(body)
    };
    let Submit {
        domain,
        descriptor,
        jobs,
        batch,
    } = read?;
    let (jobs, forms): (Vec<NewJob>, Vec<Form>) = jobs.into_iter().unzip();
    let out = state
        .queue
        .submit(&domain, &descriptor, jobs)
        .await
        .map_err(|e| submit_error(&state, &domain, &descriptor, batch, &forms, e))?;
    state.metrics.queue_op("submit", "ok");
    let now = now_us();
    let instance = state
        .queue
        .specs()
        .find(&domain, &descriptor)
        .map(|(_, i)| i)
        .unwrap_or_default();
    let mut jobs: Vec<SubmittedJob> = out.iter().map(|s| SubmittedJob::of(s, now)).collect();
    let answer = match jobs.pop() {
        Some(job) if !batch => SubmitAnswer::One { job, instance },
        last => {
            jobs.extend(last);
            SubmitAnswer::Batch { instance, jobs }
        }
    };
    Ok(Json(answer))
}

/// A submit's error as HTTP: a payload too large is named as the user sent it; a full queue
/// says to retry after the queue's spacing (the soonest a release may make room), at least 1 s.
fn submit_error(
    state: &AppState,
    domain: &str,
    descriptor: &Descriptor,
    batch: bool,
    forms: &[Form],
    e: QueueError,
) -> ApiError {
    match e {
        QueueError::PayloadTooLarge { index, bytes, max } => {
            let form = forms.get(index).copied().unwrap_or(Form::Json);
            let at = if batch {
                format!("jobs[{index}].")
            } else {
                String::new()
            };
            state
                .metrics
                .queue_op("submit", ErrorCode::PayloadTooLarge.as_str());
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::PayloadTooLarge,
                format!(
                    "`{at}{}` is {}, more than the queue's max_payload of {max} bytes",
                    form.field(),
                    form.describe(bytes)
                ),
            )
        }
        QueueError::QueueFull { .. } => {
            tracing::warn!(domain = %domain, %descriptor, error = %e, "queue full: submission refused");
            let spacing = state
                .queue
                .specs()
                .find(domain, descriptor)
                .map(|(spec, _)| Duration::from_micros(spec.spacing()));
            let err = queue_error(state, "submit", e);
            match spacing {
                Some(s) => err.retry_after(s),
                None => err,
            }
        }
        e => queue_error(state, "submit", e),
    }
}

/// A lease: the next released job of an instance.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LeaseBody {
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
#[utoipa::path(post, path = "/v1/queues/lease", tag = "queues", request_body = LeaseBody,
    responses(
        (status = 200, description = "A job, as submitted, held until `lease_deadline_ms`.", body = Leased),
        (status = 204, description = "No job came within `wait_ms`."),
        (status = 404, description = "No declared queue matches (`unknown_queue`).", body = ErrorBody),
        BodyErrors,
        Unavailable,
    ),
)]
pub(super) async fn lease(
    State(state): Shared,
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
pub(super) struct AckBody {
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
pub(super) struct NackBody {
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
#[allow(dead_code, reason = "a description for the document: the route answers an ApiError")]
pub(super) enum TokenErrors {
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
#[utoipa::path(post, path = "/v1/queues/ack", tag = "queues", request_body = AckBody,
    responses(
        (status = 200, description = "Done.", body = Acked),
        TokenErrors,
        Unavailable,
    ),
)]
pub(super) async fn ack(
    State(state): Shared,
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
#[utoipa::path(post, path = "/v1/queues/nack", tag = "queues", request_body = NackBody,
    responses(
        (status = 200, description = "Retried later, or dead.", body = NackAnswer),
        TokenErrors,
        Unavailable,
    ),
)]
pub(super) async fn nack(
    State(state): Shared,
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

/// The declared queues and every instance's depth, in flight, dead letters, oldest age, release
/// rate and time to drain.
#[utoipa::path(get, path = "/v1/queues", tag = "queues", responses(
    (status = 200, description = "The queues.", body = QueuesAnswer),
    Unavailable,
))]
pub(super) async fn list(State(state): Shared) -> Result<Response, ApiError> {
    let all = state
        .queue
        .instances()
        .await
        .map_err(|e| queue_error(&state, "list", e))?;
    let specs = state.queue.specs();
    let answer = QueuesAnswer {
        queues: specs.specs().iter().map(|s| QueueInfo::of(s)).collect(),
        instances: all.iter().map(InstanceAnswer::of).collect(),
    };
    Ok(Json(answer).into_response())
}

/// A dead letters' listing: the instance, and a page.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DeadBody {
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
#[utoipa::path(post, path = "/v1/queues/dead", tag = "queues", request_body = DeadBody,
    responses(
        (status = 200, description = "The dead letters.", body = DeadLetters),
        (status = 404, description = "No declared queue matches (`unknown_queue`).", body = ErrorBody),
        BodyErrors,
        Unavailable,
    ),
)]
pub(super) async fn dead(
    State(state): Shared,
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
pub(super) struct DeadIdsBody {
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
pub(super) struct InstanceBody {
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
#[allow(dead_code, reason = "a description for the document: the route answers an ApiError")]
pub(super) enum InstanceErrors {
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
#[utoipa::path(post, path = "/v1/queues/dead/requeue", tag = "queues", security(("admin" = [])),
    request_body = DeadIdsBody,
    responses(
        (status = 200, description = "Requeued.", body = Requeued),
        InstanceErrors,
        BodyErrors,
        AdminErrors,
        Unavailable,
    ),
)]
pub(super) async fn requeue(
    State(state): Shared,
    _: Token<Admin>,
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
#[utoipa::path(post, path = "/v1/queues/dead/purge", tag = "queues", security(("admin" = [])),
    request_body = DeadIdsBody,
    responses(
        (status = 200, description = "Deleted.", body = Purged),
        InstanceErrors,
        BodyErrors,
        AdminErrors,
        Unavailable,
    ),
)]
pub(super) async fn purge_dead(
    State(state): Shared,
    _: Token<Admin>,
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
#[utoipa::path(post, path = "/v1/queues/purge", tag = "queues", security(("admin" = [])),
    request_body = InstanceBody,
    responses(
        (status = 200, description = "Deleted.", body = Purged),
        (status = 404, description = "No declared queue matches (`unknown_queue`).", body = ErrorBody),
        BodyErrors,
        AdminErrors,
        Unavailable,
    ),
)]
pub(super) async fn purge(
    State(state): Shared,
    _: Token<Admin>,
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
