//! The queue endpoints: submit, lease, ack, nack, the queues' state, dead letters and purge.
//!
//! Bodies are JSON objects parsed by serde; an error names the field at fault
//! (`jobs[3].not_before_ms: invalid type: string "x", expected u64`). A queue is addressed by
//! `domain` and `descriptor` (`"biz=REFUND, channel=WPG"`, or Envoy's
//! `{"entries": [{"key": …, "value": …}]}`); a delivery by its `token`. A payload is stored and
//! answered byte-exact (see [`super::payload`]).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use flowgate::Descriptor;
use flowgate::queue::MAX_DELAY;
use flowgate::queue::{
    Delivery, InstanceInfo, Nacked, NewJob, QueueError, instance_descriptor, instance_names,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::ApiError;
use super::api::{authorized, body_bytes, body_bytes_within};
use super::body::{self, DescriptorField};
use super::payload::{self, Form, WithPayload};
use crate::limits;
use crate::state::AppState;

type Shared = State<Arc<AppState>>;

/// The longest a lease may wait (`wait_ms`).
pub(super) const MAX_WAIT: Duration = Duration::from_secs(60);
/// The most jobs in one submit.
pub(super) const MAX_BATCH: usize = 10_000;
/// The largest submit body (the other routes take at most 64 KiB).
pub(super) const MAX_SUBMIT_BYTES: usize = 32 << 20;

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobField {
    #[serde(default)]
    payload: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    payload_base64: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    not_before_ms: Option<u64>,
}

/// A submit: one job (its fields at the top) or a batch (`jobs`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitBody {
    domain: String,
    descriptor: DescriptorField,
    #[serde(default)]
    payload: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    payload_base64: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    not_before_ms: Option<u64>,
    #[serde(default)]
    jobs: Option<Vec<JobField>>,
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

fn ms(us: u64) -> u64 {
    us / 1000
}

/// A queue error as HTTP.
fn queue_error(state: &AppState, op: &'static str, e: QueueError) -> ApiError {
    let (status, kind) = match &e {
        QueueError::UnknownQueue { .. } => (StatusCode::NOT_FOUND, "unknown_queue"),
        QueueError::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
        QueueError::QueueFull { .. } => (StatusCode::TOO_MANY_REQUESTS, "queue_full"),
        QueueError::BadToken(_) => (StatusCode::BAD_REQUEST, "bad_token"),
        QueueError::NotHeld { .. } => (StatusCode::CONFLICT, "not_held"),
        QueueError::NotDead { .. } => (StatusCode::CONFLICT, "not_dead"),
        QueueError::KeyConflict { .. } => (StatusCode::CONFLICT, "key_conflict"),
        QueueError::Invalid(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        QueueError::Store(_) | _ => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
    };
    state.metrics.queue_op(op, kind);
    ApiError::new(status, kind, e.to_string())
}

/// The current time on this node, for `*_in_ms` fields.
fn now_us() -> u64 {
    flowgate::clock::Clock::now(&flowgate::clock::SystemClock::new())
}

/// A submit body above this many bytes is parsed on a blocking thread.
const BLOCKING_PARSE_ABOVE: usize = 1 << 20;

/// A submit, read and validated.
struct Submit {
    domain: String,
    descriptor: Descriptor,
    jobs: Vec<(NewJob, Form)>,
    batch: bool,
}

/// Reads a submit's body: its queue instance and its jobs.
fn read_submit(bytes: &[u8]) -> Result<Submit, ApiError> {
    let b: SubmitBody = body::parse(bytes)?;
    let descriptor = instance_of(b.descriptor)?;
    let now_ms = ms(now_us());
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

/// `POST /v1/queues/submit`: one job (`payload`, `key`, `not_before_ms`) or a batch (`jobs`).
pub(super) async fn submit(
    State(state): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = body_bytes_within(body, MAX_SUBMIT_BYTES)?;
    // A big batch is parsed on a blocking thread: its megabytes of JSON must not hold up the
    // decisions the same workers serve.
    let read = if bytes.len() > BLOCKING_PARSE_ABOVE {
        tokio::task::spawn_blocking(move || read_submit(&bytes))
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    format!("the submit's parser failed: {e}"),
                )
            })?
    } else {
        read_submit(&bytes)
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
    let mut list: Vec<Value> = out
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "duplicate": s.duplicate,
                "state": s.state.as_str(),
                "position": s.position,
                "release_at_ms": s.release_at.map(ms),
                "release_in_ms": s.release_at.map(|t| ms(t.saturating_sub(now))),
            })
        })
        .collect();
    let body = match list.pop() {
        Some(Value::Object(mut one)) if !batch => {
            one.insert("instance".into(), json!(instance));
            Value::Object(one)
        }
        last => {
            list.extend(last);
            json!({"instance": instance, "jobs": list})
        }
    };
    Ok(Json(body).into_response())
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
            state.metrics.queue_op("submit", "payload_too_large");
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LeaseBody {
    domain: String,
    descriptor: DescriptorField,
    #[serde(default)]
    wait_ms: u64,
}

