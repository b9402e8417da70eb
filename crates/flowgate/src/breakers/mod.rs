//! Circuit breakers around the limiter: calls' outcomes are reported, and a request matching an
//! open breaker is refused before the store is asked.
//!
//! A [`BreakerDef`] names a descriptor pattern, matched as rules are (one breaker instance per
//! matched descriptor, keyed `<domain>:<breaker>:<k>=<v>,...`), and a
//! [`BreakerSpec`]: the state machine of
//! [`flowgate_core::breaker`], whose module documentation states the semantics exactly (a
//! sliding window of buckets, thresholds compared "at least", probes holding expiring leases).
//!
//! The states are this process's (`States::Local`) unless the limiter shares them through
//! Redis ([`crate::Limiter::share_breakers`], `States::Shared`, module `shared`): then each
//! breaker is the cluster's, read from this node's cached copy, and the local states are the
//! fallback decided on while Redis is unreachable.
//!
//! # Cost
//! With no breaker declared, a check reads one atomic flag. With breakers, a check takes each
//! matched breaker's lock twice (a look before the store, the admission after it), a report
//! once; both are short and never wait on I/O.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

#[cfg(feature = "redis")]
pub mod shared;

pub use flowgate_core::breaker::{BreakerError, BreakerSpec, DEFAULT_BUCKETS, Opened, Strategy};

use arc_swap::ArcSwap;
use flowgate_core::breaker::{Admit, Breaker, Phase, Transition};
use flowgate_core::clock::Micros;
use flowgate_core::{Descriptor, Matcher, Request, Rule, RuleSet, RuleSetError};
use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;

/// The most instances (distinct matched descriptors) one breaker keeps. At the cap, closed
/// instances with an empty window are dropped to make room; if none is, a report for a new
/// instance is dropped (and counted as such).
pub const MAX_INSTANCES: usize = 10_000;

/// The most instances a view lists: those not closed first, then closed ones with the most bad
/// calls in their window.
pub const MAX_VIEWS: usize = 1_000;

/// A declared breaker.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BreakerDef {
    /// Its domain.
    pub domain: String,
    /// Unique among the domain's breakers; part of every instance's key.
    pub name: String,
    /// The descriptor pattern, matched as a rule's is.
    pub pattern: Vec<Matcher>,
    /// Its state machine's parameters.
    pub spec: BreakerSpec,
    /// For the breaker shared by a cluster: the fewest nodes whose bad calls in the window may
    /// open it (`None`: one). Per process it has no effect.
    pub min_nodes: Option<u32>,
}

impl BreakerDef {
    /// A breaker `name` in `domain` over `pattern`.
    pub fn new(
        domain: impl Into<String>,
        name: impl Into<String>,
        pattern: Vec<Matcher>,
        spec: BreakerSpec,
    ) -> Self {
        Self {
            domain: domain.into(),
            name: name.into(),
            pattern,
            spec,
            min_nodes: None,
        }
    }

    /// The pattern as written (`key=value, key`).
    pub fn pattern_text(&self) -> String {
        self.pattern
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A validated set of breakers and the matcher that finds each descriptor's.
#[derive(Debug, Default)]
pub struct BreakerSet {
    defs: Vec<BreakerDef>,
    matcher: RuleSet,
    /// A matched pattern's definition, by the address of the matcher's rule.
    by_rule: HashMap<usize, usize>,
    /// A definition by domain and name.
    by_name: HashMap<(String, String), usize>,
}

impl BreakerSet {
    /// Validates `defs`: in each domain, unique names and unique patterns.
    ///
    /// # Errors
    /// [`RuleSetError`] naming the breakers in conflict (its text says "rules": a caller that
    /// shows it says "breakers").
    pub fn new(defs: Vec<BreakerDef>) -> Result<Self, RuleSetError> {
        let rules: Vec<Rule> = defs
            .iter()
            .map(|d| Rule::new(d.domain.clone(), d.name.clone(), d.pattern.clone(), None))
            .collect();
        let matcher = RuleSet::new(rules)?;
        let by_rule = matcher
            .rules()
            .iter()
            .enumerate()
            .map(|(i, r)| (Arc::as_ptr(r) as usize, i))
            .collect();
        let by_name = defs
            .iter()
            .enumerate()
            .map(|(i, d)| ((d.domain.clone(), d.name.clone()), i))
            .collect();
        Ok(Self {
            defs,
            matcher,
            by_rule,
            by_name,
        })
    }

    /// The breakers, in the order given.
    pub fn defs(&self) -> &[BreakerDef] {
        &self.defs
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// The breaker matching `descriptor` in `domain`, and the instance's key.
    fn find(&self, domain: &str, descriptor: &Descriptor) -> Option<(usize, String)> {
        let rule = self.matcher.find(domain, descriptor)?;
        let i = *self.by_rule.get(&(Arc::as_ptr(rule) as usize))?;
        Some((
            i,
            flowgate_core::ruleset::rule_state_key(domain, rule, descriptor),
        ))
    }
}

/// A call's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded.
    Ok,
    /// It failed.
    Error,
}

/// What a report reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reported {
    /// Breaker instances that counted it.
    pub counted: usize,
    /// Breaker instances or adaptive limits that matched but could not be kept (a breaker at
    /// [`MAX_INSTANCES`], adaptive limits at [`crate::adaptive::MAX_KEYS`]).
    pub dropped: usize,
    /// Adaptive concurrency limits that counted it ([`crate::adaptive`]).
    pub adaptive: usize,
}

/// A breaker instance's change of phase.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerEvent {
    /// The breaker's domain.
    pub domain: String,
    /// The breaker's name.
    pub breaker: String,
    /// The instance's key.
    pub key: String,
    /// The phase left: `closed`, `open` or `half_open`.
    pub from: &'static str,
    /// The phase entered.
    pub to: &'static str,
}

