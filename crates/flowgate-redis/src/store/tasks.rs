//! The Redis store's background tasks (keeping its estimate of Redis's clock, probing a Redis
//! known down) and its concurrency lease ids.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flowgate_core::StoreError;
use flowgate_core::clock::micros;

use super::{Inner, RedisStore};
use crate::health::MIN_PROBE_TIMEOUT;

/// How often an idle store reads Redis's `TIME` (every script call measures it too).
const TIME_EVERY: Duration = Duration::from_secs(1);

/// Keeps the store's estimate of Redis's clock fresh while it makes no script call: reads
/// `TIME` when the last measure is older than [`TIME_EVERY`] (and Redis is not known down),
/// counted as a call, so that a store with no traffic notices an outage too; ends with the
/// store.
pub(super) async fn keep_time(inner: std::sync::Weak<Inner>) {
    let mut tick = tokio::time::interval(TIME_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let time = &inner.caller.time;
        let sent = time.local.now();
        // Known down: the probe is on it.
        if sent.saturating_sub(time.synced_at()) < micros(TIME_EVERY) || inner.health.is_down() {
            continue;
        }
        let reply =
            tokio::time::timeout(inner.deadline, inner.caller.conn.query(&redis::cmd("TIME")))
                .await
                .unwrap_or(Err(StoreError::Timeout));
        let received = time.local.now();
        // Counted as any call: an idle store notices an outage (and its end) by itself.
        RedisStore {
            inner: Arc::clone(&inner),
        }
        .settle(&reply);
        if let Ok(redis::Value::Array(v)) = reply
            && let [secs, us] = &v[..]
        {
            let int = |x: &redis::Value| match x {
                redis::Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse::<u64>().ok(),
                _ => None,
            };
            if let (Some(s), Some(u)) = (int(secs), int(us)) {
                time.observe(sent, received, s * 1_000_000 + u);
            }
        }
    }
}

/// Retries a Redis known down: asks whether it serves ([`RedisConnection::serves`]: `PING`, or
/// a cluster's state) at once (a stall that made calls time out may be over already), then
/// every `probe_every`, each within the decisions' deadline (at least
/// [`MIN_PROBE_TIMEOUT`]), until one is answered (the store is then back) or the store is
/// dropped.
pub(super) async fn probe(inner: std::sync::Weak<Inner>) {
    let mut first = true;
    loop {
        let Some(every) = inner.upgrade().map(|i| i.probe_every) else {
            return;
        };
        if !std::mem::take(&mut first) {
            tokio::time::sleep(every).await;
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let timeout = inner.deadline.max(MIN_PROBE_TIMEOUT);
        let r = tokio::time::timeout(timeout, inner.caller.conn.serves())
            .await
            .unwrap_or(Err(StoreError::Timeout));
        match r {
            Ok(()) => {
                // (no "recovered" line of the degraded flag's: the health logs the recovery)
                inner
                    .caller
                    .counters
                    .degraded
                    .store(false, Ordering::Relaxed);
                inner.health.recovered(flowgate_core::clock::system_now());
                return;
            }
            Err(e) => inner.health.probe_failed(&e),
        }
    }
}

/// Concurrency lease ids: a bijective mix of a random seed plus a counter, cut to 52 bits (the
/// scripts hold them as doubles, and a state holding a value from 2^52 up counts as none), so
/// ids are unpredictable and two leases collide with probability about 2^-52 per pair. Never 0.
pub(super) struct LeaseIds {
    seed: u64,
    next: AtomicU64,
}

impl LeaseIds {
    /// Ids on a seed from the operating system: without one, the store cannot be made (a fixed
    /// seed would give every app server the same ids, and one would release another's leases).
    pub(super) fn new() -> Result<Self, StoreError> {
        let seed =
            flowgate_core::random::seed().map_err(|e| StoreError::Internal(e.to_string()))?;
        Ok(Self {
            seed,
            next: AtomicU64::new(1),
        })
    }

    pub(super) fn next(&self) -> u64 {
        loop {
            let mut z = self
                .seed
                .wrapping_add(self.next.fetch_add(1, Ordering::Relaxed))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            z >>= 12;
            if z != 0 {
                return z;
            }
        }
    }
}
