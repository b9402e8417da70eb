//! Errors as JSON: `{"error": "<kind>", "detail": "<what is wrong>"}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An HTTP error with a JSON body.
#[derive(Debug)]
pub(crate) struct ApiError {
    /// The status.
    pub(crate) status: StatusCode,
    /// A short, stable kind (`bad_request`, `unauthorized`, ...).
    pub(crate) error: &'static str,
    /// What is wrong, for people.
    pub(crate) detail: String,
}

impl ApiError {
    /// A 400.
    pub(crate) fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", detail)
    }

    /// Any status.
    pub(crate) fn new(status: StatusCode, error: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            error,
            detail: detail.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({"error": self.error, "detail": self.detail})),
        )
            .into_response()
    }
}
