//! Shaped queues: durable jobs released at a steady rate across a cluster.
//!
//! `delay` mode shapes callers that can wait a little; a queue shapes work that drains over
//! hours or days (thousands of refunds to a channel that takes 1 per second). A [`QueueSpec`]
//! declares a queue; each descriptor it matches is one *instance* with its own jobs and release
//! schedule. Jobs leave an instance in submission order, each at the next slot of its rate
//! ([`release`]), leased to a worker until acked; a lease not acked in time gives the job back,
//! and a job that fails `max_attempts` times goes to the dead letters.
//!
//! - [`engine`]: one instance's transitions, pure functions of `now` (the embedded store's
//!   engine, and the reference the Redis scripts follow);
//! - [`QueueStore`]: the store interface, implemented by the embedded on-disk store (in
//!   `flowgate`) and the Redis store (in `flowgate-redis`);
//! - [`QueueSet`]: the declared queues and the descriptor matcher;
//! - [`record`]: the encoding of a job's fields, the same in both stores.

pub mod engine;
mod job;
pub mod record;
pub mod release;
mod set;
mod spec;
mod store;

pub use job::{
    DeadJob, InstanceStats, JobStatus, LeaseOutcome, Leased, Nacked, NewJob, QueueError,
    RELEASE_LOG, RELEASE_WINDOW, Submitted, Token, fingerprint,
};
pub use set::{QueueSet, instance_descriptor, instance_names};
pub use spec::{
    DEFAULT_KEY_RETENTION, DEFAULT_LEASE, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_PAYLOAD, DEFAULT_RETRY_BACKOFF, MAX_AUTO_BACKOFF, MAX_KEYED_BATCH,
    MAX_PAYLOAD_LIMIT, QueueSpec, QueueSpecError,
};
pub use spec::{MAX_DELAY, MAX_KEY_RETENTION, MAX_LEASE, MAX_RETRY_BACKOFF};
pub use store::QueueStore;
