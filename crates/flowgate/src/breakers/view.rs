//! Breaker instances as shown: every one not closed, and the closed ones with the most bad calls
//! in their window.

use std::time::Duration;

use flowgate_core::breaker::{Opened, Phase};
use flowgate_core::clock::Micros;

use super::{BreakerDef, MAX_VIEWS};

/// A breaker instance's state, as shown.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BreakerView {
    /// The breaker's domain.
    pub domain: String,
    /// The breaker's name.
    pub breaker: String,
    /// The instance's key.
    pub key: String,
    /// Its phase.
    pub phase: Phase,
    /// When it entered its phase (µs, by the limiter's store clock).
    pub since: Micros,
    /// Calls in the window (closed).
    pub calls: u64,
    /// Bad calls in the window (closed).
    pub bad: u64,
    /// Open: the time left until half-open. Half-open: the probes' leases held.
    pub retry_after: Option<Duration>,
    /// Half-open: probes out (admitted, not reported, lease not expired): the cluster's when
    /// shared (as last read, or as this node's last probe found them), else this process's.
    pub probes_out: u32,
    /// Open or half-open: why it opened last, the calls and bad calls at the transition
    /// ([`Opened`]); `None` while closed (or, shared, when the cluster holds no figures).
    pub opened: Option<Opened>,
    /// Decided by the cluster's shared state (`false`: this process's, because breakers are not
    /// shared, or because Redis is unreachable now).
    pub shared: bool,
}

impl BreakerView {
    /// Whether it is closed.
    pub(super) fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }
}

/// A closed instance with calls in its window, a candidate for the views.
pub(super) struct Closed<'a> {
    pub(super) key: &'a str,
    pub(super) calls: u64,
    pub(super) bad: u64,
    pub(super) since: Micros,
}

impl Closed<'_> {
    /// The [`MAX_VIEWS`] of `all` worth showing first: most bad calls, then by key. A breaker
    /// may have [`super::MAX_INSTANCES`] closed instances with calls; only these become views.
    pub(super) fn shown(mut all: Vec<Self>) -> impl Iterator<Item = Self> {
        let order = |a: &Self, b: &Self| b.bad.cmp(&a.bad).then_with(|| a.key.cmp(b.key));
        if all.len() > MAX_VIEWS {
            all.select_nth_unstable_by(MAX_VIEWS, order);
            all.truncate(MAX_VIEWS);
        }
        all.into_iter()
    }

    pub(super) fn view(&self, def: &BreakerDef, shared: bool) -> BreakerView {
        BreakerView {
            domain: def.domain.clone(),
            breaker: def.name.clone(),
            key: self.key.to_owned(),
            phase: Phase::Closed,
            since: self.since,
            calls: self.calls,
            bad: self.bad,
            retry_after: None,
            probes_out: 0,
            opened: None,
            shared,
        }
    }
}

/// The [`MAX_VIEWS`] of `views` shown: those not closed first, then the most bad calls, then by
/// domain, breaker and key.
pub(super) fn shown(mut views: Vec<BreakerView>) -> Vec<BreakerView> {
    views.sort_by(|a, b| {
        (a.is_closed())
            .cmp(&b.is_closed())
            .then_with(|| b.bad.cmp(&a.bad))
            .then_with(|| (&a.domain, &a.breaker, &a.key).cmp(&(&b.domain, &b.breaker, &b.key)))
    });
    views.truncate(MAX_VIEWS);
    views
}
