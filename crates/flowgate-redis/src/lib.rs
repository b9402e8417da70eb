//! Flowgate's Redis store: the [`flowgate_core::Store`] interface on a single Redis server or a
//! Redis Cluster, deciding with the same arithmetic as the memory store.
//!
//! - **One Lua file per algorithm** (`scripts/*.lua`, each with a `KEYS[i]: … ARGV[j]: …`
//!   contract), assembled at startup into scripts sent by EVALSHA and loaded on NOSCRIPT: a
//!   straight-line fast script (no function definitions, one parameter block per distinct limit,
//!   the whole call as one binary argument, each distinct key read once by one MGET and a key
//!   shared by several requests of the call written once) for every request whose keys are
//!   distinct, and a function-based driver for requests that repeat a key
//!   ([`scripts`]). The clock is `redis.call('TIME')` in microseconds: app servers' clocks never
//!   decide. Every state is a little-endian binary string (a sliding window, a sliding log or a set
//!   of leases carries its total, so a decision reads only what has gone stale; a sliding window
//!   or log stores its newest counts or entries first, so its new state is one `struct.pack` of a
//!   prefix of the old one, Redis's Lua hashing every byte of every string it makes). The fast script
//!   only admits and records: it answers its admissions (one byte per item, in one string) and the
//!   state each request was decided on (a key that several requests of a call share sends its state
//!   once, as it was before the call, and the client replays the call's requests on it), and the
//!   client derives the decision with the same Rust transition as the memory store, checking that
//!   both admit alike. A key shared by several requests of a call that admits them all, whichever
//!   are admitted (a global or per-channel limit far from its limit; any algorithm but
//!   concurrency), is decided in bulk: its later items are admitted without being decided, and its
//!   state is written once, for the requests admitted. Within a call a
//!   shared concurrency lease list is kept as a table and made into a string once, when written.
//!   Every key written expires at the next whole second of Redis's clock after its state is empty
//!   again (so a key whose expiry would not move is overwritten in place, `SETRANGE`, or with
//!   `KEEPTTL`); rejected requests write nothing.
//! - **Several limits of one request in one round trip**, atomically, on a single server; on a
//!   cluster, per slot in parallel with refunds when another slot rejects ([`cluster`]).
//! - **Delay mode across app servers**: the reservation lives in Redis, so callers everywhere
//!   are spaced at the rule's rate in reservation order.
//! - **A deadline** on every call ([`RedisOptions::deadline`], default 25 ms): a call fails with
//!   `StoreError::Timeout` or `StoreError::Unavailable` and never hangs; the connection
//!   reconnects by itself; [`RedisStore::is_degraded`] and a `tracing` warning say when Redis is
//!   failing. The failure policy (open, closed, local) is the limiter's.
//! - **A blocked-keys cache** ([`blocked`]) answers requests for keys known to reject without a
//!   round trip; **coalescing** ([`batch`]) shares one script call among the decisions in flight
//!   (on a cluster, among those of one slot), and [`RedisStore::decide_batch`] decides a
//!   caller's batch of requests in one call.
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

pub mod batch;
pub mod blocked;
mod call;
pub mod cluster;
mod conn;
mod error;
pub mod keys;
mod options;
pub mod queue;
pub mod scripts;
mod state;
mod stats;
mod store;

pub use options::{DEFAULT_BLOCKED_CAPACITY, DEFAULT_DEADLINE, DEFAULT_MAX_BATCH, RedisOptions};
pub use queue::RedisQueueStore;
pub use stats::RedisStats;
pub use store::RedisStore;