/// A breaker instance's state, as shown.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BreakerView {
    /// The breaker's domain.
    pub domain: String,
    /// The breaker's name.
    pub breaker: String,
    /// The instance's key.
    pub key: String,
    /// `closed`, `open` or `half_open`.
    pub phase: &'static str,
    /// When it entered its phase (µs, by the limiter's store clock).
    pub since: Micros,
    /// Calls in the window (closed).
    pub calls: u64,
    /// Bad calls in the window (closed).
    pub bad: u64,
    /// Open: the time left until half-open. Half-open: the probes' leases held.
    pub retry_after: Option<Duration>,
    /// Half-open: probes out (admitted, not reported, lease not expired): the cluster's when
    /// shared (as last read, or as this node's last probe found them), else this process's.
    pub probes_out: u32,
    /// Open or half-open: why it opened last, the calls and bad calls at the transition
    /// ([`Opened`]); `None` while closed (or, shared, when the cluster holds no figures).
    pub opened: Option<Opened>,
    /// Decided by the cluster's shared state (`false`: this process's, because breakers are not
    /// shared, or because Redis is unreachable now).
    pub shared: bool,
}

/// A breaker's part in a descriptor's status: the instance that matched, and whether it
/// refused the request or admitted it as a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerStatus {
    /// The breaker's domain.
    pub domain: String,
    /// The breaker's name.
    pub name: String,
    /// The instance's key.
    pub key: String,
    /// The request was refused: the circuit is open (or half-open with no probe free).
    pub open: bool,
    /// Admitted as a probe: the lease to report with ([`crate::Limiter::report`]'s `probe`).
    pub probe: Option<u64>,
}

/// One instance: its state machine, the phase it was last seen in and since when, and its
/// identity in probe tokens.
#[derive(Debug)]
struct Instance {
    breaker: Breaker,
    phase: &'static str,
    since: Micros,
    id: u32,
}

/// Distinguishes instances in probe tokens.
static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(1);

/// A probe token: the instance's identity (high half) and the core lease (low half), so that a
/// token given by one instance is never taken for another's lease.
fn token(id: u32, lease: u64) -> u64 {
    (u64::from(id) << 32) | (lease & 0xffff_ffff)
}

/// The core lease of `token` if it was given by instance `id`.
fn lease_of(id: u32, token: u64) -> Option<u64> {
    (token >> 32 == u64::from(id)).then_some(token & 0xffff_ffff)
}

fn dur(us: Micros) -> Duration {
    Duration::from_micros(us)
}

/// Changes of phase seen by one operation: (from, to), at most two (open turned half-open,
/// then a probe's report).
type Changes = SmallVec<[(&'static str, &'static str); 2]>;

