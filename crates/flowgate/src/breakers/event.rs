//! Breaker instances' changes of phase: the event an observer is told, and the log line.

use std::sync::Arc;

use flowgate_core::breaker::Phase;
use parking_lot::RwLock;
use smallvec::SmallVec;

use super::BreakerDef;

/// A breaker instance's change of phase.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerEvent {
    /// The breaker's domain.
    pub domain: String,
    /// The breaker's name.
    pub breaker: String,
    /// The instance's key.
    pub key: String,
    /// The phase left.
    pub from: Phase,
    /// The phase entered.
    pub to: Phase,
}

/// An observer of breaker transitions.
pub(crate) type Observer = Arc<dyn Fn(&BreakerEvent) + Send + Sync>;

/// Changes of phase seen by one operation: (from, to), at most two (open turned half-open,
/// then a probe's report).
pub(crate) type Changes = SmallVec<[(Phase, Phase); 2]>;

/// Tells `observer` (and the log) of the changes of phase of instance `key` of breaker `def`.
pub(super) fn emit(
    observer: &RwLock<Option<Observer>>,
    def: &BreakerDef,
    key: &str,
    changes: &Changes,
) {
    if changes.is_empty() {
        return;
    }
    let observer = observer.read().clone();
    for &(from, to) in changes {
        let e = BreakerEvent {
            domain: def.domain.clone(),
            breaker: def.name.clone(),
            key: key.to_owned(),
            from,
            to,
        };
        let (from, to) = (from.name(), to.name());
        if e.to == Phase::Open {
            tracing::warn!(target: "flowgate::breakers", domain = %e.domain, breaker = %e.breaker, key = %e.key, from, to, "circuit breaker opened");
        } else {
            tracing::info!(target: "flowgate::breakers", domain = %e.domain, breaker = %e.breaker, key = %e.key, from, to, "circuit breaker {to}");
        }
        if let Some(f) = &observer {
            f(&e);
        }
    }
}
