//! The queues' state, read from the store every few seconds: it feeds the `flowgate_queue_*`
//! gauges and logs each instance's changes of state (a backlog starts, it drains, jobs reach
//! the dead letters). On Redis every node reads the whole cluster's state.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use flowgate::queue::{InstanceInfo, instance_names};

use crate::state::AppState;
use flowgate_observe::metrics::{InstanceLabels, JobLabels, MAX_QUEUE_SERIES};
use flowgate_observe::view::{NO_CONSUMER_AFTER_S, QueueStats};

/// How often the state is read.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// What was last seen of an instance.
#[derive(Clone, Copy, Default)]
struct Seen {
    waiting: u64,
    busy: bool,
    dead: u64,
    /// Releases, ever.
    released: u64,
    /// Since when (by the store's clock, µs) a release has been due and nobody took it.
    unclaimed_since: Option<u64>,
}

/// Since when a release of `s` has been due with nobody to take it (ready jobs, none in flight
/// or reserved for a waiting worker, the next slot now), continuing `before`'s count while no
/// release happened in between.
fn unclaimed_since(s: &flowgate::queue::InstanceStats, before: &Seen) -> Option<u64> {
    let due = s.ready > 0 && s.in_flight == 0 && s.reserved == 0 && s.next_slot <= s.now;
    let since = match before.unclaimed_since {
        Some(t) if before.released == s.released_total => t,
        _ => s.now,
    };
    due.then_some(since)
}

/// The watcher's memory between two reads.
#[derive(Default)]
pub(crate) struct Watch {
    seen: HashMap<String, Seen>,
}

fn labels(instance: &str) -> InstanceLabels {
    let (domain, queue) = instance_names(instance).unwrap_or_default();
    InstanceLabels {
        domain,
        queue,
        instance: instance.to_owned(),
    }
}

impl Watch {
    /// Reads every instance once: updates the gauges and logs the changes.
    pub(crate) async fn tick(&mut self, state: &AppState) {
        let m = &state.metrics;
        let all = match state.queue.instances().await {
            Ok(all) => all,
            Err(e) => {
                // (the queue logs the store's failure once, and its return)
                tracing::debug!(error = %e, "cannot read the queues' state");
                return;
            }
        };
        m.queue_state_read(flowgate::clock::system_now());
        let mut now_seen = HashMap::with_capacity(all.len());
        let mut shown = Vec::with_capacity(all.len().min(MAX_QUEUE_SERIES));
        for i in all.iter().take(MAX_QUEUE_SERIES) {
            let InstanceInfo {
                instance,
                spec: Some(spec),
                stats: Some(s),
                ..
            } = i
            else {
                continue;
            };
            let l = labels(instance);
            for (state, n) in [
                ("ready", s.ready),
                ("delayed", s.delayed),
                ("reserved", s.reserved),
                ("in_flight", s.in_flight),
                ("dead", s.dead),
            ] {
                m.queue_jobs
                    .get_or_create(&JobLabels {
                        domain: l.domain.clone(),
                        queue: l.queue.clone(),
                        instance: l.instance.clone(),
                        state,
                    })
                    .set(n as i64);
            }
            m.queue_oldest
                .get_or_create(&l)
                .set(s.oldest_age().unwrap_or(0) as f64 / 1e6);
            m.queue_drain
                .get_or_create(&l)
                .set(s.time_to_drain(spec.spacing()) as f64 / 1e6);
            m.queue_rate
                .get_or_create(&l)
                .set(i.release_rate.unwrap_or(0.0));
            let before = self.seen.get(instance).copied().unwrap_or_default();
            let unclaimed = unclaimed_since(s, &before);
            let no_consumer = unclaimed
                .is_some_and(|t| s.now.saturating_sub(t) as f64 / 1e6 >= NO_CONSUMER_AFTER_S);
            shown.push(QueueStats {
                instance: instance.clone(),
                domain: l.domain.clone(),
                queue: l.queue.clone(),
                rate: spec.rate().to_string(),
                depth: s.depth(),
                in_flight: s.in_flight,
                dead: s.dead,
                oldest_age_s: s.oldest_age().map(|a| a as f64 / 1e6),
                release_rate: i.release_rate,
                drain_s: (!no_consumer).then(|| s.time_to_drain(spec.spacing()) as f64 / 1e6),
                no_consumer,
            });
            let now = Seen {
                waiting: s.waiting(),
                busy: s.depth() > 0,
                dead: s.dead,
                released: s.released_total,
                unclaimed_since: unclaimed,
            };
            if now.waiting > 0 && before.waiting == 0 {
                tracing::info!(%instance, waiting = now.waiting, drain_s = s.time_to_drain(spec.spacing()) / 1_000_000, "queue backlog");
            }
            if !now.busy && before.busy {
                tracing::info!(%instance, "queue drained");
            }
            if now.dead > before.dead {
                tracing::warn!(%instance, dead = now.dead, new = now.dead - before.dead, "jobs moved to the dead letters");
            }
            now_seen.insert(instance.clone(), now);
        }
        for gone in self.seen.keys().filter(|k| !now_seen.contains_key(*k)) {
            let l = labels(gone);
            for state in ["ready", "delayed", "reserved", "in_flight", "dead"] {
                m.queue_jobs.remove(&JobLabels {
                    domain: l.domain.clone(),
                    queue: l.queue.clone(),
                    instance: l.instance.clone(),
                    state,
                });
            }
            m.queue_oldest.remove(&l);
            m.queue_drain.remove(&l);
            m.queue_rate.remove(&l);
        }
        self.seen = now_seen;
        state.stats.set_queues(shown);
    }
}

/// Runs the watcher every [`INTERVAL`] for ever (the server aborts it on shutdown).
pub(crate) async fn run(state: Arc<AppState>) {
    let mut watch = Watch::default();
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        watch.tick(&state).await;
    }
}
