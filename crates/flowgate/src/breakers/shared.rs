//! Breakers shared by a cluster through Redis ([`flowgate_redis::breakers`]), answering the
//! three objections to a shared breaker:
//!
//! - **No round trip added to a decision.** A check reads this node's cached copy of each
//!   instance's phase. Only a call that finds an instance half-open asks Redis, for a probe
//!   lease, so that exactly `probes` calls go ahead across the cluster; once every probe is out,
//!   the node refuses locally until the first lease's deadline.
//! - **Reports in batches, each transition decided once.** Reports are counted here and sent
//!   every 20 ms, one script call per breaker (chunked); the script decides the transitions
//!   atomically and publishes them. Every node reads the breaker's phases again on the message,
//!   and every second in any case.
//! - **Redis unreachable is not a new failure mode.** When a flush, a read or a probe fails,
//!   the node decides on a local breaker fed with its own reports (fed all along, restarted at
//!   each of the cluster's transitions, so it holds this node's reports since then), keeping an
//!   instance refused while its last known opening lasts, and says so: a warning once,
//!   [`BreakerView::shared`] false, [`super::Breakers::shared`]. A batch that could not be sent,
//!   and the reports queued while Redis is unreachable, are dropped (and counted,
//!   [`super::Breakers::unsent`]): replayed later, old failures would count as new ones. The
//!   next read that succeeds shares again.
//!
//! The queue, the flushes, the reads, the fallback and the unsent count are the engine every
//! shared state uses ([`crate::link`]); this module is the breakers' side of it: this node's
//! copy of each instance's phase ([`SharedStates`]) and the [`Side`] that sends and reads.
//!
//! One bad node cannot open a breaker for all with `min_nodes`: the script opens it only when
//! that many nodes saw bad calls in the window.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use flowgate_core::StoreError;
use flowgate_core::breaker::Phase;
use flowgate_core::clock::Micros;
use flowgate_redis::breakers::{
    InstanceReport, InstanceState, OpenInstance, ProbeAnswer, RedisBreakers, SharedBreaker,
    SharedPhase,
};
use parking_lot::Mutex;

use super::event::Changes;
use super::instance::{ByKey, LocalStates, wait};
use super::registry::{Armed, Inner};
use super::view::{BreakerView, Closed};
use super::{BreakerDef, MAX_INSTANCES};
use crate::link::{Follower, Link, Read, Side, Unsent};

/// The most probe reports of one instance kept between two flushes.
const MAX_PROBE_REPORTS: usize = 1_024;

/// A shared probe token: this bit set, and the Redis lease (local tokens never set it).
const SHARED_TOKEN: u64 = 1 << 63;

/// The Redis lease of a shared probe token.
pub(super) fn shared_lease(token: u64) -> Option<u64> {
    (token & SHARED_TOKEN != 0).then_some(token & !SHARED_TOKEN)
}

/// This node's copy of an instance's shared state.
#[derive(Debug)]
struct Cached {
    phase: SharedPhase,
    /// The phase last seen (so a change is told once).
    seen: Phase,
    since: Micros,
    /// Half-open with every probe out: refused locally until then.
    busy_until: Micros,
    /// The window's calls and bad calls at the last flush answer (closed).
    calls: u64,
    bad: u64,
    /// The cluster's probe leases held (half-open), at the last answer or read.
    probes_out: u32,
}

impl Cached {
    fn new(now: Micros) -> Self {
        Self {
            phase: SharedPhase::Closed,
            seen: Phase::Closed,
            since: now,
            busy_until: 0,
            calls: 0,
            bad: 0,
            probes_out: 0,
        }
    }

