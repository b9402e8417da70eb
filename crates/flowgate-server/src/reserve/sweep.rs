//! The sweeper: each node releases the reservations that expired uncommitted, each exactly once
//! across the nodes sharing the records (the records' `expire` claims them atomically).

use std::sync::Arc;
use std::time::Duration;

use flowgate::records::Reservations;
use flowgate::store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::state::AppState;

/// How often a node looks for expired reservations: an expired reservation stops counting
/// within this much of its expiry.
pub(crate) const EVERY: Duration = Duration::from_millis(100);

/// The outstanding reservations are read every this many sweeps (each second).
const READ_EVERY: u32 = 10;

/// Reservations released per call, at most (more wait for the next call, at once).
const BATCH: usize = 500;

/// Releases the expired reservations; answers how many.
pub(crate) async fn once(state: &AppState) -> usize {
    let reserve = &state.reserve;
    let mut done = 0;
    loop {
        let now = state.limiter.store().now();
        let expired = match reserve.records.expire(now, BATCH).await {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(error = %e, "expired reservations cannot be read now");
                return done;
            }
        };
        let n = expired.len();
        for r in &expired {
            if let Err(e) = reserve.apply(state, r, None, true).await {
                // Its units count on until the state's own time frees them (a window's end,
                // a bucket's refill).
                tracing::warn!(error = %e, id = %r.id, "an expired reservation's units could not be given back");
            }
        }
        done += n;
        if n < BATCH {
            return done;
        }
    }
}

/// Runs [`once`] every [`EVERY`] until `shutdown`.
pub(crate) fn spawn(state: Arc<AppState>, shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let sweep = async {
            let mut tick = tokio::time::interval(EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut n: u32 = 0;
            loop {
                tick.tick().await;
                once(&state).await;
                if n.is_multiple_of(READ_EVERY) {
                    state.reserve.read_outstanding().await;
                }
                n = n.wrapping_add(1);
            }
        };
        tokio::select! {
            () = crate::listen::signal(shutdown) => {}
            () = sweep => {}
        }
    })
}
