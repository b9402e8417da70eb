//! Adaptive concurrency limits in the limiter: a `concurrency` rule with
//! [`Rule::adaptive`](flowgate_core::Rule::adaptive) has one
//! [`Aimd`] per matched descriptor (its state key), fed by the
//! reports of calls ([`crate::Limiter::report`], [`crate::Permit::report`], the tower layer), and
//! its concurrency check uses that key's limit.
//!
//! The limiter substitutes the limit: before asking the store, each item of an adaptive rule gets
//! a `concurrency` [`Limit`] with the rule's window (the leases' time to live) and the key's
//! adaptive count, so the store (memory or Redis, unchanged) checks the leases held against it.
//! The substituted limit is cached per key and rebuilt only when the count moves.
//!
//! A report needs the calls in flight for its key: it takes the count the key's latest decision
//! saw (leases held after an admission, or held when refused), lowered by each release through
//! this limiter. Leases that expire unreleased are not seen until the next decision.
//!
//! # Per process, or shared by the cluster on Redis
//! By default the states are this process's: each node moves its own limits on its own reports.
//! After [`crate::Limiter::share_adaptive`], the limits are the cluster's, kept in Redis
//! ([`flowgate_redis::RedisAdaptive`]: one hash per rule, where the transition runs once per
//! report for every node):
//!
//! - a check reads the node's cached copy of its key's limit: no round trip is added to a
//!   decision;
//! - a report is queued, and a background task sends the queue every [`FLUSH_EVERY`] (20 ms), one
//!   script call per rule; each call answers the new limits of its keys, which refresh the cache;
//! - every [`READ_EVERY`] (1 s) the task reads the limits of every key this node uses (and at its
//!   next flush, those of a key it has just started using), so each node follows the limits
//!   moved by the others' reports;
//! - every report also moves the node's own [`Aimd`] for its key, as without Redis, so that it
//!   is warm when needed: when a flush or a read fails, the node **falls back** to those local
//!   limits, says so once (a `tracing` warning, target `flowgate::adaptive`) and in
//!   [`AdaptiveView::shared`], and tries a read every [`READ_EVERY`]; when one succeeds it uses
//!   the cluster's limits again (an info line). Reports queued while Redis is unreachable, and
//!   the batch of a failed flush, are dropped, not sent later: they have already moved the
//!   local limits in force then, and sent late their latencies would act a second time, on a
//!   shared limit that has moved since;
//! - a key refused by Redis (its rule's hash is full, [`flowgate_redis::ADAPTIVE_MAX_KEYS`]) keeps
//!   its local limit, also shown as not shared;
//! - the task ends when the limiter is dropped (it holds a weak reference), or when
//!   `share_adaptive` is called again (the new call's task takes over).
//!
//! A report's `inflight` is the same either way: the leases its key's latest decision saw (with
//! a Redis store, the cluster's), less this node's releases since.
//!
//! # Cost
//! A rule without `adaptive` costs one branch per matched rule. An adaptive rule's check takes a
//! short lock twice (its limit before the store, the leases seen after), a report once (and,
//! shared, a second short lock to queue it).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flowgate_core::adaptive::{Aimd, AimdSpec};
use flowgate_core::{Algorithm, Limit};
use parking_lot::Mutex;

/// The most keys (matched descriptors) with an adaptive limit this limiter keeps, all rules
/// together. At the cap, keys whose limit is back at its start with no call out are dropped to
/// make room; if none is, a new key keeps its rule's starting limit and its reports are dropped
/// (counted in [`crate::breakers::Reported::dropped`]).
pub const MAX_KEYS: usize = 10_000;

/// The most keys one rule's view lists (lowest limits first).
pub const MAX_VIEWS: usize = 100;

/// How often queued reports are sent to Redis, once the limits are shared.
pub const FLUSH_EVERY: Duration = Duration::from_millis(20);

/// How often the limits of the keys a node uses are read from Redis, once shared (and how often
/// a node that fell back tries Redis again).
pub const READ_EVERY: Duration = Duration::from_secs(1);

/// The most reports waiting for a flush; more are dropped (they still move the node's own
/// limits).
pub const MAX_QUEUED: usize = 10_000;

