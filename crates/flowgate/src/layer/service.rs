//! [`RateLimitService`].

use std::sync::Arc;
use std::task::{Context, Poll};

use flowgate_core::{Request, Store};
use http::Response;
use tower_service::Service;

use super::future::ResponseFuture;
use super::reject::Reject;
use crate::limiter::Limiter;

/// The service made by [`super::RateLimitLayer`].
pub struct RateLimitService<Svc, K, S: Store, R> {
    inner: Svc,
    limiter: Arc<Limiter<S>>,
    key: K,
    reject: R,
}

impl<Svc: Clone, K: Clone, S: Store, R: Clone> Clone for RateLimitService<Svc, K, S, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            limiter: Arc::clone(&self.limiter),
            key: self.key.clone(),
            reject: self.reject.clone(),
        }
    }
}

impl<Svc, K, S: Store, R> RateLimitService<Svc, K, S, R> {
    pub(crate) fn new(inner: Svc, limiter: Arc<Limiter<S>>, key: K, reject: R) -> Self {
        Self {
            inner,
            limiter,
            key,
            reject,
        }
    }
}

impl<Svc, K, S, R, B, RB> Service<http::Request<B>> for RateLimitService<Svc, K, S, R>
where
    Svc: Service<http::Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    Svc::Future: Send + 'static,
    K: Fn(&http::Request<B>) -> Option<Request> + Clone + Send + Sync + 'static,
    S: Store,
    R: Reject<RB>,
    B: Send + 'static,
    RB: 'static,
{
    type Response = Response<RB>;
    type Error = Svc::Error;
    type Future = ResponseFuture<Response<RB>, Svc::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // The service that was polled ready goes into the future; a fresh clone stays here.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let Some(flow) = (self.key)(&req) else {
            return Box::pin(inner.call(req));
        };
        let limiter = Arc::clone(&self.limiter);
        let reject = self.reject.clone();
        Box::pin(async move {
            match limiter.acquire(&flow).await {
                Ok(mut permit) => {
                    // A request a circuit breaker watches reports its outcome: a 5xx or an
                    // error is a failure; the latency is the inner service's.
                    let watched = permit
                        .verdict()
                        .statuses
                        .iter()
                        .any(|s| s.breaker.is_some());
                    let start = watched.then(tokio::time::Instant::now);
                    let res = inner.call(req).await;
                    if let Some(start) = start {
                        let ok = res.as_ref().is_ok_and(|r| !r.status().is_server_error());
                        permit.report(ok, start.elapsed());
                    }
                    let mut res = res?;
                    for (name, value) in permit.verdict().headers() {
                        if let Ok(v) = http::HeaderValue::from_str(&value) {
                            res.headers_mut().insert(name, v);
                        }
                    }
                    drop(permit);
                    Ok(res)
                }
                Err(verdict) => {
                    tracing::debug!(domain = %flow.domain, "request rejected by rate limit");
                    Ok(reject.reject(&verdict))
                }
            }
        })
    }
}
