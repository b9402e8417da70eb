//! [`RedisStore`]: the [`Store`] on a single Redis server or a Redis Cluster.

use std::sync::Arc;
use std::time::Duration;

use flowgate_core::{
    Algorithm, Clock, Decisions, Item, Limit, Micros, Store, StoreError, SystemClock,
    reservation::Reservation,
};

use crate::batch::{Batching, Lanes};
use crate::blocked::Blocked;
use crate::call::Caller;
use crate::charge::CommitBatch;
use crate::conn::RedisConnection;
use crate::error::store_error;
use crate::health::{Change, DOWN, Health, StoreHealth};
use crate::keys::{SLOTS, redis_key};
use crate::options::RedisOptions;
use crate::recorded::DecideBatch;
use crate::reservations::{PutBatch, PutRequest};
use crate::scripts::RELEASE;
use crate::stats::{Counters, RedisStats};
use crate::time_source::TimeSource;

mod decide;
mod tasks;

use tasks::{LeaseIds, keep_time, probe};

/// The Redis store. See the [crate documentation](crate).
///
/// Cloning is cheap: clones share the connection, the blocked-keys cache and the counters.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    caller: Caller,
    deadline: Duration,
    blocked: Blocked,
    local_clock: Arc<dyn Clock>,
    lanes: Option<Lanes<DecideBatch>>,
    /// Reservation records' writes, coalesced.
    puts: Option<Lanes<PutBatch>>,
    /// Commits, coalesced (a single Redis only: a commit's keys span slots).
    commits: Option<Lanes<CommitBatch>>,
    leases: LeaseIds,
    /// Whether Redis is known down (decisions then answer at once).
    health: Health,
    /// How often the probe of a Redis known down retries it.
    probe_every: Duration,
    /// The servers a subscriber connects to, tried in turn (a cluster publishes to every node;
    /// a sentinel URL names the primary each time), and how to connect to them.
    subscribe: (Vec<String>, crate::ConnectionOptions),
}