/// One key's adaptive limit, as shown.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdaptiveView {
    /// The key (the rule's state key for the descriptor).
    pub key: String,
    /// The limit in force.
    pub limit: u64,
    /// The calls in flight its latest decision saw, less the releases since.
    pub in_flight: u64,
    /// Whether the limit in force is the cluster's, kept in Redis; false per process, while
    /// Redis is unreachable, or for a key Redis refused (its rule's keys at their cap).
    pub shared: bool,
}

/// One key's state.
#[derive(Debug)]
struct Instance {
    domain: String,
    rule: String,
    /// This node's limit, moved by its own reports: in force unless shared.
    aimd: Aimd,
    in_flight: u64,
    /// The cluster's limit, as last read or answered by Redis; `None` until then.
    remote: Option<u64>,
    /// Whether Redis refused this key's reports (its rule's hash is full).
    refused: bool,
    /// The limit last substituted, rebuilt when the count or the rule's window changes.
    cached: Option<Limit>,
}

impl Instance {
    fn new(domain: &str, rule: &str, spec: &AimdSpec) -> Self {
        Self {
            domain: domain.to_owned(),
            rule: rule.to_owned(),
            aimd: Aimd::new(spec.clone()),
            in_flight: 0,
            remote: None,
            refused: false,
            cached: None,
        }
    }

    /// Holds no more than a new instance would.
    fn is_idle(&self) -> bool {
        self.in_flight == 0 && self.aimd.limit() == Aimd::new(self.aimd.spec().clone()).limit()
    }

    /// Whether the limit in force is the cluster's, when the limits are `shared`.
    fn is_shared(&self, shared: bool) -> bool {
        shared && !self.refused && self.remote.is_some()
    }

    /// The count in force: the cluster's when shared, else this node's.
    fn count(&self, shared: bool) -> u64 {
        match self.remote {
            Some(n) if self.is_shared(shared) => n,
            _ => self.aimd.limit(),
        }
    }

    fn limit_for(&mut self, base: &Limit, shared: bool) -> Limit {
        let n = self.count(shared);
        match &self.cached {
            Some(l) if l.limit() == n && l.window() == base.window() => l.clone(),
            _ => {
                let l = with_count(base, n);
                self.cached = Some(l.clone());
                l
            }
        }
    }
}

/// `base` with `n` calls at once (its window unchanged).
fn with_count(base: &Limit, n: u64) -> Limit {
    base.quota()
        .with_limit(n)
        .ok()
        .and_then(|q| Limit::new(Algorithm::Concurrency, q).ok())
        .unwrap_or_else(|| base.clone())
}

type Map = HashMap<String, Instance>;

/// The limiter's adaptive limits, by state key.
#[derive(Debug, Default)]
pub(crate) struct Adaptive {
    state: Arc<State>,
}

/// What the limiter and the sharing task hold (the task through a weak reference).
#[derive(Debug, Default)]
struct State {
    instances: Mutex<Map>,
    /// Whether some key has a state (releases look it up only then).
    on: AtomicBool,
    /// Whether the limits in force are the cluster's: shared, and Redis answered last time.
    shared: AtomicBool,
    #[cfg(feature = "redis")]
    link: link::Link,
}

/// The instance of `key`, made (or remade, when the rule's parameters changed) as needed;
/// `None` when the cap is reached.
fn instance<'m>(
    map: &'m mut Map,
    domain: &str,
    rule: &str,
    spec: &AimdSpec,
    key: &str,
) -> Option<&'m mut Instance> {
    if !map.contains_key(key) && map.len() >= MAX_KEYS {
        map.retain(|_, i| !i.is_idle());
        if map.len() >= MAX_KEYS {
            return None;
        }
    }
    let inst = map
        .entry(key.to_owned())
        .or_insert_with(|| Instance::new(domain, rule, spec));
    if inst.aimd.spec() != spec || inst.rule != rule || inst.domain != domain {
        *inst = Instance::new(domain, rule, spec);
    }
    Some(inst)
}