fn delivery_json(d: &Delivery) -> WithPayload<'_> {
    let v = json!({
        "id": d.id,
        "token": d.token,
        "attempt": d.attempt,
        "instance": d.instance,
        "submitted_at_ms": ms(d.submitted_at),
        "released_at_ms": ms(d.released_at),
        "released_at_us": d.released_at,
        "lease_deadline_ms": ms(d.lease_deadline),
    });
    payload::with_payload(v, &d.payload)
}

/// `POST /v1/queues/lease`: the next released job (200), or 204 when none came within `wait_ms`.
pub(super) async fn lease(
    State(state): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let b: LeaseBody = body::parse(&body_bytes(body)?)?;
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
            Ok(Json(delivery_json(&d)).into_response())
        }
        None => {
            state.metrics.queue_op("lease", "empty");
            Ok(StatusCode::NO_CONTENT.into_response())
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenBody {
    token: String,
    #[serde(default)]
    retry_after_ms: Option<u64>,
}

/// `POST /v1/queues/ack`.
pub(super) async fn ack(
    State(state): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let b: TokenBody = body::parse(&body_bytes(body)?)?;
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
    Ok(Json(json!({"acked": true})).into_response())
}

/// `POST /v1/queues/nack`.
pub(super) async fn nack(
    State(state): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let b: TokenBody = body::parse(&body_bytes(body)?)?;
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
    let body = match out {
        Nacked::Retry { at } => json!({
            "state": "retry",
            "retry_at_ms": ms(at),
            "retry_in_ms": ms(at.saturating_sub(now_us())),
        }),
        Nacked::Dead => json!({"state": "dead"}),
    };
    Ok(Json(body).into_response())
}

/// One instance as JSON.
pub(crate) fn instance_json(i: &InstanceInfo) -> Value {
    let (domain, queue) = instance_names(&i.instance).unwrap_or_default();
    let descriptor = instance_descriptor(&i.instance)
        .map(|d| d.to_string())
        .unwrap_or_default();
    let mut v = json!({
        "instance": i.instance,
        "domain": domain,
        "queue": queue,
        "descriptor": descriptor,
        "declared": i.spec.is_some() && !i.retired,
        "retired": i.retired,
    });
    let Value::Object(m) = &mut v else {
        return v;
    };
    if let Some(spec) = &i.spec {
        m.insert("rate".into(), json!(spec.rate().to_string()));
        m.insert("burst".into(), json!(spec.burst()));
        m.insert("max_depth".into(), json!(spec.max_depth()));
    }
    if let (Some(s), Some(spec)) = (&i.stats, &i.spec) {
        m.insert("depth".into(), json!(s.depth()));
        m.insert("waiting".into(), json!(s.waiting()));
        m.insert("ready".into(), json!(s.ready));
        m.insert("delayed".into(), json!(s.delayed));
        m.insert("in_flight".into(), json!(s.in_flight));
        m.insert("reserved".into(), json!(s.reserved));
        m.insert("dead".into(), json!(s.dead));
        m.insert(
            "oldest_age_ms".into(),
            json!(s.oldest_age().map(|a| a / 1000)),
        );
        m.insert("release_rate".into(), json!(i.release_rate));
        m.insert(
            "time_to_drain_ms".into(),
            json!(s.time_to_drain(spec.spacing()) / 1000),
        );
        m.insert(
            "next_release_in_ms".into(),
            json!(s.next_slot.saturating_sub(s.now) / 1000),
        );
        m.insert("submitted_total".into(), json!(s.submitted_total));
        m.insert("released_total".into(), json!(s.released_total));
        m.insert("acked_total".into(), json!(s.acked_total));
        m.insert("dead_total".into(), json!(s.dead_total));
    }
    v
}

/// `GET /v1/queues`: every queue instance's state.
pub(super) async fn list(State(state): Shared) -> Result<Response, ApiError> {
    let all = state
        .queue
        .instances()
        .await
        .map_err(|e| queue_error(&state, "list", e))?;
    let queues: Vec<Value> = state
        .queue
        .specs()
        .specs()
        .iter()
        .map(|s| {
            json!({
                "domain": s.domain,
                "name": s.name,
                "match": s.pattern.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "rate": s.rate().to_string(),
                "burst": s.burst(),
                "max_depth": s.max_depth(),
                "lease_ms": s.lease() / 1000,
                "max_attempts": s.max_attempts(),
                "retry_backoff_ms": s.retry_backoff() / 1000,
                "max_payload": s.max_payload(),
                "key_retention_ms": s.key_retention() / 1000,
            })
        })
        .collect();
    let instances: Vec<Value> = all.iter().map(instance_json).collect();
    Ok(Json(json!({"queues": queues, "instances": instances})).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstanceBody {
    domain: String,
    descriptor: DescriptorField,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    ids: Option<Vec<u64>>,
}

/// The most dead letters listed at once.
const MAX_DEAD_LIST: usize = 1_000;

/// `POST /v1/queues/dead`: the dead letters, oldest first (`offset`, `limit` up to 1,000).
pub(super) async fn dead(
    State(state): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let b: InstanceBody = body::parse(&body_bytes(body)?)?;
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
    let jobs: Vec<WithPayload<'_>> = list
        .iter()
        .map(|j| {
            let v = json!({
                "id": j.id,
                "attempts": j.attempts,
                "key": j.key,
                "submitted_at_ms": ms(j.submitted_at),
                "died_at_ms": ms(j.died_at),
            });
            payload::with_payload(v, &j.payload)
        })
        .collect();
    Ok(Json(DeadList { jobs }).into_response())
}

/// The dead letters' answer (a struct, not `json!`, so that payloads stay raw text).
#[derive(Serialize)]
struct DeadList<'a> {
    jobs: Vec<WithPayload<'a>>,
}

/// An operation on a queue instance that needs the admin token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AdminOp {
    /// Dead letters (`ids`, or all) back in the queue.
    Requeue,
    /// Deletes dead letters (`ids`, or all).
    PurgeDead,
    /// Deletes every job of the instance (no `ids`).
    Purge,
}

impl AdminOp {
    /// Its name in metrics and logs.
    fn name(self) -> &'static str {
        match self {
            AdminOp::Requeue => "requeue",
            AdminOp::PurgeDead => "purge_dead",
            AdminOp::Purge => "purge",
        }
    }

    /// The field of the answer that counts the jobs it moved or deleted.
    fn counted(self) -> &'static str {
        match self {
            AdminOp::Requeue => "requeued",
            AdminOp::PurgeDead | AdminOp::Purge => "purged",
        }
    }
}

