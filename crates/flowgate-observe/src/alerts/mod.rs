//! Alerts: declared in the configuration (`[[alert]]`, and so in the rules shared through
//! Redis), evaluated on each new [`StatsView`] (every second), announced as Alertmanager
//! webhooks and to Alertmanagers through their API, logged (target `flowgate::alerts`),
//! exported as `flowgate_alerts_firing{alert}` and shown in the views ([`Alerts::views`]).
//!
//! The parts: what an alert watches ([`AlertSpec`], declared in the configuration), [`condition`] (reading it from a view, with
//! its value in units and who it is about), [`machine`] (inactive → pending → firing →
//! resolved, on time passed in), [`webhook`] (the webhook message), [`alertmanager`]
//! (Alertmanager's API, re-sent while firing), [`delivery`] (the webhooks' outboxes),
//! [`cluster`] (one evaluator per cluster on Redis), `alone` (each node on its own while no
//! node can hold the cluster's lease, and the hand-back). [`Alerts`] ties them: it holds the
//! alerts in force (changed with the rules, by the server's `RulesInForce`),
//! their states, and evaluates on [`Alerts::tick`].

pub mod alertmanager;
mod alone;
pub mod cluster;
pub mod condition;
pub mod delivery;
pub mod machine;
pub mod webhook;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use self::alertmanager::{PostableAlert, Senders};
use self::alone::Alone;
use self::cluster::{Cluster, Lease};
use self::condition::Reading;
use self::delivery::{Delivery, Outbox};
use self::machine::{Phase, Transition};
use flowgate_config::alert::{AlertSet, AlertSpec};

use crate::metrics::Metrics;
use crate::view::{AlertView, StatsView, Watched};

/// How often the alerts are evaluated (on each new view, which comes every second).
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
    reading: Reading,
}

/// An alert resolved lately, sent to its Alertmanagers again until [`alertmanager::RESOLVED_RESEND`]
/// has passed.
struct Resolved {
    spec: AlertSpec,
    reading: Reading,
    fired_ms: i64,
    ended_ms: i64,
}

/// What one evaluation gives: the new states, the transitions to announce, and each alert's
/// reading (for the messages re-sent while firing).
struct Evaluation {
    states: BTreeMap<String, Stored>,
    announce: Vec<Announcement>,
    readings: BTreeMap<String, Reading>,
}

/// The alerts in force, their states, and where their notifications go.
pub struct Alerts {
    set: ArcSwap<AlertSet>,
    states: Mutex<BTreeMap<String, Stored>>,
    /// The specs last evaluated, by name: an alert dropped from the rules while firing is
    /// resolved with them.
    known: Mutex<BTreeMap<String, AlertSpec>>,
    outbox: Outbox,
    alertmanagers: Senders,
    /// The server's own Alertmanagers (`--alertmanager-url`), beside each alert's.
    global_alertmanagers: Mutex<Vec<String>>,
    resolved: Mutex<Vec<Resolved>>,
    alone: Mutex<Alone>,
    metrics: Arc<Metrics>,
    external_url: Mutex<String>,
}

impl Alerts {
    /// Alerts in force from `set`, delivering as `delivery` says, exporting into `metrics`.
    pub fn new(set: AlertSet, delivery: Delivery, metrics: Arc<Metrics>) -> Self {
        let outbox = Outbox::new(delivery, Arc::clone(&metrics));
        let alertmanagers = Senders::new(outbox.agent(), Arc::clone(&metrics));
        Self {
            set: ArcSwap::from_pointee(set),
            states: Mutex::new(BTreeMap::new()),
            known: Mutex::new(BTreeMap::new()),
            outbox,
            alertmanagers,
            global_alertmanagers: Mutex::new(Vec::new()),
            resolved: Mutex::new(Vec::new()),
            alone: Mutex::new(Alone::default()),
            metrics,
            external_url: Mutex::new(String::new()),
        }
    }

    /// Puts `set` in force (from the next evaluation).
    pub fn set_alerts(&self, set: AlertSet) {
        self.set.store(Arc::new(set));
    }

    /// The alerts in force.
    pub fn alerts(&self) -> Arc<AlertSet> {
        self.set.load_full()
    }

    /// The address messages link to (`externalURL`, `generatorURL`): `--external-url`, else the
    /// server's HTTP address.
    pub fn set_external_url(&self, url: String) {
        *self.external_url.lock() = url.trim_end_matches('/').to_owned();
    }