impl Adaptive {
    /// The limit in force for `key` of rule `rule` in `domain`, whose own limit now is `base`:
    /// `base` with the key's adaptive count (the cluster's cached count when shared). `None`
    /// when `base` is not a `concurrency` limit (adaptive limits are for concurrency only; the
    /// configuration refuses the others).
    pub(crate) fn limit(
        &self,
        domain: &str,
        rule: &str,
        spec: &AimdSpec,
        key: &str,
        base: &Limit,
    ) -> Option<Limit> {
        if base.algorithm() != Algorithm::Concurrency {
            return None;
        }
        let shared = self.state.shared.load(Ordering::Relaxed);
        let mut map = self.state.instances.lock();
        let l = match instance(&mut map, domain, rule, spec, key) {
            Some(inst) => {
                #[cfg(feature = "redis")]
                if shared && inst.remote.is_none() {
                    self.state.link.unread.store(true, Ordering::Relaxed);
                }
                inst.limit_for(base, shared)
            }
            None => with_count(base, Aimd::new(spec.clone()).limit()),
        };
        drop(map);
        self.state.on.store(true, Ordering::Relaxed);
        Some(l)
    }

    /// Records the calls in flight a decision saw for `key`.
    pub(crate) fn decided(&self, key: &str, in_flight: u64) {
        if let Some(inst) = self.state.instances.lock().get_mut(key) {
            inst.in_flight = in_flight;
        }
    }

    /// Records a released lease of `key`.
    pub(crate) fn released(&self, key: &str) {
        if !self.state.on.load(Ordering::Relaxed) {
            return;
        }
        if let Some(inst) = self.state.instances.lock().get_mut(key) {
            inst.in_flight = inst.in_flight.saturating_sub(1);
        }
    }

    /// Feeds a call's outcome to `key`'s limit (and, shared, queues it for Redis); answers
    /// whether it was counted (false: the cap of keys is reached).
    pub(crate) fn report(
        &self,
        domain: &str,
        rule: &str,
        spec: &AimdSpec,
        key: &str,
        failed: bool,
        latency: Duration,
    ) -> bool {
        let rtt = latency.as_secs_f64() * 1e6;
        let mut map = self.state.instances.lock();
        let Some(inst) = instance(&mut map, domain, rule, spec, key) else {
            return false;
        };
        let in_flight = inst.in_flight;
        inst.aimd.report(rtt, failed, in_flight);
        drop(map);
        self.state.on.store(true, Ordering::Relaxed);
        #[cfg(feature = "redis")]
        self.state
            .queue(domain, rule, spec, key, rtt, failed, in_flight);
        true
    }

    /// Reports not sent to Redis since sharing began (0 per process): see
    /// [`crate::Limiter::adaptive_reports_unsent`].
    pub(crate) fn unsent(&self) -> u64 {
        #[cfg(feature = "redis")]
        return self.state.link.unsent.load(Ordering::Relaxed);
        #[cfg(not(feature = "redis"))]
        0
    }

    /// The keys of rule `rule` in `domain` with their limits, lowest first, at most
    /// [`MAX_VIEWS`].
    pub(crate) fn views(&self, domain: &str, rule: &str) -> Vec<AdaptiveView> {
        if !self.state.on.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let shared = self.state.shared.load(Ordering::Relaxed);
        let mut out: Vec<AdaptiveView> = self
            .state
            .instances
            .lock()
            .iter()
            .filter(|(_, i)| i.domain == domain && i.rule == rule)
            .map(|(k, i)| AdaptiveView {
                key: k.clone(),
                limit: i.count(shared),
                in_flight: i.in_flight,
                shared: i.is_shared(shared),
            })
            .collect();
        out.sort_by(|a, b| a.limit.cmp(&b.limit).then_with(|| a.key.cmp(&b.key)));
        out.truncate(MAX_VIEWS);
        out
    }

    /// Shares the limits through `redis` from now on (see the [module documentation](self)):
    /// starts the task that sends reports and reads limits, on the current Tokio runtime.
    /// Without a runtime the limits stay per process (and a warning says so).
    #[cfg(feature = "redis")]
    pub(crate) fn share(&self, redis: flowgate_redis::RedisAdaptive) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                target: "flowgate::adaptive",
                "share_adaptive called outside a Tokio runtime: adaptive limits stay per process"
            );
            return;
        };
        let generation = self.state.link.generation.fetch_add(1, Ordering::Relaxed) + 1;
        // Known keys are read again at the first flush, before their cached counts are used.
        for inst in self.state.instances.lock().values_mut() {
            inst.remote = None;
        }
        self.state.shared.store(true, Ordering::Relaxed);
        rt.spawn(link::run(Arc::downgrade(&self.state), redis, generation));
    }
}

