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
//! After [`Adaptive::share`], the limits are the cluster's, kept in Redis
//! ([`flowgate_redis::RedisAdaptive`]: one hash per rule, where the transition runs once per
//! report for every node), through the engine every shared state uses (`link.rs`, beside the
//! circuit breakers'):
//!
//! - a check reads the node's cached copy of its key's limit: no round trip is added to a
//!   decision;
//! - a report is queued, and a background task sends the queue every 20 ms, one script call per
//!   rule; each call answers the new limits of its keys, which refresh the cache;
//! - every second the task reads the limits of every key this node uses (and at its next flush,
//!   those of a key it has just started using), so each node follows the limits moved by the
//!   others' reports;
//! - every report also moves the node's own [`Aimd`] for its key, as without Redis, so that it
//!   is warm when needed: when a flush or a read fails, the node **falls back** to those local
//!   limits, says so once (a `tracing` warning, target `flowgate::adaptive`) and in
//!   [`AdaptiveView::shared`] and [`Adaptive::shared`], and tries a read every second; when one
//!   succeeds it uses the cluster's limits again (an info line). Reports queued while Redis is
//!   unreachable, and the batch of a failed flush, are dropped, not sent later: they have
//!   already moved the local limits in force then, and sent late their latencies would act a
//!   second time, on a shared limit that has moved since ([`Adaptive::unsent`] counts them);
//! - a key refused by Redis (its rule's hash is full, [`flowgate_redis::ADAPTIVE_MAX_KEYS`]) keeps
//!   its local limit, also shown as not shared;
//! - the task ends when the limiter is dropped (it holds a weak reference), or when
//!   [`Adaptive::share`] is called again (the new call's task takes over).
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

use crate::link::{Link, Subject};

#[cfg(feature = "redis")]
mod shared;

/// The most keys (matched descriptors) with an adaptive limit this limiter keeps, all rules
/// together. At the cap, keys whose limit is back at its start with no call out are dropped to
/// make room; if none is, a new key keeps its rule's starting limit and its reports are dropped
/// (counted in [`crate::breakers::Reported::dropped`]).
pub const MAX_KEYS: usize = 10_000;

/// The most keys one rule's view lists (lowest limits first).
pub const MAX_VIEWS: usize = 100;

/// The most reports waiting for a flush to Redis; more are dropped (they still move the node's
/// own limits) and counted in [`Adaptive::unsent`].
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

/// A limiter's adaptive concurrency limits: [`crate::Limiter::adaptive`] hands it out.
#[derive(Clone, Copy)]
pub struct Adaptive<'a> {
    registry: &'a Registry,
}

impl<'a> Adaptive<'a> {
    pub(crate) fn new(registry: &'a Registry) -> Self {
        Self { registry }
    }

    /// Shares the limits with every node on `store`'s Redis: from now on a check uses the
    /// cluster's limit for its key (this node's cached copy, so no round trip is added to a
    /// decision), reports are sent to Redis in batches every 20 ms and the limits read back
    /// every second. While Redis is unreachable each node moves its own limits, and
    /// [`AdaptiveView::shared`] says so. Needs a Tokio runtime (its task ends with the limiter;
    /// without one, the limits stay per process and a warning says so); calling it again hands
    /// over to `store`. See the [module documentation](self).
    #[cfg(feature = "redis")]
    pub fn share(&self, store: &flowgate_redis::RedisStore) {
        self.registry.share(store.adaptive());
    }

    /// Whether the limits are shared through Redis (`None`: per process), and if so whether
    /// the cluster's are in force now (`Some(false)`: Redis unreachable, each node moves its
    /// own).
    pub fn shared(&self) -> Option<bool> {
        self.registry.state.link.shared()
    }

    /// Reports this node could not send to Redis since it started sharing the limits (more
    /// than [`MAX_QUEUED`] waiting, Redis unreachable, or a flush that failed): they moved only
    /// this node's limits. 0 when the limits are per process.
    pub fn unsent(&self) -> u64 {
        self.registry.state.link.unsent()
    }

    /// Sends the reports queued for the shared limits now, rather than at the next batch (every
    /// 20 ms): completes once every report made before the call has reached Redis or been
    /// counted [`Adaptive::unsent`]; at once when the limits are per process. For a shutdown;
    /// bound it with a timeout (it waits on Redis's answer).
    pub async fn flush(self) {
        self.registry.state.link.flush().await;
    }

    /// The limits of rule `rule` in `domain`, per key (lowest first, at most [`MAX_VIEWS`]);
    /// empty for a rule without `adaptive` or before its first request.
    pub fn limits(&self, domain: &str, rule: &str) -> Vec<AdaptiveView> {
        self.registry.views(domain, rule)
    }
}

