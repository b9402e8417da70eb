//! The layer's response future.

use std::future::Future;
use std::pin::Pin;

/// The response future of [`super::RateLimitService`]: decides, waits its slot if shaped, then
/// runs the inner service while holding the permit.
pub type ResponseFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'static>>;
