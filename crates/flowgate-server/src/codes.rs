//! The codes of Flowgate's own answers: one enum, written in `snake_case`, for
//!
//! - the `error` field of every HTTP error (`{"error": "<code>", "detail": "..."}`);
//! - the `reason` field of a refused `POST /v1/check` or `/v1/acquire` (`over_limit`,
//!   `circuit_open`), beside Envoy's `code` (`OK`, `OVER_LIMIT`), which is Envoy's enum and not
//!   this one;
//! - the `x-flowgate-reason` header a gRPC `ShouldRateLimit` answer adds when a circuit breaker
//!   refused it (`circuit_open`);
//! - the `result` label of `flowgate_queue_operations_total` for a queue operation that failed.
//!
//! Clients switch on these codes; the detail beside them is for people and may change. The
//! OpenAPI document lists them (`ErrorCode`), and `docs/operating.md` says what each means.

use serde::{Deserialize, Serialize};

/// The code of an error or a refusal (see the module's documentation): `bad_request` (400),
/// `unauthorized` (401), `admin_disabled`, `forbidden` (403), `not_found`, `unknown_queue`,
/// `version_not_found` (404), `method_not_allowed` (405), `not_held`, `not_dead`, `key_conflict`,
/// `version_conflict`, `follows_files`, `queues_would_be_removed` (409), `payload_too_large`
/// (413), `unsupported_media_type` (415), `invalid_rules`, `bad_token` (400), `over_limit`,
/// `circuit_open`, `queue_full`, `too_many_failed_credentials` (429), `store_unavailable`, `not_ready` (503), `internal` (500).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request is malformed: a body, a field, a query or a path the route does not take.
    BadRequest,
    /// The route needs a credential, and none or a wrong one came.
    Unauthorized,
    /// The admin API is off: the server has no admin credential.
    AdminDisabled,
    /// The credential presented does not have the scope the route needs.
    Forbidden,
    /// This source presented too many wrong tokens: its credentials are refused unread until
    /// `Retry-After`.
    TooManyFailedCredentials,
    /// No such route, or no such dashboard file.
    NotFound,
    /// The route does not take that method.
    MethodNotAllowed,
    /// The body is over its route's bound, or a job's payload over its queue's `max_payload`.
    PayloadTooLarge,
    /// `PUT /v1/rules` with a content type it does not read.
    UnsupportedMediaType,
    /// The request is over a limit (a check's or an acquire's `reason`).
    OverLimit,
    /// A circuit breaker refused the request (a check's `reason`, gRPC's `x-flowgate-reason`).
    CircuitOpen,
    /// The queue holds its `max_depth` jobs: nothing was stored.
    QueueFull,
    /// No declared queue matches the domain and descriptor.
    UnknownQueue,
    /// A delivery token that is not one this server gave.
    BadToken,
    /// The delivery is no longer held by this token (acked, nacked, or its lease expired).
    NotHeld,
    /// A job named for the dead letters is not a dead letter.
    NotDead,
    /// A job's `key` is already used by a job of another payload.
    KeyConflict,
    /// The rules sent are invalid: nothing changed.
    InvalidRules,
    /// No such version of the shared rules.
    VersionNotFound,
    /// Another version came after the `base_version` given: nothing changed.
    VersionConflict,
    /// The route needs the rules shared through Redis; this node follows its files.
    FollowsFiles,
    /// A change of the shared rules that would drop every declared queue.
    QueuesWouldBeRemoved,
    /// No reservation has the id committed (never made, or forgotten): nothing changed.
    UnknownReservation,
    /// The reservation was committed already: nothing changed.
    AlreadyCommitted,
    /// The store cannot answer now: try again later.
    StoreUnavailable,
    /// The node is starting or draining (`/readyz`).
    NotReady,
    /// The server failed; the detail says how.
    Internal,
}

impl ErrorCode {
    /// Every code, in the order of the enum.
    pub const ALL: [ErrorCode; 27] = [
        ErrorCode::BadRequest,
        ErrorCode::Unauthorized,
        ErrorCode::AdminDisabled,
        ErrorCode::Forbidden,
        ErrorCode::TooManyFailedCredentials,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::OverLimit,
        ErrorCode::CircuitOpen,
        ErrorCode::QueueFull,
        ErrorCode::UnknownQueue,
        ErrorCode::BadToken,
        ErrorCode::NotHeld,
        ErrorCode::NotDead,
        ErrorCode::KeyConflict,
        ErrorCode::InvalidRules,
        ErrorCode::VersionNotFound,
        ErrorCode::VersionConflict,
        ErrorCode::FollowsFiles,
        ErrorCode::QueuesWouldBeRemoved,
        ErrorCode::UnknownReservation,
        ErrorCode::AlreadyCommitted,
        ErrorCode::StoreUnavailable,
        ErrorCode::NotReady,
        ErrorCode::Internal,
    ];

    /// The code as it is written on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::AdminDisabled => "admin_disabled",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TooManyFailedCredentials => "too_many_failed_credentials",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::OverLimit => "over_limit",
            ErrorCode::CircuitOpen => "circuit_open",
            ErrorCode::QueueFull => "queue_full",
            ErrorCode::UnknownQueue => "unknown_queue",
            ErrorCode::BadToken => "bad_token",
            ErrorCode::NotHeld => "not_held",
            ErrorCode::NotDead => "not_dead",
            ErrorCode::KeyConflict => "key_conflict",
            ErrorCode::InvalidRules => "invalid_rules",
            ErrorCode::VersionNotFound => "version_not_found",
            ErrorCode::VersionConflict => "version_conflict",
            ErrorCode::FollowsFiles => "follows_files",
            ErrorCode::QueuesWouldBeRemoved => "queues_would_be_removed",
            ErrorCode::UnknownReservation => "unknown_reservation",
            ErrorCode::AlreadyCommitted => "already_committed",
            ErrorCode::StoreUnavailable => "store_unavailable",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_form_is_serdes_and_every_code_is_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_value(c).ok(),
                Some(serde_json::Value::from(c.as_str()))
            );
            assert!(seen.insert(c.as_str()), "{c} listed twice");
        }
    }
}
