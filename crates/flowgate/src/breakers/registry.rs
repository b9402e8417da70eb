//! The limiter's breakers: the set in force, swapped whole, each breaker's instances, and what
//! reports and views do with them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use flowgate_core::Descriptor;
use flowgate_core::clock::Micros;
use parking_lot::RwLock;
use smallvec::SmallVec;

use super::event::{Changes, Observer, emit};
use super::instance::{LocalStates, Locked};
use super::view::{self, BreakerView};
use super::{BreakerDef, BreakerSet, BreakerStatus, Reported};
use crate::link::{Link, Subject};

#[cfg(feature = "redis")]
use super::shared::SharedStates;

/// Where a breaker's instances live: this process ([`States::Local`]), or Redis, read through
/// this node's cache, with this process's instances as the fallback ([`States::Shared`]).
#[derive(Debug)]
pub(super) enum States {
    /// This process's instances.
    Local(LocalStates),
    /// The cluster's, through Redis.
    #[cfg(feature = "redis")]
    Shared(Box<SharedStates>),
}

impl States {
    /// This process's instances (a shared breaker's fallback).
    pub(super) fn local(&self) -> &LocalStates {
        match self {
            States::Local(l) => l,
            #[cfg(feature = "redis")]
            States::Shared(s) => &s.local,
        }
    }

    /// This process's instances, locked.
    pub(super) fn lock(&self) -> Locked<'_> {
        self.local().lock()
    }

    /// The cluster's copy, when shared.
    #[cfg(feature = "redis")]
    pub(super) fn shared(&self) -> Option<&SharedStates> {
        match self {
            States::Shared(s) => Some(s),
            States::Local(_) => None,
        }
    }
}

/// The breakers in force and their states.
pub(super) struct Armed {
    pub(super) set: BreakerSet,
    pub(super) states: Vec<Arc<States>>,
}

impl Armed {
    /// Breaker `def`'s definition.
    pub(super) fn def(&self, def: usize) -> &BreakerDef {
        &self.set.defs()[def]
    }
}

/// What the limiter and the sharing task hold (the task through a weak reference).
pub(super) struct Inner {
    pub(super) armed: ArcSwap<Armed>,
    observer: RwLock<Option<Observer>>,
    pub(super) link: Link,
    /// The calls to Redis, once shared.
    #[cfg(feature = "redis")]
    pub(super) redis: std::sync::OnceLock<flowgate_redis::breakers::RedisBreakers>,
}

impl Inner {
    /// Tells the observer (and the log) of instance `key` of breaker `def`'s changes of phase.
    pub(super) fn emit(&self, armed: &Armed, def: usize, key: &str, changes: &Changes) {
        emit(&self.observer, armed.def(def), key, changes);
    }

    /// Whether shared breakers decide by the cluster's state now (Redis answers).
    #[cfg(feature = "redis")]
    #[inline]
    pub(super) fn sharing(&self) -> bool {
        self.link.sharing()
    }
}

/// The limiter's breakers.
pub(crate) struct Registry {
    on: AtomicBool,
    pub(super) inner: Arc<Inner>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            on: AtomicBool::new(false),
            inner: Arc::new(Inner {
                armed: ArcSwap::from_pointee(Armed {
                    set: BreakerSet::default(),
                    states: Vec::new(),
                }),
                observer: RwLock::new(None),
                link: Link::new(Subject::Breakers),
                #[cfg(feature = "redis")]
                redis: std::sync::OnceLock::new(),
            }),
        }
    }
}

impl Registry {
    /// Whether any breaker is declared (one atomic read: the whole cost without breakers).
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The link to Redis (per process until shared).
    pub(crate) fn link(&self) -> &Link {
        &self.inner.link
    }

    /// The states of a breaker newly in force.
    fn fresh(&self, def: &BreakerDef) -> Arc<States> {
        #[cfg(feature = "redis")]
        if self.inner.link.shared().is_some() {
            return Arc::new(States::Shared(Box::new(SharedStates::new(def))));
        }
        let _ = def;
        Arc::new(States::Local(LocalStates::default()))
    }

    /// Puts `set` in force. A breaker whose definition (domain, name, pattern, parameters) is
    /// unchanged keeps its instances; any other starts closed.
    pub(crate) fn set(&self, set: BreakerSet) {
        let old = self.inner.armed.load_full();
        let states = set
            .defs()
            .iter()
            .map(|d| {
                old.set
                    .index_of(&d.domain, &d.name)
                    .filter(|&j| old.def(j) == d)
                    .map_or_else(|| self.fresh(d), |j| Arc::clone(&old.states[j]))
            })
            .collect();
        let on = !set.is_empty();
        self.inner.armed.store(Arc::new(Armed { set, states }));
        self.on.store(on, Ordering::Relaxed);
    }

    /// The breakers in force.
    pub(crate) fn defs(&self) -> Vec<BreakerDef> {
        self.inner.armed.load().set.defs().to_vec()
    }

