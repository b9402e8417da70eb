//! The embedded memory store: a sharded map from key to algorithm state.
//!
//! - **Sharded, short critical sections.** 64 shards, each a `parking_lot::Mutex` over a hash map;
//!   a decision holds one shard lock for one lookup and one transition (no allocation for token
//!   and leaky buckets and fixed windows). A request with several limits locks their shards in
//!   ascending order, decides them all, and records them only if all admit: all-or-nothing and
//!   exact under any concurrency.
//! - **Keys are 128-bit digests.** A key is stored as its SipHash-1-3-128 digest under a random
//!   per-store secret, so an entry is 32 bytes (16 of digest, 16 of state) whatever the key's length and a lookup never
//!   allocates. Two distinct keys share a digest with probability about 2^-128 per pair, and an
//!   attacker who does not know the secret cannot aim for a collision.
//! - **Idle keys are dropped.** A key whose state is back to empty (its bucket full, its window
//!   past, its leases expired) is removed by the next sweep of its shard; a shard sweeps itself
//!   when it has doubled since its last sweep, so memory stays proportional to the live keys.
//!   [`MemoryStore::sweep`] sweeps every shard (the limiter calls it periodically).
//! - **A cap on keys.** At most `max_keys` keys (default 1,000,000, spread evenly over the
//!   shards). When a new key arrives at a full shard, the shard is swept first; if it is still
//!   full the request fails with [`StoreError::KeyCapacity`], counted in
//!   [`MemoryStats::refused_keys`], and the rule's failure policy decides it. Keys already
//!   tracked are never evicted, so a flood of random keys cannot reset anyone's counters.

use std::collections::HashMap;
use std::future::{Future, ready};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};
use siphasher::sip128::{Hasher128, SipHasher13};
use smallvec::SmallVec;

use crate::algorithm::{self, State};
use crate::clock::{Clock, SystemClock};
use crate::limit::{Algorithm, Limit};
use crate::random;
use crate::store::{Decisions, Item, Store, StoreError, admitted};

/// The number of shards (a power of two).
const SHARDS: usize = 64;
/// A shard sweeps itself once it reaches this many entries, then each time it doubles.
const MIN_SWEEP: usize = 256;
/// The default cap on keys.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// A key's digest. Two `u64`s rather than a `u128`, so an entry is 8-aligned and 32 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Digest([u64; 2]);

impl Hash for Digest {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Already uniform: the first word is the map's hash (the second picks the shard).
        state.write_u64(self.0[0]);
    }
}

/// The digest is already uniform: the map uses its first word as the hash.
#[derive(Default)]
struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Never reached (`Digest` hashes through `write_u64`), but stay correct for any input.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Map = HashMap<Digest, State, BuildHasherDefault<DigestHasher>>;

#[derive(Default)]
struct ShardMap {
    map: Map,
    sweep_at: usize,
}

/// A shard on its own cache lines, so two cores working on neighbouring shards do not contend.
#[repr(align(128))]
#[derive(Default)]
struct Shard(Mutex<ShardMap>);

/// Counters of a memory store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Keys held now (live or idle but not yet swept).
    pub keys: usize,
    /// New keys refused because the store was at its cap.
    pub refused_keys: u64,
    /// Idle keys dropped by sweeps.
    pub swept_keys: u64,
}

/// The embedded memory store. See the [module documentation](self).
///
/// # Examples
/// ```
/// use flowgate_core::{Algorithm, Item, Limit, ManualClock, MemoryStore, Quota};
/// let store = MemoryStore::with_clock(ManualClock::new(1_000_000));
/// let limit = Limit::new(Algorithm::SlidingLog, Quota::per_second(2).unwrap()).unwrap();
/// let item = Item { key: "user=1", limit: &limit, cost: 1, enforce: true };
/// assert!(store.decide_now(&[item]).unwrap()[0].allowed);
/// assert!(store.decide_now(&[item]).unwrap()[0].allowed);
/// assert!(!store.decide_now(&[item]).unwrap()[0].allowed);
/// ```
pub struct MemoryStore<C: Clock = SystemClock> {
    shards: Box<[Shard]>,
    clock: C,
    secret: (u64, u64),
    max_per_shard: usize,
    next_lease: AtomicU64,
    refused: AtomicU64,
    swept: AtomicU64,
}

