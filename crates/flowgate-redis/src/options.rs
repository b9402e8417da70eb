//! Options of a [`crate::RedisStore`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use flowgate_core::Clock;

/// The default deadline of one decision: well under the 100 ms a caller can afford to wait.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(25);
/// The default bound on the blocked-keys cache.
pub const DEFAULT_BLOCKED_CAPACITY: usize = 10_000;
/// The default largest number of requests coalesced into one script call.
pub const DEFAULT_MAX_BATCH: usize = 64;

/// How long a call on a [`crate::RedisConnection`] may wait by default: a bound for calls that no
/// caller's deadline covers (a batching worker's, a queue operation's), so that a Redis that
/// stopped answering never holds them for ever. A store's decisions have their own, shorter
/// deadline ([`RedisOptions::deadline`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How a [`crate::RedisConnection`] connects and how long its calls may wait.
///
/// # Examples
/// ```
/// use flowgate_redis::ConnectionOptions;
/// use std::time::Duration;
/// let opts = ConnectionOptions::default().timeout(Duration::from_secs(3));
/// assert_eq!(opts.timeout, Duration::from_secs(3));
/// assert_eq!(opts.connect_timeout, Duration::from_millis(500));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionOptions {
    /// How long one connection attempt may take (initial connect and reconnects). Default
    /// 500 ms.
    pub connect_timeout: Duration,
    /// How long a call may wait for its reply. Default [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_millis(500),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl ConnectionOptions {
    /// Sets the timeout of one connection attempt.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets how long a call may wait for its reply.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// How a [`crate::RedisStore`] talks to Redis.
///
/// # Examples
/// ```
/// use flowgate_redis::RedisOptions;
/// use std::time::Duration;
/// let opts = RedisOptions::default()
///     .deadline(Duration::from_millis(10))
///     .blocked_capacity(0); // no blocked-keys cache
/// assert_eq!(opts.deadline, Duration::from_millis(10));
/// ```
#[derive(Clone)]
pub struct RedisOptions {
    /// How long a decision (or release) may take before it fails with
    /// `StoreError::Timeout`; the limiter's failure policy then decides. Default 25 ms.
    pub deadline: Duration,
    /// How long one connection attempt may take (initial connect and reconnects). Default 500 ms.
    pub connect_timeout: Duration,
    /// The bound on the blocked-keys cache (see [`crate::blocked`]); 0 turns it off.
    /// Default 10,000.
    pub blocked_capacity: usize,
    /// Whether decisions in flight at the same moment are coalesced into one script call (on a
    /// Redis Cluster, those whose keys share a slot: a hot limit's; see [`crate::batch`]).
    /// Default on.
    pub coalesce: bool,
    /// The largest number of requests in one coalesced script call. Default 64.
    pub max_batch: usize,
    /// Coalesced script calls in flight at once (at least 1). Default 2: while one call is in
    /// Redis the next one is already on its way, so Redis does not wait for the client between
    /// calls; more calls in flight only make each one smaller.
    pub batches_in_flight: usize,
    /// TEST ONLY: a clock whose `now` is passed to the scripts instead of Redis's `TIME`.
    pub(crate) clock_override: Option<Arc<dyn Clock>>,
    /// The app server's clock: the blocked-keys cache's relative deadlines, calendar periods.
    pub(crate) local_clock: Option<Arc<dyn Clock>>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            deadline: DEFAULT_DEADLINE,
            connect_timeout: ConnectionOptions::default().connect_timeout,
            blocked_capacity: DEFAULT_BLOCKED_CAPACITY,
            coalesce: true,
            max_batch: DEFAULT_MAX_BATCH,
            batches_in_flight: 2,
            clock_override: None,
            local_clock: None,
        }
    }
}

impl fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisOptions")
            .field("deadline", &self.deadline)
            .field("connect_timeout", &self.connect_timeout)
            .field("blocked_capacity", &self.blocked_capacity)
            .field("coalesce", &self.coalesce)
            .field("max_batch", &self.max_batch)
            .field("batches_in_flight", &self.batches_in_flight)
            .field("clock_override", &self.clock_override.is_some())
            .field("local_clock", &self.local_clock.is_some())
            .finish()
    }
}

impl RedisOptions {
    /// Sets the deadline of one decision.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the timeout of one connection attempt.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The store's connection: [`RedisOptions::connect_timeout`], calls bounded by
    /// [`DEFAULT_TIMEOUT`] (decisions by their deadline).
    pub(crate) fn connection(&self) -> ConnectionOptions {
        ConnectionOptions::default().connect_timeout(self.connect_timeout)
    }

    /// Sets the bound on the blocked-keys cache; 0 turns it off.
    pub fn blocked_capacity(mut self, capacity: usize) -> Self {
        self.blocked_capacity = capacity;
        self
    }

    /// Turns coalescing of concurrent decisions on or off.
    pub fn coalesce(mut self, on: bool) -> Self {
        self.coalesce = on;
        self
    }

    /// Sets how many coalesced script calls may be in flight at once (at least 1).
    pub fn batches_in_flight(mut self, n: usize) -> Self {
        self.batches_in_flight = n.max(1);
        self
    }

    /// Sets the largest number of requests in one coalesced script call (at least 1).
    pub fn max_batch(mut self, max: usize) -> Self {
        self.max_batch = max.max(1);
        self
    }

    /// Sets the app server's clock, read to turn the `retry_after` of a cached rejection into a
    /// local deadline (differences of its readings, so its offset from Redis's clock does not
    /// matter), and to send a calendar window's periods around the instant Redis will decide at
    /// (an offset below a period does not matter). Default: [`flowgate_core::SystemClock`], or
    /// the clock override if set.
    pub fn local_clock(mut self, clock: impl Clock) -> Self {
        self.local_clock = Some(Arc::new(clock));
        self
    }

    /// **Test only** (the `test-support` feature). Makes the scripts read `clock.now()` (passed as an argument) instead of
    /// Redis's `TIME`, so a conformance suite on a [`flowgate_core::ManualClock`] is
    /// deterministic. Keys then get 10 extra minutes of expiry, so state does not vanish while
    /// the test's clock runs slower than Redis's. Production code must never set it: the
    /// app servers' clocks would then decide, and they drift.
    #[cfg(feature = "test-support")]
    pub fn clock_override(mut self, clock: impl Clock) -> Self {
        self.clock_override = Some(Arc::new(clock));
        self
    }
}
