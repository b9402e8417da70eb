//! Delivery of webhook messages, apart from everything else: one lane per webhook URL, each a
//! bounded outbox and a task that POSTs its messages in order.
//!
//! A POST is given [`Delivery::timeout`] (5 s) to be answered; a 2xx answer is delivered, a 4xx
//! is refused for good (sending it again would be refused again), anything else (no answer, a
//! connection error, a 5xx) is tried again after a backoff that doubles from
//! [`Delivery::backoff`] (1 s), at most [`Delivery::attempts`] (4) times in all. Each outbox
//! holds at most [`Delivery::capacity`] (256) messages: a message pushed onto a full one drops
//! the oldest, counted in `flowgate_alert_notifications_total{result="dropped"}`. So a webhook
//! that is dead or never answers holds one blocking thread for at most its timeout at a time,
//! delays only its own messages, and never grows memory; the evaluator only pushes (a lock and
//! a queue push) and decisions never meet any of it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::metrics::Metrics;

/// How messages are delivered.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// How long one POST may take, connecting included.
    pub timeout: Duration,
    /// Attempts per message, the first included.
    pub attempts: u32,
    /// The wait before the second attempt, doubling after each.
    pub backoff: Duration,
    /// The most messages waiting per webhook.
    pub capacity: usize,
}

impl Default for Delivery {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            attempts: 4,
            backoff: Duration::from_secs(1),
            capacity: 256,
        }
    }
}

/// One webhook's outbox.
struct Lane {
    queue: Mutex<VecDeque<Arc<str>>>,
    ready: Notify,
}

/// A lane and the task delivering it.
struct Worker {
    lane: Arc<Lane>,
    task: tokio::task::JoinHandle<()>,
}

/// The outboxes of every webhook, and their delivery tasks.
pub struct Outbox {
    policy: Delivery,
    lanes: Mutex<HashMap<String, Worker>>,
    metrics: Arc<Metrics>,
    agent: ureq::Agent,
}

impl Outbox {
    /// Outboxes delivering as `policy` says, counting into `metrics`.
    pub fn new(policy: Delivery, metrics: Arc<Metrics>) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(policy.timeout))
            // A receiver that redirects is not followed: it could bounce the server's POSTs to
            // addresses of its choosing. With 0, ureq answers the 3xx itself ([`post`]).
            .max_redirects(0)
            .user_agent("flowgate-alerts")
            .build()
            .into();
        Self {
            policy,
            lanes: Mutex::new(HashMap::new()),
            metrics,
            agent,
        }
    }

    /// Queues `body` (JSON) for `url`, dropping that webhook's oldest message when its outbox
    /// is full. Starts the webhook's delivery task on first use (on the current runtime).
    pub fn push(&self, url: &str, body: Arc<str>) {
        let lane = {
            let mut lanes = self.lanes.lock();
            let worker = lanes.entry(url.to_owned()).or_insert_with(|| {
                let lane = Arc::new(Lane {
                    queue: Mutex::new(VecDeque::new()),
                    ready: Notify::new(),
                });
                let task = tokio::spawn(deliver(
                    url.to_owned(),
                    Arc::clone(&lane),
                    self.policy.clone(),
                    self.agent.clone(),
                    Arc::clone(&self.metrics),
                ));
                Worker { lane, task }
            });
            Arc::clone(&worker.lane)
        };
        {
            let mut q = lane.queue.lock();
            while q.len() >= self.policy.capacity.max(1) {
                q.pop_front();
                self.metrics.alert_notification("dropped");
                tracing::warn!(target: "flowgate::alerts", webhook = %flowgate_config::redact_url(url), "alert outbox full: the oldest message is dropped");
            }
            q.push_back(body);
        }
        lane.ready.notify_one();
    }

    /// The HTTP client deliveries use (Alertmanager's API too).
    pub fn agent(&self) -> ureq::Agent {
        self.agent.clone()
    }

    /// The messages waiting, across every webhook.
    pub fn waiting(&self) -> usize {
        self.lanes
            .lock()
            .values()
            .map(|w| w.lane.queue.lock().len())
            .sum()
    }
}

