//! A breaker instance in this process: the pure state machine of [`flowgate_core::breaker`], the
//! phase it was last seen in, and its identity in probe tokens; and one breaker's instances.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use flowgate_core::breaker::{Admit, Breaker, BreakerSpec, Phase, State, Transition};
use flowgate_core::clock::Micros;
use parking_lot::{Mutex, MutexGuard};

use super::event::Changes;
use super::view::{BreakerView, Closed};
use super::{BreakerDef, MAX_INSTANCES};

/// A breaker's instances by key (foldhash, as the Redis client's maps: SipHash showed in the
/// profile of a node taking reports; the seed is random per map).
pub(super) type ByKey<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// One instance: its state machine, the phase it was last seen in and since when, and its
/// identity in probe tokens.
#[derive(Debug)]
pub(super) struct Instance {
    breaker: Breaker,
    phase: Phase,
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

/// The time from `now` until `at`.
pub(super) fn until(at: Micros, now: Micros) -> Duration {
    Duration::from_micros(at.saturating_sub(now))
}

/// The time to wait from `now` until `at`, at least a microsecond.
pub(super) fn wait(at: Micros, now: Micros) -> Duration {
    Duration::from_micros(at.saturating_sub(now).max(1))
}

impl Instance {
    fn new(spec: &BreakerSpec, now: Micros) -> Self {
        Self {
            breaker: Breaker::new(spec.clone()),
            phase: Phase::Closed,
            since: now,
            id: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The changes since the phase last seen, given the transition an operation answered.
    fn changes(&mut self, t: Option<Transition>, now: Micros) -> Changes {
        let current = self.breaker.state(now).phase();
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
    pub(super) fn look(&mut self, now: Micros) -> (Result<(), Duration>, Changes) {
        let probes = self.breaker.spec().probes();
        let look = match self.breaker.state(now) {
            State::Closed => Ok(()),
            State::Open { until, .. } => Err(wait(*until, now)),
            State::HalfOpen {
                leases, succeeded, ..
            } => {
                if (leases.len() as u32).saturating_add(*succeeded) < probes {
                    Ok(())
                } else {
                    let first = leases.iter().map(|l| l.1).min().unwrap_or(now + 1);
                    Err(wait(first, now))
                }
            }
        };
        (look, self.changes(None, now))
    }

    /// Admits a call: `Ok` with its probe token when it goes ahead as a probe, `Err` with the
    /// time to wait when refused.
    pub(super) fn admit(&mut self, now: Micros) -> (Result<Option<u64>, Duration>, Changes) {
        let (admit, t) = self.breaker.admit(now);
        let answer = match admit {
            Admit::Call => Ok(None),
            Admit::Probe(lease) => Ok(Some(token(self.id, lease))),
            Admit::Refused { retry_after } => Err(Duration::from_micros(retry_after.max(1))),
        };
        (answer, self.changes(t, now))
    }

    fn view(&mut self, def: &BreakerDef, key: &str, now: Micros) -> BreakerView {
        let (calls, bad) = self.breaker.window(now);
        let state = self.breaker.state(now);
        let (retry_after, probes_out) = match state {
            State::Closed => (None, 0),
            State::Open { until: at, .. } => (Some(until(*at, now)), 0),
            State::HalfOpen { leases, .. } => (
                leases.iter().map(|l| l.1).min().map(|d| until(d, now)),
                leases.len() as u32,
            ),
        };
        BreakerView {
            domain: def.domain.clone(),
            breaker: def.name.clone(),
            key: key.to_owned(),
            phase: state.phase(),
            since: self.since,
            calls,
            bad,
            retry_after,
            probes_out,
            opened: state.opened(),
            shared: false,
        }
    }
}

/// The instances of one breaker, locked.
pub(super) type Locked<'a> = MutexGuard<'a, ByKey<Instance>>;

/// The instances of one breaker, in this process.
#[derive(Debug, Default)]
pub(super) struct LocalStates {
    instances: Mutex<ByKey<Instance>>,
}

impl LocalStates {
    pub(super) fn lock(&self) -> Locked<'_> {
        self.instances.lock()
    }

    /// Whether instance `key` lets a call go ahead now, without a probe; `Err` is the time to
    /// wait.
    pub(super) fn look(&self, key: &str, now: Micros) -> (Result<(), Duration>, Changes) {
        match self.instances.lock().get_mut(key) {
            None => (Ok(()), Changes::new()),
            Some(inst) => inst.look(now),
        }
    }

    /// Admits a call to instance `key` (none yet: closed): its probe token, or the wait.
    #[cfg(feature = "redis")]
    pub(super) fn admit(&self, key: &str, now: Micros) -> (Result<Option<u64>, Duration>, Changes) {
        match self.instances.lock().get_mut(key) {
            None => (Ok(None), Changes::new()),
            Some(inst) => inst.admit(now),
        }
    }

    /// Feeds a call's outcome to instance `key`, made as needed; `None` when it could not be
    /// kept ([`MAX_INSTANCES`] hold state).
    pub(super) fn report(
        &self,
        spec: &BreakerSpec,
        key: &str,
        (failed, latency): (bool, Micros),
        probe: Option<u64>,
        now: Micros,
    ) -> Option<Changes> {
        let mut instances = self.instances.lock();
        if !instances.contains_key(key) {
            if instances.len() >= MAX_INSTANCES {
                // Make room: closed instances with nothing in their window hold no state.
                instances.retain(|_, i| {
                    i.breaker.state(now) != &State::Closed || i.breaker.window(now) != (0, 0)
                });
                if instances.len() >= MAX_INSTANCES {
                    return None;
                }
            }
            instances.insert(key.to_owned(), Instance::new(spec, now));
        }
        let inst = instances.get_mut(key)?;
        let lease = probe.and_then(|p| lease_of(inst.id, p));
        let t = inst.breaker.report(now, lease, failed, latency);
        Some(inst.changes(t, now))
    }

    /// Starts the instances `keys` afresh (closed, empty).
    #[cfg(feature = "redis")]
    pub(super) fn restart<'k>(&self, keys: impl Iterator<Item = &'k str>) {
        let mut instances = self.instances.lock();
        for key in keys {
            instances.remove(key);
        }
    }

    /// The instances worth showing: every one not closed, and the closed ones with calls in
    /// their window (at most [`super::MAX_VIEWS`] of those); and the changes of phase seen.
    pub(super) fn views(
        &self,
        def: &BreakerDef,
        now: Micros,
    ) -> (Vec<BreakerView>, Vec<(String, Changes)>) {
        let mut views = Vec::new();
        let mut changed = Vec::new();
        let mut instances = self.instances.lock();
        for (key, inst) in instances.iter_mut() {
            let (_, c) = inst.look(now);
            if !c.is_empty() {
                changed.push((key.clone(), c));
            }
            if inst.phase != Phase::Closed {
                views.push(inst.view(def, key, now));
            }
        }
        let closed = instances
            .iter()
            .filter(|(_, inst)| inst.phase == Phase::Closed)
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
        views.extend(Closed::shown(closed).map(|c| c.view(def, false)));
        (views, changed)
    }
}