impl Instance {
    fn new(spec: &BreakerSpec, now: Micros) -> Self {
        Self {
            breaker: Breaker::new(spec.clone()),
            phase: Phase::Closed.name(),
            since: now,
            id: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The changes since the phase last seen, given the transition an operation answered.
    fn changes(&mut self, t: Option<Transition>, now: Micros) -> Changes {
        let current = self.breaker.phase(now).name();
        let mut out = Changes::new();
        if let Some(t) = t {
            if self.phase != t.from {
                out.push((self.phase, t.from));
            }
            out.push((t.from, t.to));
        } else if self.phase != current {
            out.push((self.phase, current));
        }
        if !out.is_empty() {
            self.since = now;
        }
        self.phase = current;
        out
    }

    /// Whether a call may go ahead now, without taking a probe; `Err` is the time to wait.
    fn look(&mut self, now: Micros) -> (Result<(), Duration>, Changes) {
        let probes = self.breaker.spec().probes();
        let look = match self.breaker.phase(now) {
            Phase::Closed => Ok(()),
            Phase::Open { until, .. } => Err(dur(until.saturating_sub(now).max(1))),
            Phase::HalfOpen {
                leases, succeeded, ..
            } => {
                if (leases.len() as u32).saturating_add(*succeeded) < probes {
                    Ok(())
                } else {
                    let first = leases.iter().map(|l| l.1).min().unwrap_or(now + 1);
                    Err(dur(first.saturating_sub(now).max(1)))
                }
            }
        };
        (look, self.changes(None, now))
    }

    fn view(&mut self, def: &BreakerDef, key: &str, now: Micros) -> BreakerView {
        let (calls, bad) = self.breaker.window(now);
        let (retry_after, probes_out) = match self.breaker.phase(now) {
            Phase::Closed => (None, 0),
            Phase::Open { until, .. } => (Some(dur(until.saturating_sub(now))), 0),
            Phase::HalfOpen { leases, .. } => (
                leases
                    .iter()
                    .map(|l| l.1)
                    .min()
                    .map(|d| dur(d.saturating_sub(now))),
                leases.len() as u32,
            ),
        };
        BreakerView {
            domain: def.domain.clone(),
            breaker: def.name.clone(),
            key: key.to_owned(),
            phase: self.breaker.phase(now).name(),
            since: self.since,
            calls,
            bad,
            retry_after,
            probes_out,
            opened: self.breaker.phase(now).opened(),
            shared: false,
        }
    }
}

/// A closed instance with calls in its window, a candidate for the views.
pub(crate) struct Closed<'a> {
    pub(crate) key: &'a str,
    pub(crate) calls: u64,
    pub(crate) bad: u64,
    pub(crate) since: Micros,
}

impl Closed<'_> {
    /// The [`MAX_VIEWS`] of `all` worth showing first: most bad calls, then by key. A breaker
    /// may have [`MAX_INSTANCES`] closed instances with calls; only these become views.
    pub(crate) fn shown(mut all: Vec<Self>) -> impl Iterator<Item = Self> {
        let order = |a: &Self, b: &Self| b.bad.cmp(&a.bad).then_with(|| a.key.cmp(b.key));
        if all.len() > MAX_VIEWS {
            all.select_nth_unstable_by(MAX_VIEWS, order);
            all.truncate(MAX_VIEWS);
        }
        all.into_iter()
    }

    pub(crate) fn view(&self, def: &BreakerDef, shared: bool) -> BreakerView {
        BreakerView {
            domain: def.domain.clone(),
            breaker: def.name.clone(),
            key: self.key.to_owned(),
            phase: "closed",
            since: self.since,
            calls: self.calls,
            bad: self.bad,
            retry_after: None,
            probes_out: 0,
            opened: None,
            shared,
        }
    }
}

/// A breaker's instances by key (foldhash, as the Redis client's maps: SipHash showed in the
/// profile of a node taking reports; the seed is random per map).
pub(crate) type ByKey<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// The instances of one breaker, locked.
type Locked<'a> = MutexGuard<'a, ByKey<Instance>>;

/// The instances of one breaker, in this process.
#[derive(Debug, Default)]
pub(crate) struct LocalStates {
    instances: Mutex<ByKey<Instance>>,
}

/// Where a breaker's instances live: this process ([`States::Local`]), or Redis, read through
/// this node's cache, with this process's instances as the fallback ([`States::Shared`]).
#[derive(Debug)]
pub(crate) enum States {
    /// This process's instances.
    Local(LocalStates),
    /// The cluster's, through Redis.
    #[cfg(feature = "redis")]
    Shared(Box<shared::SharedStates>),
}

impl States {
    fn local() -> Self {
        States::Local(LocalStates::default())
    }

    /// This process's instances (a shared breaker's fallback).
    fn lock(&self) -> Locked<'_> {
        match self {
            States::Local(l) => l.instances.lock(),
            #[cfg(feature = "redis")]
            States::Shared(s) => s.local.instances.lock(),
        }
    }

    #[cfg(feature = "redis")]
    fn shared(&self) -> Option<&shared::SharedStates> {
        match self {
            States::Shared(s) => Some(s),
            States::Local(_) => None,
        }
    }
}

/// An observer of breaker transitions.
type Observer = Arc<dyn Fn(&BreakerEvent) + Send + Sync>;

/// The breakers in force and their states.
struct Armed {
    set: BreakerSet,
    states: Vec<Arc<States>>,
}

/// A request's breakers: each matched descriptor's instance.
pub(crate) struct Gate {
    armed: Arc<Armed>,
    /// (descriptor index, definition index, instance key)
    hits: SmallVec<[(usize, usize, String); 2]>,
    /// Per hit, shared: whether the admission must ask Redis for a probe (the cached phase was
    /// not closed when looked at).
    probe: SmallVec<[bool; 2]>,
}