/// The link to Redis of shared limits: the queue of reports and the task that sends them and
/// reads the limits back.
#[cfg(feature = "redis")]
mod link {
    use std::collections::HashMap;
    use std::collections::hash_map::Entry;
    use std::sync::Weak;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use flowgate_core::StoreError;
    use flowgate_core::adaptive::{Aimd, AimdSpec};
    use flowgate_redis::{AdaptiveReport, RedisAdaptive};
    use parking_lot::Mutex;
    use tokio::time::Instant;

    use super::{FLUSH_EVERY, MAX_QUEUED, READ_EVERY, State};

    /// A report waiting for the next flush.
    #[derive(Debug)]
    pub(super) struct Queued {
        domain: String,
        rule: String,
        spec: AimdSpec,
        key: String,
        report: AdaptiveReport,
    }

    #[derive(Debug, Default)]
    pub(super) struct Link {
        /// The current sharing task's number (0: never shared); an older task ends.
        pub(super) generation: AtomicU64,
        queue: Mutex<Vec<Queued>>,
        /// Whether a check used a key whose shared limit was never read.
        pub(super) unread: AtomicBool,
        /// Reports not sent to Redis, so far: past [`MAX_QUEUED`], while fallen back, or in a
        /// flush that failed. They moved only this node's limits.
        pub(super) unsent: AtomicU64,
    }

    /// Keys of one rule under one set of parameters, each with its reports in order (or none,
    /// for a read).
    struct Group {
        domain: String,
        rule: String,
        spec: AimdSpec,
        keys: Vec<(String, Vec<AdaptiveReport>)>,
    }

    /// The place of the group of `(domain, rule, spec)` in `groups`, added when missing.
    fn group(groups: &mut Vec<Group>, domain: &str, rule: &str, spec: &AimdSpec) -> usize {
        let at = groups
            .iter()
            .position(|g| g.domain == domain && g.rule == rule && &g.spec == spec);
        at.unwrap_or_else(|| {
            groups.push(Group {
                domain: domain.to_owned(),
                rule: rule.to_owned(),
                spec: spec.clone(),
                keys: Vec::new(),
            });
            groups.len() - 1
        })
    }

    impl State {
        /// Queues a report for Redis, when shared.
        #[allow(clippy::too_many_arguments)]
        pub(super) fn queue(
            &self,
            domain: &str,
            rule: &str,
            spec: &AimdSpec,
            key: &str,
            rtt: f64,
            failed: bool,
            inflight: u64,
        ) {
            if self.link.generation.load(Ordering::Relaxed) == 0 {
                return;
            }
            let mut q = self.link.queue.lock();
            if q.len() >= MAX_QUEUED {
                self.link.unsent.fetch_add(1, Ordering::Relaxed);
                return;
            }
            q.push(Queued {
                domain: domain.to_owned(),
                rule: rule.to_owned(),
                spec: spec.clone(),
                key: key.to_owned(),
                report: AdaptiveReport {
                    rtt,
                    failed,
                    inflight,
                },
            });
        }

        /// Uses this node's own limits from now on, saying so when it is new.
        fn fall_back(&self, error: &StoreError) {
            if self.shared.swap(false, Ordering::Relaxed) {
                tracing::warn!(
                    target: "flowgate::adaptive",
                    %error,
                    "adaptive limits: Redis unreachable; this node moves its limits on its own \
                     reports until it is back"
                );
            }
        }

        /// The keys in use, by rule and parameters: all of them, or those never read yet.
        fn in_use(&self, all: bool) -> Vec<Group> {
            let mut groups = Vec::new();
            for (key, i) in self.instances.lock().iter() {
                if all || i.remote.is_none() {
                    let g = group(&mut groups, &i.domain, &i.rule, i.aimd.spec());
                    groups[g].keys.push((key.clone(), Vec::new()));
                }
            }
            groups
        }

