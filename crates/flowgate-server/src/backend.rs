//! The store the server runs on, chosen at start: the embedded memory store, or Redis.

use flowgate::clock::{Clock, ManualClock, Micros, SystemClock};
use flowgate::queue::DiskQueueStore;
use flowgate::queue::{
    DeadJob, InstanceStats, LeaseOutcome, Nacked, NewJob, QueueError, QueueSpec, QueueStore,
    Submitted,
};
use flowgate::records::Reservation;
use flowgate::store::{ChargeItem, Charges, Decisions, Item, Store, StoreError};
use flowgate::{Limit, MemoryStore};
use flowgate_redis::RedisQueueStore;

use flowgate_observe::view::StoreKind;

/// The clock of the embedded store: the real one, or a manual one for tests.
#[derive(Clone, Debug)]
pub enum ServerClock {
    /// The real clock.
    System(SystemClock),
    /// A clock that moves only when told to (tests).
    Manual(ManualClock),
}

impl Clock for ServerClock {
    #[inline]
    fn now(&self) -> flowgate::clock::Micros {
        match self {
            ServerClock::System(c) => c.now(),
            ServerClock::Manual(c) => c.now(),
        }
    }
}

/// The store behind the server's limiter.
pub enum Backend {
    /// The embedded memory store (no set-up; limits are per process).
    Memory(MemoryStore<ServerClock>),
    /// Redis, a single server or a cluster (limits shared by every server on it).
    Redis(flowgate_redis::RedisStore),
}

impl Backend {
    /// A memory store on `clock` holding at most `max_keys` keys.
    pub fn memory(clock: ServerClock, max_keys: usize) -> Self {
        Backend::Memory(MemoryStore::with_clock(clock).with_max_keys(max_keys))
    }

    /// Connects to Redis: `redis://host:port/db` (or `rediss://`) for one server,
    /// `redis+cluster://host:port,host:port` (or `rediss+cluster://`) for a cluster. When Redis
    /// cannot be reached, the store connects on first use (each rule's failure policy decides
    /// until then).
    ///
    /// # Errors
    /// For an invalid URL, or when Redis answers with an error.
    pub async fn redis(url: &str, deadline: std::time::Duration) -> Result<Self, StoreError> {
        Self::redis_with(
            url,
            flowgate_redis::RedisOptions::default().deadline(deadline),
        )
        .await
    }

    /// As [`Backend::redis`], with the store's `options` (its deadline, its TLS certificates
    /// for `rediss://` and `rediss+cluster://` URLs).
    ///
    /// # Errors
    /// For an invalid URL or certificates, or when Redis answers with an error.
    pub async fn redis_with(
        url: &str,
        options: flowgate_redis::RedisOptions,
    ) -> Result<Self, StoreError> {
        let nodes = flowgate_redis::cluster_nodes(url);
        let connected = match &nodes {
            Some(nodes) => {
                flowgate_redis::RedisStore::connect_cluster_with(nodes, options.clone()).await
            }
            None => flowgate_redis::RedisStore::connect_with(url, options.clone()).await,
        };
        let store = match connected {
            Ok(store) => store,
            Err(e @ (StoreError::Unavailable(_) | StoreError::Timeout)) => {
                tracing::warn!(error = %e, "Redis is unreachable: starting anyway, each rule's failure policy decides until it is back");
                match &nodes {
                    Some(nodes) => {
                        flowgate_redis::RedisStore::connect_cluster_lazy_with(nodes, options)?
                    }
                    None => flowgate_redis::RedisStore::connect_lazy_with(url, options)?,
                }
            }
            Err(e) => return Err(e),
        };
        Ok(Backend::Redis(store))
    }

    /// Which store it is.
    pub fn kind(&self) -> StoreKind {
        match self {
            Backend::Memory(_) => StoreKind::Memory,
            Backend::Redis(_) => StoreKind::Redis,
        }
    }

    /// Whether the store can answer now (on Redis, a `PING` counted as a call: see
    /// [`flowgate_redis::RedisStore::ping`]).
    ///
    /// # Errors
    /// The store's error when it cannot.
    pub async fn ready(&self) -> Result<(), StoreError> {
        match self {
            Backend::Memory(_) => Ok(()),
            Backend::Redis(r) => r.ping().await,
        }
    }

    /// The embedded store's counters (`None` on Redis).
    pub fn memory_stats(&self) -> Option<flowgate::store::MemoryStats> {
        match self {
            Backend::Memory(m) => Some(m.stats()),
            Backend::Redis(_) => None,
        }
    }

    /// Drops idle state (memory store); a no-op for stores that expire state themselves.
    pub fn sweep(&self) {
        match self {
            Backend::Memory(m) => m.sweep(),
            Backend::Redis(_) => {}
        }
    }
}

impl Store for Backend {
    fn now(&self) -> u64 {
        match self {
            Backend::Memory(m) => m.now(),
            Backend::Redis(r) => r.now(),
        }
    }