    /// Takes `phase` with `probes_out` probe leases held, answering the change of phase seen,
    /// if any; `not_closed` counts the instances not closed.
    fn set(
        &mut self,
        phase: SharedPhase,
        probes_out: u32,
        now: Micros,
        changes: &mut Changes,
        not_closed: &AtomicUsize,
    ) {
        self.probes_out = probes_out;
        if std::mem::discriminant(&phase) != std::mem::discriminant(&self.phase)
            || matches!(phase, SharedPhase::Open { .. })
        {
            self.busy_until = 0;
        }
        match (
            self.phase == SharedPhase::Closed,
            phase == SharedPhase::Closed,
        ) {
            (true, false) => {
                not_closed.fetch_add(1, Ordering::Relaxed);
            }
            (false, true) => {
                not_closed.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        self.phase = phase;
        self.seen(now, changes);
    }

    fn seen(&mut self, now: Micros, changes: &mut Changes) {
        let current = self.phase.phase(now);
        if current != self.seen {
            changes.push((self.seen, current));
            self.seen = current;
            self.since = now;
        }
    }
}

/// One shared breaker on this node: its cached phases, the reports not sent yet, and the local
/// breaker decided on when Redis is unreachable.
pub(super) struct SharedStates {
    pub(super) breaker: SharedBreaker,
    cache: Mutex<ByKey<Cached>>,
    /// How many cached instances are not closed: while none is, a check needs no lookup.
    not_closed: AtomicUsize,
    pending: Mutex<ByKey<InstanceReport>>,
    pub(super) local: LocalStates,
}

impl std::fmt::Debug for SharedStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStates")
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

impl SharedStates {
    pub(super) fn new(def: &BreakerDef) -> Self {
        Self {
            breaker: SharedBreaker::new(
                &def.domain,
                &def.name,
                &def.pattern_text(),
                def.spec.clone(),
                def.min_nodes.unwrap_or(1),
            ),
            cache: Mutex::new(ByKey::default()),
            not_closed: AtomicUsize::new(0),
            pending: Mutex::new(ByKey::default()),
            local: LocalStates::default(),
        }
    }

    /// Whether a call may go ahead by the cached phase (no I/O); `Err` is the time to wait.
    /// Half-open with a probe possibly free answers `Ok`, and `true` last: the admission asks
    /// Redis for a probe.
    pub(super) fn look(&self, key: &str, now: Micros) -> (Result<(), Duration>, Changes, bool) {
        let mut changes = Changes::new();
        if self.not_closed.load(Ordering::Relaxed) == 0 {
            return (Ok(()), changes, false);
        }
        let mut cache = self.cache.lock();
        let Some(c) = cache.get_mut(key) else {
            return (Ok(()), changes, false);
        };
        c.seen(now, &mut changes);
        let look = match c.phase {
            SharedPhase::Closed => Ok(()),
            SharedPhase::Open { until, .. } if now < until => Err(wait(until, now)),
            _ if c.busy_until > now => Err(wait(c.busy_until, now)),
            _ => Ok(()),
        };
        let probe = c.phase != SharedPhase::Closed;
        (look, changes, probe)
    }

    /// The last known opening of `key`, if it still lasts: kept while Redis is unreachable.
    pub(super) fn open_until(&self, key: &str, now: Micros) -> Option<Duration> {
        match self.cache.lock().get(key)?.phase {
            SharedPhase::Open { until, .. } if now < until => Some(wait(until, now)),
            _ => None,
        }
    }

    /// Takes Redis's answer to a probe request for `key` (the answer, the phase after it and
    /// the probe leases held): `Ok` with the probe token, if one was taken, or `Err` with the
    /// time to wait.
    pub(super) fn probed(
        &self,
        key: &str,
        (answer, phase, probes_out): (ProbeAnswer, SharedPhase, u32),
        now: Micros,
        changes: &mut Changes,
    ) -> Result<Option<u64>, Duration> {
        let mut cache = self.cache.lock();
        let c = cache
            .entry(key.to_owned())
            .or_insert_with(|| Cached::new(now));
        let before = changes.len();
        c.set(phase, probes_out, now, changes, &self.not_closed);
        if changes.len() > before {
            self.local.restart(std::iter::once(key));
        }
        match answer {
            ProbeAnswer::Call => Ok(None),
            ProbeAnswer::Probe(lease) => Ok(Some(SHARED_TOKEN | lease)),
            ProbeAnswer::Refused { retry_after } => {
                if !matches!(phase, SharedPhase::Open { .. }) {
                    c.busy_until = now.saturating_add(retry_after);
                }
                Err(Duration::from_micros(retry_after.max(1)))
            }
        }
    }

    /// Counts a report to send; `probe` is a token from [`SharedStates::probed`] or a local one.
    /// Answers whether it was kept (an instance past the caps is not).
    pub(super) fn count(&self, key: &str, bad: bool, probe: Option<u64>) -> bool {
        let mut pending = self.pending.lock();
        if !pending.contains_key(key) && pending.len() >= MAX_INSTANCES {
            return false;
        }
        let r = pending
            .entry(key.to_owned())
            .or_insert_with(|| InstanceReport {
                instance: key.to_owned(),
                ..InstanceReport::default()
            });
        match probe {
            Some(token) if token & SHARED_TOKEN != 0 => {
                if r.probes.len() >= MAX_PROBE_REPORTS {
                    return false;
                }
                r.probes.push((token & !SHARED_TOKEN, bad));
            }
            _ => {
                r.calls += 1;
                r.bad += u64::from(bad);
            }
        }
        true
    }

    /// The reports counted since the last call.
    pub(super) fn take(&self) -> Vec<InstanceReport> {
        self.pending.lock().drain().map(|(_, r)| r).collect()
    }

    /// Takes a flush's answers: each instance's state after the batch.
    pub(super) fn flushed(
        &self,
        states: &[(String, InstanceState)],
        now: Micros,
    ) -> Vec<(String, Changes)> {
        let mut out = Vec::new();
        let mut cache = self.cache.lock();
        for (key, s) in states {
            if !cache.contains_key(key)
                && s.phase == SharedPhase::Closed
                && cache.len() >= MAX_INSTANCES
            {
                continue;
            }
            let c = cache.entry(key.clone()).or_insert_with(|| Cached::new(now));
            let mut changes = Changes::new();
            c.set(s.phase, s.probes_out, now, &mut changes, &self.not_closed);
            c.calls = s.calls;
            c.bad = s.bad;
            if !changes.is_empty() {
                out.push((key.clone(), changes));
            }
        }
        drop(cache);
        self.restart_local(&out);
        out
    }

    /// Restarts the local fallback of each instance whose cluster phase changed: from then on
    /// it holds this node's reports since the cluster's last transition.
    fn restart_local(&self, changed: &[(String, Changes)]) {
        if !changed.is_empty() {
            self.local
                .restart(changed.iter().map(|(key, _)| key.as_str()));
        }
    }

    /// Takes a read of the instances not closed: every other cached instance is closed.
    pub(super) fn read(&self, phases: Vec<OpenInstance>, now: Micros) -> Vec<(String, Changes)> {
        let mut phases: HashMap<String, (SharedPhase, u32)> = phases
            .into_iter()
            .map(|i| (i.instance, (i.phase, i.probes_out)))
            .collect();
        let mut out = Vec::new();
        let mut cache = self.cache.lock();
        for (key, c) in cache.iter_mut() {
            let (phase, probes_out) = phases.remove(key).unwrap_or((SharedPhase::Closed, 0));
            let mut changes = Changes::new();
            c.set(phase, probes_out, now, &mut changes, &self.not_closed);
            if !changes.is_empty() {
                out.push((key.clone(), changes));
            }
        }
        for (key, (phase, probes_out)) in phases {
            if cache.len() >= MAX_INSTANCES {
                // Keep room for the cluster's opened instances: drop closed idle ones.
                cache.retain(|_, c| c.phase != SharedPhase::Closed || c.calls > 0);
                if cache.len() >= MAX_INSTANCES {
                    break;
                }
            }
            let mut c = Cached::new(now);
            let mut changes = Changes::new();
            c.set(phase, probes_out, now, &mut changes, &self.not_closed);
            cache.insert(key.clone(), c);
            if !changes.is_empty() {
                out.push((key, changes));
            }
        }
        drop(cache);
        self.restart_local(&out);
        out
    }

    /// The cached instances worth showing (not closed, or with calls in the window: at most
    /// [`super::MAX_VIEWS`] of those).
    pub(super) fn views(
        &self,
        def: &BreakerDef,
        now: Micros,
    ) -> (Vec<BreakerView>, Vec<(String, Changes)>) {
        let mut views = Vec::new();
        let mut all = Vec::new();
        let mut cache = self.cache.lock();
        for (key, c) in cache.iter_mut() {
            let mut changes = Changes::new();
            c.seen(now, &mut changes);
            if !changes.is_empty() {
                all.push((key.clone(), changes));
            }
            let phase = c.phase.phase(now);
            if phase == Phase::Closed {
                continue;
            }
            let retry_after = match c.phase {
                SharedPhase::Open { until, .. } if now < until => Some(wait(until, now)),
                _ if c.busy_until > now => Some(wait(c.busy_until, now)),
                _ => None,
            };
            views.push(BreakerView {
                domain: def.domain.clone(),
                breaker: def.name.clone(),
                key: key.clone(),
                phase,
                since: c.since,
                calls: 0,
                bad: 0,
                retry_after,
                probes_out: if phase == Phase::HalfOpen {
                    c.probes_out
                } else {
                    0
                },
                opened: c.phase.opened(),
                shared: true,
            });
        }
        let closed = cache
            .iter()
            .filter(|(_, c)| c.seen == Phase::Closed && c.calls > 0)
            .map(|(key, c)| Closed {
                key,
                calls: c.calls,
                bad: c.bad,
                since: c.since,
            })
            .collect();
        views.extend(Closed::shown(closed).map(|c| c.view(def, true)));
        (views, all)
    }
}

/// A turn's reports: each shared breaker's, with its place among the breakers in force.
pub(super) struct Batch {
    armed: std::sync::Arc<Armed>,
    reports: Vec<(usize, Vec<InstanceReport>)>,
}

impl Batch {
    /// The shared breakers' reports, aligned with their states.
    fn shared(&self) -> impl Iterator<Item = (usize, &SharedStates, &[InstanceReport])> {
        self.reports
            .iter()
            .filter_map(|(i, r)| Some((*i, self.armed.states[*i].shared()?, r.as_slice())))
    }

    /// How many reports it holds (a probe's report is one, as a call's).
    fn len(&self) -> u64 {
        self.reports
            .iter()
            .flat_map(|(_, r)| r.iter())
            .map(|r| r.calls + r.probes.len() as u64)
            .sum()
    }
}

/// The breakers' side of the engine: every shared breaker's reports in one batch (one round
/// trip on a single Redis), every breaker's phases in one read.
impl Side for Inner {
    type Redis = RedisBreakers;
    type Batch = Batch;

    fn link(&self) -> &Link {
        &self.link
    }

    fn take(&self) -> (Batch, u64) {
        let armed = self.armed.load_full();
        let reports = armed
            .states
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let r = s.shared()?.take();
                (!r.is_empty()).then_some((i, r))
            })
            .collect();
        let batch = Batch { armed, reports };
        let n = batch.len();
        (batch, n)
    }

