//! [`TimeSource`]: the clock the scripts read, and this node's estimate of Redis's.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use flowgate_core::{Clock, Micros};

/// Where the script reads the time: Redis's `TIME`, or (test only) an overriding clock; and
/// this node's estimate of it: the local clock corrected by its offset to Redis's `TIME`, which
/// every script call answers (and an idle store asks for, see `RedisStore`). Redis read its
/// clock somewhere between sending and answering: taking the middle, the estimate is off by at
/// most half a round trip (plus the clocks' drift since the last call).
#[derive(Clone)]
pub(crate) struct TimeSource {
    /// TEST ONLY: the clock the scripts read instead of Redis's `TIME`.
    pub(crate) fixed: Option<Arc<dyn Clock>>,
    /// This node's clock (the override's, unless a test sets another).
    pub(crate) local: Arc<dyn Clock>,
    /// Redis's clock less this node's, in microseconds, as last measured.
    offset: Arc<AtomicI64>,
    /// This node's clock when the offset was last measured (0: never).
    synced_at: Arc<AtomicU64>,
}

/// Extra expiry with a clock override: the test's clock may run slower than Redis's.
const OVERRIDE_SLACK_MS: u64 = 600_000;

impl TimeSource {
    /// Redis's `TIME` (or `fixed`) estimated from `local`.
    pub(crate) fn new(fixed: Option<Arc<dyn Clock>>, local: Arc<dyn Clock>) -> Self {
        Self {
            fixed,
            local,
            offset: Arc::new(AtomicI64::new(0)),
            synced_at: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Records Redis's clock, `redis_now`, answered to a command sent at `sent` and answered at
    /// `received` by this node's clock. (Not with a test clock: the scripts read that one.)
    pub(crate) fn observe(&self, sent: Micros, received: Micros, redis_now: Micros) {
        if self.fixed.is_some() {
            return;
        }
        let middle = sent + received.saturating_sub(sent) / 2;
        let offset = i64::try_from(redis_now).unwrap_or(i64::MAX)
            - i64::try_from(middle).unwrap_or(i64::MAX);
        self.offset.store(offset, Ordering::Relaxed);
        self.synced_at.store(received.max(1), Ordering::Relaxed);
    }

    /// This node's clock when the offset was last measured (0: never).
    pub(crate) fn synced_at(&self) -> Micros {
        self.synced_at.load(Ordering::Relaxed)
    }

    /// `now` and the extra expiry for the script: 0 and 0 for Redis's `TIME`.
    pub(crate) fn now_and_slack(&self) -> (u64, u64) {
        match &self.fixed {
            Some(c) => (c.now(), OVERRIDE_SLACK_MS),
            None => (0, 0),
        }
    }

    /// The instant the script is expected to decide at: Redis's clock, as estimated here.
    pub(crate) fn estimate(&self) -> Micros {
        self.local
            .now()
            .saturating_add_signed(self.offset.load(Ordering::Relaxed))
    }
}