    /// Alertmanagers every alert is sent to, beside its own (`--alertmanager-url`).
    pub fn set_global_alertmanagers(&self, urls: Vec<String>) {
        *self.global_alertmanagers.lock() = urls;
    }

    /// The outboxes.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Whether this node evaluates alone now (it cannot hold the cluster's lease).
    pub fn evaluates_alone(&self) -> bool {
        self.alone.lock().is_on()
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
                    watched: Some(Watched::of(&a.kind)),
                }
            })
            .collect()
    }

    /// The states after evaluating the alerts in force on `view` at `now_ms`, from `prev`; the
    /// transitions to announce (an alert no longer declared resolves if it was firing); and
    /// each alert's reading.
    fn evaluate(
        &self,
        prev: &BTreeMap<String, Stored>,
        view: &StatsView,
        now_ms: i64,
    ) -> Evaluation {
        let set = self.alerts();
        let mut e = Evaluation {
            states: BTreeMap::new(),
            announce: Vec::new(),
            readings: BTreeMap::new(),
        };
        for a in set.alerts() {
            let reading = condition::read(&a.kind, view);
            let before = prev.get(&a.name).copied().unwrap_or_default();
            let (phase, t) = before.phase.step(reading.holds, now_ms, a.for_ms);
            if let Some(transition) = t {
                e.announce.push(Announcement {
                    spec: a.clone(),
                    transition,
                    reading: reading.clone(),
                });
            }
            e.states.insert(
                a.name.clone(),
                Stored {
                    phase,
                    value: reading.value,
                },
            );
            e.readings.insert(a.name.clone(), reading);
        }
        let known = self.known.lock();
        for (name, s) in prev {
            if e.states.contains_key(name) {
                continue;
            }
            if let (Phase::Firing { fired_ms, .. }, Some(spec)) = (s.phase, known.get(name)) {
                e.announce.push(Announcement {
                    spec: spec.clone(),
                    transition: Transition::Resolved {
                        fired_ms,
                        ended_ms: now_ms,
                    },
                    reading: Reading::default(),
                });
            }
        }
        e
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

    /// Logs the transitions of `announcements`, and queues their webhook messages.
    fn announce(&self, announcements: &[Announcement]) {
        let external_url = self.external_url.lock().clone();
        for a in announcements {
            let value = a.reading.text.as_deref().unwrap_or("");
            let who = a.reading.who.as_deref().unwrap_or("");
            match a.transition {
                Transition::Fired { .. } => tracing::warn!(
                    target: "flowgate::alerts",
                    alert = %a.spec.name,
                    watches = %a.spec.watches(),
                    value,
                    who,
                    "alert firing"
                ),
                Transition::Resolved { .. } => tracing::info!(
                    target: "flowgate::alerts",
                    alert = %a.spec.name,
                    watches = %a.spec.watches(),
                    value,
                    "alert resolved"
                ),
            }
            if let Transition::Resolved { fired_ms, ended_ms } = a.transition {
                self.resolved.lock().push(Resolved {
                    spec: a.spec.clone(),
                    reading: a.reading.clone(),
                    fired_ms,
                    ended_ms,
                });
            }
            if a.spec.webhooks.is_empty() {
                continue;
            }
            let message = webhook::message(&a.spec, a.transition, &a.reading, &external_url);
            let Ok(body) = serde_json::to_string(&message) else {
                continue;
            };
            let body: Arc<str> = Arc::from(body);
            for url in &a.spec.webhooks {
                self.outbox.push(url, Arc::clone(&body));
            }
        }
    }

    /// Sends every Alertmanager the alerts firing for it in `states` (with their `readings`),
    /// and those resolved within [`alertmanager::RESOLVED_RESEND`] of `now_ms`, but for the
    /// alerts firing in `firing_elsewhere` (a follower's: the cluster's evaluator sends them
    /// firing, and Alertmanager would take this node's older resolution over it).
    fn send_alertmanagers(
        &self,
        states: &BTreeMap<String, Stored>,
        readings: &BTreeMap<String, Reading>,
        now_ms: i64,
        firing_elsewhere: &BTreeMap<String, Stored>,
    ) {
        let global = self.global_alertmanagers.lock().clone();
        let external_url = self.external_url.lock().clone();
        let generator = format!("{external_url}/dashboard");
        let mut batches: BTreeMap<String, Vec<PostableAlert>> = BTreeMap::new();
        let mut add = |spec: &AlertSpec, alert: PostableAlert| {
            for url in spec.alertmanagers.iter().chain(&global) {
                batches.entry(url.clone()).or_default().push(alert.clone());
            }
        };
        let set = self.alerts();
        // Alertmanager keeps one alert per label set, the last one posted: an alert firing
        // again, or resolved twice within the re-send time, is sent once, as it is now.
        // Nor is a resolution re-sent while its alert is pending again here (its condition
        // holds: another node evaluating alone may already send it firing).
        let mut sent: BTreeSet<BTreeMap<String, String>> = set
            .alerts()
            .iter()
            .filter(|a| {
                firing_elsewhere
                    .get(&a.name)
                    .is_some_and(|s| s.phase.is_firing())
                    || states
                        .get(&a.name)
                        .is_some_and(|s| matches!(s.phase, Phase::Pending { .. }))
            })
            .map(webhook::labels)
            .collect();
        for a in set.alerts() {
            let Some(Phase::Firing { fired_ms, .. }) = states.get(&a.name).map(|s| s.phase) else {
                continue;
            };
            let reading = readings.get(&a.name).cloned().unwrap_or_default();
            let labels = webhook::labels(a);
            sent.insert(labels.clone());
            add(
                a,
                PostableAlert::new(
                    labels,
                    webhook::annotations(a, &reading),
                    fired_ms,
                    None,
                    now_ms,
                    generator.clone(),
                ),
            );
        }
        let resend_ms = alertmanager::RESOLVED_RESEND.as_millis() as i64;
        let mut resolved = self.resolved.lock();
        resolved.retain(|r| now_ms.saturating_sub(r.ended_ms) <= resend_ms);
        for r in resolved.iter().rev() {
            let labels = webhook::labels(&r.spec);
            if !sent.insert(labels.clone()) {
                continue;
            }
            add(
                &r.spec,
                PostableAlert::new(
                    labels,
                    webhook::annotations(&r.spec, &r.reading),
                    r.fired_ms,
                    Some(r.ended_ms),
                    now_ms,
                    generator.clone(),
                ),
            );
        }
        drop(resolved);
        for (url, alerts) in batches {
            self.alertmanagers.send(&url, &alerts);
        }
    }

    /// Evaluates on `view` at `now_ms` from `prev`, keeps the new states, and announces: what
    /// a node does alone, and what the cluster's evaluator does once its states are stored.
    fn evaluate_and_announce(
        &self,
        prev: &BTreeMap<String, Stored>,
        view: &StatsView,
        now_ms: i64,
    ) -> Evaluation {
        let e = self.evaluate(prev, view, now_ms);
        self.announce(&e.announce);
        self.send_alertmanagers(&e.states, &e.readings, now_ms, &BTreeMap::new());
        e
    }

    /// One evaluation on `view` at `now_ms` (Unix milliseconds). Alone (no `cluster`), this
    /// node evaluates and announces. With `cluster`, only the lease's holder does, after storing
    /// the new states (when it took the lease now, from the stored states merged with its own:
    /// `alone.rs`); the other nodes take the stored states. While Redis does not answer, every
    /// node evaluates alone on its own figures and announces, until it can lead or follow
    /// again.
    pub async fn tick(&self, view: &StatsView, now_ms: i64, cluster: Option<&Cluster>) {
        let Some(cluster) = cluster else {
            let prev = self.states.lock().clone();
            let e = self.evaluate_and_announce(&prev, view, now_ms);
            self.keep(e.states);
            return;
        };
        let lease = match cluster.lease().await {
            Ok(l) => l,
            Err(e) => return self.alone_tick(view, now_ms, &e),
        };
        let stored = match lease {
            Lease::Renewed => None,
            Lease::Taken | Lease::Follower => match cluster.states().await {
                Ok(s) => Some(s),
                Err(e) => return self.alone_tick(view, now_ms, &e),
            },
        };
        let was_alone = self.alone.lock().leave();
        if was_alone {
            self.metrics.alerts_local.set(0);
            tracing::info!(target: "flowgate::alerts", "alerts: Redis answers; the cluster's evaluation resumes");
        }
        if lease == Lease::Follower {
            let stored = stored.unwrap_or_default();
            let out = self.alone.lock().follow(&stored, now_ms);
            self.announce(&out);
            for name in self.alone.lock().resolved_by_cluster(&stored) {
                tracing::info!(target: "flowgate::alerts", alert = %name, "alert resolved (announced by the cluster's evaluator)");
            }
            // Only what this node resolved itself (its own announcements made alone), and not
            // an alert the cluster's evaluator now sends firing.
            self.send_alertmanagers(&BTreeMap::new(), &BTreeMap::new(), now_ms, &stored);
            self.keep(stored);
            return;
        }
        let mine = self.states.lock().clone();
        let prev = match stored {
            Some(stored) => alone::merge(stored, mine, was_alone),
            None => mine,
        };
        if lease == Lease::Taken {
            tracing::info!(target: "flowgate::alerts", evaluator = %cluster.id(), "alerts: this node evaluates for the cluster");
        }
        let e = self.evaluate(&prev, view, now_ms);
        match cluster.write(&e.states).await {
            Ok(true) => {
                self.alone.lock().hand_over();
                self.announce(&e.announce);
                self.send_alertmanagers(&e.states, &e.readings, now_ms, &BTreeMap::new());
                self.keep(e.states);
            }
            Ok(false) => {
                tracing::info!(target: "flowgate::alerts", "alerts: the lease went to another node");
            }
            Err(err) => {
                tracing::debug!(target: "flowgate::alerts", error = %err, "alerts: cannot store the states; not announced");
            }
        }
    }

    /// An evaluation while the cluster's lease cannot be had (`why`): this node evaluates its
    /// own figures from the states it knew, and announces on its own.
    fn alone_tick(&self, view: &StatsView, now_ms: i64, why: &flowgate::store::StoreError) {
        if self.alone.lock().enter() {
            self.metrics.alerts_local.set(1);
            tracing::warn!(target: "flowgate::alerts", error = %why, "alerts: cannot reach Redis for the cluster's evaluation; this node evaluates its own figures and announces alone until it can");
        }
        let prev = self.states.lock().clone();
        let e = self.evaluate_and_announce(&prev, view, now_ms);
        self.alone.lock().announced(&e.announce);
        self.keep(e.states);
    }
}

