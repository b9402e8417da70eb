//! [`ReserveService`].

use std::sync::Arc;
use std::task::{Context, Poll};

use flowgate_core::{Request, Store};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use tower_service::Service;

use super::commit_body::{CommitBody, usage_in};
use super::future::ResponseFuture;
use super::reject::Reject;
use super::reserve::Options;
use crate::limiter::{Limiter, ReserveError};
use crate::reservation::Reservation;

/// The service made by [`super::ReserveLayer`].
pub struct ReserveService<Svc, K, S: Store, R> {
    inner: Svc,
    limiter: Arc<Limiter<S>>,
    key: K,
    reject: R,
    options: Options,
}

impl<Svc: Clone, K: Clone, S: Store, R: Clone> Clone for ReserveService<Svc, K, S, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            limiter: Arc::clone(&self.limiter),
            key: self.key.clone(),
            reject: self.reject.clone(),
            options: self.options.clone(),
        }
    }
}

impl<Svc, K, S: Store, R> ReserveService<Svc, K, S, R> {
    pub(crate) fn new(
        inner: Svc,
        limiter: Arc<Limiter<S>>,
        key: K,
        reject: R,
        options: Options,
    ) -> Self {
        Self {
            inner,
            limiter,
            key,
            reject,
            options,
        }
    }
}

fn insert_all(headers: &mut HeaderMap, pairs: Vec<(&'static str, String)>) {
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
}

/// An answer of the layer's own: `status` with a JSON body.
fn json<RB, S: Store>(status: StatusCode, body: &serde_json::Value) -> Response<CommitBody<RB, S>> {
    let mut res = Response::new(CommitBody::fixed(body.to_string()));
    *res.status_mut() = status;
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// The answer to a reservation that was not taken.
fn refused<RB, S: Store, R: Reject<RB>>(
    error: ReserveError,
    reject: &R,
    openai: bool,
) -> Response<CommitBody<RB, S>> {
    match error {
        ReserveError::Refused(verdict) => {
            let res = reject.reject(&verdict);
            let mut res = res.map(CommitBody::plain);
            if openai {
                insert_all(res.headers_mut(), verdict.openai_token_headers());
            }
            res
        }
        ReserveError::OverClamp {
            rule,
            estimate,
            max,
        } => json(
            StatusCode::BAD_REQUEST,
            &serde_json::json!({
                "error": "estimate_over_clamp",
                "rule": rule,
                "estimate": estimate,
                "max": max,
            }),
        ),
        ReserveError::NotChargeable { rule, reason } => {
            tracing::error!(%rule, %reason, "a reserving layer's request matched a rule that takes no reservations");
            json(
                StatusCode::INTERNAL_SERVER_ERROR,
                &serde_json::json!({
                    "error": "rule_takes_no_reservations",
                    "rule": rule,
                    "reason": reason.to_string(),
                }),
            )
        }
    }
}

/// Runs the inner service's answer through the reservation: commits a usage response header
/// now, or wraps the body to commit from its trailers; adds the budget headers.
async fn answer<RB, S: Store>(
    mut res: Response<RB>,
    reservation: Reservation<S>,
    options: &Options,
) -> Response<CommitBody<RB, S>> {
    let (headers, openai) = match usage_in(res.headers(), &options.usage) {
        Ok(Some(actual)) => match reservation.commit(actual).await {
            Ok(c) => (c.headers(), c.openai_token_headers()),
            Err(error) => {
                tracing::warn!(%error, "commit failed: the estimate stays counted");
                (Vec::new(), Vec::new())
            }
        },
        found => {
            if found.is_err() {
                tracing::warn!(header = %options.usage, "response header is not a whole number of units: the reservation commits its estimate");
            }
            let v = reservation.verdict();
            let pair = (v.headers(), v.openai_token_headers());
            insert_all(res.headers_mut(), pair.0);
            if options.openai {
                insert_all(res.headers_mut(), pair.1);
            }
            let usage = options.usage.clone();
            return res.map(|b| CommitBody::committing(b, reservation, usage));
        }
    };
    insert_all(res.headers_mut(), headers);
    if options.openai {
        insert_all(res.headers_mut(), openai);
    }
    res.map(CommitBody::plain)
}

impl<Svc, K, S, R, B, RB> Service<http::Request<B>> for ReserveService<Svc, K, S, R>
where
    Svc: Service<http::Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    Svc::Future: Send + 'static,
    K: Fn(&http::Request<B>) -> Option<Request> + Clone + Send + Sync + 'static,
    S: Store,
    R: Reject<RB>,
    B: Send + 'static,
    RB: Send + 'static,
{
    type Response = Response<CommitBody<RB, S>>;
    type Error = Svc::Error;
    type Future = ResponseFuture<Self::Response, Svc::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // The service that was polled ready goes into the future; a fresh clone stays here.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let Some(flow) = (self.key)(&req) else {
            return Box::pin(async move { Ok(inner.call(req).await?.map(CommitBody::plain)) });
        };
        let (parts, body) = req.into_parts();
        let estimate = self.options.estimate.of(&parts);
        let req = http::Request::from_parts(parts, body);
        let limiter = Arc::clone(&self.limiter);
        let reject = self.reject.clone();
        let options = self.options.clone();
        Box::pin(async move {
            let estimate = match estimate {
                Ok(e) => e,
                Err(message) => {
                    let body = serde_json::json!({"error": "bad_estimate", "message": message});
                    return Ok(json(StatusCode::BAD_REQUEST, &body));
                }
            };
            let mut reservation = match limiter.reserve(&flow, estimate).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(domain = %flow.domain, "request refused by its reservation");
                    return Ok(refused(e, &reject, options.openai));
                }
            };
            // A request a circuit breaker watches reports its outcome, as the rate-limit
            // layer's does.
            let watched = reservation
                .verdict()
                .statuses
                .iter()
                .any(|s| s.breaker.is_some());
            let start = watched.then(tokio::time::Instant::now);
            // An error of the inner service drops the reservation: its estimate is committed.
            let res = {
                let res = inner.call(req).await;
                if let Some(start) = start {
                    let ok = res.as_ref().is_ok_and(|r| !r.status().is_server_error());
                    reservation.report(ok, start.elapsed());
                }
                res?
            };
            Ok(answer(res, reservation, &options).await)
        })
    }
}
