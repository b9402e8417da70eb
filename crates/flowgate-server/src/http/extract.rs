//! The extractors every route reads its input through, each refusing with an [`ApiError`]:
//!
//! - [`JsonBody`]: a JSON body of a [`RequestBody`] type, read within the type's bound (413
//!   naming it) and parsed by serde (400 naming the field at fault, [`super::body::parse`]).
//!   Bodies are read whatever their `Content-Type`, as they always were: `curl -d` sends
//!   `application/x-www-form-urlencoded`.
//! - [`Params`]: a query string of a typed struct (400 naming the parameter).
//! - [`Token`]: `Authorization: Bearer <token>`, checked against the admin tokens
//!   ([`Admin`]: 403 when the server has none, 401 when missing or wrong) or the dashboard's
//!   ([`Reader`]: an admin token too; free when the server has no dashboard token).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use serde::de::DeserializeOwned;

use super::{ApiError, ErrorCode, body};
use crate::limits;
use crate::state::AppState;

/// A body above this many bytes is parsed on a blocking thread: megabytes of JSON must not
/// hold up the decisions the same workers serve.
const BLOCKING_PARSE_ABOVE: usize = 1 << 20;

/// A type a route reads its JSON body into.
pub(super) trait RequestBody: DeserializeOwned + Send + 'static {
    /// The largest body the route takes.
    const MAX_BYTES: usize = limits::MAX_BODY_BYTES;
}

/// A JSON body, typed.
#[derive(Debug)]
pub(super) struct JsonBody<T>(pub(super) T);

impl<S: Send + Sync, T: RequestBody> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let bytes = read(req, T::MAX_BYTES).await?;
        if bytes.len() <= BLOCKING_PARSE_ABOVE {
            return body::parse(&bytes).map(JsonBody);
        }
        tokio::task::spawn_blocking(move || body::parse(&bytes).map(JsonBody))
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::Internal,
                    format!("the body's parser failed: {e}"),
                )
            })?
    }
}

/// The body of `req`, whole, if it is at most `max` bytes (a 413 naming `max` otherwise).
pub(super) async fn read(req: Request, max: usize) -> Result<Bytes, ApiError> {
    match Limited::new(req.into_body(), max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::PayloadTooLarge,
            format!(
                "the body is too long: the largest body of this route is {}",
                size(max)
            ),
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "the body could not be read: {e}"
        ))),
    }
}

/// A size in bytes, also in KiB or MiB when it is a whole number of them.
pub(super) fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB ({b} bytes)", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB ({b} bytes)", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// A query string, typed.
#[derive(Debug)]
pub(super) struct Params<T>(pub(super) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let q: Result<Query<T>, QueryRejection> = Query::from_request_parts(parts, state).await;
        q.map(|Query(t)| Params(t))
            .map_err(|e| ApiError::bad_request(e.body_text()))
    }
}

/// Who a token may be.
pub(super) trait Role: Send + Sync + 'static {
    /// What a request presenting `given` is granted, or why it is refused.
    fn check(state: &AppState, given: &str) -> Result<Self, ApiError>
    where
        Self: Sized;
}

/// The token presented, and what it grants: `Token<Admin>` or `Token<Reader>`.
#[derive(Debug)]
pub(super) struct Token<R>(pub(super) R);

/// An admin: the name of the token presented (the author of a rule change).
#[derive(Debug)]
pub(super) struct Admin(pub(super) String);

/// A reader of the dashboard's figures.
#[derive(Debug)]
pub(super) struct Reader;

/// The token of `Authorization: Bearer <token>`; empty when there is none.
fn bearer(headers: &HeaderMap) -> &str {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
}

impl Role for Admin {
    fn check(state: &AppState, given: &str) -> Result<Self, ApiError> {
        if state.admin.is_empty() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::AdminDisabled,
                "the admin API is disabled: start the server with --admin-token (FLOWGATE_ADMIN_TOKEN) or --admin-tokens-file (FLOWGATE_ADMIN_TOKENS_FILE)",
            ));
        }
        state
            .admin
            .authenticate(given)
            .map(|name| Admin(name.to_owned()))
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    ErrorCode::Unauthorized,
                    "missing or wrong admin token: send `Authorization: Bearer <token>`",
                )
            })
    }
}

impl Role for Reader {
    fn check(state: &AppState, given: &str) -> Result<Self, ApiError> {
        let free = state.dashboard.is_empty();
        if free
            || state.dashboard.authenticate(given).is_some()
            || state.admin.authenticate(given).is_some()
        {
            return Ok(Reader);
        }
        Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            "this server's figures need a token: send `Authorization: Bearer <token>` with the dashboard token (--dashboard-token) or an admin token",
        ))
    }
}

impl<R: Role> FromRequestParts<Arc<AppState>> for Token<R> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        R::check(state, bearer(&parts.headers)).map(Token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_named_in_their_largest_whole_unit() {
        assert_eq!(size(64 << 10), "64 KiB (65536 bytes)");
        assert_eq!(size(32 << 20), "32 MiB (33554432 bytes)");
        assert_eq!(size(1000), "1000 bytes");
    }
}
