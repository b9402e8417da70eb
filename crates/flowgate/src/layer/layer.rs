//! [`RateLimitLayer`].

use std::sync::Arc;

use flowgate_core::{MemoryStore, Store};
use tower_layer::Layer;

use super::reject::HttpReject;
use super::service::RateLimitService;
use crate::limiter::Limiter;

/// Limits the wrapped service with a shared [`Limiter`]; see the [module docs](super).
///
/// `K` extracts the Flowgate request from an HTTP request (`None`: not limited).
pub struct RateLimitLayer<K, S: Store = MemoryStore, R = HttpReject> {
    limiter: Arc<Limiter<S>>,
    key: K,
    reject: R,
}

impl<K: Clone, S: Store, R: Clone> Clone for RateLimitLayer<K, S, R> {
    fn clone(&self) -> Self {
        Self {
            limiter: Arc::clone(&self.limiter),
            key: self.key.clone(),
            reject: self.reject.clone(),
        }
    }
}

impl<K, S: Store> RateLimitLayer<K, S, HttpReject> {
    /// A layer answering rejections with HTTP 429.
    pub fn new(limiter: Arc<Limiter<S>>, key: K) -> Self {
        Self {
            limiter,
            key,
            reject: HttpReject,
        }
    }
}

impl<K, S: Store, R> RateLimitLayer<K, S, R> {
    /// Answers rejections with `reject` instead (e.g. [`super::GrpcReject`] for tonic).
    pub fn with_reject<R2>(self, reject: R2) -> RateLimitLayer<K, S, R2> {
        RateLimitLayer {
            limiter: self.limiter,
            key: self.key,
            reject,
        }
    }
}

impl<Svc, K: Clone, S: Store, R: Clone> Layer<Svc> for RateLimitLayer<K, S, R> {
    type Service = RateLimitService<Svc, K, S, R>;

    fn layer(&self, inner: Svc) -> Self::Service {
        RateLimitService::new(
            inner,
            Arc::clone(&self.limiter),
            self.key.clone(),
            self.reject.clone(),
        )
    }
}
