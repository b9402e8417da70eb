//! The embedded memory store: a sharded table from key to algorithm state.
//!
//! - **Sharded, short critical sections.** 64 shards, each a `parking_lot::Mutex` over a hash
//!   table; a decision holds one shard lock for one lookup and one transition (no allocation for
//!   token and leaky buckets and fixed windows). A request with several limits locks their shards
//!   in ascending order, decides them all, and records them only if all admit: all-or-nothing and
//!   exact under any concurrency.
//! - **Keys are 96-bit digests.** A key is stored as 96 bits of its SipHash-1-3-128 digest under
//!   a random per-store secret, so an entry is 32 bytes (12 of digest, 4 of the limit's capacity,
//!   16 of state) whatever the key's length, and a lookup never allocates. Two distinct keys share
//!   a digest with probability about 2^-96 per pair (below 2^-56 for a million keys), and an
//!   attacker who does not know the secret cannot aim for a collision.
//! - **Idle keys are dropped.** A key whose state is back to empty (its bucket full, its window
//!   past, its leases expired) is removed by the next sweep of its shard; a shard sweeps itself
//!   when it has doubled since its last sweep, so memory stays proportional to the live keys.
//!   [`MemoryStore::sweep`] sweeps every shard (the limiter calls it periodically).
//! - **A cap on keys, and eviction at the cap.** At most `max_keys` keys (default 1,000,000,
//!   spread evenly over the shards). A new key at a full shard takes the place of the entry that
//!   is closest to empty among [`EVICTION_SAMPLES`] entries of that shard picked at random (as
//!   Redis's approximate LRU samples): the one holding the smallest share of its limit
//!   ([`algorithm::held`] ÷ [`algorithm::capacity`]), idle entries first, and between equal
//!   shares the one that empties first ([`algorithm::empties_at`]). Eviction costs O(1) and
//!   no request is ever refused or decided by a failure policy because the table is full.
//!
//! **What eviction can cost, and whom.** A key whose state is dropped starts again from empty:
//! it gains at most what its state held, at most one full limit, and only if it is chosen. A key
//! is chosen only when each of the other sampled entries holds at least its share of its own
//! limit. So a flood of random keys, each holding a request or two, evicts other flood keys and
//! idle entries; a key at or near its limit (the one being limited, the one that matters) loses
//! its state only to a flood whose keys are themselves each near their limit, which costs the
//! attacker a full limit of admitted requests per key. (A key that holds no more than a flood
//! key's share and returns more slowly than an entry lives under the flood, about the cap ÷ the
//! flood's new keys per second, may lose its state between its requests.) Evictions are counted in
//! [`MemoryStats::evicted_keys`]. Memory is bounded by the cap: 32 bytes and a control byte per
//! slot of each shard's table (at most 2 slots per key), plus the boxed state of sliding windows,
//! sliding logs and concurrency leases.

use std::future::{Future, ready};
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::HashTable;
use parking_lot::{Mutex, MutexGuard};
use siphasher::sip128::{Hasher128, SipHasher13};
use smallvec::SmallVec;

use crate::algorithm::{self, State};
use crate::clock::{Clock, SystemClock};
use crate::limit::{Algorithm, Limit};

mod charge;
use crate::random;
use crate::store::{Decisions, Item, Store, StoreError, admitted};

/// The number of shards (a power of two).
const SHARDS: usize = 64;
/// A shard sweeps itself once it reaches this many entries, then each time it doubles.
const MIN_SWEEP: usize = 256;
/// The default cap on keys.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;
/// How many entries eviction compares (Redis's `maxmemory-samples` default).
pub const EVICTION_SAMPLES: usize = 5;
/// Random slots tried to find the samples: at the cap a table is at least 7/16 full, so this
/// almost never runs out (and eviction then takes the first entry it finds).
const EVICTION_PROBES: usize = 16 * EVICTION_SAMPLES;

/// A key's digest: the first word is the table's hash (already uniform), the second's low bits
/// pick the shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Digest(u64, u32);

/// A key's state in a shard's table: 32 bytes (the digest's two parts are fields of their own,
/// so that the capacity fills the space a `Digest` would pad).
#[derive(Debug)]
struct Entry {
    hash: u64,
    tag: u32,
    /// [`algorithm::capacity`] of the limit that last wrote the state, so that eviction can tell
    /// how full the state is without the limit.
    capacity: f32,
    state: State,
}

impl Entry {
    #[inline]
    fn is(&self, d: &Digest) -> bool {
        self.hash == d.0 && self.tag == d.1
    }

    fn digest(&self) -> Digest {
        Digest(self.hash, self.tag)
    }