impl Default for MemoryStore<SystemClock> {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore<SystemClock> {
    /// A store on the real clock with the default cap.
    pub fn new() -> Self {
        Self::with_clock(SystemClock::new())
    }
}

impl<C: Clock> MemoryStore<C> {
    /// A store reading `clock`, with the default cap.
    ///
    /// Its hashing secret comes from [`crate::random::seed`]. Should the operating system's
    /// random source fail, the secret is made of `clock`'s reading and the address of the
    /// store's shards instead (placed at random per process by the system's address-space
    /// layout randomisation): never one fixed secret, and decisions stay exact; only someone able
    /// to guess both could aim two keys at one digest. This constructor stays infallible because
    /// the secret guards against crafted keys, not the store's correctness.
    pub fn with_clock(clock: C) -> Self {
        let shards: Box<[Shard]> = (0..SHARDS).map(|_| Shard::default()).collect();
        let secret = match (random::seed(), random::seed()) {
            (Ok(a), Ok(b)) => (a, b),
            _ => {
                let at = shards.as_ptr().addr() as u64;
                (clock.now() ^ at.rotate_left(32), at ^ 0x9E37_79B9_7F4A_7C15)
            }
        };
        Self {
            shards,
            clock,
            secret,
            max_per_shard: DEFAULT_MAX_KEYS.div_ceil(SHARDS),
            next_lease: AtomicU64::new(1),
            refused: AtomicU64::new(0),
            swept: AtomicU64::new(0),
        }
    }

    /// Sets the cap on keys (rounded up to a multiple of the shard count).
    pub fn with_max_keys(mut self, max_keys: usize) -> Self {
        self.max_per_shard = max_keys.div_ceil(SHARDS).max(1);
        self
    }

    /// The store's clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The digest of `key`'s state under `limit`: of the state key and the limit's
    /// [`crate::StateTag`], so that a limit whose state means something else (another algorithm,
    /// window or bucket count) starts from a state of its own. (The 0xFF byte between them is in
    /// no UTF-8 text, so no key and tag read as another's.)
    #[inline]
    fn digest(&self, key: &str, limit: &Limit) -> Digest {
        let mut h = SipHasher13::new_with_keys(self.secret.0, self.secret.1);
        h.write(key.as_bytes());
        h.write_u8(0xFF);
        limit.state_tag().hash(&mut h);
        let d = h.finish128();
        Digest([d.h1, d.h2])
    }

    #[inline]
    fn shard_of(d: &Digest) -> usize {
        (d.0[1] as usize) & (SHARDS - 1)
    }

