//! [`RedisAdaptive`]: adaptive concurrency limits shared by a cluster, kept in Redis.
//!
//! One hash per adaptive rule, `flowgate:adaptive:{<domain>:<rule>}` (domain and rule escaped as
//! in state keys, so the braces are the hash tag: a rule's keys share one slot of a Redis
//! Cluster). A field per state key; its value the AIMD state as text, `<limit> <hold> <spec>`:
//! the limit written with `%.17g`, so it reads back as the same double, the reports still held,
//! and the parameters it moved under (a key stored under other parameters starts again, as the
//! library's per-process state does when a rule changes).
//!
//! [`RedisAdaptive::apply`] sends a batch of reports for several keys of one rule to one script
//! call (`scripts/aimd.lua`), which applies each key's reports in order exactly as
//! [`flowgate_core::adaptive::Aimd::report`] does (its port, line for line, proved against it by
//! `tests/adaptive.rs`) and answers each key's new limit. [`RedisAdaptive::limits`] reads keys'
//! limits (`HMGET`).
//!
//! **Bounds.** A hash holds at most [`ADAPTIVE_MAX_KEYS`] fields: past it, the reports of a key
//! not in it are refused (answered `None`, counted by [`RedisAdaptive::refused`]) and the node
//! keeps that key's limit on its own. Every call that writes sets the hash's expiry again to
//! [`ADAPTIVE_TTL`]: a rule with no report reaching Redis for that long is forgotten, and its
//! keys start again from `initial`. Fields have no expiry of their own (Redis 7.0 has none), so a
//! key that stops being used keeps its field while its rule's other keys are reported on. A call
//! carries at most [`MAX_REPORTS`] reports; a bigger batch takes several, in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flowgate_core::adaptive::AimdSpec;
use flowgate_core::{Descriptor, StoreError};
use redis::Value;

use crate::RedisStore;
use crate::conn::RedisConnection;
use crate::error::store_error;
use crate::scripts::AIMD;

/// The most keys (fields) one rule's hash holds.
pub const ADAPTIVE_MAX_KEYS: u64 = 10_000;

/// How long a rule's hash lives after the last call that wrote it.
pub const ADAPTIVE_TTL: Duration = Duration::from_secs(3_600);

/// The longest one call waits for Redis, unless [`RedisAdaptive::deadline`] says otherwise.
pub const ADAPTIVE_DEADLINE: Duration = Duration::from_millis(500);

/// The most reports in one script call.
const MAX_REPORTS: usize = 1_000;

/// The most keys in one read.
const MAX_READ: usize = 1_000;

/// The largest `inflight` sent: Lua's numbers are doubles, exact up to 2^53.
const MAX_INFLIGHT: u64 = 1 << 53;

/// One call's report, as [`flowgate_core::adaptive::Aimd::report`] takes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveReport {
    /// Its latency, µs.
    pub rtt: f64,
    /// Whether it failed.
    pub failed: bool,
    /// The calls out for its key when it was reported (at most 2^53 are sent).
    pub inflight: u64,
}

/// Adaptive limits kept in Redis. Built by [`RedisStore::adaptive`]: it shares the store's
/// connection. Cheap to clone (clones share the refusal count).
///
/// One hash per rule ([`RedisAdaptive::hash_key`]), a field per state key holding its AIMD
/// state as text (`<limit %.17g> <hold> <parameters>`). At most [`ADAPTIVE_MAX_KEYS`] keys per
/// rule (a new key's reports past that are refused and counted); every write sets the hash's
/// expiry again to [`ADAPTIVE_TTL`]; every call waits at most [`ADAPTIVE_DEADLINE`].
#[derive(Clone)]
pub struct RedisAdaptive {
    conn: RedisConnection,
    deadline: Duration,
    max_keys: u64,
    ttl: Duration,
    refused: Arc<AtomicU64>,
}

impl std::fmt::Debug for RedisAdaptive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisAdaptive")
            .field("deadline", &self.deadline)
            .field("max_keys", &self.max_keys)
            .field("ttl", &self.ttl)
            .field("refused", &self.refused())
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// The shared adaptive limits on this store's connection.
    pub fn adaptive(&self) -> RedisAdaptive {
        RedisAdaptive::new(self.conn().clone())
    }
}

/// A number as the shortest decimal text that reads back as `x` (Rust's `Display`, never an
/// exponent), which Lua's `tonumber` reads back as `x` too.
fn num(x: f64) -> String {
    format!("{x}")
}

