//! Hot reload: the configuration file or directory is watched (and polled, for file systems
//! where notifications are lost, such as Kubernetes ConfigMap volumes); a change is applied
//! after a short debounce if the new rules are valid, and refused otherwise: the refusal is
//! logged with file, line and field, counted in `flowgate_config_reloads_total{result="failure"}`,
//! and the last good rules stay in force.
//!
//! # File reloads and the admin API: last writer wins
//! Both replace the whole rule set; nothing is merged. Rules put through `PUT /v1/rules` stay in
//! force only until the configuration changes on disk: the next reload (a file event, or a
//! change the poll notices) replaces them with the file's rules, and the admin rules are gone.
//! They are not written anywhere, so a restart also starts from the file. A reload is triggered
//! only by a change of the files' contents (or of the set of files), never by the poll alone, so
//! admin rules are not undone while the files stay as they are. `GET /v1/rules` says which set
//! is in force (`source` is `file` or `api`, with a `version` incremented on every change). To
//! keep rules set through the API, write them to the configuration as well, or run with
//! `--no-watch` (then only the API, or a restart, changes the rules).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use crate::rules::{RulesInForce, RulesOrigin};
use flowgate_config::ConfigError;

/// How long to wait for more file events before reloading.
const DEBOUNCE: Duration = Duration::from_millis(150);

/// A digest of the configuration's files and their contents (or of the error reading them).
pub(crate) fn fingerprint(path: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    match flowgate_config::files(path) {
        Ok(files) => {
            for f in files {
                f.hash(&mut h);
                match std::fs::read(&f) {
                    Ok(bytes) => bytes.hash(&mut h),
                    Err(e) => e.to_string().hash(&mut h),
                }
            }
        }
        Err(e) => e.to_string().hash(&mut h),
    }
    h.finish()
}

/// Reloads the configuration at `path` now: applies it if valid, else keeps the rules in force.
///
/// # Errors
/// The configuration error, already logged and counted.
pub(crate) async fn reload_now(rules: &RulesInForce, path: &Path) -> Result<u64, ConfigError> {
    let change = rules.change().await;
    let p = path.to_owned();
    let loaded = tokio::task::spawn_blocking(move || flowgate_config::load(&p))
        .await
        .unwrap_or_else(|e| {
            Err(ConfigError::new(
                path.display().to_string(),
                None,
                "",
                format!("reload failed: {e}"),
            ))
        });
    match loaded {
        Ok(loaded) => {
            let count = loaded.rules.rules().len();
            let queues = loaded.queues.specs().len();
            let version = change.apply(
                loaded.rules,
                Some(loaded.queues),
                Some(loaded.alerts),
                loaded.breakers,
                RulesOrigin::Files,
                loaded.config.files,
            );
            tracing::info!(version, rules = count, queues, path = %path.display(), "rules reloaded");
            Ok(version)
        }
        Err(e) => {
            rules.refused("file");
            tracing::error!(
                file = %e.file,
                line = e.line,
                field = %e.field,
                error = %e,
                "invalid configuration refused; the last good rules stay in force"
            );
            Err(e)
        }
    }
}

/// Watches `path`, whose loaded rules have fingerprint `loaded`, until `shutdown` turns true;
/// reloads on change (a node that `follows_redis` only warns that the files changed).
pub(crate) fn spawn(
    rules: Arc<RulesInForce>,
    follows_redis: bool,
    path: PathBuf,
    poll: Duration,
    loaded: u64,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        // Reading the files (as the reload does) raises access events: ignore them.
        if res.is_ok_and(|e| !e.kind.is_access()) {
            let _ = tx.send(());
        }
    })
    .and_then(|mut w| {
        let dir = if path.is_dir() {
            path.clone()
        } else {
            // Watch the directory: editors and ConfigMaps replace files rather than write them.
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
        };
        w.watch(&dir, RecursiveMode::NonRecursive).map(|()| w)
    });
    let watcher = match watcher {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the configuration; polling it instead");
            None
        }
    };
    tokio::spawn(async move {
        let _watcher = watcher;
        let mut last = loaded;
        let mut tick = tokio::time::interval(poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                Some(()) = rx.recv() => {
                    tokio::time::sleep(DEBOUNCE).await;
                    while rx.try_recv().is_ok() {}
                }
                _ = tick.tick() => {}
            }
            if *shutdown.borrow() {
                tracing::debug!("configuration watcher stopping");
                break;
            }
            let p = path.clone();
            let now = tokio::task::spawn_blocking(move || fingerprint(&p))
                .await
                .unwrap_or(last);
            tracing::debug!(now, last, "configuration fingerprint");
            if now == last {
                continue;
            }
            last = now;
            if follows_redis {
                // One source: the files only seeded the shared rules.
                tracing::warn!(path = %path.display(), "the configuration files changed, but this node follows the rules shared through Redis: push them with `flowgate rules push` to change the rules");
                continue;
            }
            let _ = reload_now(&rules, &path).await;
        }
    })
}