impl Gate {
    /// Whether no breaker matched.
    pub(crate) fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    /// The status of hit `h` (`open`: it refused; `probe`: its token).
    fn status(&self, h: usize, open: bool, probe: Option<u64>) -> (usize, BreakerStatus) {
        let (descriptor, def, key) = &self.hits[h];
        let d = &self.armed.set.defs[*def];
        (
            *descriptor,
            BreakerStatus {
                domain: d.domain.clone(),
                name: d.name.clone(),
                key: key.clone(),
                open,
                probe,
            },
        )
    }
}

/// A refusal by a breaker: the descriptor's status and the time to wait.
pub(crate) struct Refusal {
    pub(crate) descriptor: usize,
    pub(crate) status: BreakerStatus,
    pub(crate) retry_after: Duration,
}

/// The limiter's breakers: the set in force, swapped whole, and each breaker's instances.
pub(crate) struct Breakers {
    on: AtomicBool,
    armed: Arc<ArcSwap<Armed>>,
    observer: Arc<parking_lot::RwLock<Option<Observer>>>,
    /// Set once breakers are shared through Redis.
    #[cfg(feature = "redis")]
    hub: std::sync::OnceLock<Arc<shared::Hub>>,
}

impl Default for Breakers {
    fn default() -> Self {
        Self {
            on: AtomicBool::new(false),
            armed: Arc::new(ArcSwap::from_pointee(Armed {
                set: BreakerSet::default(),
                states: Vec::new(),
            })),
            observer: Arc::new(parking_lot::RwLock::new(None)),
            #[cfg(feature = "redis")]
            hub: std::sync::OnceLock::new(),
        }
    }
}

/// Tells `observer` (and the log) of an instance's changes of phase.
fn emit(
    observer: &parking_lot::RwLock<Option<Observer>>,
    armed: &Armed,
    def: usize,
    key: &str,
    changes: &Changes,
) {
    if changes.is_empty() {
        return;
    }
    let d = &armed.set.defs[def];
    let observer = observer.read().clone();
    for &(from, to) in changes {
        let e = event(d, key, from, to);
        if to == "open" {
            tracing::warn!(target: "flowgate::breakers", domain = %e.domain, breaker = %e.breaker, key = %e.key, from, to, "circuit breaker opened");
        } else {
            tracing::info!(target: "flowgate::breakers", domain = %e.domain, breaker = %e.breaker, key = %e.key, from, to, "circuit breaker {to}");
        }
        if let Some(f) = &observer {
            f(&e);
        }
    }
}

impl Breakers {
    /// Whether any breaker is declared (one atomic read: the whole cost without breakers).
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The states of a breaker newly in force.
    fn fresh(&self, def: &BreakerDef) -> Arc<States> {
        #[cfg(feature = "redis")]
        if self.hub.get().is_some() {
            return Arc::new(States::Shared(Box::new(shared::SharedStates::new(def))));
        }
        let _ = def;
        Arc::new(States::local())
    }

    /// Puts `set` in force. A breaker whose definition (domain, name, pattern, parameters) is
    /// unchanged keeps its instances; any other starts closed.
    pub(crate) fn set(&self, set: BreakerSet) {
        let old = self.armed.load_full();
        let states = set
            .defs
            .iter()
            .map(|d| {
                old.set
                    .by_name
                    .get(&(d.domain.clone(), d.name.clone()))
                    .filter(|&&j| old.set.defs[j] == *d)
                    .map_or_else(|| self.fresh(d), |&j| Arc::clone(&old.states[j]))
            })
            .collect();
        let on = !set.is_empty();
        self.armed.store(Arc::new(Armed { set, states }));
        self.on.store(on, Ordering::Relaxed);
    }

    /// The breakers in force.
    pub(crate) fn defs(&self) -> Vec<BreakerDef> {
        self.armed.load().set.defs.clone()
    }

    /// Calls `f` on every transition from now on (after the breaker's lock is released).
    pub(crate) fn observe(&self, f: Observer) {
        *self.observer.write() = Some(f);
    }

    fn emit(&self, armed: &Armed, def: usize, key: &str, changes: &Changes) {
        emit(&self.observer, armed, def, key, changes);
    }

    /// Whether the breakers are shared (`None`: per process) and Redis answers now.
    pub(crate) fn shared(&self) -> Option<bool> {
        #[cfg(feature = "redis")]
        if let Some(hub) = self.hub.get() {
            return Some(!hub.degraded());
        }
        None
    }

    /// Reports counted by this node that Redis could not take (their batch failed): they fed
    /// only this node's fallback. 0 per process.
    pub(crate) fn unsent(&self) -> u64 {
        #[cfg(feature = "redis")]
        if let Some(hub) = self.hub.get() {
            return hub.unsent.load(Ordering::Relaxed);
        }
        0
    }