async fn admin_op(
    state: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    op: AdminOp,
) -> Result<Response, ApiError> {
    authorized(state, headers)?;
    let b: InstanceBody = body::parse(&body_bytes(body)?)?;
    if b.offset != 0 || b.limit.is_some() {
        return Err(ApiError::bad_request(
            "`offset` and `limit` are for listing",
        ));
    }
    let descriptor = instance_of(b.descriptor)?;
    let ids = b.ids.as_deref();
    let q = &state.queue;
    let n = match op {
        AdminOp::Requeue => q.requeue_dead(&b.domain, &descriptor, ids).await,
        AdminOp::PurgeDead => q.purge_dead(&b.domain, &descriptor, ids).await,
        AdminOp::Purge => {
            if ids.is_some() {
                return Err(ApiError::bad_request(
                    "`ids` is for the dead letters: a purge deletes every job of the instance",
                ));
            }
            q.purge(&b.domain, &descriptor).await
        }
    }
    .map_err(|e| queue_error(state, op.name(), e))?;
    state.metrics.queue_op(op.name(), "ok");
    tracing::info!(op = op.name(), domain = %b.domain, descriptor = %descriptor, jobs = n, "queue admin operation");
    Ok(Json(json!({ op.counted(): n })).into_response())
}

/// `POST /v1/queues/dead/requeue` (admin): dead letters (`ids`, or all) back in the queue.
pub(super) async fn requeue(
    State(state): Shared,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    admin_op(&state, &headers, body, AdminOp::Requeue).await
}

/// `POST /v1/queues/dead/purge` (admin): deletes dead letters (`ids`, or all).
pub(super) async fn purge_dead(
    State(state): Shared,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    admin_op(&state, &headers, body, AdminOp::PurgeDead).await
}

/// `POST /v1/queues/purge` (admin): deletes every job of an instance.
pub(super) async fn purge(
    State(state): Shared,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    admin_op(&state, &headers, body, AdminOp::Purge).await
}