/// The wall clock, in Unix milliseconds.
fn now_ms() -> i64 {
    i64::try_from(flowgate::clock::system_now() / 1000).unwrap_or(i64::MAX)
}

/// Evaluates `alerts` on each new view of `stats` (every second; every [`EVERY`] × 2 at the
/// latest, on the newest view, should views stop coming), until `shutdown` turns true.
pub async fn run(
    alerts: Arc<Alerts>,
    mut stats: watch::Receiver<Arc<StatsView>>,
    cluster: Option<Cluster>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            r = stats.changed() => if r.is_err() { return },
            () = tokio::time::sleep(EVERY * 2) => {}
            r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
        }
        let view = Arc::clone(&stats.borrow_and_update());
        alerts.tick(&view, now_ms(), cluster.as_ref()).await;
    }
}

/// Where the alerts' messages go beside each alert's own destinations, and how they link back.
pub struct Destinations {
    /// `--external-url`, else the server's HTTP address: `externalURL`, `generatorURL`.
    pub external_url: String,
    /// `--alertmanager-url`: Alertmanagers every alert is sent to.
    pub alertmanagers: Vec<String>,
}

/// Starts evaluating `alerts` on the views of `stats` until `shutdown`: for the whole cluster
/// when `redis` (a URL and how to connect) is given, as node `node`.
///
/// # Errors
/// When the Redis URL is invalid.
pub fn spawn(
    alerts: Arc<Alerts>,
    stats: watch::Receiver<Arc<StatsView>>,
    redis: Option<(&str, &flowgate_redis::RedisOptions)>,
    node: &str,
    destinations: Destinations,
    shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, flowgate::store::StoreError> {
    alerts.set_external_url(destinations.external_url);
    alerts.set_global_alertmanagers(destinations.alertmanagers);
    let cluster = match redis {
        Some((url, options)) => {
            let conn = flowgate_redis::RedisConnection::connect_lazy(
                url,
                options.connection().timeout(cluster::CALL_TIMEOUT),
            )?;
            // Unique per process: a restarted node is a new evaluator.
            let id = format!(
                "{node}/{}/{}",
                std::process::id(),
                flowgate::clock::system_now()
            );
            Some(Cluster::new(conn, id))
        }
        None => None,
    };
    Ok(tokio::spawn(run(alerts, stats, cluster, shutdown)))
}

#[cfg(test)]
mod tests;