    /// Whether a shared breaker decides by its cluster state now (Redis answers).
    #[cfg(feature = "redis")]
    fn sharing(&self) -> bool {
        self.hub.get().is_some_and(|h| !h.degraded())
    }

    /// Shares every breaker through `redis` from now on (their instances start from the
    /// cluster's state), and starts the task that sends reports and reads the phases. Once
    /// only: later calls change nothing.
    #[cfg(feature = "redis")]
    pub(crate) fn share(&self, redis: flowgate_redis::breakers::RedisBreakers) {
        let hub = Arc::new(shared::Hub::new(redis));
        if self.hub.set(Arc::clone(&hub)).is_err() {
            return;
        }
        let old = self.armed.load_full();
        let states = old.set.defs.iter().map(|d| self.fresh(d)).collect();
        self.armed.store(Arc::new(Armed {
            set: BreakerSet::new(old.set.defs.clone()).unwrap_or_default(),
            states,
        }));
        tokio::spawn(shared_task(
            Arc::downgrade(&self.armed),
            Arc::clone(&self.observer),
            hub,
        ));
    }

    /// The breakers `request` matches, and whether one refuses it now (without taking a probe).
    pub(crate) fn gate(&self, request: &Request, now: Micros) -> (Gate, Option<Refusal>) {
        let armed = self.armed.load_full();
        let hits: SmallVec<[(usize, usize, String); 2]> = request
            .descriptors
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                let (def, key) = armed.set.find(&request.domain, d)?;
                Some((i, def, key))
            })
            .collect();
        let mut gate = Gate {
            armed,
            hits,
            probe: SmallVec::new(),
        };
        let mut refusal = None;
        for (h, (_, def, key)) in gate.hits.iter().enumerate() {
            let (look, changes, probe) = self.look(&gate.armed, *def, key, now);
            gate.probe.push(probe);
            self.emit(&gate.armed, *def, key, &changes);
            if let Err(wait) = look {
                let (descriptor, status) = gate.status(h, true, None);
                refusal = Some(Refusal {
                    descriptor,
                    status,
                    retry_after: wait,
                });
                break;
            }
        }
        (gate, refusal)
    }

    /// Whether instance `key` of breaker `def` lets a call go ahead now, without a probe, and
    /// (shared) whether its admission must ask Redis for one.
    fn look(
        &self,
        armed: &Armed,
        def: usize,
        key: &str,
        now: Micros,
    ) -> (Result<(), Duration>, Changes, bool) {
        #[cfg(feature = "redis")]
        if let Some(s) = armed.states[def].shared() {
            if self.sharing() {
                return s.look(key, now);
            }
            // Redis unreachable: the last known opening lasts; otherwise the local breaker.
            if let Some(wait) = s.open_until(key, now) {
                return (Err(wait), Changes::new(), false);
            }
        }
        let mut instances = armed.states[def].lock();
        match instances.get_mut(key) {
            None => (Ok(()), Changes::new(), false),
            Some(inst) => {
                let (look, changes) = inst.look(now);
                (look, changes, false)
            }
        }
    }

    /// Admits a request the store admitted: takes a probe of each half-open instance, all or
    /// nothing. Per process, the instances' locks are held together, taken in the breakers'
    /// order; shared, a half-open instance's probe is asked of Redis, and probes taken are given
    /// back when a later instance refuses.
    ///
    /// # Errors
    /// The refusal, when an instance turned open or ran out of probes since [`Breakers::gate`].
    pub(crate) async fn admit(
        &self,
        gate: &Gate,
        now: Micros,
    ) -> Result<SmallVec<[(usize, BreakerStatus); 2]>, Refusal> {
        #[cfg(feature = "redis")]
        if self.hub.get().is_some() {
            return self.admit_shared(gate, now).await;
        }
        self.admit_local(gate, now)
    }

    fn admit_local(
        &self,
        gate: &Gate,
        now: Micros,
    ) -> Result<SmallVec<[(usize, BreakerStatus); 2]>, Refusal> {
        let armed = &gate.armed;
        let mut defs: SmallVec<[usize; 2]> = gate.hits.iter().map(|h| h.1).collect();
        defs.sort_unstable();
        defs.dedup();
        let mut changes: SmallVec<[(usize, String, Changes); 2]> = SmallVec::new();
        let result = {
            let mut guards: SmallVec<[(usize, Locked<'_>); 2]> =
                defs.iter().map(|&d| (d, armed.states[d].lock())).collect();
            let mut refused = None;
            for (h, (_, def, key)) in gate.hits.iter().enumerate() {
                let Some(inst) = held(&mut guards, *def, key) else {
                    continue;
                };
                let (look, c) = inst.look(now);
                changes.push((*def, key.clone(), c));
                if let Err(wait) = look {
                    refused = Some((h, wait));
                    break;
                }
            }
            match refused {
                Some((h, wait)) => {
                    let (descriptor, status) = gate.status(h, true, None);
                    Err(Refusal {
                        descriptor,
                        status,
                        retry_after: wait,
                    })
                }
                None => {
                    let mut out: SmallVec<[(usize, BreakerStatus); 2]> = SmallVec::new();
                    for (h, (_, def, key)) in gate.hits.iter().enumerate() {
                        // One call takes one probe of an instance, however many of its
                        // descriptors match it.
                        let earlier = gate.hits[..h]
                            .iter()
                            .position(|(_, d, k)| d == def && k == key);
                        let probe = match earlier {
                            Some(e) => out[e].1.probe,
                            None => match held(&mut guards, *def, key) {
                                None => None,
                                Some(inst) => {
                                    let (admit, t) = inst.breaker.admit(now);
                                    let c = inst.changes(t, now);
                                    changes.push((*def, key.clone(), c));
                                    match admit {
                                        Admit::Probe(lease) => Some(token(inst.id, lease)),
                                        Admit::Call | Admit::Refused { .. } => None,
                                    }
                                }
                            },
                        };
                        out.push(gate.status(h, false, probe));
                    }
                    Ok(out)
                }
            }
        };
        for (def, key, c) in &changes {
            self.emit(armed, *def, key, c);
        }
        result
    }

    /// [`Breakers::admit`] for shared breakers.
    #[cfg(feature = "redis")]
    async fn admit_shared(
        &self,
        gate: &Gate,
        now: Micros,
    ) -> Result<SmallVec<[(usize, BreakerStatus); 2]>, Refusal> {
        let Some(hub) = self.hub.get() else {
            return self.admit_local(gate, now);
        };
        let armed = &gate.armed;
        let mut out: SmallVec<[(usize, BreakerStatus); 2]> = SmallVec::new();
        for (h, (_, def, key)) in gate.hits.iter().enumerate() {
            let earlier = gate.hits[..h]
                .iter()
                .position(|(_, d, k)| d == def && k == key);
            let taken = match (earlier, armed.states[*def].shared()) {
                (Some(e), _) => Ok(out[e].1.probe),
                (None, Some(s)) if self.sharing() => {
                    if !gate.probe.get(h).copied().unwrap_or(true) {
                        Ok(None)
                    } else {
                        match hub.redis.probe(&s.breaker, key).await {
                            Ok(answer) => {
                                let mut changes = Changes::new();
                                let r = s.probed(key, answer, now, &mut changes);
                                self.emit(armed, *def, key, &changes);
                                r
                            }
                            Err(e) => {
                                hub.failed(&e);
                                self.admit_one_local(armed, *def, key, now)
                            }
                        }
                    }
                }
                (None, _) => self.admit_one_local(armed, *def, key, now),
            };
            match taken {
                Ok(probe) => out.push(gate.status(h, false, probe)),
                Err(wait) => {
                    // Give back the shared probes taken for this call: it does not go ahead.
                    for (i, (_, status)) in out.iter().enumerate() {
                        let (_, d, k) = &gate.hits[i];
                        if let (Some(lease), Some(s)) = (
                            status.probe.and_then(shared::shared_lease),
                            armed.states[*d].shared(),
                        ) {
                            let _ = hub.redis.cancel(&s.breaker, k, lease).await;
                        }
                    }
                    let (descriptor, status) = gate.status(h, true, None);
                    return Err(Refusal {
                        descriptor,
                        status,
                        retry_after: wait,
                    });
                }
            }
        }
        Ok(out)
    }

    /// One instance's admission by this process's breaker: the probe token, or the wait.
    #[cfg(feature = "redis")]
    fn admit_one_local(
        &self,
        armed: &Armed,
        def: usize,
        key: &str,
        now: Micros,
    ) -> Result<Option<u64>, Duration> {
        if let Some(wait) = armed.states[def]
            .shared()
            .and_then(|s| s.open_until(key, now))
        {
            return Err(wait);
        }
        let (answer, changes) = {
            let mut instances = armed.states[def].lock();
            let Some(inst) = instances.get_mut(key) else {
                return Ok(None);
            };
            let (admit, t) = inst.breaker.admit(now);
            let c = inst.changes(t, now);
            let answer = match admit {
                Admit::Call => Ok(None),
                Admit::Probe(lease) => Ok(Some(token(inst.id, lease))),
                Admit::Refused { retry_after } => Err(dur(retry_after.max(1))),
            };
            (answer, c)
        };
        self.emit(armed, def, key, &changes);
        answer
    }

    /// Reports a call's outcome to every breaker instance its descriptors match.
    pub(crate) fn report(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
        failed: bool,
        latency: Duration,
        probe: Option<u64>,
        now: Micros,
    ) -> Reported {
        let armed = self.armed.load_full();
        let mut out = Reported::default();
        let mut done: SmallVec<[(usize, String); 2]> = SmallVec::new();
        for d in descriptors {
            let Some((def, key)) = armed.set.find(domain, d) else {
                continue;
            };
            if done.iter().any(|(x, k)| *x == def && *k == key) {
                continue;
            }
            self.report_instance(&armed, def, &key, failed, latency, probe, now, &mut out);
            done.push((def, key));
        }
        out
    }

    /// Reports the outcome of a call admitted with `statuses` (the breakers that matched it).
    pub(crate) fn report_statuses<'a>(
        &self,
        statuses: impl Iterator<Item = &'a BreakerStatus>,
        failed: bool,
        latency: Duration,
        now: Micros,
    ) -> Reported {
        let armed = self.armed.load_full();
        let mut out = Reported::default();
        for s in statuses.filter(|s| !s.open) {
            let Some(&def) = armed.set.by_name.get(&(s.domain.clone(), s.name.clone())) else {
                continue;
            };
            self.report_instance(&armed, def, &s.key, failed, latency, s.probe, now, &mut out);
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn report_instance(
        &self,
        armed: &Armed,
        def: usize,
        key: &str,
        failed: bool,
        latency: Duration,
        probe: Option<u64>,
        now: Micros,
        out: &mut Reported,
    ) {
        let spec = &armed.set.defs[def].spec;
        let latency = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        // A shared breaker counts the report for Redis, and feeds its local fallback too, so
        // that it is warm; the fallback's changes are told only while it decides.
        #[cfg_attr(not(feature = "redis"), allow(unused_mut))]
        let mut tell = true;
        #[cfg(feature = "redis")]
        if let Some(s) = armed.states[def].shared() {
            if !s.count(key, spec.is_bad(failed, latency), probe) {
                out.dropped += 1;
                return;
            }
            tell = !self.sharing();
        }
        let changes = {
            let mut instances = armed.states[def].lock();
            if !instances.contains_key(key) && instances.len() >= MAX_INSTANCES {
                // Make room: closed instances with nothing in their window hold no state.
                instances.retain(|_, i| {
                    i.breaker.phase(now) != &Phase::Closed || i.breaker.window(now) != (0, 0)
                });
                if instances.len() >= MAX_INSTANCES {
                    out.dropped += 1;
                    return;
                }
            }
            let inst = instances
                .entry(key.to_owned())
                .or_insert_with(|| Instance::new(spec, now));
            let lease = probe.and_then(|p| lease_of(inst.id, p));
            let t = inst.breaker.report(now, lease, failed, latency);
            inst.changes(t, now)
        };
        out.counted += 1;
        if tell {
            self.emit(armed, def, key, &changes);
        }
    }

    /// Every instance not closed, and every closed one with calls in its window (up to
    /// [`MAX_VIEWS`], those not closed first, then those with the most bad calls); and per
    /// breaker, the instances not closed.
    pub(crate) fn views(&self, now: Micros) -> (Vec<BreakerView>, Vec<(BreakerDef, usize)>) {
        let armed = self.armed.load_full();
        let mut views = Vec::new();
        let mut counts = Vec::with_capacity(armed.set.defs.len());
        for (i, d) in armed.set.defs.iter().enumerate() {
            let mut all: Vec<(String, Changes)> = Vec::new();
            let mut mine: Vec<BreakerView> = Vec::new();
            #[cfg(feature = "redis")]
            let shared = armed.states[i].shared().filter(|_| self.sharing());
            #[cfg(not(feature = "redis"))]
            let shared: Option<()> = None;
            match shared {
                #[cfg(feature = "redis")]
                Some(s) => {
                    let (v, c) = s.views(d, now);
                    mine = v;
                    all = c;
                }
                #[cfg(not(feature = "redis"))]
                Some(()) => {}
                None => {
                    let mut instances = armed.states[i].lock();
                    for (key, inst) in instances.iter_mut() {
                        let (_, c) = inst.look(now);
                        if !c.is_empty() {
                            all.push((key.clone(), c));
                        }
                        if inst.phase != "closed" {
                            mine.push(inst.view(d, key, now));
                        }
                    }
                    let closed = instances
                        .iter()
                        .filter(|(_, inst)| inst.phase == "closed")
                        .filter_map(|(key, inst)| {
                            let (calls, bad) = inst.breaker.window(now);
                            (calls > 0).then_some(Closed {
                                key,
                                calls,
                                bad,
                                since: inst.since,
                            })
                        })
                        .collect();
                    mine.extend(Closed::shown(closed).map(|c| c.view(d, false)));
                }
            }
            for (key, c) in &all {
                self.emit(&armed, i, key, c);
            }
            counts.push((
                d.clone(),
                mine.iter().filter(|v| v.phase != "closed").count(),
            ));
            views.extend(mine);
        }
        views.sort_by(|a, b| {
            (a.phase == "closed")
                .cmp(&(b.phase == "closed"))
                .then_with(|| b.bad.cmp(&a.bad))
                .then_with(|| (&a.domain, &a.breaker, &a.key).cmp(&(&b.domain, &b.breaker, &b.key)))
        });
        views.truncate(MAX_VIEWS);
        (views, counts)
    }
}

/// The shared breakers' task: sends the reports counted every [`shared::FLUSH_EVERY`], and
/// reads every breaker's phases on a notification and every [`shared::READ_EVERY`]. Ends when
/// the limiter is dropped.
#[cfg(feature = "redis")]
async fn shared_task(
    armed: std::sync::Weak<ArcSwap<Armed>>,
    observer: Arc<parking_lot::RwLock<Option<Observer>>>,
    hub: Arc<shared::Hub>,
) {
    let notify = Arc::new(tokio::sync::Notify::new());
    // Subscribed once a breaker is in force (a node without breakers holds no subscription).
    let mut follower: Option<tokio::task::JoinHandle<()>> = None;
    let mut flush = tokio::time::interval(shared::FLUSH_EVERY);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut read = tokio::time::interval(shared::READ_EVERY);
    read.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let reading = tokio::select! {
            _ = flush.tick() => false,
            _ = read.tick() => true,
            () = notify.notified() => true,
        };
        let Some(armed) = armed.upgrade() else {
            break;
        };
        let armed = armed.load_full();
        if follower.is_none() && !armed.states.is_empty() {
            let (hub, notify) = (Arc::clone(&hub), Arc::clone(&notify));
            follower = Some(tokio::spawn(async move { hub.redis.follow(notify).await }));
        }
        let shared: Vec<(usize, &shared::SharedStates)> = armed
            .states
            .iter()
            .enumerate()
            .filter_map(|(i, states)| Some((i, states.shared()?)))
            .collect();
        // Every breaker's reports in one batch (one round trip on a single Redis).
        let batches: Vec<(usize, &shared::SharedStates, Vec<_>)> = shared
            .iter()
            .map(|(i, s)| (*i, *s, s.take()))
            .filter(|(_, _, r)| !r.is_empty())
            .collect();
        if !batches.is_empty() {
            let calls: Vec<_> = batches
                .iter()
                .map(|(_, s, r)| (&s.breaker, r.as_slice()))
                .collect();
            match hub.redis.report_many(&calls).await {
                Ok(answers) => {
                    hub.answered();
                    let now = hub.redis.now();
                    for ((i, s, reports), states) in batches.into_iter().zip(answers) {
                        let states: Vec<(String, _)> = reports
                            .into_iter()
                            .map(|r| r.instance)
                            .zip(states)
                            .collect();
                        for (key, c) in s.flushed(&states, now) {
                            emit(&observer, &armed, i, &key, &c);
                        }
                    }
                }
                Err(e) => {
                    let unsent: u64 = batches
                        .iter()
                        .flat_map(|(_, _, r)| r.iter())
                        .map(|r| r.calls + r.probes.len() as u64)
                        .sum();
                    hub.unsent.fetch_add(unsent, Ordering::Relaxed);
                    hub.failed(&e);
                }
            }
        }
        if reading && !shared.is_empty() {
            let breakers: Vec<_> = shared.iter().map(|(_, s)| &s.breaker).collect();
            match hub.redis.read_many(&breakers).await {
                Ok(all) => {
                    hub.answered();
                    let now = hub.redis.now();
                    for ((i, s), phases) in shared.iter().zip(all) {
                        for (key, c) in s.read(phases, now) {
                            emit(&observer, &armed, *i, &key, &c);
                        }
                    }
                }
                Err(e) => hub.failed(&e),
            }
        }
    }
    if let Some(f) = follower {
        f.abort();
    }
}

/// The instance `key` of breaker `def` among the locked breakers.
fn held<'g>(
    guards: &'g mut [(usize, Locked<'_>)],
    def: usize,
    key: &str,
) -> Option<&'g mut Instance> {
    guards
        .iter_mut()
        .find(|(d, _)| *d == def)
        .and_then(|(_, g)| g.get_mut(key))
}

fn event(def: &BreakerDef, key: &str, from: &'static str, to: &'static str) -> BreakerEvent {
    BreakerEvent {
        domain: def.domain.clone(),
        breaker: def.name.clone(),
        key: key.to_owned(),
        from,
        to,
    }
}
