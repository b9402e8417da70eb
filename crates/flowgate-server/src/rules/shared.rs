//! The rule set shared by the cluster: a versioned document in Redis.
//!
//! Keys (one hash tag, so one Redis Cluster slot): `flowgate:{rules}:version` holds the number of
//! the version in force; `flowgate:{rules}:v:<n>` is version `n`, a hash of its document (JSON),
//! author, time (Redis's clock, ms), action, diff from the version before and a summary. A new
//! version is written by one script (`flowgate-redis`'s `rules_push.lua`) that checks the version it was based on (a push made on a
//! stale read is refused, never lost), stores it, moves `version` and publishes `n` on the
//! channel `flowgate:rules`. The newest [`KEPT_VERSIONS`] versions are kept.

use std::time::Duration;

use flowgate::store::StoreError;
use flowgate_redis::scripts::RULES_PUSH;
use flowgate_redis::{RedisConnection, RedisOptions};
use serde::Serialize;

use super::doc::RulesDoc;

/// The key holding the number of the version in force.
pub const VERSION_KEY: &str = "flowgate:{rules}:version";
/// The prefix of a version's key (`flowgate:{rules}:v:<n>`).
pub const VERSION_PREFIX: &str = "flowgate:{rules}:v:";
/// The channel on which a new version's number is published.
pub const CHANNEL: &str = "flowgate:rules";
/// How many versions are kept (older ones are deleted as new ones are written).
pub const KEPT_VERSIONS: u64 = 1000;

/// How long one command may take (connecting included).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the shared rules cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// Redis cannot be reached or did not answer in time.
    #[error("Redis is unreachable: {0}")]
    Unavailable(String),
    /// Another change was stored after the version this one was based on.
    #[error("version {current} was stored after version {base}, on which this change is based")]
    Conflict {
        /// The version this change was based on.
        base: u64,
        /// The version in force.
        current: u64,
    },
    /// A stored version cannot be read.
    #[error("version {version} is unreadable: {detail}")]
    Corrupt {
        /// The version.
        version: u64,
        /// Why.
        detail: String,
    },
}

/// A stored version.
#[derive(Clone, Debug, Serialize)]
pub struct Version {
    /// Its number (1, 2, ...).
    pub version: u64,
    /// Who stored it: the admin token's name, or `seed` for a cluster's first version.
    pub author: String,
    /// When, by Redis's clock, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// `push`, `rollback to N` or `seed from <files>`.
    pub action: String,
    /// What changed from the version before (`+3 -1 lines`).
    pub summary: String,
    /// The unified diff from the version before.
    pub diff: String,
    /// The rules.
    #[serde(skip)]
    pub doc: RulesDoc,
}

/// Which version a new one must follow.
#[derive(Clone, Copy, Debug)]
pub enum Base {
    /// Exactly this version (0: none yet).
    Version(u64),
    /// Only if no version exists (a cluster's first node seeds it).
    Empty,
}

/// The outcome of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// Stored as this version.
    New(u64),
    /// Not stored: a version already exists (`Base::Empty`), this one.
    Exists(u64),
}

/// The shared rules' connection to Redis.
#[derive(Clone)]
pub struct SharedRules {
    conn: RedisConnection,
    /// When changes must reach replicas before they are answered: their connection.
    replicated: Option<flowgate_redis::Replicated>,
    /// The URLs a subscriber connects to, tried in turn: a cluster publishes to every node, so
    /// any one that answers will do; a sentinel URL subscribes on the primary named then.
    subscribe_urls: Vec<String>,
    /// How the subscriber connects (certificates, the sentinels' credentials).
    subscribe_options: flowgate_redis::ConnectionOptions,
}

fn unavailable(e: impl std::fmt::Display) -> SharedError {
    SharedError::Unavailable(e.to_string())
}

impl From<StoreError> for SharedError {
    /// Whatever went wrong with Redis, the shared rules cannot be read or written now.
    fn from(e: StoreError) -> Self {
        unavailable(e)
    }
}

impl SharedRules {
    /// A connection to `url` (`redis://…` or `redis+cluster://…`), made on first use and
    /// remade after failures, so this succeeds while Redis is down.
    ///
    /// # Errors
    /// [`SharedError::Unavailable`] for a bad URL.
    pub async fn connect(url: &str) -> Result<Self, SharedError> {
        Self::connect_with(url, &RedisOptions::default()).await
    }

    /// As [`SharedRules::connect`], connecting as the store's `options` say (its connect
    /// timeout and TLS certificates; for `rediss://` and `rediss+cluster://` URLs).
    ///
    /// # Errors
    /// [`SharedError::Unavailable`] for a bad URL, or certificates given for a URL without TLS.
    pub async fn connect_with(url: &str, options: &RedisOptions) -> Result<Self, SharedError> {
        let connection = options.connection().timeout(COMMAND_TIMEOUT);
        Ok(Self {
            conn: RedisConnection::connect_lazy(url, connection)?,
            replicated: None,
            subscribe_urls: flowgate_redis::cluster_nodes(url)
                .unwrap_or_else(|| vec![url.to_owned()]),
            subscribe_options: options.connection(),
        })
    }