    /// How close to its limit the key is at `now`: 0 when idle, about 1 when full.
    fn fill(&self, now: u64) -> f32 {
        algorithm::held(&self.state, now) as f32 / self.capacity.max(1.0)
    }
}

struct ShardMap {
    table: HashTable<Entry>,
    sweep_at: usize,
    /// xorshift64 state for picking eviction samples; never 0.
    rng: u64,
}

impl ShardMap {
    fn new(seed: u64) -> Self {
        Self {
            table: HashTable::new(),
            sweep_at: 0,
            rng: seed | 1,
        }
    }

    #[inline]
    fn get_mut(&mut self, d: &Digest) -> Option<&mut Entry> {
        self.table.find_mut(d.0, |e| e.is(d))
    }

    #[inline]
    fn get(&self, d: &Digest) -> Option<&Entry> {
        self.table.find(d.0, |e| e.is(d))
    }

    #[inline]
    fn insert(&mut self, digest: Digest, capacity: f32, state: State) {
        self.table.insert_unique(
            digest.0,
            Entry {
                hash: digest.0,
                tag: digest.1,
                capacity,
                state,
            },
            |e| e.hash,
        );
    }

    fn remove(&mut self, d: &Digest) {
        if let Ok(e) = self.table.find_entry(d.0, |e| e.is(d)) {
            e.remove();
        }
    }

    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Drops the entry closest to empty among [`EVICTION_SAMPLES`] picked at random, never one
    /// of `keep`. Answers whether one was dropped.
    fn evict_one(&mut self, now: u64, keep: &[Digest]) -> bool {
        let buckets = self.table.num_buckets();
        if buckets == 0 {
            return false;
        }
        // The smallest share of its limit; between equal shares, the one that empties first
        // (the idlest).
        let mut best: Option<(usize, f32, u64)> = None;
        // Distinct slots: a small shard's entries are each compared once.
        let mut seen: SmallVec<[usize; EVICTION_SAMPLES]> = SmallVec::new();
        for _ in 0..EVICTION_PROBES {
            let at = (self.next_random() as usize) & (buckets - 1);
            if seen.contains(&at) {
                continue;
            }
            let Some(e) = self.table.get_bucket(at) else {
                continue;
            };
            if keep.contains(&e.digest()) {
                continue;
            }
            let fill = e.fill(now);
            let empties = algorithm::empties_at(&e.state);
            if best.is_none_or(|(_, f, t)| fill < f || (fill == f && empties < t)) {
                best = Some((at, fill, empties));
            }
            seen.push(at);
            if seen.len() == EVICTION_SAMPLES || fill == 0.0 || seen.len() == self.table.len() {
                break;
            }
        }
        if let Some((at, _, _)) = best
            && let Ok(e) = self.table.get_bucket_entry(at)
        {
            e.remove();
            return true;
        }
        // Every probe missed: take the first entry that may go.
        let first = self
            .table
            .iter()
            .map(Entry::digest)
            .find(|d| !keep.contains(d));
        match first {
            Some(d) => {
                self.remove(&d);
                true
            }
            None => false,
        }
    }
}

/// A shard on its own cache lines, so two cores working on neighbouring shards do not contend.
#[repr(align(128))]
struct Shard(Mutex<ShardMap>);