impl RedisStore {
    /// Connects to a single Redis server (`redis://127.0.0.1:6379/`) with default options.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] or [`StoreError::Timeout`] when the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, RedisOptions::default()).await
    }

    /// Connects to a single Redis server, or to the primary Redis Sentinel names
    /// (`redis+sentinel://host:port,host:port/<master-name>`: see [`RedisOptions::sentinel`]).
    ///
    /// # Errors
    /// As [`RedisStore::connect`].
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let conn = if crate::is_sentinel_url(url) {
            RedisConnection::sentinel(url, options.connection()).await?
        } else {
            RedisConnection::single(url, options.connection()).await?
        };
        Self::build(conn, options, vec![url.to_owned()])
    }

    /// A store on a single Redis server that connects on first use (and again after failures):
    /// it can be made while Redis is down, whose decisions then fail until it is back (each
    /// rule's failure policy decides meanwhile).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] for a URL that cannot be parsed; [`StoreError::Internal`]
    /// when the operating system's random source fails (see [`flowgate_core::random`]).
    pub fn connect_lazy_with(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let conn = if crate::is_sentinel_url(url) {
            RedisConnection::sentinel_lazy(url, options.connection())?
        } else {
            RedisConnection::single_lazy(url, options.connection())?
        };
        Self::build(conn, options, vec![url.to_owned()])
    }

    /// A Redis Cluster's store whose connection is made on first use, so that it can be built
    /// while the cluster is down: decisions fail as unavailable until a node answers.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] for an invalid URL; [`StoreError::Internal`] when the
    /// operating system's random source fails (see [`flowgate_core::random`]).
    pub fn connect_cluster_lazy_with<S: AsRef<str>>(
        urls: &[S],
        options: RedisOptions,
    ) -> Result<Self, StoreError> {
        let urls: Vec<String> = urls.iter().map(|u| u.as_ref().to_owned()).collect();
        let conn = RedisConnection::cluster_lazy(&urls, options.connection())?;
        Self::build(conn, options, urls)
    }

    /// Connects to a Redis Cluster through any of its nodes, with default options.
    ///
    /// # Errors
    /// As [`RedisStore::connect`].
    pub async fn connect_cluster<S: AsRef<str>>(urls: &[S]) -> Result<Self, StoreError> {
        Self::connect_cluster_with(urls, RedisOptions::default()).await
    }

    /// Connects to a Redis Cluster through any of its nodes.
    ///
    /// # Errors
    /// As [`RedisStore::connect`].
    pub async fn connect_cluster_with<S: AsRef<str>>(
        urls: &[S],
        options: RedisOptions,
    ) -> Result<Self, StoreError> {
        let urls: Vec<String> = urls.iter().map(|u| u.as_ref().to_owned()).collect();
        let conn = RedisConnection::cluster(&urls, options.connection()).await?;
        Self::build(conn, options, urls)
    }

    /// # Errors
    /// [`StoreError::Internal`] when the operating system gives no random seed for lease ids.
    fn build(
        conn: RedisConnection,
        options: RedisOptions,
        subscribe: Vec<String>,
    ) -> Result<Self, StoreError> {
        let leases = LeaseIds::new()?;
        let counters = Arc::new(Counters::default());
        let local_clock: Arc<dyn Clock> = match (&options.local_clock, &options.clock_override) {
            (Some(c), _) | (None, Some(c)) => c.clone(),
            (None, None) => Arc::new(SystemClock::new()),
        };
        let time = TimeSource::new(options.clock_override.clone(), local_clock.clone());
        let caller = Caller {
            conn,
            time,
            counters,
        };
        let lanes = options.coalesce.then(|| {
            Lanes::new(
                if caller.conn.is_cluster() { SLOTS } else { 1 },
                options.batches_in_flight,
                Batching {
                    batch: DecideBatch(caller.clone()),
                    max_batch: options.max_batch,
                },
            )
        });
        let puts = options.coalesce.then(|| {
            Lanes::new(
                1,
                options.batches_in_flight,
                Batching {
                    batch: PutBatch(caller.conn.clone()),
                    max_batch: options.max_batch,
                },
            )
        });
        let commits = (options.coalesce && !caller.conn.is_cluster()).then(|| {
            Lanes::new(
                1,
                options.batches_in_flight,
                Batching {
                    batch: CommitBatch(caller.clone()),
                    max_batch: options.max_batch,
                },
            )
        });
        let store = Self {
            inner: Arc::new(Inner {
                caller,
                deadline: options.deadline,
                blocked: Blocked::new(options.blocked_capacity),
                local_clock,
                lanes,
                puts,
                commits,
                leases,
                health: Health::new(options.down_after),
                probe_every: options.probe_every,
                subscribe: (subscribe, options.connection()),
            }),
        };
        if options.clock_override.is_none()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(keep_time(Arc::downgrade(&store.inner)));
        }
        Ok(store)
    }

    /// Redis's clock as this node estimates it: the instant a decision sent now is made at,
    /// within about half a round trip (see [`Store::now`]).
    pub fn now(&self) -> Micros {
        self.inner.caller.time.estimate()
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.caller.conn.is_cluster()
    }

    /// The deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.inner.deadline
    }

    /// Whether the store is failing now (its last call failed). A warning is logged (target
    /// `flowgate_redis`) when it becomes degraded, and an info line when it recovers.
    pub fn is_degraded(&self) -> bool {
        self.stats().degraded
    }

    /// Where Redis's primaries are, as this store's connection follows them (see
    /// [`TopologyView`](crate::TopologyView)).
    pub fn topology(&self) -> crate::TopologyView {
        self.inner.caller.conn.topology()
    }

    /// Whether Redis is known down, since when, and why (see [`StoreHealth`]).
    pub fn health(&self) -> StoreHealth {
        self.inner.health.snapshot()
    }

    /// The answer of a call made while Redis is known down, counted; `None` while it is not.
    #[inline]
    fn known_down(&self) -> Option<StoreError> {
        if !self.inner.health.is_down() {
            return None;
        }
        Counters::add(&self.inner.caller.counters.fast_failures, 1);
        Some(StoreError::Unavailable(DOWN.to_owned()))
    }

    /// Records a call's outcome: the counters, the degraded flag, and whether Redis is now known
    /// down (then starts the probe that finds it back).
    fn settle<T>(&self, r: &Result<T, StoreError>) {
        let inner = &self.inner;
        inner.caller.counters.outcome(r);
        inner.caller.conn.note(r);
        if inner.health.record(r, flowgate_core::clock::system_now()) == Change::WentDown
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(probe(Arc::downgrade(inner)));
        }
    }

    /// The store's counters.
    pub fn stats(&self) -> RedisStats {
        self.inner
            .caller
            .counters
            .snapshot(self.inner.blocked.len() as u64)
    }

    /// Empties the blocked-keys cache (call it when the rules change).
    pub fn clear_blocked(&self) {
        self.inner.blocked.clear();
    }

    /// Sends a plain command on the store's connection (benchmarks, tests, diagnostics), within
    /// the deadline.
    ///
    /// # Errors
    /// As a decision.
    pub async fn query(&self, cmd: &redis::Cmd) -> Result<redis::Value, StoreError> {
        tokio::time::timeout(self.inner.deadline, self.inner.caller.conn.query(cmd))
            .await
            .unwrap_or(Err(StoreError::Timeout))
    }

    /// Whether Redis answers now: a `PING` within the deadline, counted as any call is (it
    /// clears the degraded flag, or adds a failure). While Redis is known down, none: the
    /// answer is at once, the probe's last failure (a Redis that hangs is a timeout, not
    /// unavailable), and not counted as a decision answered at once.
    ///
    /// # Errors
    /// As a decision.
    pub async fn ping(&self) -> Result<(), StoreError> {
        if self.inner.health.is_down() {
            return Err(self
                .inner
                .health
                .snapshot()
                .last_error
                .unwrap_or_else(|| StoreError::Unavailable(DOWN.to_owned())));
        }
        let r = self.query(&redis::cmd("PING")).await.map(|_| ());
        self.settle(&r);
        r
    }

    /// The connection (the queue store shares it).
    pub(crate) fn conn(&self) -> &RedisConnection {
        &self.inner.caller.conn
    }

    /// The servers a subscriber to this store's notifications connects to, tried in turn, and
    /// how to connect to them (certificates, the sentinels' credentials).
    pub(crate) fn subscribe_to(&self) -> (&[String], &crate::ConnectionOptions) {
        (&self.inner.subscribe.0, &self.inner.subscribe.1)
    }

    /// The test clock's reading, when the scripts are given one instead of Redis's `TIME`.
    pub(crate) fn clock_override(&self) -> Option<Micros> {
        self.inner.caller.time.fixed.as_ref().map(|c| c.now())
    }
}