        /// Sets the cached counts of `g`'s keys from Redis's answers: a flush's (`flushed`;
        /// `None`: refused) or a read's (`None`: no state in Redis, so the rule's start).
        fn cache(&self, g: &Group, answers: &[Option<u64>], flushed: bool) {
            let start = Aimd::new(g.spec.clone()).limit();
            let mut map = self.instances.lock();
            for ((key, _), a) in g.keys.iter().zip(answers) {
                let Some(inst) = map.get_mut(key) else {
                    continue;
                };
                if inst.aimd.spec() != &g.spec || inst.rule != g.rule || inst.domain != g.domain {
                    continue;
                }
                match (a, flushed) {
                    (Some(n), _) => {
                        inst.remote = Some(*n);
                        if flushed {
                            inst.refused = false;
                        }
                    }
                    (None, true) => inst.refused = true,
                    (None, false) => inst.remote = Some(start),
                }
            }
        }

        /// Reads the limits of `groups` into the cache.
        async fn read(&self, redis: &RedisAdaptive, groups: &[Group]) -> Result<(), StoreError> {
            for g in groups {
                let keys: Vec<&str> = g.keys.iter().map(|(k, _)| k.as_str()).collect();
                let answers = redis.limits(&g.domain, &g.rule, &g.spec, &keys).await?;
                self.cache(g, &answers, false);
            }
            Ok(())
        }

