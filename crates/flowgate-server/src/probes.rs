//! What the probes answer: the node's lifecycle (`/readyz`) and the store's health
//! (`GET /v1/store`, `flowgate_store_down`, `flowgate_store_degraded`), kept apart on purpose.
//!
//! A node is ready while it can answer decisions: once started and until it drains. A store
//! outage does not make it unready, since each rule's failure policy then decides, at once
//! (the Redis store fails fast while it is known down): were readiness to follow the store, a
//! Redis outage would take every node of a cluster out of its Service at the same moment,
//! turning a degraded limiter into an outage of everything behind it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;

use crate::backend::Backend;
use crate::state::AppState;
use flowgate_observe::view::StoreKind;

/// Where the node is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Phase {
    /// Its ports are open, its start-up is not finished.
    Starting = 0,
    /// It answers decisions.
    Serving = 1,
    /// It is shutting down: it still answers during the drain delay, but should get no new
    /// traffic.
    Draining = 2,
}

/// The node's phase, shared by the start-up, the shutdown, `/readyz` and the HTTP connections
/// (a clone reads the same phase).
#[derive(Clone, Debug, Default)]
pub(crate) struct Lifecycle(Arc<AtomicU8>);

impl Lifecycle {
    pub(crate) fn set(&self, phase: Phase) {
        self.0.store(phase as u8, Ordering::Relaxed);
    }

    /// Whether the node is shutting down.
    #[inline]
    pub(crate) fn draining(&self) -> bool {
        self.phase() == Phase::Draining
    }

    pub(crate) fn phase(&self) -> Phase {
        match self.0.load(Ordering::Relaxed) {
            0 => Phase::Starting,
            1 => Phase::Serving,
            _ => Phase::Draining,
        }
    }
}

/// The store's health, as `GET /v1/store` and `/readyz` show it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct StoreView {
    /// Which store it is.
    pub kind: StoreKind,
    /// Whether the store answers now: neither known down nor failing.
    pub up: bool,
    /// Whether its last call failed (or it is known down).
    pub degraded: bool,
    /// Known down: decisions go straight to the failure policies while a probe retries.
    pub down: bool,
    /// Since when it is known down (Unix milliseconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_since_ms: Option<u64>,
    /// Failed calls in a row.
    pub consecutive_failures: u32,
    /// What the last failure was: `timeout` or `unavailable` (the detail is in the log, not
    /// shown to callers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<&'static str>,
    /// A decision's deadline, in milliseconds (Redis).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// Decisions answered at once as unavailable while the store was known down, since start.
    pub fast_failures: u64,
    /// Redis: the primaries this node writes to, failovers followed, connections made again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<flowgate_observe::topology::StoreTopology>,
}

/// The store's health now.
pub(crate) fn store_view(backend: &Backend) -> StoreView {
    match backend {
        Backend::Memory(_) => StoreView {
            kind: StoreKind::Memory,
            up: true,
            degraded: false,
            down: false,
            down_since_ms: None,
            consecutive_failures: 0,
            failure: None,
            deadline_ms: None,
            fast_failures: 0,
            topology: None,
        },
        Backend::Redis(r) => {
            let h = r.health();
            let stats = r.stats();
            let failure = h.last_error.as_ref().map(failure_kind);
            StoreView {
                kind: StoreKind::Redis,
                up: !h.down && !stats.degraded,
                degraded: stats.degraded || h.down,
                down: h.down,
                down_since_ms: h.down_since.map(|us| us / 1000),
                consecutive_failures: h.consecutive_failures,
                failure,
                deadline_ms: Some(r.deadline().as_millis() as u64),
                fast_failures: stats.fast_failures,
                topology: Some((&r.topology()).into()),
            }
        }
    }
}

/// What kind of failure `e` is, as shown to callers: `timeout` or `unavailable` (the error's
/// own text, which may name Redis's configuration, stays in the log).
pub(crate) fn failure_kind(e: &flowgate::store::StoreError) -> &'static str {
    match e {
        flowgate::store::StoreError::Timeout => "timeout",
        _ => "unavailable",
    }
}

/// Brings the store's gauges in line with its health: `flowgate_store_down`, and
/// `flowgate_store_degraded` (which decisions also set when they meet an error, and clear when
/// one reaches the store; this clears it once a probe found Redis back with no decision since).
pub(crate) fn refresh(state: &AppState) -> StoreView {
    let view = store_view(state.limiter.store());
    let m = &state.metrics;
    m.store_down.set(i64::from(view.down));
    if let Backend::Redis(r) = state.limiter.store() {
        m.topology.update(&r.topology());
    }
    if view.kind == StoreKind::Redis {
        let degraded = i64::from(view.degraded);
        if m.store_degraded.get() != degraded {
            m.store_degraded.set(degraded);
        }
    }
    view
}

/// How often the store's health is brought into the gauges (and so into the figures and the
/// alerts, which read them every second).
const REFRESH_EVERY: Duration = Duration::from_millis(250);

/// Refreshes the store's gauges every [`REFRESH_EVERY`] until `shutdown`.
pub(crate) async fn watch_store(state: Arc<AppState>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(REFRESH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
        }
        refresh(&state);
    }
}