impl Drop for Outbox {
    /// The delivery tasks end with their outboxes (a server shut down in-process).
    fn drop(&mut self) {
        for w in self.lanes.lock().values() {
            w.task.abort();
        }
    }
}

/// How one POST went.
pub(super) enum Sent {
    /// A 2xx answer.
    Delivered,
    /// A 4xx answer: sending it again would be refused again.
    Refused(u16),
    /// No answer, a connection error, or another status.
    Failed(String),
}

impl std::fmt::Display for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sent::Delivered => write!(f, "delivered"),
            Sent::Refused(status) => write!(f, "refused with {status}"),
            Sent::Failed(why) => write!(f, "{why}"),
        }
    }
}

/// POSTs `body` (JSON) to `url`.
pub(super) fn post(agent: &ureq::Agent, url: &str, body: &str) -> Sent {
    match agent
        .post(url)
        .header("Content-Type", "application/json")
        .send(body.as_bytes())
    {
        Ok(r) if r.status().is_success() => Sent::Delivered,
        Ok(r) if r.status().is_redirection() => Sent::Failed(redirected(&r)),
        Ok(r) if r.status().is_client_error() => Sent::Refused(r.status().as_u16()),
        Ok(r) => Sent::Failed(format!("answered {}", r.status())),
        Err(e) => Sent::Failed(e.to_string()),
    }
}

/// Why a redirect failed the delivery: the agent follows none (a receiver could bounce the
/// server's POSTs to addresses of its choosing, internal ones included), so a 3xx is a failure
/// like a 5xx, named with its status and its `Location`, redacted.
fn redirected(r: &ureq::http::Response<ureq::Body>) -> String {
    let to = r
        .headers()
        .get(ureq::http::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| "no Location".to_owned(), flowgate_config::redact_url);
    format!(
        "answered {}, a redirect to {to}: redirects are never followed",
        r.status()
    )
}

/// Delivers `lane`'s messages to `url`, one at a time, for as long as the runtime runs.
async fn deliver(
    url: String,
    lane: Arc<Lane>,
    policy: Delivery,
    agent: ureq::Agent,
    metrics: Arc<Metrics>,
) {
    // Logged redacted: a webhook's URL may hold a token.
    let shown = flowgate_config::redact_url(&url);
    loop {
        let next = lane.queue.lock().pop_front();
        let Some(body) = next else {
            lane.ready.notified().await;
            continue;
        };
        let mut wait = policy.backoff;
        for attempt in 1..=policy.attempts.max(1) {
            let (a, u, b) = (agent.clone(), url.clone(), Arc::clone(&body));
            let sent = tokio::task::spawn_blocking(move || post(&a, &u, &b))
                .await
                .unwrap_or_else(|e| Sent::Failed(e.to_string()));
            match sent {
                Sent::Delivered => {
                    metrics.alert_notification("sent");
                    break;
                }
                Sent::Refused(status) => {
                    metrics.alert_notification("failed");
                    tracing::warn!(target: "flowgate::alerts", webhook = %shown, status, "the webhook refused an alert message; not sent again");
                    break;
                }
                Sent::Failed(why) if attempt == policy.attempts.max(1) => {
                    metrics.alert_notification("failed");
                    tracing::warn!(target: "flowgate::alerts", webhook = %shown, attempts = attempt, error = %why, "an alert message could not be delivered; given up");
                }
                Sent::Failed(why) => {
                    tracing::debug!(target: "flowgate::alerts", webhook = %shown, attempt, error = %why, "an alert message was not delivered; trying again");
                    tokio::time::sleep(wait).await;
                    wait = wait.saturating_mul(2);
                }
            }
        }
    }
}