/// Counters of a memory store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryStats {
    /// Keys held now (live or idle but not yet swept).
    pub keys: usize,
    /// The cap on keys.
    pub max_keys: usize,
    /// Keys evicted to make room for new ones at the cap.
    pub evicted_keys: u64,
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
    evicted: AtomicU64,
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
    /// store's clock value (placed at random per process by the system's address-space layout
    /// randomisation) instead: never one fixed secret, and decisions stay exact; only someone
    /// able to guess both could aim two keys at one digest. This constructor stays infallible
    /// because the secret guards against crafted keys, not the store's correctness.
    pub fn with_clock(clock: C) -> Self {
        let secret = match (random::seed(), random::seed()) {
            (Ok(a), Ok(b)) => (a, b),
            _ => {
                let at = std::ptr::from_ref(&clock).addr() as u64;
                (clock.now() ^ at.rotate_left(32), at ^ 0x9E37_79B9_7F4A_7C15)
            }
        };
        let shards: Box<[Shard]> = (0..SHARDS as u64)
            .map(|i| {
                let seed =
                    (secret.0 ^ secret.1).wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                Shard(Mutex::new(ShardMap::new(seed)))
            })
            .collect();
        Self {
            shards,
            clock,
            secret,
            max_per_shard: DEFAULT_MAX_KEYS.div_ceil(SHARDS),
            next_lease: AtomicU64::new(1),
            evicted: AtomicU64::new(0),
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
        use std::hash::Hash;
        let mut h = SipHasher13::new_with_keys(self.secret.0, self.secret.1);
        h.write(key.as_bytes());
        h.write_u8(0xFF);
        limit.state_tag().hash(&mut h);
        let d = h.finish128();
        Digest(d.h1, d.h2 as u32)
    }

    #[inline]
    fn shard_of(d: &Digest) -> usize {
        (d.1 as usize) & (SHARDS - 1)
    }

    /// Decides `items` now, synchronously: the memory store never waits and never fails.
    ///
    /// # Errors
    /// None today; the signature is the [`Store`]'s.
    pub fn decide_now(&self, items: &[Item<'_>]) -> Result<Decisions, StoreError> {
        let now = self.clock.now();
        Ok(match items {
            [] => Decisions::new(),
            [one] => smallvec::smallvec![self.decide_one(one, now)],
            many => self.decide_many(many, now),
        })
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
    /// None today; the signature is the [`Store`]'s.
    #[inline]
    pub fn decide_one_now(&self, item: &Item<'_>) -> Result<crate::Decision, StoreError> {
        Ok(self.decide_one(item, self.clock.now()))
    }

    #[inline]
    fn decide_one(&self, item: &Item<'_>, now: u64) -> crate::Decision {
        let digest = self.digest(item.key, item.limit);
        let mut shard = self.shards[Self::shard_of(&digest)].0.lock();
        if let Some(entry) = shard.get_mut(&digest) {
            let mut d = algorithm::check(item.limit, &entry.state, now, item.cost);
            if d.allowed && item.cost > 0 {
                let lease = self.lease_for(item.limit, item.cost);
                algorithm::apply(item.limit, &mut entry.state, now, item.cost, lease);
                entry.capacity = algorithm::capacity(item.limit) as f32;
                d.lease = (lease != 0).then_some(lease);
            }
            return d;
        }
        let mut d = algorithm::check(item.limit, &State::Empty, now, item.cost);
        if d.allowed && item.cost > 0 {
            self.make_room(&mut shard, now, &[]);
            let lease = self.lease_for(item.limit, item.cost);
            let mut state = State::Empty;
            algorithm::apply(item.limit, &mut state, now, item.cost, lease);
            d.lease = (lease != 0).then_some(lease);
            shard.insert(digest, algorithm::capacity(item.limit) as f32, state);
        }
        d
    }

    fn decide_many(&self, items: &[Item<'_>], now: u64) -> Decisions {
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
        // items with the same key see each other: (digest, capacity, state).
        let mut work: SmallVec<[(Digest, f32, State); 4]> = SmallVec::new();
        let mut decisions = Decisions::new();
        for (item, digest) in items.iter().zip(&digests) {
            let at = match work.iter().position(|(d, _, _)| d == digest) {
                Some(at) => at,
                None => {
                    let g = &guards[guard_of(Self::shard_of(digest))].1;
                    let state = g.get(digest).map(|e| e.state.clone()).unwrap_or_default();
                    work.push((*digest, 0.0, state));
                    work.len() - 1
                }
            };
            let (_, capacity, state) = &mut work[at];
            let mut d = algorithm::check(item.limit, state, now, item.cost);
            if d.allowed && item.cost > 0 {
                let lease = self.lease_for(item.limit, item.cost);
                algorithm::apply(item.limit, state, now, item.cost, lease);
                *capacity = algorithm::capacity(item.limit) as f32;
                d.lease = (lease != 0).then_some(lease);
            }
            decisions.push(d);
        }
        if !admitted(items, &decisions) {
            return decisions;
        }
        for (digest, capacity, state) in work.into_iter().filter(|w| w.2 != State::Empty) {
            let g = &mut guards[guard_of(Self::shard_of(&digest))].1;
            match g.get_mut(&digest) {
                Some(entry) => {
                    entry.state = state;
                    if capacity > 0.0 {
                        entry.capacity = capacity;
                    }
                }
                None => {
                    self.make_room(g, now, &digests);
                    g.insert(digest, capacity, state);
                }
            }
        }
        decisions
    }

    /// Ensures the shard can take one more key: sweeps it once it has doubled since its last
    /// sweep, and at the cap evicts the sampled entry closest to empty (never one of `keep`,
    /// the keys of the request being recorded).
    fn make_room(&self, shard: &mut ShardMap, now: u64, keep: &[Digest]) {
        if shard.table.len() >= shard.sweep_at.max(MIN_SWEEP) {
            self.sweep_shard(shard, now);
        }
        if shard.table.len() >= self.max_per_shard && shard.evict_one(now, keep) {
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn sweep_shard(&self, shard: &mut ShardMap, now: u64) {
        let before = shard.table.len();
        shard.table.retain(|e| !algorithm::is_idle(&e.state, now));
        let after = shard.table.len();
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
        self.shards.iter().map(|s| s.0.lock().table.len()).sum()
    }

    /// Whether the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap on keys.
    pub fn max_keys(&self) -> usize {
        self.max_per_shard * SHARDS
    }

    /// Counters for metrics.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            keys: self.len(),
            max_keys: self.max_keys(),
            evicted_keys: self.evicted.load(Ordering::Relaxed),
            swept_keys: self.swept.load(Ordering::Relaxed),
        }
    }

    /// Releases a `concurrency` lease of `key` under `limit` now; answers whether it was held.
    pub fn release_now(&self, key: &str, limit: &Limit, lease: u64) -> bool {
        let digest = self.digest(key, limit);
        let mut shard = self.shards[Self::shard_of(&digest)].0.lock();
        let now = self.clock.now();
        let Some(entry) = shard.get_mut(&digest) else {
            return false;
        };
        let held = algorithm::release(&mut entry.state, lease);
        if algorithm::is_idle(&entry.state, now) {
            shard.remove(&digest);
        }
        held
    }
}

impl<C: Clock> Store for MemoryStore<C> {
    fn now(&self) -> u64 {
        self.clock.now()
    }

    fn charge(
        &self,
        items: &[crate::ChargeItem<'_>],
    ) -> impl Future<Output = Result<crate::Charges, StoreError>> + Send {
        ready(self.charge_now(items))
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
    fn an_entry_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 32);
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

    fn item<'a>(key: &'a str, l: &'a Limit) -> Item<'a> {
        Item {
            key,
            limit: l,
            cost: 1,
            enforce: true,
        }
    }

    #[test]
    fn idle_keys_are_swept_and_the_cap_evicts_instead_of_refusing() {
        let clock = ManualClock::new(0);
        let store = MemoryStore::with_clock(clock.clone()).with_max_keys(SHARDS * 2);
        let l = limit(Algorithm::TokenBucket, "10/s");
        for i in 0..SHARDS * 4 {
            let key = format!("k{i}");
            assert!(store.decide_now(&[item(&key, &l)]).unwrap()[0].allowed);
        }
        assert!(store.len() <= SHARDS * 2);
        assert_eq!(
            store.stats().evicted_keys,
            (SHARDS * 4 - store.len()) as u64
        );
        // After a tenth of a second every bucket is full again: the keys are idle.
        clock.advance(Duration::from_millis(100));
        store.sweep();
        assert!(store.is_empty());
        assert!(store.decide_now(&[item("new", &l)]).unwrap()[0].allowed);
    }

    #[test]
    fn the_cap_keeps_the_key_at_its_limit() {
        // Eight keys per shard.
        let store = MemoryStore::with_clock(ManualClock::new(0)).with_max_keys(SHARDS * 8);
        let l = limit(Algorithm::FixedWindow, "5/h");
        for _ in 0..5 {
            assert!(store.decide_now(&[item("real", &l)]).unwrap()[0].allowed);
        }
        let real_shard = MemoryStore::<ManualClock>::shard_of(&store.digest("real", &l));
        // Flood the real key's shard: each new key evicts the sampled entry closest to empty.
        let mut flooded = 0;
        for i in 0.. {
            let key = format!("flood{i}");
            if MemoryStore::<ManualClock>::shard_of(&store.digest(&key, &l)) == real_shard {
                store.decide_now(&[item(&key, &l)]).unwrap();
                flooded += 1;
                if flooded == 2_000 {
                    break;
                }
            }
        }
        assert!(store.len() <= SHARDS * 8);
        assert_eq!(store.stats().evicted_keys, 2_000 - 7);
        assert!(
            !store.decide_now(&[item("real", &l)]).unwrap()[0].allowed,
            "the real key kept its count"
        );
    }

    #[test]
    fn a_multi_key_request_never_evicts_its_own_keys() {
        let store = MemoryStore::with_clock(ManualClock::new(0)).with_max_keys(1);
        let l = limit(Algorithm::FixedWindow, "2/h");
        let keys: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
        let items: Vec<Item<'_>> = keys.iter().map(|k| item(k, &l)).collect();
        assert!(admitted(&items, &store.decide_now(&items).unwrap()));
        assert!(admitted(&items, &store.decide_now(&items).unwrap()));
        let d = store.decide_now(&items).unwrap();
        assert!(d.iter().all(|d| !d.allowed), "all eight kept their count");
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