    /// Rules changes through `replicated`'s connection, each answered only once its replicas
    /// hold it.
    pub fn replicated(mut self, replicated: flowgate_redis::Replicated) -> Self {
        self.replicated = Some(replicated);
        self
    }

    /// The URLs of the servers whose notifications a node follows, tried in turn.
    pub fn subscribe_urls(&self) -> &[String] {
        &self.subscribe_urls
    }

    /// How the subscriber connects (certificates, the sentinels' credentials).
    pub fn subscribe_options(&self) -> &flowgate_redis::ConnectionOptions {
        &self.subscribe_options
    }

    /// The number of the version in force (0 when none was stored yet).
    ///
    /// # Errors
    /// [`SharedError::Unavailable`].
    pub async fn current(&self) -> Result<u64, SharedError> {
        let v: Option<u64> = self.conn.query(redis::cmd("GET").arg(VERSION_KEY)).await?;
        Ok(v.unwrap_or(0))
    }

    /// Version `n`, if it is kept.
    ///
    /// # Errors
    /// [`SharedError::Unavailable`], or [`SharedError::Corrupt`] when it cannot be read.
    pub async fn get(&self, n: u64) -> Result<Option<Version>, SharedError> {
        let fields: std::collections::HashMap<String, String> = self
            .conn
            .query(redis::cmd("HGETALL").arg(format!("{VERSION_PREFIX}{n}")))
            .await?;
        if fields.is_empty() {
            return Ok(None);
        }
        let corrupt = |detail: String| SharedError::Corrupt { version: n, detail };
        let field = |name: &str| fields.get(name).cloned().unwrap_or_default();
        let doc: RulesDoc = serde_json::from_str(&field("doc"))
            .map_err(|e| corrupt(format!("its document: {e}")))?;
        Ok(Some(Version {
            version: n,
            author: field("author"),
            at_ms: field("at_ms").parse().unwrap_or(0),
            action: field("action"),
            summary: field("summary"),
            diff: field("diff"),
            doc,
        }))
    }

    /// Stores `doc` as a new version after `base`.
    ///
    /// # Errors
    /// [`SharedError::Conflict`] when `base` is not the version in force;
    /// [`SharedError::Unavailable`]: then nothing was stored, or the whole version was (the
    /// script is atomic).
    pub async fn write(
        &self,
        doc: &RulesDoc,
        base: Base,
        author: &str,
        action: &str,
        diff: &super::doc::Diff,
    ) -> Result<Written, SharedError> {
        let json = serde_json::to_string(doc).map_err(unavailable)?;
        let base_arg = match base {
            Base::Version(v) => v.to_string(),
            Base::Empty => "empty".to_owned(),
        };
        let mut call = RULES_PUSH.prepare_invoke();
        call.key(VERSION_KEY)
            .arg(base_arg)
            .arg(VERSION_PREFIX)
            .arg(json)
            .arg(author)
            .arg(action)
            .arg(&diff.text)
            .arg(diff.summary())
            .arg(CHANNEL)
            .arg(KEPT_VERSIONS);
        let conn = self.replicated.as_ref().map_or(&self.conn, |r| r.conn());
        let (n, outcome): (u64, i64) = conn.query_script(&call).await?;
        match (outcome, base) {
            (1, _) => {
                if let Some(r) = &self.replicated {
                    r.confirm(VERSION_KEY).await?;
                }
                Ok(Written::New(n))
            }
            (0, _) => Ok(Written::Exists(n)),
            (_, Base::Version(b)) => Err(SharedError::Conflict {
                base: b,
                current: n,
            }),
            (_, Base::Empty) => Err(SharedError::Conflict {
                base: 0,
                current: n,
            }),
        }
    }

    /// The newest versions kept, newest first, at most `limit` (documents not read).
    ///
    /// # Errors
    /// [`SharedError::Unavailable`].
    pub async fn history(&self, limit: u64) -> Result<(u64, Vec<Version>), SharedError> {
        let current = self.current().await?;
        let oldest = current.saturating_sub(limit.min(KEPT_VERSIONS)) + 1;
        let numbers: Vec<u64> = (oldest..=current).rev().collect();
        // One round trip for all of them.
        let mut pipe = redis::pipe();
        for n in &numbers {
            pipe.cmd("HMGET")
                .arg(format!("{VERSION_PREFIX}{n}"))
                .arg(&["author", "at_ms", "action", "summary"]);
        }
        let rows: Vec<[Option<String>; 4]> = if numbers.is_empty() {
            Vec::new()
        } else {
            self.conn.query_pipe(&pipe).await?
        };
        let mut out = Vec::new();
        for (n, [author, at, action, summary]) in numbers.into_iter().zip(rows) {
            let Some(author) = author else { break };
            out.push(Version {
                version: n,
                author,
                at_ms: at.and_then(|a| a.parse().ok()).unwrap_or(0),
                action: action.unwrap_or_default(),
                summary: summary.unwrap_or_default(),
                diff: String::new(),
                doc: RulesDoc::default(),
            });
        }
        Ok((current, out))
    }
}