    async fn decide(&self, items: &[Item<'_>]) -> Result<Decisions, StoreError> {
        match self {
            Backend::Memory(m) => m.decide_now(items),
            // Boxed: the Redis call's future is about 1.7 KB, and every caller's future would
            // otherwise carry it, and move it, on the embedded store too.
            Backend::Redis(r) => Box::pin(r.decide(items)).await,
        }
    }

    async fn decide_recorded(
        &self,
        items: &[Item<'_>],
        record: &Reservation,
        forget_at: Micros,
    ) -> Result<(Decisions, bool), StoreError> {
        match self {
            // (the embedded store's records are this process's: written apart, in memory)
            Backend::Memory(m) => Ok((m.decide_now(items)?, false)),
            Backend::Redis(r) => Box::pin(r.decide_recorded(items, record, forget_at)).await,
        }
    }

    async fn release(&self, key: &str, limit: &Limit, lease: u64) -> Result<bool, StoreError> {
        match self {
            Backend::Memory(m) => Ok(m.release_now(key, limit, lease)),
            Backend::Redis(r) => r.release(key, limit, lease).await,
        }
    }

    /// Charges take their own path: the memory store's shards, or one Redis call of their own
    /// (never a decision's lane), which answers at once while Redis is known down and gives up
    /// at the store's deadline otherwise.
    async fn charge(&self, items: &[ChargeItem<'_>]) -> Result<Charges, StoreError> {
        match self {
            Backend::Memory(m) => m.charge_now(items),
            Backend::Redis(r) => Box::pin(r.charge(items)).await,
        }
    }
}

/// The queue store behind the server: the embedded on-disk store, or Redis (the same Redis as
/// the limits).
#[derive(Clone)]
pub enum QueueBackend {
    /// Jobs in an embedded database under the data directory.
    Disk(DiskQueueStore),
    /// Jobs in Redis.
    Redis(RedisQueueStore),
}

impl QueueBackend {
    /// The queue store that goes with `backend`: Redis's (its writes waiting for replicas
    /// through `replicated`, when given), or an embedded one opened in `data_dir` on `clock`.
    ///
    /// # Errors
    /// When the data directory cannot be opened.
    pub fn for_backend(
        backend: &Backend,
        data_dir: &std::path::Path,
        clock: ServerClock,
        replicated: Option<flowgate_redis::Replicated>,
    ) -> Result<Self, StoreError> {
        match backend {
            Backend::Redis(r) => Ok(QueueBackend::Redis(match replicated {
                Some(rep) => r.queues().replicated(rep),
                None => r.queues(),
            })),
            Backend::Memory(_) => DiskQueueStore::open(data_dir, clock).map(QueueBackend::Disk),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            QueueBackend::Disk($s) => $call.await,
            QueueBackend::Redis($s) => $call.await,
        }
    };
}

impl QueueStore for QueueBackend {
    async fn submit(
        &self,
        spec: &QueueSpec,
        instance: &str,
        jobs: &[NewJob],
    ) -> Result<Vec<Submitted>, QueueError> {
        dispatch!(self, s => s.submit(spec, instance, jobs))
    }

    async fn lease(
        &self,
        spec: &QueueSpec,
        instance: &str,
        horizon: Micros,
        nonce: u64,
    ) -> Result<LeaseOutcome, QueueError> {
        dispatch!(self, s => s.lease(spec, instance, horizon, nonce))
    }

    async fn give_back(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
        slot: Micros,
    ) -> Result<(), QueueError> {
        dispatch!(self, s => s.give_back(spec, instance, id, nonce, slot))
    }

    async fn ack(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
    ) -> Result<(), QueueError> {
        dispatch!(self, s => s.ack(spec, instance, id, nonce))
    }

    async fn nack(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
        retry_after: Option<Micros>,
    ) -> Result<Nacked, QueueError> {
        dispatch!(self, s => s.nack(spec, instance, id, nonce, retry_after))
    }

    async fn dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<DeadJob>, QueueError> {
        dispatch!(self, s => s.dead(spec, instance, offset, limit))
    }

    async fn requeue_dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        dispatch!(self, s => s.requeue_dead(spec, instance, ids))
    }

    async fn purge_dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        ids: Option<&[u64]>,
    ) -> Result<u64, QueueError> {
        dispatch!(self, s => s.purge_dead(spec, instance, ids))
    }

    async fn purge(&self, spec: &QueueSpec, instance: &str) -> Result<u64, QueueError> {
        dispatch!(self, s => s.purge(spec, instance))
    }

    async fn stats(
        &self,
        spec: &QueueSpec,
        instance: &str,
    ) -> Result<Option<InstanceStats>, QueueError> {
        dispatch!(self, s => s.stats(spec, instance))
    }

    async fn instances(&self) -> Result<Vec<String>, QueueError> {
        dispatch!(self, s => s.instances())
    }
}
