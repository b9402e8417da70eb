//! The queue endpoints: submit ([`submit`]), lease, ack and nack ([`delivery`]), the queues'
//! state (here), dead letters and purges ([`dead`]).
//!
//! Bodies are JSON objects parsed by serde; an error names the field at fault
//! (`jobs[3].not_before_ms: invalid type: string "x", expected u64`). A queue is addressed by
//! `domain` and `descriptor` (`"biz=REFUND, channel=WPG"`, or Envoy's
//! `{"entries": [{"key": …, "value": …}]}`); a delivery by its `token`. A payload is stored and
//! answered byte-exact (see [`super::payload`]). What the routes answer is in [`answers`].

mod answers;
pub(super) mod dead;
pub(super) mod delivery;
pub(super) mod submit;

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use flowgate::Descriptor;
use flowgate::queue::QueueError;

use self::answers::{InstanceAnswer, QueueInfo, QueuesAnswer};
use super::body::DescriptorField;
use super::doc::Unavailable;
use super::{ApiError, ErrorCode};
use crate::http::doc::CredentialErrors;
use crate::http::extract::{Caller, Reader};
use crate::limits;
use crate::state::AppState;

type Shared = State<Arc<AppState>>;

/// The queue instance a body names: its descriptor, validated (a queue's descriptor takes no
/// `hits_addend`).
pub(super) fn instance_of(d: DescriptorField) -> Result<Descriptor, ApiError> {
    if d.0.cost.is_some() {
        return Err(ApiError::bad_request(
            "`descriptor.hits_addend`: a queue's descriptor has no cost",
        ));
    }
    let probe = flowgate::Request::new("q", vec![d.0]);
    limits::validate(&probe).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(probe.descriptors.into_iter().next().unwrap_or_default())
}

/// A whole number of days, as text (`30 days`).
pub(super) fn days(d: Duration) -> String {
    format!("{} days", d.as_secs() / 86_400)
}

/// A queue error as HTTP.
pub(super) fn queue_error(state: &AppState, op: &'static str, e: QueueError) -> ApiError {
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
        QueueError::Store(store) => {
            state
                .metrics
                .queue_op(op, ErrorCode::StoreUnavailable.as_str());
            return ApiError::store_error(&format!("queue {op}"), store);
        }
        _ => {
            state
                .metrics
                .queue_op(op, ErrorCode::StoreUnavailable.as_str());
            return ApiError::store(&format!("queue {op}"), &e);
        }
    };
    state.metrics.queue_op(op, code.as_str());
    ApiError::new(status, code, e.to_string())
}

/// The current time on this node, for `*_in_ms` fields.
pub(super) fn now_us() -> u64 {
    flowgate::clock::Clock::now(&flowgate::clock::SystemClock::new())
}

/// The declared queues and every instance's depth, in flight, dead letters, oldest age, release
/// rate and time to drain.
#[utoipa::path(get, path = "/v1/queues", tag = "queues", security(("reader" = [])), responses(CredentialErrors,
    (status = 200, description = "The queues.", body = QueuesAnswer),
    Unavailable,
))]
pub(super) async fn list(State(state): Shared, _: Caller<Reader>) -> Result<Response, ApiError> {
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
