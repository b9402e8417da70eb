//! A graceful shutdown, in order, each step bounded:
//!
//! 1. **drain**: `/readyz` answers 503 while the node keeps serving every request for the drain
//!    delay, so that load balancers and Kubernetes take it out of rotation before its ports close;
//! 2. **stop accepting**: both ports close; long-polling queue leases answer 204 at once, a job
//!    held for its slot going back to the queue untouched (first in line, never delivered);
//! 3. **finish what is in flight**, within the grace period: HTTP requests (a held `acquire`
//!    answers at its slot), gRPC calls (tonic's graceful shutdown: a GOAWAY, streams finish);
//! 4. **flush**, within [`FLUSH_BOUND`]: the breakers' and adaptive limits' reports still queued
//!    for Redis, and this node's figures of its last second (published to the cluster's);
//! 5. the background tasks stop.
//!
//! A node thus exits within drain delay + grace + [`FLUSH_BOUND`] (plus the process's own exit),
//! with success unless requests were still in flight when the grace period ended.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::server::{Server, ServerError};
use crate::state::AppState;

/// The longest a shutdown waits for its last reports and figures to reach Redis, after the
/// requests in flight are answered.
pub const FLUSH_BOUND: Duration = Duration::from_secs(2);

/// The default grace period for the requests in flight at a shutdown.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// What a shutdown stops.
pub(crate) struct Stopping {
    /// Turned on when the ports close: the front ends and the background tasks stop.
    pub(crate) signal: watch::Sender<bool>,
    pub(crate) http: JoinHandle<Result<(), ServerError>>,
    pub(crate) grpc: JoinHandle<Result<(), ServerError>>,
    /// The figures' sampler: awaited (it may be publishing), then the last second published.
    pub(crate) figures: JoinHandle<()>,
    /// Tasks with nothing to hand over: aborted last.
    pub(crate) background: Vec<JoinHandle<()>>,
    pub(crate) grace: Duration,
    pub(crate) drain_delay: Duration,
    /// Its lifecycle (draining), its queues (closed to leases), its limiter and figures
    /// (flushed).
    pub(crate) state: Arc<AppState>,
}

impl Server {
    /// Shuts down gracefully, in the order and within the bound the module's documentation
    /// gives: drains for the drain delay, stops accepting, finishes the requests
    /// in flight (up to the grace period), flushes the reports and figures still buffered for
    /// Redis (up to [`FLUSH_BOUND`]), and stops.
    ///
    /// # Errors
    /// [`ServerError::Serve`] when a front end failed, or did not finish within the grace period
    /// (the flush is made either way).
    pub async fn shutdown(self) -> Result<(), ServerError> {
        let s = self.stopping;
        s.state.lifecycle.set(crate::probes::Phase::Draining);
        if !s.drain_delay.is_zero() {
            tokio::time::sleep(s.drain_delay).await;
        }
        let _ = s.signal.send(true);
        // Long-polling leases answer 204 now; a job held for its slot goes back untouched.
        s.state.queue.close();
        let grace = s.grace;
        let join = |api: &'static str, h: JoinHandle<Result<(), ServerError>>| async move {
            match tokio::time::timeout(grace, h).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => Err(ServerError::Serve {
                    api,
                    detail: e.to_string(),
                }),
                Err(_) => Err(ServerError::Serve {
                    api,
                    detail: format!("requests still in flight after {grace:?}"),
                }),
            }
        };
        let (h, g) = tokio::join!(join("http", s.http), join("grpc", s.grpc));
        flush(&s.state, s.figures).await;
        for b in s.background {
            b.abort();
        }
        h.and(g)
    }
}

/// Sends what the node still holds for Redis, within [`FLUSH_BOUND`]: the shared breakers' and
/// adaptive limits' queued reports, and its figures' last second (once `figures`, the sampler,
/// has ended: it may be publishing the second before).
async fn flush(state: &AppState, figures: JoinHandle<()>) {
    let last = async {
        let _ = figures.await;
        state.stats.publish_last(state).await;
    };
    let all = async {
        tokio::join!(
            state.limiter.breakers().flush(),
            state.limiter.adaptive().flush(),
            last,
        )
    };
    if tokio::time::timeout(FLUSH_BOUND, all).await.is_err() {
        tracing::warn!(
            bound_ms = FLUSH_BOUND.as_millis() as u64,
            "shutdown: reports or figures not sent to Redis within the bound; they are lost"
        );
    }
}