    /// Calls `f` on every transition from now on (after the breaker's lock is released).
    pub(crate) fn observe(&self, f: Observer) {
        *self.inner.observer.write() = Some(f);
    }

    /// Shares every breaker through `store`'s Redis from now on, this node named `node` (their
    /// instances start from the cluster's state), and starts the task that sends reports and
    /// reads the phases, on the current Tokio runtime (without one, the breakers stay per
    /// process and a warning says so). Once only: later calls change nothing.
    #[cfg(feature = "redis")]
    pub(crate) fn share(&self, store: &flowgate_redis::RedisStore, node: &str) {
        // Before the connection is made: it needs the runtime too.
        let Some(rt) = crate::link::runtime(Subject::Breakers) else {
            return;
        };
        let redis = flowgate_redis::breakers::RedisBreakers::new(store, node);
        if self.inner.redis.set(redis.clone()).is_err() {
            return;
        }
        let generation = self.inner.link.begin();
        let old = self.inner.armed.load_full();
        let states = old.set.defs().iter().map(|d| self.fresh(d)).collect();
        self.inner.armed.store(Arc::new(Armed {
            set: BreakerSet::new(old.set.defs().to_vec()).unwrap_or_default(),
            states,
        }));
        rt.spawn(crate::link::run(
            Arc::downgrade(&self.inner),
            redis,
            generation,
        ));
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
        let armed = self.inner.armed.load_full();
        let mut out = Reported::default();
        let mut done: SmallVec<[(usize, String); 2]> = SmallVec::new();
        for d in descriptors {
            let Some((def, key)) = armed.set.find(domain, d) else {
                continue;
            };
            if done.iter().any(|(x, k)| *x == def && *k == key) {
                continue;
            }
            let call = Call {
                failed,
                latency,
                probe,
            };
            self.report_instance(&armed, def, &key, call, now, &mut out);
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
        let armed = self.inner.armed.load_full();
        let mut out = Reported::default();
        for s in statuses.filter(|s| !s.open) {
            let Some(def) = armed.set.index_of(&s.domain, &s.name) else {
                continue;
            };
            let call = Call {
                failed,
                latency,
                probe: s.probe,
            };
            self.report_instance(&armed, def, &s.key, call, now, &mut out);
        }
        out
    }

    fn report_instance(
        &self,
        armed: &Armed,
        def: usize,
        key: &str,
        call: Call,
        now: Micros,
        out: &mut Reported,
    ) {
        let spec = &armed.def(def).spec;
        let latency = u64::try_from(call.latency.as_micros()).unwrap_or(u64::MAX);
        // A shared breaker queues the report for Redis, and feeds its local fallback too, so
        // that it is warm; the fallback's changes are told only while it decides.
        #[cfg_attr(not(feature = "redis"), allow(unused_mut))]
        let mut tell = true;
        #[cfg(feature = "redis")]
        if let Some(s) = armed.states[def].shared() {
            if !s.count(key, spec.is_bad(call.failed, latency), call.probe) {
                out.dropped += 1;
                return;
            }
            tell = !self.inner.sharing();
        }
        let local = armed.states[def].local();
        let Some(changes) = local.report(spec, key, (call.failed, latency), call.probe, now) else {
            out.dropped += 1;
            return;
        };
        out.counted += 1;
        if tell {
            self.inner.emit(armed, def, key, &changes);
        }
    }

    /// Every instance not closed, and every closed one with calls in its window (up to
    /// [`super::MAX_VIEWS`], those not closed first, then those with the most bad calls); and
    /// per breaker, the instances not closed.
    pub(crate) fn views(&self, now: Micros) -> (Vec<BreakerView>, Vec<(BreakerDef, usize)>) {
        let armed = self.inner.armed.load_full();
        let mut views = Vec::new();
        let mut counts = Vec::with_capacity(armed.states.len());
        for (i, d) in armed.set.defs().iter().enumerate() {
            let (mine, changed) = self.views_of(&armed, i, now);
            for (key, c) in &changed {
                self.inner.emit(&armed, i, key, c);
            }
            let not_closed = mine.iter().filter(|v| !v.is_closed()).count();
            counts.push((d.clone(), not_closed));
            views.extend(mine);
        }
        (view::shown(views), counts)
    }

    /// Breaker `def`'s instances worth showing, by the states in force (the cluster's copy
    /// while shared and Redis answers, else this process's), and the changes of phase seen.
    fn views_of(
        &self,
        armed: &Armed,
        def: usize,
        now: Micros,
    ) -> (Vec<BreakerView>, Vec<(String, Changes)>) {
        #[cfg(feature = "redis")]
        if let Some(s) = armed.states[def].shared().filter(|_| self.inner.sharing()) {
            return s.views(armed.def(def), now);
        }
        armed.states[def].local().views(armed.def(def), now)
    }
}

/// A reported call: whether it failed, its latency, and the probe lease it was admitted with.
#[derive(Clone, Copy)]
struct Call {
    failed: bool,
    latency: Duration,
    probe: Option<u64>,
}
