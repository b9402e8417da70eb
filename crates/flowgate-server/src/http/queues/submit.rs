//! `POST /v1/queues/submit`: one job, or a batch of up to 10,000.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use flowgate::Descriptor;
use flowgate::queue::MAX_DELAY;
use flowgate::queue::{NewJob, QueueError};
use serde::Deserialize;
use utoipa::ToSchema;

use super::answers::{SubmitAnswer, SubmittedJob};
use super::{days, instance_of, now_us, queue_error};
use crate::http::body::DescriptorField;
use crate::http::doc::CredentialErrors;
use crate::http::doc::{BodyErrors, Unavailable};
use crate::http::error::ErrorBody;
use crate::http::extract::{Caller, JsonBody, RequestBody, Worker};
use crate::http::payload::{self, Form};
use crate::http::{ApiError, ErrorCode};
use crate::limits;
use crate::state::AppState;

type Shared = State<Arc<AppState>>;

/// The most jobs in one submit.
const MAX_BATCH: usize = 10_000;
/// The largest submit body (the other routes take at most 64 KiB).
const MAX_SUBMIT_BYTES: usize = 32 << 20;

/// One job of a batch.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::http) struct JobField {
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
pub(in crate::http) struct SubmitBody {
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
#[utoipa::path(post, path = "/v1/queues/submit", tag = "queues", security(("worker" = [])), request_body = SubmitBody,
    responses(CredentialErrors,
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
pub(in crate::http) async fn submit(
    State(state): Shared,
    _: Caller<Worker>,
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
