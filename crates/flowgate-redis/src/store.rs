//! [`RedisStore`]: the [`Store`] on a single Redis server or a Redis Cluster.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flowgate_core::{
    Algorithm, Clock, Decisions, Item, Limit, Micros, Store, StoreError, SystemClock,
};
use tokio::sync::oneshot;

use crate::batch::{Batching, Job, Lanes};
use crate::blocked::{Blocked, Record};
use crate::call::{self, Encoded, TimeSource};
use crate::cluster;
use crate::conn::Conn;
use crate::keys::{SLOTS, redis_key, redis_key_bytes, slot};
use crate::options::RedisOptions;
use crate::scripts::{EncItem, Params, RELEASE_SCRIPT, Raw};
use crate::stats::{Counters, RedisStats};

/// The Redis store. See the [crate documentation](crate).
///
/// Cloning is cheap: clones share the connection, the blocked-keys cache and the counters.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) conn: Conn,
    pub(crate) deadline: Duration,
    pub(crate) time: TimeSource,
    pub(crate) counters: Arc<Counters>,
    blocked: Blocked,
    local_clock: Arc<dyn Clock>,
    lanes: Option<Lanes>,
    leases: LeaseIds,
}

/// Concurrency lease ids: a bijective mix of a random seed plus a counter, cut to 52 bits (the
/// scripts hold them as doubles, and a state holding a value from 2^52 up counts as none), so
/// ids are unpredictable and two leases collide with probability about 2^-52 per pair. Never 0.
struct LeaseIds {
    seed: u64,
    next: AtomicU64,
}

impl LeaseIds {
    fn new() -> Self {
        let mut b = [0u8; 8];
        let _ = getrandom::fill(&mut b);
        Self {
            seed: u64::from_le_bytes(b),
            next: AtomicU64::new(1),
        }
    }

    fn next(&self) -> u64 {
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

impl RedisStore {
    /// Connects to a single Redis server (`redis://127.0.0.1:6379/`) with default options.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] or [`StoreError::Timeout`] when the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, RedisOptions::default()).await
    }

    /// Connects to a single Redis server.
    ///
    /// # Errors
    /// As [`RedisStore::connect`].
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let conn = Conn::single(url, options.connect_timeout).await?;
        Ok(Self::build(conn, options))
    }

    /// Connects to a Redis Cluster through any of its nodes, with default options.
    ///
    /// # Errors
    /// As [`RedisStore::connect`].
    pub async fn connect_cluster<S: AsRef<str>>(urls: &[S]) -> Result<Self, StoreError> {
        Self::connect_cluster_with(urls, RedisOptions::default()).await
    }

    /// Connects to a Redis Cluster through any of its nodes.
    ///
    /// # Errors
    /// As [`RedisStore::connect`].
    pub async fn connect_cluster_with<S: AsRef<str>>(
        urls: &[S],
        options: RedisOptions,
    ) -> Result<Self, StoreError> {
        let urls: Vec<String> = urls.iter().map(|u| u.as_ref().to_owned()).collect();
        let conn = Conn::cluster(&urls, options.connect_timeout, options.deadline).await?;
        Ok(Self::build(conn, options))
    }

    fn build(conn: Conn, options: RedisOptions) -> Self {
        let counters = Arc::new(Counters::default());
        let time = TimeSource(options.clock_override.clone());
        let local_clock: Arc<dyn Clock> = match (&options.local_clock, &options.clock_override) {
            (Some(c), _) | (None, Some(c)) => c.clone(),
            (None, None) => Arc::new(SystemClock::new()),
        };
        let lanes = options.coalesce.then(|| {
            Lanes::new(
                if conn.is_cluster() { SLOTS } else { 1 },
                options.batches_in_flight,
                Batching {
                    conn: conn.clone(),
                    time: time.clone(),
                    counters: counters.clone(),
                    max_batch: options.max_batch,
                    deadline: options.deadline,
                },
            )
        });
        Self {
            inner: Arc::new(Inner {
                conn,
                deadline: options.deadline,
                time,
                counters,
                blocked: Blocked::new(options.blocked_capacity),
                local_clock,
                lanes,
                leases: LeaseIds::new(),
            }),
        }
    }

    /// The connection.
    pub(crate) fn conn(&self) -> &Conn {
        &self.inner.conn
    }

    /// The test clock's reading, when the scripts are given one instead of Redis's `TIME`.
    pub(crate) fn clock_override(&self) -> Option<Micros> {
        self.inner.time.0.as_ref().map(|c| c.now())
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.conn.is_cluster()
    }

