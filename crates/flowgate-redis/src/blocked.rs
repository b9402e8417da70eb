//! The blocked-keys cache: once an enforced limit rejects a request with a `retry_after`, later
//! requests for that key are rejected in-process until then, without a round trip.
//!
//! **Why it is valid.** Until `retry_after`, the same request can only keep failing: every
//! algorithm but `concurrency` only becomes more permissive as time passes, and other callers
//! only take more. A request of the same or a larger cost fails too, since every algorithm's
//! rejection is monotone in the cost. In `delay` mode `retry_after` is when the wait first fits
//! in `max_wait`; the wait only shrinks with time, so the same reasoning holds.
//!
//! **What is never cached.** `concurrency` (a release frees units at any moment), shadow items
//! (they never block), rejections that can never pass (no `retry_after`: caching them would save
//! nothing a rule change should not undo), and peeks (cost 0 are never short-circuited).
//!
//! **What a short-circuited batch reports.** The blocked item: `allowed: false`, `remaining: 0`,
//! `retry_after` = the cached instant minus now, `reset_after` = the same value (a lower bound:
//! the state is not empty before then). Every other item is *not evaluated*: `allowed: true`,
//! `remaining` = its limit, zero `reset_after`. Nothing is recorded for any item, as for any
//! rejected batch.
//!
//! **Where it is conservative.** A cross-slot refund on Redis Cluster, a rule change, or a refund
//! reported to another node (`Store::charge`) can make a key pass earlier than cached: the cache
//! then rejects a request Redis would admit, until the cached instant. A refund reported to this
//! node drops its key from the cache. Entries are matched with their exact [`Limit`], so a changed limit is never
//! served from the cache; [`crate::RedisStore::clear_blocked`] drops everything anyway.
//!
//! Bounded: when full, expired entries are swept; if it is still full, the new rejection is not
//! cached (counted in `RedisStats::blocked_full`).

use std::collections::HashMap;
use std::time::Duration;

use flowgate_core::{Algorithm, Decision, Decisions, Item, Limit, Micros};
use parking_lot::Mutex;

struct Entry {
    until: Micros,
    cost: u64,
    limit: Limit,
}

pub(crate) struct Blocked {
    capacity: usize,
    map: Mutex<HashMap<String, Entry>>,
}

/// Whether an item's rejection may be cached and short-circuited.
fn eligible(item: &Item<'_>) -> bool {
    item.enforce && item.cost > 0 && item.limit.algorithm() != Algorithm::Concurrency
}

pub(crate) enum Record {
    Done,
    Full,
}

impl Blocked {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            map: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Answers a batch from the cache when one of its enforced items is blocked at `now`.
    pub(crate) fn short_circuit(&self, items: &[Item<'_>], now: Micros) -> Option<Decisions> {
        if !self.enabled() {
            return None;
        }
        let map = self.map.lock();
        if map.is_empty() {
            return None;
        }
        let (at, until) = items.iter().enumerate().find_map(|(i, item)| {
            if !eligible(item) {
                return None;
            }
            let e = map.get(item.key)?;
            (e.until > now && item.cost >= e.cost && e.limit == *item.limit).then_some((i, e.until))
        })?;
        drop(map);
        let wait = Duration::from_micros(until - now);
        Some(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    if i == at {
                        Decision {
                            allowed: false,
                            limit: item.limit.limit(),
                            remaining: 0,
                            reset_after: wait,
                            retry_after: Some(wait),
                            wait: Duration::ZERO,
                            lease: None,
                        }
                    } else {
                        Decision {
                            allowed: true,
                            limit: item.limit.limit(),
                            remaining: item.limit.limit(),
                            reset_after: Duration::ZERO,
                            retry_after: None,
                            wait: Duration::ZERO,
                            lease: None,
                        }
                    }
                })
                .collect(),
        )
    }

    /// Caches the enforced rejections of a decided batch, `now` being the local time read before
    /// the call (so the cached instant is never later than Redis's).
    pub(crate) fn record(&self, items: &[Item<'_>], decisions: &[Decision], now: Micros) -> Record {
        if !self.enabled() {
            return Record::Done;
        }
        let mut full = false;
        for (item, d) in items.iter().zip(decisions) {
            let Some(retry) = d.retry_after else { continue };
            if d.allowed || !eligible(item) {
                continue;
            }
            let until = now + u64::try_from(retry.as_micros()).unwrap_or(u64::MAX / 2);
            let mut map = self.map.lock();
            if map.len() >= self.capacity && !map.contains_key(item.key) {
                map.retain(|_, e| e.until > now);
                if map.len() >= self.capacity {
                    full = true;
                    continue;
                }
            }
            map.insert(
                item.key.to_owned(),
                Entry {
                    until,
                    cost: item.cost,
                    limit: item.limit.clone(),
                },
            );
        }
        if full { Record::Full } else { Record::Done }
    }

    /// Drops `key`'s entry: a refund gave it units back, so it may pass before its cached instant.
    pub(crate) fn forget(&self, key: &str) {
        if self.enabled() {
            self.map.lock().remove(key);
        }
    }

    pub(crate) fn clear(&self) {
        self.map.lock().clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}
