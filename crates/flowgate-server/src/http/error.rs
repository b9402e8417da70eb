//! Errors as JSON: `{"error": "<code>", "detail": "<what is wrong>"}` ([`ErrorBody`], its code
//! one of [`ErrorCode`]); a 429 or 503 also carries `Retry-After`, so that a client backs off
//! instead of retrying at once.

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub(crate) use crate::codes::ErrorCode;

/// The `Retry-After` of a 429 or 503 that names no better time.
pub(crate) const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Every HTTP error's body.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    /// What went wrong, for programs: one of the documented codes.
    pub(crate) error: ErrorCode,
    /// What is wrong, for people (it names the field at fault, the bound exceeded, ...).
    pub(crate) detail: String,
}

/// An HTTP error with a JSON body.
#[derive(Debug)]
pub(crate) struct ApiError {
    /// The status.
    pub(crate) status: StatusCode,
    /// What went wrong, for programs.
    pub(crate) error: ErrorCode,
    /// What is wrong, for people.
    pub(crate) detail: String,
    /// When to try again (429 and 503 only; [`DEFAULT_RETRY_AFTER`] when `None`).
    pub(crate) retry_after: Option<Duration>,
}

impl ApiError {
    /// A 400.
    pub(crate) fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, detail)
    }

    /// Any status.
    pub(crate) fn new(status: StatusCode, error: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            error,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// A 503 `store_unavailable` answering `route` for the store's `error`: the caller is told
    /// [`crate::store_errors::ANSWER`] only, the error itself is logged.
    pub(crate) fn store(route: &str, error: &dyn std::fmt::Display) -> Self {
        crate::store_errors::log(route, error);
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::StoreUnavailable,
            crate::store_errors::ANSWER,
        )
    }

    /// As [`ApiError::store`], except that a write the replicas did not acknowledge is told
    /// whole: that finding is Flowgate's, and the caller must know its write may be lost.
    pub(crate) fn store_error(route: &str, error: &flowgate::store::StoreError) -> Self {
        match error {
            flowgate::store::StoreError::NotReplicated { .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::StoreUnavailable,
                error.to_string(),
            ),
            _ => Self::store(route, error),
        }
    }

    /// The same error, telling the client to try again after `after` (a 429 or 503).
    pub(crate) fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
pub(crate) fn retry_after_secs(after: Duration) -> u64 {
    let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    secs.max(1)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(ErrorBody {
                error: self.error,
                detail: self.detail,
            }),
        )
            .into_response();
        if matches!(
            self.status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        ) {
            let secs = retry_after_secs(self.retry_after.unwrap_or(DEFAULT_RETRY_AFTER));
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_rounded_up_to_whole_seconds_and_at_least_one() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(50)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(60)), 60);
    }

    #[test]
    fn only_429_and_503_carry_retry_after() {
        let r = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::StoreUnavailable,
            "x",
        )
        .into_response();
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = ApiError::new(StatusCode::TOO_MANY_REQUESTS, ErrorCode::QueueFull, "x")
            .retry_after(Duration::from_millis(2500))
            .into_response();
        assert_eq!(r.headers()[header::RETRY_AFTER], "3");
        let r = ApiError::bad_request("x")
            .retry_after(Duration::from_secs(5))
            .into_response();
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
    }
}