    /// The deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.inner.deadline
    }

    /// Whether the store is failing now (its last call failed). A warning is logged (target
    /// `flowgate_redis`) when it becomes degraded, and an info line when it recovers.
    pub fn is_degraded(&self) -> bool {
        self.stats().degraded
    }

    /// The store's counters.
    pub fn stats(&self) -> RedisStats {
        self.inner
            .counters
            .snapshot(self.inner.blocked.len() as u64)
    }

    /// Empties the blocked-keys cache (call it when the rules change).
    pub fn clear_blocked(&self) {
        self.inner.blocked.clear();
    }

    /// Sends a plain command on the store's connection (benchmarks, tests, diagnostics), within
    /// the deadline.
    ///
    /// # Errors
    /// As a decision.
    pub async fn query(&self, cmd: &redis::Cmd) -> Result<redis::Value, StoreError> {
        tokio::time::timeout(self.inner.deadline, self.inner.conn.query(cmd))
            .await
            .unwrap_or(Err(StoreError::Timeout))
    }

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
        Counters::add(&inner.counters.decisions, requests.len() as u64);
        let r = tokio::time::timeout(inner.deadline, async {
            let encoded: Vec<Encoded> = requests.iter().map(|r| self.encode(r)).collect();
            if inner.conn.is_cluster() {
                return self.decide_batch_cluster(requests, encoded).await;
            }
            let refs: Vec<&Encoded> = encoded.iter().filter(|e| e.items() > 0).collect();
            let raws = if refs.is_empty() {
                Vec::new()
            } else {
                Counters::add(&inner.counters.script_calls, 1);
                call::decide(&inner.conn, &inner.time, &refs).await?.1
            };
            Ok(attach_each(requests.iter().copied(), &raws))
        })
        .await
        .unwrap_or(Err(StoreError::Timeout));
        inner.counters.outcome(&r);
        r
    }

    /// `decide_batch` on a cluster: when each request's keys share a slot, one script call per
    /// slot, the slots in parallel; else in waves of requests that share no key.
    async fn decide_batch_cluster(
        &self,
        requests: &[&[Item<'_>]],
        encoded: Vec<Encoded>,
    ) -> Result<Vec<Decisions>, StoreError> {
        let inner = &self.inner;
        let mut out = vec![Decisions::new(); requests.len()];
        // (empty requests need no decision)
        let live: Vec<usize> = (0..requests.len())
            .filter(|&i| !requests[i].is_empty())
            .collect();
        let slots: Option<Vec<u16>> = live.iter().map(|&i| one_slot(&encoded[i])).collect();
        let Some(slots) = slots else {
            let waves = waves(live.iter().map(|&i| (i, &encoded[i])));
            let mut encoded: Vec<Option<Encoded>> = encoded.into_iter().map(Some).collect();
            for wave in waves {
                let calls = wave.iter().map(|&i| {
                    let e = encoded[i].take().unwrap_or_default();
                    cluster::decide(inner, requests[i], e)
                });
                for (&i, d) in wave.iter().zip(futures::future::join_all(calls).await) {
                    out[i] = d?;
                }
            }
            return Ok(out);
        };
        let groups = cluster::by_slot(slots);
        Counters::add(&inner.counters.script_calls, groups.len() as u64);
        let calls = groups.iter().map(|(_, idx)| {
            let refs: Vec<&Encoded> = idx.iter().map(|&j| &encoded[live[j]]).collect();
            async move { call::decide(&inner.conn, &inner.time, &refs).await }
        });
        for ((_, idx), r) in groups.iter().zip(futures::future::join_all(calls).await) {
            let ds = attach_each(idx.iter().map(|&j| requests[live[j]]), &r?.1);
            for (&j, d) in idx.iter().zip(ds) {
                out[live[j]] = d;
            }
        }
        Ok(out)
    }

    /// Encodes `items` (keys in the order of the items).
    fn encode(&self, items: &[Item<'_>]) -> Encoded {
        Encoded {
            items: items
                .iter()
                .map(|item| {
                    let a = item.limit.algorithm();
                    EncItem {
                        key: redis_key_bytes(item.key, a),
                        limit: item.limit.clone(),
                        params: Params::of(item.limit),
                        cost: item.cost,
                        enforce: item.enforce,
                        lease: if a == Algorithm::Concurrency && item.cost > 0 {
                            self.inner.leases.next()
                        } else {
                            0
                        },
                    }
                })
                .collect(),
        }
    }

    /// The coalescing lane of `encoded`: the only one on a single server; on a cluster its
    /// slot's, when all its keys share one (a request spanning slots is decided per slot).
    fn lane(&self, encoded: &Encoded) -> Option<(&Lanes, usize)> {
        let lanes = self.inner.lanes.as_ref()?;
        if !self.inner.conn.is_cluster() {
            return Some((lanes, 0));
        }
        one_slot(encoded).map(|s| (lanes, usize::from(s)))
    }

    async fn decide_remote(&self, items: &[Item<'_>]) -> Result<Decisions, StoreError> {
        let encoded = self.encode(items);
        let inner = &self.inner;
        let Some((lanes, lane)) = self.lane(&encoded) else {
            if inner.conn.is_cluster() {
                return cluster::decide(inner, items, encoded).await;
            }
            Counters::add(&inner.counters.script_calls, 1);
            let (_, raws) = call::decide(&inner.conn, &inner.time, &[&encoded]).await?;
            return Ok(attach(items, &raws));
        };
        let (_, raws) = if let Ok(permit) = lanes.slots(lane).try_acquire() {
            Counters::add(&inner.counters.script_calls, 1);
            let call = call::prepare(&inner.time, &[&encoded]);
            let value = inner.conn.eval(call.script, &call.cmd).await;
            // (the slot is free once Redis has answered)
            drop(permit);
            call.reply.parse(value?, &[&encoded])?
        } else {
            let (reply, rx) = oneshot::channel();
            lanes
                .sender(lane)
                .send(Job {
                    request: encoded,
                    reply,
                })
                .map_err(|_| StoreError::Unavailable("the batching workers have stopped".into()))?;
            rx.await.map_err(|_| {
                StoreError::Unavailable("the batching workers have stopped".into())
            })??
        };
        Ok(attach(items, &raws))
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
            .items
            .iter()
            .filter_map(|it| latest.get(&it.key[..]).map(|w| w + 1))
            .max()
            .unwrap_or(0);
        for it in &e.items {
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
    let mut slots = encoded.items.iter().map(|i| slot(&i.key));
    let first = slots.next()?;
    slots.all(|s| s == first).then_some(first)
}

/// Attaches a call's decisions (every item of `requests`, in order) to each request.
fn attach_each<'a, 'b: 'a>(
    requests: impl Iterator<Item = &'a [Item<'b>]>,
    raws: &[Raw],
) -> Vec<Decisions> {
    let mut rest = raws;
    requests
        .map(|items| {
            let (mine, tail) = rest.split_at(items.len().min(rest.len()));
            rest = tail;
            attach(items, mine)
        })
        .collect()
}

/// Attaches the limits to the script's decisions.
pub(crate) fn attach(items: &[Item<'_>], raws: &[Raw]) -> Decisions {
    items
        .iter()
        .zip(raws)
        .map(|(i, r)| r.decision(i.limit))
        .collect()
}

impl Store for RedisStore {
    async fn decide(&self, items: &[Item<'_>]) -> Result<Decisions, StoreError> {
        let inner = &self.inner;
        Counters::add(&inner.counters.decisions, 1);
        if items.is_empty() {
            return Ok(Decisions::new());
        }
        let now: Micros = if inner.blocked.enabled() {
            inner.local_clock.now()
        } else {
            0
        };
        if let Some(d) = inner.blocked.short_circuit(items, now) {
            Counters::add(&inner.counters.blocked_hits, 1);
            return Ok(d);
        }
        let r = tokio::time::timeout(inner.deadline, self.decide_remote(items))
            .await
            .unwrap_or(Err(StoreError::Timeout));
        inner.counters.outcome(&r);
        if let Ok(ds) = &r
            && let Record::Full = inner.blocked.record(items, ds, now)
        {
            Counters::add(&inner.counters.blocked_full, 1);
        }
        r
    }

    async fn release(&self, key: &str, limit: &Limit, lease: u64) -> Result<bool, StoreError> {
        if limit.algorithm() != Algorithm::Concurrency {
            return Ok(false);
        }
        let inner = &self.inner;
        let script = &*RELEASE_SCRIPT;
        let mut cmd = script.cmd(1, 2);
        cmd.arg(redis_key(key, Algorithm::Concurrency)).arg(lease);
        let r = tokio::time::timeout(inner.deadline, inner.conn.eval(script, &cmd))
            .await
            .unwrap_or(Err(StoreError::Timeout));
        inner.counters.outcome(&r);
        match r? {
            redis::Value::Int(n) => Ok(n == 1),
            other => Err(StoreError::Internal(format!(
                "unexpected reply from the release script: {other:?}"
            ))),
        }
    }
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
        let request = |keys: &[&str]| Encoded {
            items: keys
                .iter()
                .map(|k| EncItem {
                    key: redis_key_bytes(k, Algorithm::TokenBucket),
                    limit: limit.clone(),
                    params: Params::of(&limit),
                    cost: 1,
                    enforce: true,
                    lease: 0,
                })
                .collect(),
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