        /// Sends `batch`, one call per rule, each key's reports in order; the answers refresh
        /// the cache. On a failure the rest is dropped, and counted unsent.
        async fn flush(&self, redis: &RedisAdaptive, batch: Vec<Queued>) -> Result<(), StoreError> {
            let mut groups: Vec<Group> = Vec::new();
            // Where each key's reports are: (its group, its place in the group).
            let mut at: HashMap<(usize, String), usize> = HashMap::new();
            for q in batch {
                let gi = group(&mut groups, &q.domain, &q.rule, &q.spec);
                let g = &mut groups[gi];
                match at.entry((gi, q.key)) {
                    Entry::Occupied(e) => g.keys[*e.get()].1.push(q.report),
                    Entry::Vacant(e) => {
                        g.keys.push((e.key().1.clone(), vec![q.report]));
                        e.insert(g.keys.len() - 1);
                    }
                }
            }
            for (i, g) in groups.iter().enumerate() {
                let refs: Vec<(&str, &[AdaptiveReport])> = g
                    .keys
                    .iter()
                    .map(|(k, rs)| (k.as_str(), rs.as_slice()))
                    .collect();
                match redis.apply(&g.domain, &g.rule, &g.spec, &refs).await {
                    Ok(answers) => self.cache(g, &answers, true),
                    Err(e) => {
                        let unsent: usize = groups[i..]
                            .iter()
                            .flat_map(|g| g.keys.iter())
                            .map(|(_, rs)| rs.len())
                            .sum();
                        self.link.unsent.fetch_add(unsent as u64, Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
            Ok(())
        }

        /// One turn of the task: flush, then read what is due; or, fallen back, try a read.
        async fn turn(&self, redis: &RedisAdaptive, last_read: &mut Instant) {
            let batch = std::mem::take(&mut *self.link.queue.lock());
            let due = last_read.elapsed() >= READ_EVERY;
            if !self.shared.load(Ordering::Relaxed) {
                // The batch is dropped: it has moved this node's limits, the ones in force.
                self.link
                    .unsent
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                drop(batch);
                if !due {
                    return;
                }
                *last_read = Instant::now();
                let groups = self.in_use(true);
                if groups.is_empty() {
                    return;
                }
                if self.read(redis, &groups).await.is_ok() {
                    self.shared.store(true, Ordering::Relaxed);
                    tracing::info!(
                        target: "flowgate::adaptive",
                        "adaptive limits: Redis answers again; the cluster's limits are in force"
                    );
                }
                return;
            }
            if !batch.is_empty()
                && let Err(e) = self.flush(redis, batch).await
            {
                self.fall_back(&e);
                return;
            }
            let groups = if due {
                *last_read = Instant::now();
                self.in_use(true)
            } else if self.link.unread.swap(false, Ordering::Relaxed) {
                self.in_use(false)
            } else {
                return;
            };
            if let Err(e) = self.read(redis, &groups).await {
                self.fall_back(&e);
            }
        }
    }

    /// The sharing task: a turn every [`FLUSH_EVERY`] until the limiter is dropped or another
    /// task takes over.
    pub(super) async fn run(state: Weak<State>, redis: RedisAdaptive, generation: u64) {
        let mut tick = tokio::time::interval(FLUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_read = Instant::now();
        loop {
            tick.tick().await;
            let Some(state) = state.upgrade() else {
                return;
            };
            if state.link.generation.load(Ordering::Relaxed) != generation {
                return;
            }
            state.turn(&redis, &mut last_read).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowgate_core::Quota;
    use std::time::Duration;

    fn base() -> Limit {
        Limit::new(Algorithm::Concurrency, "10/30s".parse::<Quota>().unwrap()).unwrap()
    }

    fn spec() -> AimdSpec {
        AimdSpec {
            initial: 10,
            ..AimdSpec::new(2, 50, 100_000.0)
        }
    }

    #[test]
    fn slow_reports_shrink_a_key_and_fast_ones_grow_it_keys_apart() {
        let a = Adaptive::default();
        let limit = |k: &str| a.limit("d", "r", &spec(), k, &base()).unwrap();
        assert_eq!(limit("k1").limit(), 10);
        assert_eq!(
            limit("k1").window(),
            base().window(),
            "the leases' TTL is the rule's"
        );
        a.decided("k1", 10);
        let slow = |n: usize| {
            for _ in 0..n {
                a.report("d", "r", &spec(), "k1", false, Duration::from_millis(500));
            }
        };
        slow(1);
        assert_eq!(limit("k1").limit(), 9, "10 × 0.9");
        slow(10);
        assert_eq!(limit("k1").limit(), 9, "the 10 calls out at the back-off");
        slow(1);
        assert_eq!(limit("k1").limit(), 8, "9 × 0.9");
        assert_eq!(limit("k2").limit(), 10, "another key keeps its own");
        a.decided("k2", 10);
        for _ in 0..11 {
            a.report("d", "r", &spec(), "k2", false, Duration::from_millis(5));
        }
        assert_eq!(limit("k2").limit(), 11, "about one more per round trip");
        let v = a.views("d", "r");
        assert_eq!(
            v.iter()
                .map(|v| (v.key.as_str(), v.limit))
                .collect::<Vec<_>>(),
            [("k1", 8), ("k2", 11)]
        );
    }

    #[test]
    fn releases_lower_the_calls_in_flight_so_an_idle_key_does_not_grow() {
        let a = Adaptive::default();
        a.limit("d", "r", &spec(), "k", &base());
        a.decided("k", 10);
        for _ in 0..8 {
            a.released("k");
        }
        for _ in 0..20 {
            a.report("d", "r", &spec(), "k", false, Duration::from_millis(5));
        }
        assert_eq!(
            a.views("d", "r")[0].limit,
            10,
            "2 out of 10: not using the limit"
        );
    }

    #[test]
    fn a_changed_spec_restarts_the_key_and_other_algorithms_are_left_alone() {
        let a = Adaptive::default();
        a.limit("d", "r", &spec(), "k", &base());
        a.decided("k", 10);
        a.report("d", "r", &spec(), "k", true, Duration::ZERO);
        assert_eq!(a.views("d", "r")[0].limit, 9);
        let other = AimdSpec {
            initial: 20,
            ..spec()
        };
        assert_eq!(a.limit("d", "r", &other, "k", &base()).unwrap().limit(), 20);
        let tb = Limit::new(Algorithm::TokenBucket, "10/s".parse::<Quota>().unwrap()).unwrap();
        assert_eq!(a.limit("d", "r", &spec(), "k", &tb), None);
    }

    #[test]
    fn keys_are_bounded() {
        let a = Adaptive::default();
        for i in 0..MAX_KEYS {
            let k = format!("k{i}");
            a.limit("d", "r", &spec(), &k, &base());
            a.decided(&k, 1);
        }
        assert!(
            !a.report("d", "r", &spec(), "new", false, Duration::ZERO),
            "full of keys with calls out: the new key is not kept"
        );
        assert_eq!(
            a.limit("d", "r", &spec(), "new", &base()).unwrap().limit(),
            10,
            "its limit is the rule's start"
        );
        a.decided("k0", 0);
        assert!(a.report("d", "r", &spec(), "new", false, Duration::ZERO));
        assert_eq!(a.state.instances.lock().len(), MAX_KEYS);
    }
}