    /// Decides `items` now, synchronously: the memory store never waits.
    ///
    /// # Errors
    /// [`StoreError::KeyCapacity`] when a new key is needed and the store is full.
    pub fn decide_now(&self, items: &[Item<'_>]) -> Result<Decisions, StoreError> {
        let now = self.clock.now();
        match items {
            [] => Ok(Decisions::new()),
            [one] => self.decide_one(one, now).map(|d| smallvec::smallvec![d]),
            many => self.decide_many(many, now),
        }
    }

    fn lease_for(&self, limit: &Limit, cost: u64) -> u64 {
        if limit.algorithm() == Algorithm::Concurrency && cost > 0 {
            self.next_lease.fetch_add(1, Ordering::Relaxed)
        } else {
            0
        }
    }

    /// Decides one item now: the single-limit fast path of [`MemoryStore::decide_now`], without
    /// the batch's vector.
    ///
    /// # Errors
    /// [`StoreError::KeyCapacity`] when a new key is needed and the store is full.
    #[inline]
    pub fn decide_one_now(&self, item: &Item<'_>) -> Result<crate::Decision, StoreError> {
        self.decide_one(item, self.clock.now())
    }

    #[inline]
    fn decide_one(&self, item: &Item<'_>, now: u64) -> Result<crate::Decision, StoreError> {
        let digest = self.digest(item.key, item.limit);
        let mut shard = self.shards[Self::shard_of(&digest)].0.lock();
        if let Some(state) = shard.map.get_mut(&digest) {
            let mut d = algorithm::check(item.limit, state, now, item.cost);
            if d.allowed && item.cost > 0 {
                let lease = self.lease_for(item.limit, item.cost);
                algorithm::apply(item.limit, state, now, item.cost, lease);
                d.lease = (lease != 0).then_some(lease);
            }
            return Ok(d);
        }
        let mut d = algorithm::check(item.limit, &State::Empty, now, item.cost);
        if d.allowed && item.cost > 0 {
            self.make_room(&mut shard, now)?;
            let lease = self.lease_for(item.limit, item.cost);
            let mut state = State::Empty;
            algorithm::apply(item.limit, &mut state, now, item.cost, lease);
            d.lease = (lease != 0).then_some(lease);
            shard.map.insert(digest, state);
        }
        Ok(d)
    }

    fn decide_many(&self, items: &[Item<'_>], now: u64) -> Result<Decisions, StoreError> {
        let digests: SmallVec<[Digest; 4]> =
            items.iter().map(|i| self.digest(i.key, i.limit)).collect();
        let mut order: SmallVec<[usize; 4]> = digests.iter().map(Self::shard_of).collect();
        order.sort_unstable();
        order.dedup();
        // Lock in ascending shard order: no deadlock between concurrent multi-limit requests.
        let mut guards: SmallVec<[(usize, MutexGuard<'_, ShardMap>); 4]> = order
            .iter()
            .map(|&s| (s, self.shards[s].0.lock()))
            .collect();
        let guard_of = |s: usize| order.binary_search(&s).unwrap_or(0);

        // Work on copies, so that a rejection anywhere records nothing anywhere, and so that two
        // items with the same key see each other.
        let mut work: SmallVec<[(Digest, State); 4]> = SmallVec::new();
        let mut decisions = Decisions::new();
        for (item, digest) in items.iter().zip(&digests) {
            let at = match work.iter().position(|(d, _)| d == digest) {
                Some(at) => at,
                None => {
                    let g = &guards[guard_of(Self::shard_of(digest))].1;
                    work.push((*digest, g.map.get(digest).cloned().unwrap_or_default()));
                    work.len() - 1
                }
            };
            let state = &mut work[at].1;
            let mut d = algorithm::check(item.limit, state, now, item.cost);
            if d.allowed && item.cost > 0 {
                let lease = self.lease_for(item.limit, item.cost);
                algorithm::apply(item.limit, state, now, item.cost, lease);
                d.lease = (lease != 0).then_some(lease);
            }
            decisions.push(d);
        }
        if !admitted(items, &decisions) {
            return Ok(decisions);
        }
        // Make room for new keys first, so that a full store refuses the request whole.
        for (digest, state) in &work {
            let g = &mut guards[guard_of(Self::shard_of(digest))].1;
            if *state != State::Empty && !g.map.contains_key(digest) {
                self.make_room(g, now)?;
            }
        }
        for (digest, state) in work {
            if state != State::Empty {
                guards[guard_of(Self::shard_of(&digest))]
                    .1
                    .map
                    .insert(digest, state);
            }
        }
        Ok(decisions)
    }

    /// Ensures the shard can take one more key: sweeps when it has grown, refuses at the cap.
    fn make_room(&self, shard: &mut ShardMap, now: u64) -> Result<(), StoreError> {
        let len = shard.map.len();
        if len >= shard.sweep_at.max(MIN_SWEEP) || len >= self.max_per_shard {
            self.sweep_shard(shard, now);
            if shard.map.len() >= self.max_per_shard {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return Err(StoreError::KeyCapacity);
            }
        }
        Ok(())
    }

    fn sweep_shard(&self, shard: &mut ShardMap, now: u64) {
        let before = shard.map.len();
        shard.map.retain(|_, s| !algorithm::is_idle(s, now));
        let after = shard.map.len();
        shard.sweep_at = (after * 2).max(MIN_SWEEP);
        self.swept
            .fetch_add((before - after) as u64, Ordering::Relaxed);
    }

    /// Drops every idle key now. Cheap to call periodically; the store also sweeps on its own.
    pub fn sweep(&self) {
        let now = self.clock.now();
        for s in self.shards.iter() {
            self.sweep_shard(&mut s.0.lock(), now);
        }
    }

    /// The number of keys held (live, or idle and not yet swept).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock().map.len()).sum()
    }

    /// Whether the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters for metrics.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            keys: self.len(),
            refused_keys: self.refused.load(Ordering::Relaxed),
            swept_keys: self.swept.load(Ordering::Relaxed),
        }
    }

    /// Releases a `concurrency` lease of `key` under `limit` now; answers whether it was held.
    pub fn release_now(&self, key: &str, limit: &Limit, lease: u64) -> bool {
        let digest = self.digest(key, limit);
        let mut shard = self.shards[Self::shard_of(&digest)].0.lock();
        let now = self.clock.now();
        let Some(state) = shard.map.get_mut(&digest) else {
            return false;
        };
        let held = algorithm::release(state, lease);
        if algorithm::is_idle(state, now) {
            shard.map.remove(&digest);
        }
        held
    }
}

impl<C: Clock> Store for MemoryStore<C> {
    fn now(&self) -> u64 {
        self.clock.now()
    }

