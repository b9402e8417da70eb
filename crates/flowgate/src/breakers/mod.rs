//! Circuit breakers around the limiter: calls' outcomes are reported, and a request matching an
//! open breaker is refused before the store is asked.
//!
//! A [`BreakerDef`] names a descriptor pattern, matched as rules are (one breaker instance per
//! matched descriptor, keyed `<domain>:<breaker>:<k>=<v>,...`), and a [`BreakerSpec`]: the
//! state machine of [`flowgate_core::breaker`], whose module documentation states the semantics
//! exactly (a sliding window of buckets, thresholds compared "at least", probes holding expiring
//! leases). A limiter's breakers are reached through [`crate::Limiter::breakers`].
//!
//! The states are this process's unless the limiter shares them through Redis
//! ([`Breakers::share`]): then each breaker is the cluster's, read from this node's cached copy,
//! and the local states are the fallback decided on while Redis is unreachable (the module
//! `shared.rs` says how, over the engine every shared state uses, `link.rs`).
//!
//! # Where things are
//! `def.rs` (a breaker and the set of them), `registry.rs` (the limiter's breakers: the set in
//! force and each breaker's instances; reports and views), `gate.rs` (a request's look before
//! the store and its admission after it), `instance.rs` (an instance in this process),
//! `shared.rs` (this node's copy of the cluster's instances, and the breakers' side of the
//! engine), `event.rs`, `view.rs`, `outcome.rs` (what callers are told).
//!
//! # Cost
//! With no breaker declared, a check reads one atomic flag. With breakers, a check takes each
//! matched breaker's lock twice (a look before the store, the admission after it), a report
//! once; both are short and never wait on I/O.

use std::sync::Arc;

use flowgate_core::Store;

mod def;
mod event;
mod gate;
mod instance;
mod outcome;
mod registry;
#[cfg(feature = "redis")]
mod shared;
mod view;

pub use def::{BreakerDef, BreakerSet};
pub use event::BreakerEvent;
pub use flowgate_core::breaker::{
    BreakerError, BreakerSpec, DEFAULT_BUCKETS, Opened, Phase, Strategy,
};
pub use gate::BreakerStatus;
pub use outcome::{Outcome, Reported};
pub use view::BreakerView;

pub(crate) use gate::Refusal;
pub(crate) use registry::Registry;

/// The most instances (distinct matched descriptors) one breaker keeps. At the cap, closed
/// instances with an empty window are dropped to make room; if none is, a report for a new
/// instance is dropped (and counted as such).
pub const MAX_INSTANCES: usize = 10_000;

/// The most instances a view lists: those not closed first, then closed ones with the most bad
/// calls in their window.
pub const MAX_VIEWS: usize = 1_000;

/// A limiter's circuit breakers: [`crate::Limiter::breakers`] hands it out.
pub struct Breakers<'a, S: Store> {
    registry: &'a Registry,
    store: &'a S,
}

impl<S: Store> Clone for Breakers<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: Store> Copy for Breakers<'_, S> {}

impl<'a, S: Store> Breakers<'a, S> {
    pub(crate) fn new(registry: &'a Registry, store: &'a S) -> Self {
        Self { registry, store }
    }

    /// Replaces the breakers, atomically. A breaker whose definition is unchanged keeps its
    /// state (open stays open); the others start closed.
    pub fn set(&self, breakers: BreakerSet) {
        self.registry.set(breakers);
    }

    /// The breakers in force.
    pub fn defs(&self) -> Vec<BreakerDef> {
        self.registry.defs()
    }

    /// Shares the breakers with every node on `store`'s Redis (or Redis Cluster), this one
    /// named `node` (for `min_nodes`): each breaker is then the cluster's (cached phases,
    /// batched reports, transitions decided once in Redis and published, a local fallback while
    /// Redis is unreachable: see the [module documentation](self)). Call it once, within a Tokio
    /// runtime (it starts the task that sends reports and reads phases, which ends with the
    /// limiter; without a runtime the breakers stay per process and a warning says so); later
    /// calls change nothing.
    #[cfg(feature = "redis")]
    pub fn share(&self, store: &flowgate_redis::RedisStore, node: &str) {
        self.registry.share(store, node);
    }

    /// Whether the breakers are shared through Redis (`None`: per process), and if so whether
    /// Redis answers now (`Some(false)`: each node decides on its own reports).
    pub fn shared(&self) -> Option<bool> {
        self.registry.link().shared()
    }

    /// Reports of calls' outcomes this node counted for its shared breakers but never sent to
    /// Redis (their batch failed, or Redis was unreachable), since it started: they fed only
    /// the node's local fallback. 0 when the breakers are per process.
    pub fn unsent(&self) -> u64 {
        self.registry.link().unsent()
    }

    /// Sends the reports queued for the shared breakers now, rather than at the next batch
    /// (every 20 ms): completes once every report counted before the call has reached Redis or
    /// been counted [`Breakers::unsent`]; at once when the breakers are per process. For a
    /// shutdown, so that the last reports are not lost with the process; it waits on Redis's
    /// answer (up to the store's deadline per call), so bound it with a timeout.
    pub async fn flush(self) {
        self.registry.link().flush().await;
    }

    /// Calls `f` on every breaker transition (after the breaker's lock is released; it must not
    /// block). Transitions are also logged, target `flowgate::breakers`.
    pub fn on_transition(&self, f: impl Fn(&BreakerEvent) + Send + Sync + 'static) {
        self.registry.observe(Arc::new(f));
    }

    /// The breaker instances worth showing (every one not closed, and closed ones with calls
    /// in their window, up to [`MAX_VIEWS`]), and per breaker, how many of its instances are
    /// open or half-open. Phases are read at the store's clock.
    pub fn views(&self) -> (Vec<BreakerView>, Vec<(BreakerDef, usize)>) {
        if !self.registry.on() {
            return (Vec::new(), Vec::new());
        }
        self.registry.views(self.store.now())
    }
}

impl<S: Store> std::fmt::Debug for Breakers<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breakers")
            .field("defs", &self.registry.defs().len())
            .field("shared", &self.shared())
            .field("unsent", &self.unsent())
            .finish()
    }
}
