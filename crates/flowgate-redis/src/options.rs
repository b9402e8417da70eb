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
/// The default number of consecutive failed calls after which Redis is known down.
pub const DEFAULT_DOWN_AFTER: u32 = 3;
/// The default interval of the probe that retries a Redis known down.
pub const DEFAULT_PROBE_EVERY: Duration = Duration::from_millis(100);

/// How long a call on a [`crate::RedisConnection`] may wait by default: a bound for calls that no
/// caller's deadline covers (a batching worker's, a queue operation's), so that a Redis that
/// stopped answering never holds them for ever. A store's decisions have their own, shorter
/// deadline ([`RedisOptions::deadline`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificates of `rediss://` connections (PEM): the CA that signed Redis's certificate
/// (a private CA; without one, the system's roots are trusted) and a client certificate with
/// its key for mutual TLS (Redis's `tls-auth-clients yes`).
///
/// The host name (or IP address) of the URL must be one of the names of Redis's certificate.
/// Given for a `redis://` URL, connecting fails with an error that says to use `rediss://`.
///
/// # Examples
/// ```
/// use flowgate_redis::RedisTls;
/// let tls = RedisTls::default().ca_cert(b"-----BEGIN CERTIFICATE-----...".to_vec());
/// assert!(tls.client_cert.is_none());
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisTls {
    /// The CA certificates (PEM) that Redis's certificate must chain to, instead of the
    /// system's roots.
    pub ca_cert: Option<Vec<u8>>,
    /// The client certificate chain (PEM) presented to Redis.
    pub client_cert: Option<Vec<u8>>,
    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub client_key: Option<Vec<u8>>,
}

impl fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTls")
            .field("ca_cert", &self.ca_cert.is_some())
            .field("client_cert", &self.client_cert.is_some())
            .field(
                "client_key",
                &self.client_key.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl RedisTls {
    /// Trusts the CA certificates of `pem` (instead of the system's roots).
    pub fn ca_cert(mut self, pem: Vec<u8>) -> Self {
        self.ca_cert = Some(pem);
        self
    }

    /// Presents the client certificate chain `cert` with its private key `key` (PEM).
    pub fn client(mut self, cert: Vec<u8>, key: Vec<u8>) -> Self {
        self.client_cert = Some(cert);
        self.client_key = Some(key);
        self
    }

    /// Reads the files of a CA certificate, a client certificate and its key (PEM), each
    /// optional; the client certificate and key go together.
    ///
    /// # Errors
    /// When a file cannot be read, or only one of the client certificate and key is given; the
    /// message names the file.
    pub fn from_files(
        ca_cert: Option<&std::path::Path>,
        client_cert: Option<&std::path::Path>,
        client_key: Option<&std::path::Path>,
    ) -> Result<Self, String> {
        let read = |what: &str, path: &std::path::Path| {
            std::fs::read(path)
                .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))
        };
        let mut tls = Self::default();
        if let Some(p) = ca_cert {
            tls.ca_cert = Some(read("Redis CA certificate", p)?);
        }
        match (client_cert, client_key) {
            (Some(c), Some(k)) => {
                tls.client_cert = Some(read("Redis client certificate", c)?);
                tls.client_key = Some(read("Redis client key", k)?);
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err("a Redis client certificate needs its key too".into());
            }
            (None, Some(_)) => {
                return Err("a Redis client key needs its certificate too".into());
            }
        }
        Ok(tls)
    }

    /// The certificates as the client crate takes them.
    pub(crate) fn certificates(&self) -> redis::TlsCertificates {
        let client_tls = match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
            _ => None,
        };
        redis::TlsCertificates {
            client_tls,
            root_cert: self.ca_cert.clone(),
        }
    }
}

/// The credentials of Redis Sentinel's own processes (their `requirepass`, or an ACL user), apart
/// from the data nodes' credentials, which are the URL's (`redis+sentinel://user:pass@…`), as
/// envoyproxy/ratelimit's `REDIS_SENTINEL_AUTH` beside `REDIS_AUTH`, and go-redis's
/// `SentinelPassword` beside `Password`.
///
/// # Examples
/// ```
/// use flowgate_redis::SentinelAuth;
/// let auth = SentinelAuth::default().password("s3cret");
/// assert_eq!(format!("{auth:?}"), r#"SentinelAuth { username: None, password: Some("<redacted>") }"#);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SentinelAuth {
    /// The ACL user of the sentinels (`AUTH user password`); `None` for `requirepass`.
    pub username: Option<String>,
    /// The sentinels' password; `None` when they ask for none.
    pub password: Option<String>,
}

