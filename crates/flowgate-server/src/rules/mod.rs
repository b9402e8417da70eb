//! Rules at run time for the whole cluster.
//!
//! A node follows one source of rules, said at start (`--rules-source`) and in `GET /v1/rules`
//! (`follows`):
//! - `files` (the default): its configuration files, watched and reloaded; `PUT /v1/rules`
//!   replaces them until the files change. Deployments that keep rules in git push the files to
//!   every node (a ConfigMap), or to Redis with `flowgate rules push`.
//! - `redis`: the rule set shared by the cluster ([`shared`]), a versioned document: every
//!   change (`PUT /v1/rules`, `flowgate rules push`, `flowgate rules rollback`) is validated,
//!   stored as a new version with its author, time and diff, and in force on every node within
//!   the check period (`follow.rs`). The node's files only seed the first version when Redis holds
//!   none, and are not watched: one source, never two fighting.

pub mod doc;
pub(crate) mod follow;
mod in_force;
pub mod shared;

pub(crate) use in_force::{RulesInForce, RulesInfo, RulesOrigin};

use doc::RulesDoc;
use shared::{Base, SharedError, Version, Written};

use flowgate_config::ConfigError;

/// What a node follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RulesSource {
    /// Its configuration files.
    #[default]
    Files,
    /// The rules shared through Redis.
    Redis,
}

/// Why a change was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChangeError {
    /// The rules are invalid: nothing changed.
    #[error("{0}")]
    Invalid(ConfigError),
    /// Redis could not store it, or another change came first: nothing changed.
    #[error("{0}")]
    Shared(SharedError),
    /// The version to restore is not kept.
    #[error("version {0} does not exist (or is older than the versions kept)")]
    Missing(u64),
}

/// The outcome of a change that was not refused.
#[derive(Debug)]
pub(crate) struct Changed {
    /// The version in force now.
    pub version: Version,
    /// Whether it was stored by this change; `false` when the rules were those of the version
    /// in force already (a push of the same files stores nothing, so the history lists only
    /// real changes).
    pub stored: bool,
}

/// Validates `doc`, stores it as the version after `base` (or after the version in force), and
/// puts it in force on this node; the other nodes follow within their check period. Rules equal
/// to the version in force store nothing.
///
/// # Errors
/// [`ChangeError`]; nothing changed then.
pub(crate) async fn change(
    rules: &RulesInForce,
    follower: &follow::Follower,
    doc: RulesDoc,
    base: Option<u64>,
    author: &str,
    action: &str,
) -> Result<Changed, ChangeError> {
    let loaded = doc.load().map_err(ChangeError::Invalid)?;
    let shared = &follower.shared;
    // A change made on a stale read is refused by the script; without a base given, it is
    // made again on the newer version (its diff recomputed).
    for _ in 0..5 {
        let current = shared.current().await.map_err(ChangeError::Shared)?;
        if let Some(b) = base
            && b != current
        {
            return Err(ChangeError::Shared(SharedError::Conflict {
                base: b,
                current,
            }));
        }
        let in_force = match current {
            0 => None,
            n => shared.get(n).await.map_err(ChangeError::Shared)?,
        };
        if let Some(v) = in_force.as_ref().filter(|v| v.doc == doc) {
            follower.apply(rules, v, loaded).await;
            return Ok(Changed {
                version: v.clone(),
                stored: false,
            });
        }
        let old = in_force.map(|v| v.doc).unwrap_or_default();
        let diff = doc.diff(&old);
        match shared
            .write(&doc, Base::Version(current), author, action, &diff)
            .await
        {
            Ok(Written::New(n)) => {
                let v = Version {
                    version: n,
                    author: author.to_owned(),
                    at_ms: 0,
                    action: action.to_owned(),
                    summary: diff.summary(),
                    diff: diff.text,
                    doc,
                };
                // Read back for Redis's time of the change.
                let v = match shared.get(n).await {
                    Ok(Some(stored)) => stored,
                    _ => v,
                };
                follower.apply(rules, &v, loaded).await;
                return Ok(Changed {
                    version: v,
                    stored: true,
                });
            }
            // Another change came first: without a base given, made again on it.
            Err(SharedError::Conflict { .. }) if base.is_none() => {}
            Ok(Written::Exists(current)) | Err(SharedError::Conflict { current, .. }) => {
                let base = base.unwrap_or(current);
                return Err(ChangeError::Shared(SharedError::Conflict { base, current }));
            }
            Err(e) => return Err(ChangeError::Shared(e)),
        }
    }
    Err(ChangeError::Shared(SharedError::Unavailable(
        "other changes kept coming first; try again".into(),
    )))
}

/// Stores version `n`'s rules again as a new version (`rollback to n`) and puts it in force
/// (nothing is stored when they are those in force).
///
/// # Errors
/// [`ChangeError::Missing`] when version `n` is not kept; as [`change`].
pub(crate) async fn rollback(
    rules: &RulesInForce,
    follower: &follow::Follower,
    n: u64,
    author: &str,
) -> Result<Changed, ChangeError> {
    let old = follower
        .shared
        .get(n)
        .await
        .map_err(ChangeError::Shared)?
        .ok_or(ChangeError::Missing(n))?;
    change(
        rules,
        follower,
        old.doc,
        None,
        author,
        &format!("rollback to {n}"),
    )
    .await
}