impl std::fmt::Debug for Adaptive<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adaptive")
            .field("shared", &self.shared())
            .field("unsent", &self.unsent())
            .finish()
    }
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

    /// Whether it was made for rule `rule` of `domain` with `spec`.
    fn is_of(&self, domain: &str, rule: &str, spec: &AimdSpec) -> bool {
        self.aimd.spec() == spec && self.rule == rule && self.domain == domain
    }

    /// Holds no more than a new instance would.
    fn is_idle(&self) -> bool {
        self.in_flight == 0 && self.aimd.limit() == Aimd::new(self.aimd.spec().clone()).limit()
    }

    /// Whether the limit in force is the cluster's, when the cluster's limits are in force
    /// (`sharing`).
    fn is_shared(&self, sharing: bool) -> bool {
        sharing && !self.refused && self.remote.is_some()
    }

    /// The count in force: the cluster's when shared, else this node's.
    fn count(&self, sharing: bool) -> u64 {
        match self.remote {
            Some(n) if self.is_shared(sharing) => n,
            _ => self.aimd.limit(),
        }
    }

    fn limit_for(&mut self, base: &Limit, sharing: bool) -> Limit {
        let n = self.count(sharing);
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
pub(crate) struct Registry {
    state: Arc<State>,
}

/// What the limiter and the sharing task hold (the task through a weak reference).
#[derive(Debug)]
struct State {
    instances: Mutex<Map>,
    /// Whether some key has a state (releases look it up only then).
    on: AtomicBool,
    link: Link,
    /// The reports waiting for the next flush, and whether a check used a key whose shared
    /// limit was never read.
    #[cfg(feature = "redis")]
    queue: shared::Queue,
}

impl Default for State {
    fn default() -> Self {
        Self {
            instances: Mutex::default(),
            on: AtomicBool::new(false),
            link: Link::new(Subject::Adaptive),
            #[cfg(feature = "redis")]
            queue: shared::Queue::default(),
        }
    }
}

/// The instance of `key`, made (or remade, when the rule's parameters changed) as needed;
/// `None` when the cap is reached. The key is copied only when its instance is made.
fn instance<'m>(
    map: &'m mut Map,
    domain: &str,
    rule: &str,
    spec: &AimdSpec,
    key: &str,
) -> Option<&'m mut Instance> {
    if !map.contains_key(key) {
        if map.len() >= MAX_KEYS {
            map.retain(|_, i| !i.is_idle());
            if map.len() >= MAX_KEYS {
                return None;
            }
        }
        map.insert(key.to_owned(), Instance::new(domain, rule, spec));
    }
    let inst = map.get_mut(key)?;
    if !inst.is_of(domain, rule, spec) {
        *inst = Instance::new(domain, rule, spec);
    }
    Some(inst)
}

impl Registry {
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
        let sharing = self.state.link.sharing();
        let mut map = self.state.instances.lock();
        let l = match instance(&mut map, domain, rule, spec, key) {
            Some(inst) => {
                #[cfg(feature = "redis")]
                if sharing && inst.remote.is_none() {
                    self.state.queue.ask_read();
                }
                inst.limit_for(base, sharing)
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
        if self.state.link.shared().is_some() {
            let report = flowgate_redis::AdaptiveReport {
                rtt,
                failed,
                inflight: in_flight,
            };
            if !self.state.queue.push(domain, rule, spec, key, report) {
                self.state.link.count_unsent(1);
            }
        }
        true
    }

    /// The keys of rule `rule` in `domain` with their limits, lowest first, at most
    /// [`MAX_VIEWS`].
    pub(crate) fn views(&self, domain: &str, rule: &str) -> Vec<AdaptiveView> {
        if !self.state.on.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let sharing = self.state.link.sharing();
        let mut out: Vec<AdaptiveView> = self
            .state
            .instances
            .lock()
            .iter()
            .filter(|(_, i)| i.domain == domain && i.rule == rule)
            .map(|(k, i)| AdaptiveView {
                key: k.clone(),
                limit: i.count(sharing),
                in_flight: i.in_flight,
                shared: i.is_shared(sharing),
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
        let Some(rt) = crate::link::runtime(Subject::Adaptive) else {
            return;
        };
        // Known keys are read again at the first flush, before their cached counts are used.
        for inst in self.state.instances.lock().values_mut() {
            inst.remote = None;
        }
        let generation = self.state.link.begin();
        rt.spawn(crate::link::run(
            Arc::downgrade(&self.state),
            redis,
            generation,
        ));
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
        let a = Registry::default();
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
        let a = Registry::default();
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
        let a = Registry::default();
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
        let a = Registry::default();
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
