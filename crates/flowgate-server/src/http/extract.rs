//! The extractors every route reads its input through, each refusing with an [`ApiError`]:
//!
//! - [`JsonBody`]: a JSON body of a [`RequestBody`] type, read within the type's bound (413
//!   naming it) and parsed by serde (400 naming the field at fault, [`super::body::parse`]).
//!   Bodies are read whatever their `Content-Type`, as they always were: `curl -d` sends
//!   `application/x-www-form-urlencoded`.
//! - [`Params`]: a query string of a typed struct (400 naming the parameter).
//! - [`Caller`]: a credential with the scope the route needs (`Caller<Worker>`, ...): a bearer
//!   token or a client certificate, decided by [`crate::auth::Auth::authorize`]. 401 when
//!   missing or wrong, 403 when the credential lacks the scope (or, for `admin`, when the server
//!   has no admin credential), 429 while the source is slowed for its wrong tokens.

use std::marker::PhantomData;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use serde::de::DeserializeOwned;

use super::{ApiError, ErrorCode, body};
use crate::auth::{Grant, Presented, Refusal, Scope};
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

/// A scope a route needs, as a type: `Caller<Worker>` in a handler's arguments.
pub(super) trait Needs: Send + Sync + 'static {
    /// The scope.
    const SCOPE: Scope;
}

macro_rules! needs {
    ($($(#[$doc:meta])* $marker:ident => $scope:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub(super) struct $marker;
        impl Needs for $marker {
            const SCOPE: Scope = Scope::$scope;
        }
    )*};
}

needs! {
    /// The `admin` scope: rules changes, requeue, purge.
    Admin => Admin,
    /// The `worker` scope: queue submit, lease, ack, nack.
    Worker => Worker,
    /// The `reporter` scope: breaker reports.
    Reporter => Reporter,
    /// The `reader` scope: figures, metrics, listings, the rules, dead letters.
    Reader => Reader,
    /// The `decide` scope: decisions.
    Decide => Decide,
}

/// A caller let into a route of `N`'s scope ([`crate::auth::Auth::authorize`]): who it is.
#[derive(Debug)]
pub(super) struct Caller<N>(pub(super) Grant, pub(super) PhantomData<N>);

/// The token of `Authorization: Bearer <token>`.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// What a request presents: its token, its connection's certificate and address, its route.
pub(super) fn presented(parts: &Parts) -> Presented<'_> {
    let peer = parts.extensions.get::<crate::peer::Peer>();
    Presented {
        bearer: bearer(&parts.headers),
        cert_names: peer.map_or(&[], |p| p.cert_names()),
        source: peer.and_then(|p| p.addr()).map(|a| a.ip()),
        route: parts
            .extensions
            .get::<MatchedPath>()
            .map_or_else(|| parts.uri.path(), MatchedPath::as_str),
    }
}

/// The answer to a refused credential.
pub(super) fn refusal(scope: Scope, refused: &Refusal) -> ApiError {
    match refused {
        Refusal::AdminOff => ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::AdminDisabled,
            "the admin API is disabled: give the server an admin credential (--credentials-file, FLOWGATE_ADMIN_TOKEN)",
        ),
        Refusal::Missing | Refusal::Wrong => ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            format!(
                "missing or wrong credential: this route needs the `{scope}` scope; send `Authorization: Bearer <token>`"
            ),
        ),
        Refusal::Forbidden(name) => ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!("the credential `{name}` does not have the `{scope}` scope this route needs"),
        ),
        Refusal::Slowed(wait) => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::TooManyFailedCredentials,
            "too many wrong credentials from this address: try again after Retry-After",
        )
        .retry_after(*wait),
    }
}

/// Whether the caller holds a credential with `N`'s scope (never a refusal: for a route that
/// shows more to such a caller).
#[derive(Debug)]
pub(super) struct Holds<N>(pub(super) bool, pub(super) PhantomData<N>);

impl<N: Needs> FromRequestParts<Arc<AppState>> for Holds<N> {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        Ok(Holds(
            state.auth.holds(N::SCOPE, &presented(parts)),
            PhantomData,
        ))
    }
}

impl<N: Needs> FromRequestParts<Arc<AppState>> for Caller<N> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        if state.auth.is_open(N::SCOPE) {
            return Ok(Caller(Grant::Open, PhantomData));
        }
        state
            .auth
            .authorize(N::SCOPE, &presented(parts))
            .map(|g| Caller(g, PhantomData))
            .map_err(|r| refusal(N::SCOPE, &r))
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