    fn decide(
        &self,
        items: &[Item<'_>],
    ) -> impl Future<Output = Result<Decisions, StoreError>> + Send {
        ready(self.decide_now(items))
    }

    fn release(
        &self,
        key: &str,
        limit: &Limit,
        lease: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        ready(Ok(self.release_now(key, limit, lease)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ManualClock, Quota};
    use std::time::Duration;

    fn limit(a: Algorithm, q: &str) -> Limit {
        Limit::new(a, q.parse::<Quota>().unwrap()).unwrap()
    }

    #[test]
    fn all_or_nothing_across_limits() {
        let store = MemoryStore::with_clock(ManualClock::new(1_000_000));
        let wide = limit(Algorithm::FixedWindow, "10/s");
        let narrow = limit(Algorithm::FixedWindow, "1/s");
        let req = |k2| {
            [
                Item {
                    key: "global",
                    limit: &wide,
                    cost: 1,
                    enforce: true,
                },
                Item {
                    key: k2,
                    limit: &narrow,
                    cost: 1,
                    enforce: true,
                },
            ]
        };
        assert!(admitted(
            &req("user=1"),
            &store.decide_now(&req("user=1")).unwrap()
        ));
        for _ in 0..5 {
            let d = store.decide_now(&req("user=1")).unwrap();
            assert!(d[0].allowed && !d[1].allowed);
        }
        // The global limit was charged once only: 9 remain.
        let peek = Item {
            key: "global",
            limit: &wide,
            cost: 0,
            enforce: true,
        };
        assert_eq!(store.decide_now(&[peek]).unwrap()[0].remaining, 9);
    }

    #[test]
    fn same_key_twice_in_one_request_counts_twice() {
        let store = MemoryStore::with_clock(ManualClock::new(0));
        let l = limit(Algorithm::TokenBucket, "1/s");
        let item = Item {
            key: "k",
            limit: &l,
            cost: 1,
            enforce: true,
        };
        let d = store.decide_now(&[item, item]).unwrap();
        assert!(d[0].allowed && !d[1].allowed);
        assert!(store.is_empty(), "rejected request recorded nothing");
    }

    #[test]
    fn shadow_items_never_block() {
        let store = MemoryStore::with_clock(ManualClock::new(0));
        let l = limit(Algorithm::FixedWindow, "0/s");
        let ok = limit(Algorithm::FixedWindow, "5/s");
        let items = [
            Item {
                key: "a",
                limit: &l,
                cost: 1,
                enforce: false,
            },
            Item {
                key: "b",
                limit: &ok,
                cost: 1,
                enforce: true,
            },
        ];
        let d = store.decide_now(&items).unwrap();
        assert!(!d[0].allowed && admitted(&items, &d));
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn idle_keys_are_swept_and_cap_refuses_new_keys() {
        let clock = ManualClock::new(0);
        let store = MemoryStore::with_clock(clock.clone()).with_max_keys(SHARDS * 2);
        let l = limit(Algorithm::TokenBucket, "10/s");
        let mut refused = 0;
        for i in 0..SHARDS * 4 {
            let key = format!("k{i}");
            let item = Item {
                key: &key,
                limit: &l,
                cost: 1,
                enforce: true,
            };
            if store.decide_now(&[item]) == Err(StoreError::KeyCapacity) {
                refused += 1;
            }
        }
        assert!(refused > 0);
        assert!(store.len() <= SHARDS * 2);
        assert_eq!(store.stats().refused_keys, refused);
        // After a tenth of a second every bucket is full again: the keys are idle.
        clock.advance(Duration::from_millis(100));
        store.sweep();
        assert!(store.is_empty());
        let item = Item {
            key: "new",
            limit: &l,
            cost: 1,
            enforce: true,
        };
        assert!(store.decide_now(&[item]).unwrap()[0].allowed);
    }

    #[test]
    fn concurrency_lease_round_trip() {
        let store = MemoryStore::with_clock(ManualClock::new(0));
        let l = limit(Algorithm::Concurrency, "1/30s");
        let item = Item {
            key: "c",
            limit: &l,
            cost: 1,
            enforce: true,
        };
        let d = store.decide_now(&[item]).unwrap()[0];
        let lease = d.lease.expect("a lease");
        assert!(!store.decide_now(&[item]).unwrap()[0].allowed);
        assert!(store.release_now("c", &l, lease));
        assert!(store.is_empty());
        assert!(store.decide_now(&[item]).unwrap()[0].allowed);
    }
}
