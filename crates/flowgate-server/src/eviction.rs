//! Redis's eviction policy, checked. Queued jobs and the shared rules are keys without expiry: a
//! Redis whose `maxmemory-policy` is `allkeys-lru`, `allkeys-lfu` or `allkeys-random` (common on
//! caches) may evict them silently under memory pressure. With queues declared or the rules kept
//! in Redis, the server refuses such a Redis at start (or, with `--redis-allow-eviction`, warns
//! in the log, in `/readyz` and in `flowgate_redis_eviction_risk`), and reads the policy again
//! every minute. Limit state keys all expire and may be evicted safely: an evicted counter starts
//! again from empty, so that key may be admitted up to one more limit's worth in its window.

use std::sync::Arc;
use std::time::Duration;

use flowgate_redis::RedisStore;
use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;
use redis::Value;

/// How often the policy is read again.
pub(crate) const INTERVAL: Duration = Duration::from_secs(60);

/// What Redis's eviction policy means for keys without expiry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// `noeviction` or a `volatile-*` policy: keys without expiry are never evicted.
    Safe(String),
    /// An `allkeys-*` policy: any key may go.
    Evicts(String),
    /// The policy cannot be read (managed services may refuse `CONFIG`).
    Unknown(String),
}

impl Policy {
    /// The warning to show, if any.
    pub(crate) fn warning(&self) -> Option<String> {
        match self {
            Policy::Safe(_) => None,
            Policy::Evicts(p) => Some(format!(
                "Redis's maxmemory-policy is {p}: under memory pressure it may evict queued jobs and the shared rules, which have no expiry; set it to noeviction or a volatile-* policy"
            )),
            Policy::Unknown(why) => Some(format!(
                "cannot read Redis's maxmemory-policy ({why}): make sure it is noeviction or a volatile-* policy, or queued jobs and the shared rules may be evicted"
            )),
        }
    }
}

/// What Redis's eviction policy means now: the warning `/readyz` shows, and
/// `flowgate_redis_eviction_risk`.
pub(crate) struct Eviction {
    warning: Mutex<Option<String>>,
    risk: Gauge,
}

impl Eviction {
    /// No warning yet, the risk shown by `risk`.
    pub(crate) fn new(risk: Gauge) -> Self {
        Self {
            warning: Mutex::new(None),
            risk,
        }
    }

    /// Records what `policy` means for the jobs and rules kept in Redis.
    pub(crate) fn set(&self, policy: &Policy) {
        self.risk
            .set(i64::from(matches!(policy, Policy::Evicts(_))));
        *self.warning.lock() = policy.warning();
    }

    /// The warning, if any.
    pub(crate) fn warning(&self) -> Option<String> {
        self.warning.lock().clone()
    }
}

/// Reads the policy (on a cluster, from the node the command reaches).
pub(crate) async fn read(redis: &RedisStore) -> Policy {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("maxmemory-policy");
    let value = match redis.query(&cmd).await {
        Ok(v) => v,
        Err(e) => return Policy::Unknown(e.to_string()),
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let policy = match &value {
        Value::Array(a) => a.get(1).and_then(text),
        Value::Map(m) => m.first().and_then(|(_, v)| text(v)),
        _ => None,
    };
    match policy {
        Some(p) if p.starts_with("allkeys-") => Policy::Evicts(p),
        Some(p) => Policy::Safe(p),
        None => Policy::Unknown(format!("unexpected answer {value:?}")),
    }
}

/// Reads the policy every [`INTERVAL`], logging a change and keeping the warning and the gauge
/// up to date.
pub(crate) async fn watch(redis: RedisStore, eviction: Arc<Eviction>, mut last: Policy) {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let now = read(&redis).await;
        if now != last {
            match now.warning() {
                Some(w) => tracing::error!(warning = %w, "Redis eviction policy"),
                None => {
                    tracing::info!(policy = ?now, "Redis's eviction policy spares keys without expiry")
                }
            }
        }
        eviction.set(&now);
        last = now;
    }
}