impl RedisStore {
    /// Writes a reservation's record (`reservations.lua`'s `put`), with the writes in flight
    /// beside it when coalescing, within the connection's timeout (not the decisions' deadline:
    /// a write that timed out may still have been applied).
    pub(crate) async fn put_call(&self, request: PutRequest) -> Result<(), StoreError> {
        match &self.inner.puts {
            Some(lanes) => lanes.submit(0, request).await?,
            None => crate::batch::alone(&PutBatch(self.inner.caller.conn.clone()), request).await?,
        }
    }

    /// `commit.lua` ([`crate::charge::commit`]) under the store's deadline and health, as
    /// [`Store::charge`].
    pub(crate) async fn commit_call(
        &self,
        record: (&str, &str),
        read: &str,
        items: &[flowgate_core::ChargeItem<'_>],
    ) -> Result<crate::charge::Committed, StoreError> {
        if let Some(e) = self.known_down() {
            return Err(e);
        }
        let inner = &self.inner;
        let call =
            crate::charge::commit(&inner.caller, inner.commits.as_ref(), record, read, items);
        let r = tokio::time::timeout(inner.deadline, call)
            .await
            .unwrap_or(Err(StoreError::Timeout));
        self.settle(&r);
        if let Ok(crate::charge::Committed::Done(charges)) = &r {
            for (item, c) in items.iter().zip(charges) {
                if item.amount.gives_back() && c.applied > 0 {
                    inner.blocked.forget(item.key);
                }
            }
        }
        r
    }
}

impl Store for RedisStore {
    fn now(&self) -> Micros {
        RedisStore::now(self)
    }

    async fn decide(&self, items: &[Item<'_>]) -> Result<Decisions, StoreError> {
        self.decide_with(items, None).await.map(|(d, _)| d)
    }

    async fn decide_recorded(
        &self,
        items: &[Item<'_>],
        record: &Reservation,
        forget_at: Micros,
    ) -> Result<(Decisions, bool), StoreError> {
        if self.is_cluster() {
            // (the records' slot is not the limits')
            return self.decide_with(items, None).await;
        }
        self.decide_with(items, Some(PutRequest::of(record, forget_at)))
            .await
    }

    async fn charge(
        &self,
        items: &[flowgate_core::ChargeItem<'_>],
    ) -> Result<flowgate_core::Charges, StoreError> {
        if items.is_empty() {
            return Ok(flowgate_core::Charges::new());
        }
        if let Some(e) = self.known_down() {
            return Err(e);
        }
        let inner = &self.inner;
        let r = tokio::time::timeout(inner.deadline, crate::charge::charge(&inner.caller, items))
            .await
            .unwrap_or(Err(StoreError::Timeout));
        self.settle(&r);
        if let Ok(charges) = &r {
            for (item, c) in items.iter().zip(charges) {
                if item.amount.gives_back() && c.applied > 0 {
                    inner.blocked.forget(item.key);
                }
            }
        }
        r
    }

    async fn release(&self, key: &str, limit: &Limit, lease: u64) -> Result<bool, StoreError> {
        if limit.algorithm() != Algorithm::Concurrency {
            return Ok(false);
        }
        if let Some(e) = self.known_down() {
            return Err(e);
        }
        let inner = &self.inner;
        let mut inv = RELEASE.prepare_invoke();
        inv.key(redis_key(key, limit)).arg(lease);
        let r = match tokio::time::timeout(inner.deadline, inner.caller.conn.invoke(&inv)).await {
            Ok(r) => r.map_err(|e| store_error(&e)),
            Err(_) => Err(StoreError::Timeout),
        };
        self.settle(&r);
        match r? {
            redis::Value::Int(n) => Ok(n == 1),
            other => Err(StoreError::Internal(format!(
                "unexpected reply from the release script: {other:?}"
            ))),
        }
    }
}
