//! The rules in force on this node, and the one way to change them: [`RulesInForce::change`]
//! takes the lock that serialises every change (file reloads, the admin API, the follower of the
//! rules shared through Redis), and only the [`Change`] it hands out can apply one.

use std::path::PathBuf;
use std::sync::Arc;

use flowgate::breakers::BreakerSet;
use flowgate::queue::Queue;
use flowgate::queue::QueueSet;
use flowgate::{Limiter, RuleSet};
use parking_lot::Mutex;

use crate::backend::{Backend, QueueBackend};
use flowgate_config::alert::AlertSet;
use flowgate_observe::Recorder;

use flowgate_observe::alerts::Alerts;

/// Where the rules in force came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RulesOrigin {
    /// The configuration files (the node follows its files).
    Files,
    /// `PUT /v1/rules` on a node that follows its files (until the files change).
    Api,
    /// A version of the rules shared through Redis (the node follows Redis).
    Redis {
        /// The version (0: none could be read; the node serves its files).
        version: u64,
        /// Who stored it.
        author: String,
        /// When, by Redis's clock (ms since the Unix epoch).
        at_ms: u64,
        /// Why the node may not be on the version in force (Redis unreachable, a version
        /// invalid on this node), if it may not.
        problem: Option<String>,
    },
}

/// The rules in force: their version and origin.
#[derive(Clone, Debug)]
pub(crate) struct RulesInfo {
    /// Following files: incremented on every change. Following Redis: the shared version.
    pub(crate) version: u64,
    /// Where they came from.
    pub(crate) origin: RulesOrigin,
    /// The files read (empty when set through the API or Redis).
    pub(crate) files: Vec<PathBuf>,
}

impl RulesInfo {
    /// `file`, `api` or `redis`.
    pub(crate) fn source(&self) -> &'static str {
        match self.origin {
            RulesOrigin::Files => "file",
            RulesOrigin::Api => "api",
            RulesOrigin::Redis { .. } => "redis",
        }
    }

    /// What the node follows: `files` or `redis`.
    pub(crate) fn follows(&self) -> &'static str {
        match self.origin {
            RulesOrigin::Redis { .. } => "redis",
            _ => "files",
        }
    }

    /// Why the node may not be on the shared version in force.
    pub(crate) fn problem(&self) -> Option<&str> {
        match &self.origin {
            RulesOrigin::Redis { problem, .. } => problem.as_deref(),
            _ => None,
        }
    }
}

/// The rules in force: what the limiter and the queues apply, where they came from, and the
/// lock under which they change.
pub(crate) struct RulesInForce {
    limiter: Arc<Limiter<Backend>>,
    queue: Arc<Queue<QueueBackend>>,
    alerts: Arc<Alerts>,
    recorder: Arc<Recorder>,
    info: Mutex<RulesInfo>,
    lock: tokio::sync::Mutex<()>,
}

impl RulesInForce {
    /// The rules the limiter, the queues and the alerts hold now, from `info`'s origin.
    pub(crate) fn new(
        limiter: Arc<Limiter<Backend>>,
        queue: Arc<Queue<QueueBackend>>,
        alerts: Arc<Alerts>,
        recorder: Arc<Recorder>,
        info: RulesInfo,
    ) -> Self {
        let metrics = recorder.metrics();
        metrics.rules.set(limiter.rules().rules().len() as i64);
        metrics.queues.set(queue.specs().specs().len() as i64);
        Self {
            limiter,
            queue,
            alerts,
            recorder,
            info: Mutex::new(info),
            lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Where the rules in force came from.
    pub(crate) fn info(&self) -> RulesInfo {
        self.info.lock().clone()
    }

    /// Waits for the changes under way, then hands out the one that may apply a change (until
    /// it is dropped, other changes wait).
    pub(crate) async fn change(&self) -> Change<'_> {
        Change {
            rules: self,
            _guard: self.lock.lock().await,
        }
    }

    /// Records why a node following Redis may not be on the version in force (`None`: it is).
    pub(crate) fn set_problem(&self, why: Option<String>) {
        let mut info = self.info.lock();
        if let RulesOrigin::Redis { problem, .. } = &mut info.origin
            && *problem != why
        {
            match &why {
                Some(p) => {
                    tracing::warn!(problem = %p, "rules: this node may not be on the version in force")
                }
                None => tracing::info!("rules: in sync with Redis again"),
            }
            *problem = why;
        }
    }

    /// Counts a change from `source` (`file`, `api`, `redis`) that was refused.
    pub(crate) fn refused(&self, source: &'static str) {
        self.recorder.metrics().reload(source, false);
    }
}

/// A change of the rules in force, holding the lock that serialises changes.
pub(crate) struct Change<'a> {
    rules: &'a RulesInForce,
    _guard: tokio::sync::MutexGuard<'a, ()>,
}

impl Change<'_> {
    /// Where the rules in force came from.
    pub(crate) fn info(&self) -> RulesInfo {
        self.rules.info()
    }

    /// Puts `rules` and `breakers` (and `queues` and `alerts`, when given) in force; answers
    /// the new version. A breaker whose definition is unchanged keeps its state.
    pub(crate) fn apply(
        self,
        rules: RuleSet,
        queues: Option<QueueSet>,
        alerts: Option<AlertSet>,
        breakers: BreakerSet,
        origin: RulesOrigin,
        files: Vec<PathBuf>,
    ) -> u64 {
        let r = self.rules;
        let metrics = r.recorder.metrics();
        if let Some(q) = queues {
            metrics.queues.set(q.specs().len() as i64);
            r.queue.set_specs(q);
        }
        if let Some(a) = alerts {
            r.alerts.set_alerts(a);
        }
        metrics.rules.set(rules.rules().len() as i64);
        r.limiter.breakers().set(breakers);
        r.limiter.set_rules(rules);
        r.recorder.rules_changed();
        let mut info = r.info.lock();
        info.version = match &origin {
            RulesOrigin::Redis { version, .. } => *version,
            _ => info.version + 1,
        };
        info.origin = origin;
        metrics.reload(info.source(), true);
        info.files = files;
        info.version
    }
}