/// The parameters as the script joins them (`ARGV[1..5]`), or an error for one that is not a
/// finite number.
fn signature(spec: &AimdSpec) -> Result<[String; 5], StoreError> {
    if !spec.max_latency.is_finite() || !spec.backoff.is_finite() {
        return Err(StoreError::Internal(format!(
            "adaptive parameters must be finite: max_latency {}, backoff {}",
            spec.max_latency, spec.backoff
        )));
    }
    Ok([
        spec.initial.to_string(),
        spec.min.to_string(),
        spec.max.to_string(),
        num(spec.max_latency),
        num(spec.backoff),
    ])
}

fn internal(what: &str, v: &Value) -> StoreError {
    StoreError::Internal(format!("adaptive limits: unexpected {what}: {v:?}"))
}

/// The limit in a stored value written under `spec` (the joined signature); `None` for another
/// signature or a value that does not read.
fn stored_limit(v: &str, spec: &str) -> Option<u64> {
    let mut parts = v.splitn(3, ' ');
    let limit: f64 = parts.next()?.parse().ok()?;
    parts.next()?.parse::<f64>().ok()?;
    (parts.next()? == spec && limit.is_finite()).then(|| limit.floor() as u64)
}

/// Calls of at most [`MAX_REPORTS`] reports each: per call, `(key index, its reports)` in order.
/// A key with more reports than a call's room continues in the next.
fn chunks<'a>(batch: &[(&str, &'a [AdaptiveReport])]) -> Vec<Vec<(usize, &'a [AdaptiveReport])>> {
    let mut calls: Vec<Vec<(usize, &'a [AdaptiveReport])>> = Vec::new();
    let mut call = Vec::new();
    let mut room = MAX_REPORTS;
    for (k, (_, reports)) in batch.iter().enumerate() {
        let mut rest: &'a [AdaptiveReport] = reports;
        loop {
            let n = rest.len().min(room);
            call.push((k, &rest[..n]));
            rest = &rest[n..];
            room -= n;
            if room == 0 {
                calls.push(std::mem::take(&mut call));
                room = MAX_REPORTS;
            }
            if rest.is_empty() {
                break;
            }
        }
    }
    if !call.is_empty() {
        calls.push(call);
    }
    calls
}

impl RedisAdaptive {
    /// Shared adaptive limits on `conn`, with [`ADAPTIVE_MAX_KEYS`] keys per rule, an expiry of
    /// [`ADAPTIVE_TTL`] and calls bounded by [`ADAPTIVE_DEADLINE`].
    pub fn new(conn: RedisConnection) -> Self {
        Self {
            conn,
            deadline: ADAPTIVE_DEADLINE,
            max_keys: ADAPTIVE_MAX_KEYS,
            ttl: ADAPTIVE_TTL,
            refused: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Sets the most keys a rule's hash holds (tests use a small one).
    #[must_use]
    pub fn max_keys(mut self, n: u64) -> Self {
        self.max_keys = n;
        self
    }

    /// Sets the longest one call waits.
    #[must_use]
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = d;
        self
    }

    /// How many keys' batches were refused because their rule's hash was full.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The Redis key of rule `rule` in `domain`: `flowgate:adaptive:{<domain>:<rule>}`, both
    /// escaped as in state keys (no brace of theirs can move the hash tag).
    ///
    /// # Examples
    /// ```
    /// use flowgate_redis::RedisAdaptive;
    /// assert_eq!(RedisAdaptive::hash_key("pay", "calls"), "flowgate:adaptive:{pay:calls}");
    /// assert_eq!(RedisAdaptive::hash_key("a{b}", "c:d"), "flowgate:adaptive:{a%7Bb%7D:c%3Ad}");
    /// ```
    pub fn hash_key(domain: &str, rule: &str) -> String {
        let empty = Descriptor {
            entries: Vec::new(),
            cost: None,
        };
        let prefix = flowgate_core::ruleset::state_key(domain, rule, &empty);
        format!("flowgate:adaptive:{{{}}}", prefix.trim_end_matches(':'))
    }

    /// Applies `batch` to the limits of rule `rule` in `domain` under `spec`: each key's
    /// reports in order, as [`flowgate_core::adaptive::Aimd::report`] does, starting from the
    /// state in Redis (or `spec`'s start). Answers each key's new limit, `None` for a key
    /// refused because the rule's hash is full. One script call, or one per 1,000 reports, each
    /// within the deadline; calls made before one that fails stay applied.
    ///
    /// # Errors
    /// [`StoreError::Timeout`] or [`StoreError::Unavailable`] when Redis does not answer;
    /// [`StoreError::Internal`] for parameters that are not finite numbers or an unexpected
    /// reply.
    pub async fn apply(
        &self,
        domain: &str,
        rule: &str,
        spec: &AimdSpec,
        batch: &[(&str, &[AdaptiveReport])],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let sig = signature(spec)?;
        if batch
            .iter()
            .any(|(_, rs)| rs.iter().any(|r| !r.rtt.is_finite()))
        {
            return Err(StoreError::Internal(
                "adaptive report: a latency that is not a finite number".to_owned(),
            ));
        }
        let key = Self::hash_key(domain, rule);
        let ttl = self.ttl.as_secs().max(1);
        let mut out = vec![None; batch.len()];
        for call in chunks(batch) {
            let mut inv = AIMD.prepare_invoke();
            inv.key(&key);
            for s in &sig {
                inv.arg(s);
            }
            inv.arg(self.max_keys).arg(ttl);
            for (k, reports) in &call {
                inv.arg(batch[*k].0).arg(reports.len());
                for r in *reports {
                    inv.arg(num(r.rtt))
                        .arg(u8::from(r.failed))
                        .arg(r.inflight.min(MAX_INFLIGHT));
                }
            }
            let reply = match tokio::time::timeout(self.deadline, self.conn.invoke(&inv)).await {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => return Err(store_error(&e)),
                Err(_) => return Err(StoreError::Timeout),
            };
            let Value::Array(answers) = &reply else {
                return Err(internal("reply", &reply));
            };
            if answers.len() != call.len() {
                return Err(internal("number of answers", &reply));
            }
            for ((k, _), a) in call.iter().zip(answers) {
                out[*k] = match a {
                    Value::Int(n) if *n >= 0 => Some(*n as u64),
                    Value::Int(_) => {
                        self.refused.fetch_add(1, Ordering::Relaxed);
                        None
                    }
                    _ => return Err(internal("answer", a)),
                };
            }
        }
        Ok(out)
    }

    /// The limits of `keys` of rule `rule` in `domain` under `spec`, in order: `None` for a key
    /// with no state in Redis, or one moved under other parameters (its next report starts it
    /// again from `spec`'s start). `HMGET`, one per 1,000 keys, each within the deadline.
    ///
    /// # Errors
    /// As [`RedisAdaptive::apply`].
    pub async fn limits(
        &self,
        domain: &str,
        rule: &str,
        spec: &AimdSpec,
        keys: &[&str],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let sig = signature(spec)?.join(",");
        let key = Self::hash_key(domain, rule);
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(MAX_READ) {
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(&key).arg(chunk);
            let values: Vec<Option<String>> =
                match tokio::time::timeout(self.deadline, self.conn.query(&cmd)).await {
                    Ok(r) => r?,
                    Err(_) => return Err(StoreError::Timeout),
                };
            out.extend(
                values
                    .iter()
                    .map(|v| v.as_deref().and_then(|v| stored_limit(v, &sig))),
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_keep_each_keys_reports_in_order() {
        let r = AdaptiveReport {
            rtt: 1.0,
            failed: false,
            inflight: 0,
        };
        let a = vec![r; 1_500];
        let b = vec![r; 600];
        let batch = [("a", a.as_slice()), ("b", b.as_slice())];
        let calls = chunks(&batch);
        let shape: Vec<Vec<(usize, usize)>> = calls
            .iter()
            .map(|c| c.iter().map(|(k, rs)| (*k, rs.len())).collect())
            .collect();
        assert_eq!(
            shape,
            [vec![(0, 1_000)], vec![(0, 500), (1, 500)], vec![(1, 100)]]
        );
    }

    #[test]
    fn a_stored_value_is_read_under_its_own_parameters_only() {
        assert_eq!(
            stored_limit("9.9000000000000004 3 1,1,5,100,0.9", "1,1,5,100,0.9"),
            Some(9)
        );
        assert_eq!(stored_limit("9.9 3 1,1,5,100,0.9", "1,1,6,100,0.9"), None);
        assert_eq!(stored_limit("x 3 1,1,5,100,0.9", "1,1,5,100,0.9"), None);
        assert_eq!(
            stored_limit("1.5e+18 0 s", "s"),
            Some(1_500_000_000_000_000_000)
        );
    }
}
