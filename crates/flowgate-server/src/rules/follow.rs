//! A node following the shared rules: the version in force at start, then every new one within
//! the check period.
//!
//! A node learns of a new version two ways: the number published on [`super::shared::CHANNEL`]
//! (at once), and a check of the version key every `check` period (so a node that missed a
//! message, or was cut off, converges within one period of being able to reach Redis again).
//! Every version applied is written to a disk cache, from which a node starts when Redis cannot
//! be reached at start.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};

use super::doc::RulesDoc;
use super::in_force::{RulesInForce, RulesOrigin};
use super::shared::{Base, SharedError, SharedRules, Version, Written};
use flowgate_config::Loaded;

/// How often a node checks the version in force, by default.
pub(crate) const DEFAULT_CHECK: Duration = Duration::from_secs(1);

/// A node's link to the shared rules.
pub(crate) struct Follower {
    /// The shared rules.
    pub(crate) shared: SharedRules,
    /// The disk cache of the last version applied.
    pub(crate) cache: PathBuf,
    /// How often the version in force is checked.
    pub(crate) check: Duration,
    /// The node's configuration files: the first version when Redis holds none.
    pub(crate) files: RulesDoc,
    /// The action recorded when the files seed Redis (`seed from the files <path>`).
    pub(crate) seed_action: String,
}

/// The disk cache's content.
#[derive(Serialize, Deserialize)]
struct Cached {
    version: u64,
    author: String,
    at_ms: u64,
    doc: RulesDoc,
}

/// The rules a node starts with, and where they came from.
pub(crate) struct Initial {
    /// The rules and queues.
    pub(crate) loaded: Loaded,
    /// Their origin.
    pub(crate) origin: RulesOrigin,
}

fn origin_of(v: &Version) -> RulesOrigin {
    RulesOrigin::Redis {
        version: v.version,
        author: v.author.clone(),
        at_ms: v.at_ms,
        problem: None,
    }
}

impl Follower {
    /// The rules to start with: the version in force in Redis (the files seed it when Redis
    /// holds none); when Redis cannot be reached, the disk cache, else the files.
    ///
    /// # Errors
    /// Never for Redis: only when the files themselves are invalid and nothing else is usable.
    pub(crate) async fn initial(&self, files: Loaded) -> Initial {
        match self.fetch_current_or_seed().await {
            Ok(v) => match v.doc.load() {
                Ok(loaded) => {
                    self.write_cache(&v).await;
                    Initial {
                        loaded,
                        origin: origin_of(&v),
                    }
                }
                Err(e) => {
                    let problem = format!(
                        "version {} in Redis is invalid on this node ({e})",
                        v.version
                    );
                    tracing::error!(%problem, "rules: not applied");
                    self.fallback(files, problem).await
                }
            },
            Err(e) => {
                // The store's own message is logged, not shown (`GET /v1/rules` answers anyone).
                tracing::warn!(error = %e, "rules: Redis unreachable at start");
                self.fallback(files, "Redis unreachable at start".to_owned())
                    .await
            }
        }
    }

    async fn fetch_current_or_seed(&self) -> Result<Version, SharedError> {
        let mut n = self.shared.current().await?;
        if n == 0 {
            let diff = self.files.diff(&RulesDoc::default());
            n = match self
                .shared
                .write(&self.files, Base::Empty, "seed", &self.seed_action, &diff)
                .await?
            {
                Written::New(n) => {
                    tracing::info!(version = n, "rules: Redis held none; seeded with the files");
                    n
                }
                Written::Exists(n) => n,
            };
        }
        self.shared
            .get(n)
            .await?
            .ok_or_else(|| SharedError::Corrupt {
                version: n,
                detail: "missing".into(),
            })
    }

    async fn fallback(&self, files: Loaded, problem: String) -> Initial {
        if let Some(c) = read_cache(&self.cache).await {
            match c.doc.load() {
                Ok(loaded) => {
                    tracing::warn!(version = c.version, cache = %self.cache.display(), "rules: serving the last version known, from the disk cache");
                    return Initial {
                        loaded,
                        origin: RulesOrigin::Redis {
                            version: c.version,
                            author: c.author,
                            at_ms: c.at_ms,
                            problem: Some(format!(
                                "{problem}; serving version {} from the disk cache {}",
                                c.version,
                                self.cache.display()
                            )),
                        },
                    };
                }
                Err(e) => tracing::error!(error = %e, "rules: the disk cache is invalid"),
            }
        }
        tracing::warn!("rules: serving the files");
        Initial {
            loaded: files,
            origin: RulesOrigin::Redis {
                version: 0,
                author: String::new(),
                at_ms: 0,
                problem: Some(format!(
                    "{problem}; no disk cache: serving the configuration files"
                )),
            },
        }
    }

