//! Flowgate's Redis store: the [`flowgate_core::Store`] interface on a single Redis server or a
//! Redis Cluster, deciding exactly as the memory store does.
//!
//! - **One Lua file per algorithm** (`scripts/gcra.lua`, `fixed_window.lua`,
//!   `sliding_window.lua`, `sliding_log.lua`, `concurrency.lua`), each reading like the Rust
//!   module it mirrors: decode the state, admit, encode the new state, when it is empty again, its
//!   refund. One driver, `decide.lua`, decides any requests in one script call, each
//!   all-or-nothing, in order; the clock is Redis's `TIME`, so app servers' clocks never decide.
//!   Every state is a little-endian binary string read by one `MGET` and written once per call
//!   (a sliding log's new entry in place, at its end), with an expiry at the next whole second
//!   after it is empty again; rejected requests write nothing.
//! - **Lua admits, Rust reports.** The script answers its admissions and each key's state before
//!   the call; the client replays the requests on those states with the Rust transitions to
//!   report every decision (remaining, reset, retry, wait), and checks they admit alike.
//! - **Several limits of one request in one round trip**, atomically, on a single server; on a
//!   cluster, per slot in parallel, with refunds when another slot rejects.
//! - **Delay mode across app servers**: the reservation lives in Redis, so callers everywhere are
//!   spaced at the rule's rate in reservation order.
//! - **A deadline** on every decision ([`RedisOptions::deadline`], default 25 ms): a decision
//!   fails with `StoreError::Timeout` or `StoreError::Unavailable` and never hangs; the
//!   connection reconnects by itself; [`RedisStore::is_degraded`] and a `tracing` warning say
//!   when Redis is failing. The failure policy (open, closed, local) is the limiter's.
//! - **Failing fast while Redis is known down**: after a few consecutive failed calls, decisions
//!   answer at once as unavailable (no deadline waited) while a probe retries Redis; the first
//!   answer brings it back ([`StoreHealth`], [`RedisStore::health`]).
//! - **Coalescing**: the decisions in flight share one script call (on a cluster, those of one
//!   slot); [`RedisStore::decide_batch`] decides a caller's batch in one call. **A blocked-keys
//!   cache** answers requests for keys known to reject until their `retry_after`, without a round
//!   trip.
//! - **Queues** ([`RedisQueueStore`]): shaped queues in Redis, one script (`scripts/queue.lua`).
//! - **Protection shared by a cluster**: circuit breakers ([`breakers`], `scripts/breaker.lua`)
//!   and adaptive concurrency limits ([`RedisAdaptive`], `scripts/aimd.lua`), each transition run
//!   in Redis once on the reports nodes send in batches, the same as the pure machines of
//!   `flowgate_core::breaker` and `flowgate_core::adaptive`.
//! - **The server's scripts** ([`scripts`]): the alerts' evaluator lease and states, the shared
//!   rules' versions, beside the store's, run as the others through redis-rs's `Script`.
//! - **One connection layer** ([`RedisConnection`]): the store, its queues and the server's
//!   shared rules talk to Redis through it, a single server or a cluster, every call bounded in
//!   time and every client error classified the same way.
//!
//! # Examples
//! ```no_run
//! # async fn demo() -> Result<(), flowgate_core::StoreError> {
//! use flowgate_core::{Algorithm, Item, Limit, Quota, Store};
//! use flowgate_redis::RedisStore;
//! let store = RedisStore::connect("redis://127.0.0.1:6379/").await?;
//! let limit = Limit::new(Algorithm::SlidingLog, Quota::per_second(20).unwrap()).unwrap();
//! let d = store.decide(&[Item { key: "channel=WPG", limit: &limit, cost: 1, enforce: true }]).await?;
//! assert!(d[0].allowed);
//! # Ok(()) }
//! ```

mod adaptive;
mod batch;
mod blocked;
pub mod breakers;
mod call;
mod charge;
mod cluster;
mod cluster_conn;
mod conn;
mod error;
mod health;
#[cfg(not(feature = "test-support"))]
#[allow(unreachable_pub)]
mod keys;
#[cfg(feature = "test-support")]
pub mod keys;
mod options;
mod pubsub;
mod queue;
mod recorded;
mod replication;
mod reservations;
pub mod scripts;
mod sentinel;
mod single;
mod state;
mod stats;
mod store;
mod time_source;
mod topology;

pub use adaptive::{
    ADAPTIVE_DEADLINE, ADAPTIVE_MAX_KEYS, ADAPTIVE_TTL, AdaptiveReport, RedisAdaptive,
};
pub use conn::{RedisConnection, client, cluster_nodes};
pub use health::StoreHealth;
pub use options::{
    ConnectionOptions, DEFAULT_BLOCKED_CAPACITY, DEFAULT_DEADLINE, DEFAULT_DOWN_AFTER,
    DEFAULT_MAX_BATCH, DEFAULT_PROBE_EVERY, DEFAULT_TIMEOUT, RedisOptions, RedisTls, SentinelAuth,
};
pub use pubsub::follow;
pub use queue::{INSTANCES_KEY, QUEUE_DEADLINE, RedisQueueStore};
pub use replication::{DEFAULT_WAIT_TIMEOUT, Replicated};
pub use reservations::{AtomicCommit, RedisReservations};
pub use sentinel::is_sentinel_url;
pub use stats::RedisStats;
pub use store::RedisStore;
pub use topology::{TopologyKind, TopologyView};
