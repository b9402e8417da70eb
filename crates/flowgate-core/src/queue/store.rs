//! The queue store interface: where jobs live, and who applies the transitions of
//! [`super::engine`] atomically.

use std::future::Future;

use super::job::{DeadJob, InstanceStats, LeaseOutcome, Nacked, NewJob, QueueError, Submitted};
use super::spec::QueueSpec;
use crate::clock::Micros;

/// Where queue instances live: the embedded on-disk store, or Redis. Clones share the store.
///
/// Every operation is atomic on one instance (`instance` is its key, see
/// [`super::QueueSet::find`]), applies what time has done first (expired leases, due delayed
/// jobs), reads the time from the store's own clock, and answers only once its effect is durable
/// (committed to disk, or held by Redis). The semantics are [`super::engine::Instance`]'s; the
/// queue conformance table in `flowgate-testkit` holds every store to them.
pub trait QueueStore: Clone + Send + Sync + 'static {
    /// Submits a batch, all or nothing. See [`super::engine::Instance::submit`].
    fn submit(
        &self,
        spec: &QueueSpec,
        instance: &str,
        jobs: &[NewJob],
    ) -> impl Future<Output = Result<Vec<Submitted>, QueueError>> + Send;

    /// Leases the next job if its slot is within `horizon` µs. See
    /// [`super::engine::Instance::lease`].
    fn lease(
        &self,
        spec: &QueueSpec,
        instance: &str,
        horizon: Micros,
        nonce: u64,
    ) -> impl Future<Output = Result<LeaseOutcome, QueueError>> + Send;

    /// Gives back a delivery that never reached its worker. See
    /// [`super::engine::Instance::give_back`].
    fn give_back(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
        slot: Micros,
    ) -> impl Future<Output = Result<(), QueueError>> + Send;

    /// Acks a delivery. See [`super::engine::Instance::ack`].
    fn ack(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
    ) -> impl Future<Output = Result<(), QueueError>> + Send;

    /// Gives a delivery back. See [`super::engine::Instance::nack`].
    fn nack(
        &self,
        spec: &QueueSpec,
        instance: &str,
        id: u64,
        nonce: u64,
        retry_after: Option<Micros>,
    ) -> impl Future<Output = Result<Nacked, QueueError>> + Send;

    /// Lists dead letters. See [`super::engine::Instance::dead`].
    fn dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        offset: usize,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<DeadJob>, QueueError>> + Send;

    /// Requeues dead letters (`ids`, or all). See [`super::engine::Instance::requeue_dead`].
    fn requeue_dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        ids: Option<&[u64]>,
    ) -> impl Future<Output = Result<u64, QueueError>> + Send;

    /// Deletes dead letters (`ids`, or all). See [`super::engine::Instance::purge_dead`].
    fn purge_dead(
        &self,
        spec: &QueueSpec,
        instance: &str,
        ids: Option<&[u64]>,
    ) -> impl Future<Output = Result<u64, QueueError>> + Send;

    /// Deletes every job of an instance. See [`super::engine::Instance::purge`].
    fn purge(
        &self,
        spec: &QueueSpec,
        instance: &str,
    ) -> impl Future<Output = Result<u64, QueueError>> + Send;

    /// An instance's state (see [`super::engine::Instance::stats`]), or `None` when the
    /// instance was forgotten: empty and idle for its `key_retention`
    /// ([`super::engine::Instance::forgettable`]), it leaves [`QueueStore::instances`].
    fn stats(
        &self,
        spec: &QueueSpec,
        instance: &str,
    ) -> impl Future<Output = Result<Option<InstanceStats>, QueueError>> + Send;

    /// The keys of the instances the store holds: every instance that held a job, until
    /// [`QueueStore::stats`] finds it forgotten.
    fn instances(&self) -> impl Future<Output = Result<Vec<String>, QueueError>> + Send;
}