    async fn write_cache(&self, v: &Version) {
        let cached = Cached {
            version: v.version,
            author: v.author.clone(),
            at_ms: v.at_ms,
            doc: v.doc.clone(),
        };
        let path = self.cache.clone();
        let written = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension("json.tmp");
            std::fs::write(&tmp, serde_json::to_vec(&cached)?)?;
            std::fs::rename(&tmp, &path)
        })
        .await;
        if let Ok(Err(e)) = written {
            tracing::warn!(error = %e, cache = %self.cache.display(), "rules: cannot write the disk cache");
        }
    }

    /// Applies version `v` (already validated as `loaded`) unless it is in force already; writes
    /// the disk cache. A lower number than the one in force is applied too: Redis that lost its
    /// data starts again from version 1. (A check that read an older version just before a push
    /// on this node may apply it after the push; the push's notification brings the newer one
    /// back at once.)
    pub(crate) async fn apply(&self, rules: &RulesInForce, v: &Version, loaded: Loaded) {
        {
            let change = rules.change().await;
            let info = change.info();
            if let RulesOrigin::Redis {
                version,
                problem: None,
                ..
            } = info.origin
                && version == v.version
            {
                return;
            }
            let count = loaded.rules.rules().len();
            change.apply(
                loaded.rules,
                Some(loaded.queues),
                Some(loaded.alerts),
                loaded.breakers,
                origin_of(v),
                Vec::new(),
            );
            tracing::info!(
                version = v.version,
                author = %v.author,
                rules = count,
                "rules: version in force"
            );
        }
        self.write_cache(v).await;
    }

    /// Checks the version in force and applies it if it is not. `refused` is the last version
    /// found invalid on this node (not fetched again).
    async fn sync(&self, rules: &RulesInForce, refused: &mut u64) {
        let info = rules.info();
        let in_force = match &info.origin {
            RulesOrigin::Redis { version, .. } => *version,
            _ => 0,
        };
        let current = match self.shared.current().await {
            Ok(n) => n,
            Err(e) => {
                rules.set_problem(Some(if in_force == 0 {
                    format!("{e}; no version applied yet: serving the configuration files")
                } else {
                    format!("{e}; version {in_force}, the last applied, stays in force")
                }));
                return;
            }
        };
        if current == 0 {
            self.reseed().await;
            return;
        }
        if current == in_force {
            if info.problem().is_some() {
                rules.set_problem(None);
            }
            return;
        }
        if *refused == current {
            return;
        }
        match self.shared.get(current).await {
            Ok(Some(v)) => match v.doc.load() {
                Ok(loaded) => {
                    *refused = 0;
                    self.apply(rules, &v, loaded).await;
                }
                Err(e) => {
                    *refused = current;
                    let problem = format!(
                        "version {current} is invalid on this node ({e}); the last good rules stay in force"
                    );
                    tracing::error!(%problem, "rules: not applied");
                    rules.set_problem(Some(problem));
                }
            },
            Ok(None) => {}
            Err(e) => rules.set_problem(Some(e.to_string())),
        }
    }

    /// Redis holds no version (it lost its data, or could not be reached when this node
    /// started): the version this node applied last (its disk cache), else its files, become the
    /// first version again, unless another node's came first.
    async fn reseed(&self) {
        let (doc, action) = match read_cache(&self.cache).await {
            Some(c) => (
                c.doc,
                format!(
                    "seed from version {} of a node, Redis having lost the rules",
                    c.version
                ),
            ),
            None => (self.files.clone(), self.seed_action.clone()),
        };
        let diff = doc.diff(&RulesDoc::default());
        match self
            .shared
            .write(&doc, Base::Empty, "seed", &action, &diff)
            .await
        {
            Ok(Written::New(n)) => {
                tracing::warn!(version = n, %action, "rules: Redis held none; seeded it");
            }
            Ok(Written::Exists(_)) => {}
            Err(e) => tracing::warn!(error = %e, "rules: cannot seed Redis"),
        }
    }

    /// Follows the shared rules until `shutdown` turns true.
    pub(crate) fn spawn(
        self: Arc<Self>,
        rules: Arc<RulesInForce>,
        mut shutdown: watch::Receiver<bool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let notify = Arc::new(Notify::new());
        let subscriber = tokio::spawn(subscribe(self.shared.clone(), Arc::clone(&notify)));
        let checker = tokio::spawn(async move {
            let mut tick = tokio::time::interval(self.check);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut refused = 0;
            loop {
                tokio::select! {
                    _ = shutdown.changed() => break,
                    () = notify.notified() => {}
                    _ = tick.tick() => {}
                }
                if *shutdown.borrow() {
                    break;
                }
                self.sync(&rules, &mut refused).await;
            }
        });
        vec![subscriber, checker]
    }
}

/// Wakes `notify` on every message of the rules channel, and after a lost subscription
/// ([`flowgate_redis::follow`]).
async fn subscribe(shared: SharedRules, notify: Arc<Notify>) {
    flowgate_redis::follow(
        shared.subscribe_urls(),
        shared.subscribe_options(),
        super::shared::CHANNEL,
        "rules",
        notify,
    )
    .await;
}

async fn read_cache(path: &Path) -> Option<Cached> {
    let bytes = tokio::fs::read(path).await.ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(error = %e, cache = %path.display(), "rules: the disk cache is unreadable");
            None
        }
    }
}
