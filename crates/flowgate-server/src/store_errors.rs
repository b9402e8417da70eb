//! Store errors as callers see them: a fixed sentence ([`ANSWER`]), never the store's own
//! message (Redis's `WRONGPASS`, an address, an OS error), which is for operators and is logged
//! instead ([`log`]), at most once a second so that a store that is down does not flood the log
//! from the request path.

use std::fmt::Display;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

/// What a caller is told of any store error, on every route and API.
pub(crate) const ANSWER: &str = "the store could not answer; try again after Retry-After";

/// The shortest time between two logged store errors.
const EVERY_MS: u64 = 1_000;

/// When the last store error was logged: milliseconds since [`START`], plus one (0: never).
static LAST_MS: AtomicU64 = AtomicU64::new(0);
/// Store errors not logged since the last line.
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);
/// The origin of [`LAST_MS`].
static START: OnceLock<Instant> = OnceLock::new();

/// Logs the store's own `error`, met answering `route` (`POST /v1/queues/submit`, `gRPC
/// ShouldRateLimit`), unless another was logged within the last second; the next line says how
/// many were not.
pub(crate) fn log(route: &str, error: &dyn Display) {
    let now = START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1;
    let last = LAST_MS.load(Ordering::Relaxed);
    let due = last == 0 || now >= last + EVERY_MS;
    if !due
        || LAST_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let suppressed = SUPPRESSED.swap(0, Ordering::Relaxed);
    tracing::warn!(
        route,
        %error,
        suppressed,
        "the store failed a request; the caller was told only that it could not answer"
    );
}
