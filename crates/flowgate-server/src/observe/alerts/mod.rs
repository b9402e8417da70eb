//! Alerts: declared in the configuration (`[[alert]]`, and so in the rules shared through
//! Redis), evaluated every second on the newest [`StatsView`], announced as Alertmanager
//! webhooks, logged (target `flowgate::alerts`), exported as `flowgate_alerts_firing{alert}` and
//! shown in the views ([`Alerts::views`]).
//!
//! The parts: [`spec`] (what an alert watches), [`condition`] (reading it from a view),
//! [`machine`] (inactive → pending → firing → resolved, on time passed in), [`webhook`] (the
//! message), [`delivery`] (the outboxes), [`cluster`] (one evaluator per cluster on Redis).
//! [`Alerts`] ties them: it holds the alerts in force (changed with the rules, by
//! [`RulesInForce`](crate::rules::RulesInForce)), their states, and evaluates on
//! [`Alerts::tick`].

pub mod cluster;
pub mod condition;
pub mod delivery;
pub mod machine;
pub mod spec;
pub mod webhook;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use self::cluster::{Cluster, Lease};
use self::delivery::{Delivery, Outbox};
use self::machine::{Phase, Transition};
pub use self::spec::{AlertKind, AlertSet, AlertSpec};
use crate::observe::metrics::Metrics;
use crate::observe::view::{AlertView, StatsView};

/// How often the alerts are evaluated.
pub const EVERY: Duration = Duration::from_secs(1);

/// An alert's state, as kept (and, on Redis, stored for the cluster).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    /// Its phase.
    #[serde(flatten)]
    pub phase: Phase,
    /// The value last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

/// A transition to announce.
struct Announcement {
    spec: AlertSpec,
    transition: Transition,
    value: Option<f64>,
}

/// The alerts in force, their states, and where their notifications go.
pub struct Alerts {
    set: ArcSwap<AlertSet>,
    states: Mutex<BTreeMap<String, Stored>>,
    /// The specs last evaluated, by name: an alert dropped from the rules while firing is
    /// resolved with them.
    known: Mutex<BTreeMap<String, AlertSpec>>,
    outbox: Outbox,
    metrics: Arc<Metrics>,
    external_url: Mutex<String>,
}

impl Alerts {
    /// Alerts in force from `set`, delivering as `delivery` says, exporting into `metrics`.
    pub(crate) fn new(set: AlertSet, delivery: Delivery, metrics: Arc<Metrics>) -> Self {
        Self {
            set: ArcSwap::from_pointee(set),
            states: Mutex::new(BTreeMap::new()),
            known: Mutex::new(BTreeMap::new()),
            outbox: Outbox::new(delivery, Arc::clone(&metrics)),
            metrics,
            external_url: Mutex::new(String::new()),
        }
    }

    /// Puts `set` in force (from the next evaluation).
    pub(crate) fn set_alerts(&self, set: AlertSet) {
        self.set.store(Arc::new(set));
    }

    /// The alerts in force.
    pub fn alerts(&self) -> Arc<AlertSet> {
        self.set.load_full()
    }

    /// The address messages name as `externalURL` (the server's HTTP address).
    pub(crate) fn set_external_url(&self, url: String) {
        *self.external_url.lock() = url;
    }

    /// The outboxes.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Every alert in force and its state, in declaration order.
    pub fn views(&self) -> Vec<AlertView> {
        let set = self.alerts();
        let states = self.states.lock();
        set.alerts()
            .iter()
            .map(|a| {
                let s = states.get(&a.name).copied().unwrap_or_default();
                AlertView {
                    name: a.name.clone(),
                    watches: a.watches(),
                    state: s.phase.name().to_owned(),
                    since_ms: s.phase.since_ms(),
                    value: s.value,
                    watched: Some(a.kind.watched()),
                }
            })
            .collect()
    }

    /// The states after evaluating the alerts in force on `view` at `now_ms`, from `prev`; and
    /// the transitions to announce (an alert no longer declared resolves if it was firing).
    fn evaluate(
        &self,
        prev: &BTreeMap<String, Stored>,
        view: &StatsView,
        now_ms: i64,
    ) -> (BTreeMap<String, Stored>, Vec<Announcement>) {
        let set = self.alerts();
        let mut next = BTreeMap::new();
        let mut out = Vec::new();
        for a in set.alerts() {
            let reading = condition::read(&a.kind, view);
            let before = prev.get(&a.name).copied().unwrap_or_default();
            let (phase, t) = before.phase.step(reading.holds, now_ms, a.for_ms);
            if let Some(transition) = t {
                out.push(Announcement {
                    spec: a.clone(),
                    transition,
                    value: reading.value,
                });
            }
            next.insert(
                a.name.clone(),
                Stored {
                    phase,
                    value: reading.value,
                },
            );
        }
        let known = self.known.lock();
        for (name, s) in prev {
            if next.contains_key(name) {
                continue;
            }
            if let (Phase::Firing { fired_ms, .. }, Some(spec)) = (s.phase, known.get(name)) {
                out.push(Announcement {
                    spec: spec.clone(),
                    transition: Transition::Resolved {
                        fired_ms,
                        ended_ms: now_ms,
                    },
                    value: None,
                });
            }
        }
        (next, out)
    }

