//! Redis's eviction policy, checked. Queued jobs and the shared rules are keys without expiry: a
//! Redis whose `maxmemory-policy` is `allkeys-lru`, `allkeys-lfu` or `allkeys-random` (common on
//! caches) may evict them silently under memory pressure. With queues declared or the rules kept
//! in Redis, the server refuses such a Redis at start (or, with `--redis-allow-eviction`, warns
//! in the log, in `/readyz` and in `flowgate_redis_eviction_risk`), and reads the policy again
//! every minute. While Redis does not answer, the policy last read stands (an outage says
//! nothing of the policy), and it is read again every few seconds until Redis answers. Limit state keys all expire and may be evicted safely: an evicted counter starts
//! again from empty, so that key may be admitted up to one more limit's worth in its window.

use std::sync::Arc;
use std::time::Duration;

use flowgate::store::StoreError;
use flowgate_redis::RedisStore;
use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;
use redis::Value;

/// How often the policy is read again.
pub(crate) const INTERVAL: Duration = Duration::from_secs(60);

/// How soon it is read again when Redis did not answer.
const RETRY: Duration = Duration::from_secs(5);

/// What Redis's eviction policy means for keys without expiry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// `noeviction` or a `volatile-*` policy: keys without expiry are never evicted.
    Safe(String),
    /// An `allkeys-*` policy: any key may go.
    Evicts(String),
    /// The policy cannot be read (managed services may refuse `CONFIG`).
    Unknown(String),
    /// Redis did not answer (down, or past the deadline): the policy is not known yet.
    Unreached(String),
}

impl Policy {
    /// The warning to show, if any.
    pub(crate) fn warning(&self) -> Option<String> {
        match self {
            Policy::Safe(_) => None,
            Policy::Evicts(p) => Some(format!(
                "Redis's maxmemory-policy is {p}: under memory pressure it may evict queued jobs and the shared rules, which have no expiry; set it to noeviction or a volatile-* policy"
            )),
            Policy::Unknown(why) | Policy::Unreached(why) => Some(format!(
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
        Err(e @ (StoreError::Timeout | StoreError::Unavailable(_))) => {
            return Policy::Unreached(e.to_string());
        }
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
/// up to date; while Redis does not answer, the policy last read stands and it is read again
/// every [`RETRY`].
pub(crate) async fn watch(redis: RedisStore, eviction: Arc<Eviction>, last: Policy) {
    watch_every(redis, eviction, last, INTERVAL, RETRY).await;
}

/// [`watch`], reading every `interval`, or `retry` after Redis did not answer.
async fn watch_every(
    redis: RedisStore,
    eviction: Arc<Eviction>,
    mut last: Policy,
    interval: Duration,
    retry: Duration,
) {
    let mut wait = if matches!(last, Policy::Unreached(_)) {
        retry
    } else {
        interval
    };
    loop {
        tokio::time::sleep(wait).await;
        let now = read(&redis).await;
        if let Policy::Unreached(why) = &now {
            tracing::debug!(error = %why, "cannot read Redis's eviction policy now; the last read stands");
            wait = retry;
            continue;
        }
        wait = interval;
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

#[cfg(test)]
mod tests {
    use super::*;
    use flowgate_redis::RedisOptions;
    use flowgate_testkit::redis::RedisServer;

    /// Polls `cond` every 20 ms for at most 10 s.
    async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..500 {
            if cond() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// An outage says nothing of the policy: while Redis hangs the policy last read stands (no
    /// warning), and once it answers a change is read at the next reading.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_outage_keeps_the_policy_last_read() {
        let redis = RedisServer::start();
        let store = RedisStore::connect_with(
            &redis.url(),
            RedisOptions::default().deadline(Duration::from_millis(50)),
        )
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
        let first = read(&store).await;
        assert!(matches!(first, Policy::Safe(_)), "{first:?}");
        redis.pause();
        let hung = read(&store).await;
        assert!(matches!(hung, Policy::Unreached(_)), "{hung:?}");
        let eviction = Arc::new(Eviction::new(Gauge::default()));
        eviction.set(&first);
        let watching = tokio::spawn(watch_every(
            store.clone(),
            Arc::clone(&eviction),
            first,
            Duration::from_millis(100),
            Duration::from_millis(50),
        ));
        // Several readings meet the hang.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let during = eviction.warning();
        redis.resume();
        assert_eq!(during, None, "a warning from an outage");
        let set = redis.cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        assert!(set.is_ok(), "{set:?}");
        let seen = eventually(|| {
            eviction
                .warning()
                .is_some_and(|w| w.contains("allkeys-lru"))
        })
        .await;
        watching.abort();
        assert!(seen, "{:?}", eviction.warning());
    }
}
