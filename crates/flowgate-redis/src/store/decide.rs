//! [`RedisStore`]'s decisions: coalesced per lane, batches (per slot on a cluster, in waves
//! when a request spans slots), the blocked-keys cache and the store's deadline and health.

use flowgate_core::{Algorithm, Decisions, Item, Micros, StoreError};

use super::RedisStore;
use crate::batch::Lanes;
use crate::blocked::Record;
use crate::call::{EncItem, Encoded};
use crate::cluster;
use crate::keys::{redis_key_bytes, slot};
use crate::recorded::{DecideBatch, ToDecide};
use crate::reservations::PutRequest;
use crate::stats::Counters;

impl RedisStore {
    /// Decides several requests in one script call (one round trip on a single server): each
    /// request all-or-nothing, and exactly as if the requests were decided one after another, in
    /// order, at one instant of Redis's clock, so requests that share a key (a global or
    /// per-channel limit) see each other. This is what coalescing does with the requests in
    /// flight; a caller holding a batch (an SMS campaign to many users) can ask for it
    /// directly. The blocked-keys cache is neither consulted nor fed. On a Redis Cluster, when
    /// each request's keys share a slot, the requests of each slot are decided in one script
    /// call and the slots in parallel (requests of different slots share no key, so this is
    /// still as if one after another); a batch with a request spanning slots is decided in
    /// waves, each request (per slot, in parallel) as soon as every earlier request that shares
    /// a key with it is decided, so a wave's requests share no key.
    ///
    /// # Errors
    /// As a decision; one error fails the whole batch (no request of it was recorded, unless
    /// the error came after Redis ran the script, such as a deadline passing; on a cluster,
    /// the requests of other slots, or of the failing one's wave or before it, may have been).
    pub async fn decide_batch(
        &self,
        requests: &[&[Item<'_>]],
    ) -> Result<Vec<Decisions>, StoreError> {
        let inner = &self.inner;
        let counters = &inner.caller.counters;
        Counters::add(&counters.decisions, requests.len() as u64);
        if let Some(e) = self.known_down() {
            return Err(e);
        }
        let r = tokio::time::timeout(inner.deadline, self.decide_all(requests))
            .await
            .unwrap_or(Err(StoreError::Timeout));
        self.settle(&r);
        r
    }

    async fn decide_all(&self, requests: &[&[Item<'_>]]) -> Result<Vec<Decisions>, StoreError> {
        let caller = &self.inner.caller;
        let encoded: Vec<Encoded> = requests.iter().map(|r| self.encode(r)).collect();
        let mut out = vec![Decisions::new(); requests.len()];
        let live: Vec<usize> = (0..requests.len())
            .filter(|&i| !requests[i].is_empty())
            .collect();
        if !caller.conn.is_cluster() {
            let refs: Vec<&Encoded> = live.iter().map(|&i| &encoded[i]).collect();
            if !refs.is_empty() {
                let mut decided = caller.decide(&refs).await?.decisions.into_iter();
                for &i in &live {
                    out[i] = decided.by_ref().take(requests[i].len()).collect();
                }
            }
            return Ok(out);
        }
        // A cluster: one call per slot, the slots in parallel, when each request's keys share a
        // slot; else in waves of requests that share no key.
        let slots: Option<Vec<u16>> = live.iter().map(|&i| one_slot(&encoded[i])).collect();
        let Some(slots) = slots else {
            for wave in waves(live.iter().map(|&i| (i, &encoded[i]))) {
                let calls = wave.iter().map(|&i| {
                    cluster::decide(caller, self.inner.deadline, requests[i], encoded[i].clone())
                });
                for (&i, d) in wave.iter().zip(futures::future::join_all(calls).await) {
                    out[i] = d?;
                }
            }
            return Ok(out);
        };
        let groups = cluster::by_slot(slots);
        let calls = groups.iter().map(|(_, idx)| {
            let refs: Vec<&Encoded> = idx.iter().map(|&j| &encoded[live[j]]).collect();
            async move { caller.decide(&refs).await }
        });
        for ((_, idx), r) in groups.iter().zip(futures::future::join_all(calls).await) {
            let mut decided = r?.decisions.into_iter();
            for &j in idx {
                let i = live[j];
                out[i] = decided.by_ref().take(requests[i].len()).collect();
            }
        }
        Ok(out)
    }

    /// Encodes `items` (keys in the order of the items).
    pub(super) fn encode(&self, items: &[Item<'_>]) -> Encoded {
        items
            .iter()
            .map(|item| {
                let a = item.limit.algorithm();
                EncItem {
                    key: redis_key_bytes(item.key, item.limit),
                    limit: item.limit.clone(),
                    cost: item.cost,
                    enforce: item.enforce,
                    lease: if a == Algorithm::Concurrency && item.cost > 0 {
                        self.inner.leases.next()
                    } else {
                        0
                    },
                }
            })
            .collect()
    }

    /// The coalescing lane of `encoded`: the only one on a single server; on a cluster its
    /// slot's, when all its keys share one (a request spanning slots is decided per slot).
    pub(super) fn lane(&self, encoded: &Encoded) -> Option<(&Lanes<DecideBatch>, usize)> {
        let lanes = self.inner.lanes.as_ref()?;
        if !self.inner.caller.conn.is_cluster() {
            return Some((lanes, 0));
        }
        one_slot(encoded).map(|s| (lanes, usize::from(s)))
    }

    /// Decides `items` and writes `record` if they are admitted (`record`: single Redis only).
    pub(super) async fn decide_remote(
        &self,
        items: &[Item<'_>],
        record: Option<PutRequest>,
    ) -> Result<(Decisions, bool), StoreError> {
        let encoded = self.encode(items);
        let caller = &self.inner.caller;
        let Some((lanes, lane)) = self.lane(&encoded) else {
            if caller.conn.is_cluster() {
                let d = cluster::decide(caller, self.inner.deadline, items, encoded).await?;
                return Ok((d, false));
            }
            let request = ToDecide {
                items: encoded,
                record,
            };
            return crate::batch::alone(&DecideBatch(caller.clone()), request).await;
        };
        let request = ToDecide {
            items: encoded,
            record,
        };
        lanes.submit(lane, request).await
    }

    /// [`Store::decide`], writing `record` with the decision if it admits (single Redis only).
    pub(super) async fn decide_with(
        &self,
        items: &[Item<'_>],
        record: Option<PutRequest>,
    ) -> Result<(Decisions, bool), StoreError> {
        let inner = &self.inner;
        let counters = &inner.caller.counters;
        Counters::add(&counters.decisions, 1);
        if items.is_empty() {
            return Ok((Decisions::new(), false));
        }
        let now: Micros = if inner.blocked.enabled() {
            inner.local_clock.now()
        } else {
            0
        };
        if let Some(d) = inner.blocked.short_circuit(items, now) {
            Counters::add(&counters.blocked_hits, 1);
            return Ok((d, false));
        }
        if let Some(e) = self.known_down() {
            return Err(e);
        }
        let r = tokio::time::timeout(inner.deadline, self.decide_remote(items, record))
            .await
            .unwrap_or(Err(StoreError::Timeout));
        self.settle(&r);
        if let Ok((ds, _)) = &r
            && let Record::Full = inner.blocked.record(items, ds, now)
        {
            Counters::add(&counters.blocked_full, 1);
        }
        r
    }
}

/// `requests` (index, encoded) in waves: a request goes in the wave after the latest one holding
/// an earlier request with one of its keys (the first if none), so the requests of a wave share
/// no key and deciding them at once is as if one after another, in order.
fn waves<'a>(requests: impl Iterator<Item = (usize, &'a Encoded)>) -> Vec<Vec<usize>> {
    let mut waves: Vec<Vec<usize>> = Vec::new();
    let mut latest: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for (i, e) in requests {
        let w = e
            .iter()
            .filter_map(|it| latest.get(&it.key[..]).map(|w| w + 1))
            .max()
            .unwrap_or(0);
        for it in e {
            latest.insert(&it.key[..], w);
        }
        if w == waves.len() {
            waves.push(Vec::new());
        }
        waves[w].push(i);
    }
    waves
}

/// The slot of all the keys of `encoded`, if they share one (and it has any).
fn one_slot(encoded: &Encoded) -> Option<u16> {
    let mut slots = encoded.iter().map(|i| slot(&i.key));
    let first = slots.next()?;
    slots.all(|s| s == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowgate_core::{Limit, Quota};

    #[test]
    fn waves_hold_requests_that_share_no_key() {
        let limit = Limit::new(
            Algorithm::TokenBucket,
            "5/s".parse::<Quota>().unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let request = |keys: &[&str]| -> Encoded {
            keys.iter()
                .map(|k| EncItem {
                    key: redis_key_bytes(k, &limit),
                    limit: limit.clone(),
                    cost: 1,
                    enforce: true,
                    lease: 0,
                })
                .collect()
        };
        let batch = [
            request(&["a"]),
            request(&["b"]),
            request(&["a", "c"]),
            request(&["c"]),
            request(&["d"]),
            request(&["b", "c", "e"]),
        ];
        assert_eq!(
            waves(batch.iter().enumerate()),
            vec![vec![0, 1, 4], vec![2], vec![3], vec![5]]
        );
    }
}