    /// Keeps `states` as the states shown and exported.
    fn keep(&self, states: BTreeMap<String, Stored>) {
        let set = self.alerts();
        {
            let mut known = self.known.lock();
            for gone in known.keys().filter(|k| !states.contains_key(*k)) {
                self.metrics.alert_gone(gone);
            }
            *known = set
                .alerts()
                .iter()
                .map(|a| (a.name.clone(), a.clone()))
                .collect();
        }
        for a in set.alerts() {
            let firing = states.get(&a.name).is_some_and(|s| s.phase.is_firing());
            self.metrics.alert_firing(&a.name, firing);
        }
        *self.states.lock() = states;
    }

    /// Logs and queues the messages of `announcements`.
    fn announce(&self, announcements: Vec<Announcement>) {
        let external_url = self.external_url.lock().clone();
        for a in announcements {
            match a.transition {
                Transition::Fired { .. } => tracing::warn!(
                    target: "flowgate::alerts",
                    alert = %a.spec.name,
                    watches = %a.spec.watches(),
                    value = a.value,
                    "alert firing"
                ),
                Transition::Resolved { .. } => tracing::info!(
                    target: "flowgate::alerts",
                    alert = %a.spec.name,
                    watches = %a.spec.watches(),
                    value = a.value,
                    "alert resolved"
                ),
            }
            if a.spec.webhooks.is_empty() {
                continue;
            }
            let message = webhook::message(&a.spec, a.transition, a.value, &external_url);
            let Ok(body) = serde_json::to_string(&message) else {
                continue;
            };
            let body: Arc<str> = Arc::from(body);
            for url in &a.spec.webhooks {
                self.outbox.push(url, Arc::clone(&body));
            }
        }
    }

    /// One evaluation on `view` at `now_ms` (Unix milliseconds). Alone, this node evaluates and
    /// announces. With `cluster`, only the lease's holder does, after storing the new states
    /// (when it took the lease now, from the states stored); the other nodes take the stored
    /// states. Redis unreachable: nothing is evaluated (a leader that cannot renew its lease
    /// may have lost it); the states shown stay as they were.
    pub async fn tick(&self, view: &StatsView, now_ms: i64, cluster: Option<&Cluster>) {
        let Some(cluster) = cluster else {
            let prev = self.states.lock().clone();
            let (next, out) = self.evaluate(&prev, view, now_ms);
            self.keep(next);
            self.announce(out);
            return;
        };
        let lease = match cluster.lease().await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(target: "flowgate::alerts", error = %e, "alerts: Redis unreachable; not evaluated");
                return;
            }
        };
        let prev = match lease {
            Lease::Renewed => self.states.lock().clone(),
            Lease::Taken | Lease::Follower => match cluster.states().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(target: "flowgate::alerts", error = %e, "alerts: cannot read the states");
                    return;
                }
            },
        };
        if lease == Lease::Follower {
            self.keep(prev);
            return;
        }
        if lease == Lease::Taken {
            tracing::info!(target: "flowgate::alerts", evaluator = %cluster.id(), "alerts: this node evaluates for the cluster");
        }
        let (next, out) = self.evaluate(&prev, view, now_ms);
        match cluster.write(&next).await {
            Ok(true) => {
                self.keep(next);
                self.announce(out);
            }
            Ok(false) => {
                tracing::info!(target: "flowgate::alerts", "alerts: the lease went to another node");
            }
            Err(e) => {
                tracing::debug!(target: "flowgate::alerts", error = %e, "alerts: cannot store the states; not announced");
            }
        }
    }
}

/// The wall clock, in Unix milliseconds.
fn now_ms() -> i64 {
    i64::try_from(flowgate_core::clock::system_now() / 1000).unwrap_or(i64::MAX)
}

/// Evaluates `alerts` every [`EVERY`] on the newest view of `stats` (by the wall clock), until
/// `shutdown` turns true.
pub async fn run(
    alerts: Arc<Alerts>,
    mut stats: watch::Receiver<Arc<StatsView>>,
    cluster: Option<Cluster>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
        }
        let view = Arc::clone(&stats.borrow_and_update());
        alerts.tick(&view, now_ms(), cluster.as_ref()).await;
    }
}

/// Starts evaluating `alerts` on the views of `stats` until `shutdown`: for the whole cluster
/// when `redis` (a URL and how to connect) is given, as node `node`; `external_url` is the
/// server's HTTP address, named in the messages.
///
/// # Errors
/// When the Redis URL is invalid.
pub(crate) fn spawn(
    alerts: Arc<Alerts>,
    stats: watch::Receiver<Arc<StatsView>>,
    redis: Option<(&str, &flowgate_redis::RedisOptions)>,
    node: &str,
    external_url: String,
    shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, flowgate_core::StoreError> {
    alerts.set_external_url(external_url);
    let cluster = match redis {
        Some((url, options)) => {
            let conn = flowgate_redis::RedisConnection::connect_lazy(url, options.connection())?;
            // Unique per process: a restarted node is a new evaluator.
            let id = format!(
                "{node}/{}/{}",
                std::process::id(),
                flowgate_core::clock::system_now()
            );
            Some(Cluster::new(conn, id))
        }
        None => None,
    };
    Ok(tokio::spawn(run(alerts, stats, cluster, shutdown)))
}

#[cfg(test)]
mod tests;
