//! Alertmanager as a destination, through its own API: `POST <url>/api/v2/alerts` with a JSON
//! array of alerts (`labels`, `annotations`, `startsAt`, `endsAt`, `generatorURL`), as
//! Prometheus sends them.
//!
//! - Every evaluation (each second) the evaluator sends each Alertmanager **every alert firing
//!   for it**, `endsAt` [`VALIDITY`] ahead: Alertmanager keeps an alert active while it is sent
//!   again, so an alert firing for an hour stays firing, and one that stops being sent (every
//!   node gone) resolves by itself a minute later. A resolved alert is sent with its real
//!   `endsAt` for [`RESOLVED_RESEND`] after it resolved, so one lost POST does not leave it
//!   firing.
//! - The labels are the alert's (the same as the webhook message's), so every node sending the
//!   same alert sends the same label set, and Alertmanager merges them into one alert by its
//!   fingerprint: nodes that evaluate alone while Redis is down are deduplicated there.
//! - Delivery is latest-wins per Alertmanager: each POST carries the whole current state, so a
//!   batch not yet sent is replaced by the next one rather than queued. A POST has
//!   [`super::delivery::Delivery::timeout`] to be answered; `flowgate_alert_notifications_total`
//!   counts `sent` and `failed` batches; the log says once when an Alertmanager stops taking
//!   them and once when it takes them again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::Notify;

use super::webhook::rfc3339;
use crate::metrics::Metrics;

/// How far ahead of now a firing alert's `endsAt` is set.
pub const VALIDITY: Duration = Duration::from_secs(60);
/// How long a resolved alert is sent again after it resolved.
pub const RESOLVED_RESEND: Duration = Duration::from_secs(60);

/// The path of Alertmanager's API that takes alerts, after the URL given.
pub const PATH: &str = "/api/v2/alerts";

/// One alert as Alertmanager's API takes it (`postableAlert`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PostableAlert {
    /// Its labels: what it is (and its fingerprint).
    pub labels: BTreeMap<String, String>,
    /// `summary`, `description`, `value`, `who`.
    pub annotations: BTreeMap<String, String>,
    /// When it fired (RFC 3339).
    pub starts_at: String,
    /// When it ends: [`VALIDITY`] ahead while firing, when it resolved once resolved.
    pub ends_at: String,
    /// Where to look at it.
    #[serde(rename = "generatorURL")]
    pub generator_url: String,
}

impl PostableAlert {
    /// An alert with `labels` and `annotations` that fired at `fired_ms`: firing at `now_ms`
    /// (`ended_ms` `None`), or resolved at `ended_ms`.
    pub fn new(
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
        fired_ms: i64,
        ended_ms: Option<i64>,
        now_ms: i64,
        generator_url: String,
    ) -> Self {
        let ends = ended_ms.unwrap_or(now_ms.saturating_add(VALIDITY.as_millis() as i64));
        Self {
            labels,
            annotations,
            starts_at: rfc3339(fired_ms),
            ends_at: rfc3339(ends),
            generator_url,
        }
    }
}

/// One Alertmanager's newest batch.
struct Lane {
    latest: Mutex<Option<Arc<str>>>,
    ready: Notify,
}

/// An Alertmanager's lane, and the task sending it.
type Sender = (Arc<Lane>, tokio::task::JoinHandle<()>);

/// The Alertmanagers alerts are sent to: each one's lane and the task sending it.
pub struct Senders {
    lanes: Mutex<HashMap<String, Sender>>,
    agent: ureq::Agent,
    metrics: Arc<Metrics>,
}

impl Senders {
    /// Senders POSTing with `agent` (its timeout bounds each POST), counting into `metrics`.
    pub fn new(agent: ureq::Agent, metrics: Arc<Metrics>) -> Self {
        Self {
            lanes: Mutex::new(HashMap::new()),
            agent,
            metrics,
        }
    }

    /// Sends `alerts` to the Alertmanager at `url` (its base: `http://am:9093`), replacing a
    /// batch not yet sent. Starts its task on first use (on the current runtime).
    pub fn send(&self, url: &str, alerts: &[PostableAlert]) {
        let Ok(body) = serde_json::to_string(alerts) else {
            return;
        };
        let lane = {
            let mut lanes = self.lanes.lock();
            let (lane, _) = lanes.entry(url.to_owned()).or_insert_with(|| {
                let lane = Arc::new(Lane {
                    latest: Mutex::new(None),
                    ready: Notify::new(),
                });
                let task = tokio::spawn(deliver(
                    format!("{}{PATH}", url.trim_end_matches('/')),
                    Arc::clone(&lane),
                    self.agent.clone(),
                    Arc::clone(&self.metrics),
                ));
                (lane, task)
            });
            Arc::clone(lane)
        };
        *lane.latest.lock() = Some(Arc::from(body));
        lane.ready.notify_one();
    }
}

impl Drop for Senders {
    /// The tasks end with their senders (a server shut down in-process).
    fn drop(&mut self) {
        for (_, task) in self.lanes.lock().values() {
            task.abort();
        }
    }
}

/// POSTs the newest batch of `lane` to `url` whenever there is one (until aborted).
async fn deliver(url: String, lane: Arc<Lane>, agent: ureq::Agent, metrics: Arc<Metrics>) {
    // Logged redacted: the URL may hold a password.
    let shown = flowgate_config::redact_url(&url);
    let mut failing = false;
    loop {
        let next = lane.latest.lock().take();
        let Some(body) = next else {
            lane.ready.notified().await;
            continue;
        };
        let (a, u) = (agent.clone(), url.clone());
        let sent = tokio::task::spawn_blocking(move || super::delivery::post(&a, &u, &body))
            .await
            .unwrap_or_else(|e| super::delivery::Sent::Failed(e.to_string()));
        match sent {
            super::delivery::Sent::Delivered => {
                metrics.alert_notification("sent");
                if failing {
                    failing = false;
                    tracing::info!(target: "flowgate::alerts", alertmanager = %shown, "Alertmanager takes alerts again");
                }
            }
            other => {
                metrics.alert_notification("failed");
                if !failing {
                    failing = true;
                    tracing::warn!(target: "flowgate::alerts", alertmanager = %shown, error = %other, "Alertmanager does not take alerts; the next evaluation sends them again");
                }
            }
        }
    }
}
