//! Adaptive concurrency limits in the limiter: a `concurrency` rule with
//! [`Rule::adaptive`](flowgate_core::Rule::adaptive) has one
//! [`Aimd`](flowgate_core::adaptive::Aimd) per matched descriptor (its state key), fed by the
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
//! The states are this process's: each node moves its own limits on its own reports. A limit
//! shared by a cluster plugs in here: [`Adaptive::limit`] would read the node's cached copy of a
//! limit kept in the store, [`Adaptive::report`] would batch reports there, where the transition
//! runs once.
//!
//! # Cost
//! A rule without `adaptive` costs one branch per matched rule. An adaptive rule's check takes a
//! short lock twice (its limit before the store, the leases seen after), a report once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

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
}

/// One key's state.
#[derive(Debug)]
struct Instance {
    domain: String,
    rule: String,
    aimd: Aimd,
    in_flight: u64,
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
            cached: None,
        }
    }

    /// Holds no more than a new instance would.
    fn is_idle(&self) -> bool {
        self.in_flight == 0 && self.aimd.limit() == Aimd::new(self.aimd.spec().clone()).limit()
    }

    fn limit_for(&mut self, base: &Limit) -> Limit {
        let n = self.aimd.limit();
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
    instances: Mutex<Map>,
    /// Whether some key has a state (releases look it up only then).
    on: AtomicBool,
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
    /// `base` with the key's adaptive count. `None` when `base` is not a `concurrency` limit
    /// (adaptive limits are for concurrency only; the configuration refuses the others).
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
        let mut map = self.instances.lock();
        let l = match instance(&mut map, domain, rule, spec, key) {
            Some(inst) => inst.limit_for(base),
            None => with_count(base, Aimd::new(spec.clone()).limit()),
        };
        drop(map);
        self.on.store(true, Ordering::Relaxed);
        Some(l)
    }

    /// Records the calls in flight a decision saw for `key`.
    pub(crate) fn decided(&self, key: &str, in_flight: u64) {
        if let Some(inst) = self.instances.lock().get_mut(key) {
            inst.in_flight = in_flight;
        }
    }

    /// Records a released lease of `key`.
    pub(crate) fn released(&self, key: &str) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        if let Some(inst) = self.instances.lock().get_mut(key) {
            inst.in_flight = inst.in_flight.saturating_sub(1);
        }
    }

    /// Feeds a call's outcome to `key`'s limit; answers whether it was counted (false: the cap
    /// of keys is reached).
    pub(crate) fn report(
        &self,
        domain: &str,
        rule: &str,
        spec: &AimdSpec,
        key: &str,
        failed: bool,
        latency: std::time::Duration,
    ) -> bool {
        let rtt = latency.as_secs_f64() * 1e6;
        let mut map = self.instances.lock();
        let Some(inst) = instance(&mut map, domain, rule, spec, key) else {
            return false;
        };
        let in_flight = inst.in_flight;
        inst.aimd.report(rtt, failed, in_flight);
        drop(map);
        self.on.store(true, Ordering::Relaxed);
        true
    }

    /// The keys of rule `rule` in `domain` with their limits, lowest first, at most
    /// [`MAX_VIEWS`].
    pub(crate) fn views(&self, domain: &str, rule: &str) -> Vec<AdaptiveView> {
        if !self.on.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let mut out: Vec<AdaptiveView> = self
            .instances
            .lock()
            .iter()
            .filter(|(_, i)| i.domain == domain && i.rule == rule)
            .map(|(k, i)| AdaptiveView {
                key: k.clone(),
                limit: i.aimd.limit(),
                in_flight: i.in_flight,
            })
            .collect();
        out.sort_by(|a, b| a.limit.cmp(&b.limit).then_with(|| a.key.cmp(&b.key)));
        out.truncate(MAX_VIEWS);
        out
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
        assert_eq!(a.instances.lock().len(), MAX_KEYS);
    }
}