    async fn flush(&self, redis: &RedisBreakers, batch: Batch) -> Result<(), Unsent> {
        let shared: Vec<_> = batch.shared().collect();
        let calls: Vec<(&SharedBreaker, &[InstanceReport])> =
            shared.iter().map(|(_, s, r)| (&s.breaker, *r)).collect();
        match redis.report_many(&calls).await {
            Ok(answers) => {
                let now = redis.now();
                for ((i, s, reports), states) in shared.into_iter().zip(answers) {
                    let states: Vec<(String, InstanceState)> = reports
                        .iter()
                        .map(|r| r.instance.clone())
                        .zip(states)
                        .collect();
                    for (key, c) in s.flushed(&states, now) {
                        self.emit(&batch.armed, i, &key, &c);
                    }
                }
                Ok(())
            }
            Err(error) => Err(Unsent {
                error,
                reports: batch.len(),
            }),
        }
    }

    async fn read(&self, redis: &RedisBreakers, what: Read) -> Result<bool, StoreError> {
        if what == Read::New {
            // A breaker's read is whole: its instances not closed.
            return Ok(false);
        }
        let armed = self.armed.load_full();
        let shared: Vec<(usize, &SharedStates)> = armed
            .states
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.shared()?)))
            .collect();
        if shared.is_empty() {
            return Ok(false);
        }
        let breakers: Vec<&SharedBreaker> = shared.iter().map(|(_, s)| &s.breaker).collect();
        let all = redis.read_many(&breakers).await?;
        let now = redis.now();
        for ((i, s), phases) in shared.iter().zip(all) {
            for (key, c) in s.read(phases, now) {
                self.emit(&armed, *i, &key, &c);
            }
        }
        Ok(true)
    }

    /// The transitions published by every node, subscribed once a breaker is in force (a node
    /// without breakers holds no subscription).
    fn follow(&self, redis: &RedisBreakers) -> Option<Follower> {
        if self.armed.load().states.is_empty() {
            return None;
        }
        let (redis, wake) = (redis.clone(), std::sync::Arc::clone(self.link.wake()));
        Some(Box::pin(async move { redis.follow(wake).await }))
    }
}