impl fmt::Debug for SentinelAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelAuth")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl SentinelAuth {
    /// Authenticates to the sentinels with `password`.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Authenticates to the sentinels as the ACL user `username`.
    pub fn username(mut self, username: impl Into<String>) -> Self {
        self.username = Some(username.into());
        self
    }
}

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
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionOptions {
    /// How long one connection attempt may take (initial connect and reconnects). Default
    /// 500 ms.
    pub connect_timeout: Duration,
    /// How long a call may wait for its reply. Default [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// The certificates of a `rediss://` connection; `None` trusts the system's roots and
    /// presents no client certificate.
    pub tls: Option<RedisTls>,
    /// The sentinels' own credentials, for a `redis+sentinel://` URL.
    pub sentinel: SentinelAuth,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_millis(500),
            timeout: DEFAULT_TIMEOUT,
            tls: None,
            sentinel: SentinelAuth::default(),
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

    /// Sets the certificates of a `rediss://` connection.
    pub fn tls(mut self, tls: Option<RedisTls>) -> Self {
        self.tls = tls;
        self
    }

    /// Sets the sentinels' own credentials (for a `redis+sentinel://` URL).
    pub fn sentinel(mut self, auth: SentinelAuth) -> Self {
        self.sentinel = auth;
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
    /// The bound on the blocked-keys cache (see `blocked.rs`); 0 turns it off.
    /// Default 10,000.
    pub blocked_capacity: usize,
    /// Whether decisions in flight at the same moment are coalesced into one script call (on a
    /// Redis Cluster, those whose keys share a slot: a hot limit's; see `batch.rs`), and so are
    /// reservation records' writes, and commits on a single Redis (or Sentinel), each kind in
    /// calls of its own. Default on.
    pub coalesce: bool,
    /// The largest number of requests in one coalesced script call. Default 64.
    pub max_batch: usize,
    /// Coalesced script calls in flight at once, per lane and kind (at least 1). Default 2: while one call is in
    /// Redis the next one is already on its way, so Redis does not wait for the client between
    /// calls; more calls in flight only make each one smaller.
    pub batches_in_flight: usize,
    /// The certificates of a `rediss://` connection (a private CA, a client certificate);
    /// `None` trusts the system's roots. The one place both the store and the server's shared
    /// rules take them from.
    pub tls: Option<RedisTls>,
    /// The sentinels' own credentials, for a `redis+sentinel://` URL (the data nodes' are the
    /// URL's).
    pub sentinel: SentinelAuth,
    /// Consecutive failed calls (refused, lost, past the deadline) after which Redis is known
    /// down: decisions then answer at once as unavailable (the failure policies decide without
    /// waiting) while a probe retries Redis (see [`crate::StoreHealth`]). 0 never marks it down.
    /// Default 3.
    pub down_after: u32,
    /// How often the probe of a Redis known down sends `PING`. Default 100 ms.
    pub probe_every: Duration,
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
            tls: None,
            sentinel: SentinelAuth::default(),
            down_after: DEFAULT_DOWN_AFTER,
            probe_every: DEFAULT_PROBE_EVERY,
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
            .field("tls", &self.tls)
            .field("sentinel", &self.sentinel)
            .field("down_after", &self.down_after)
            .field("probe_every", &self.probe_every)
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

    /// Sets the certificates of a `rediss://` connection.
    pub fn tls(mut self, tls: RedisTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Sets the sentinels' own credentials (for a `redis+sentinel://` URL).
    pub fn sentinel(mut self, auth: SentinelAuth) -> Self {
        self.sentinel = auth;
        self
    }

    /// The connection these options make: [`RedisOptions::connect_timeout`],
    /// [`RedisOptions::tls`] and [`RedisOptions::sentinel`], calls bounded by
    /// [`DEFAULT_TIMEOUT`] (the store's decisions by their deadline).
    pub fn connection(&self) -> ConnectionOptions {
        ConnectionOptions::default()
            .connect_timeout(self.connect_timeout)
            .tls(self.tls.clone())
            .sentinel(self.sentinel.clone())
    }

    /// Sets the consecutive failures after which Redis is known down; 0 never marks it down.
    pub fn down_after(mut self, failures: u32) -> Self {
        self.down_after = failures;
        self
    }

    /// Sets how often the probe of a Redis known down sends `PING` (at least 1 ms).
    pub fn probe_every(mut self, every: Duration) -> Self {
        self.probe_every = every.max(Duration::from_millis(1));
        self
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
