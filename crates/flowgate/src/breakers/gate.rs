//! A request's passage through the breakers: a look before the store (no probe taken), and the
//! admission after it, which takes a probe of each half-open instance, all or nothing.

use std::sync::Arc;
use std::time::Duration;

use flowgate_core::Request;
use flowgate_core::clock::Micros;
use smallvec::SmallVec;

use super::event::Changes;
use super::instance::{Instance, Locked};
use super::registry::{Armed, Registry};

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
        let d = self.armed.def(*def);
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

    /// The refusal by hit `h`, to retry after `wait`.
    fn refusal(&self, h: usize, wait: Duration) -> Refusal {
        let (descriptor, status) = self.status(h, true, None);
        Refusal {
            descriptor,
            status,
            retry_after: wait,
        }
    }

    /// The place of an earlier hit on the same instance as hit `h`: one call takes one probe of
    /// an instance, however many of its descriptors match it.
    fn earlier(&self, h: usize) -> Option<usize> {
        let (_, def, key) = &self.hits[h];
        self.hits[..h]
            .iter()
            .position(|(_, d, k)| d == def && k == key)
    }
}

/// A refusal by a breaker: the descriptor's status and the time to wait.
pub(crate) struct Refusal {
    pub(crate) descriptor: usize,
    pub(crate) status: BreakerStatus,
    pub(crate) retry_after: Duration,
}

/// The statuses of the breakers that admitted a request, by descriptor.
pub(crate) type Admitted = SmallVec<[(usize, BreakerStatus); 2]>;

impl Registry {
    /// The breakers `request` matches, and whether one refuses it now (without taking a probe).
    pub(crate) fn gate(&self, request: &Request, now: Micros) -> (Gate, Option<Refusal>) {
        let armed = self.inner.armed.load_full();
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
            self.inner.emit(&gate.armed, *def, key, &changes);
            if let Err(wait) = look {
                refusal = Some(gate.refusal(h, wait));
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
            if self.inner.sharing() {
                return s.look(key, now);
            }
            // Redis unreachable: the last known opening lasts; otherwise the local breaker.
            if let Some(wait) = s.open_until(key, now) {
                return (Err(wait), Changes::new(), false);
            }
        }
        let (look, changes) = armed.states[def].local().look(key, now);
        (look, changes, false)
    }

    /// Admits a request the store admitted: takes a probe of each half-open instance, all or
    /// nothing. Per process, the instances' locks are held together, taken in the breakers'
    /// order; shared, a half-open instance's probe is asked of Redis, and probes taken are given
    /// back when a later instance refuses.
    ///
    /// # Errors
    /// The refusal, when an instance turned open or ran out of probes since [`Registry::gate`].
    pub(crate) async fn admit(&self, gate: &Gate, now: Micros) -> Result<Admitted, Refusal> {
        #[cfg(feature = "redis")]
        if let Some(redis) = self.inner.redis.get() {
            return self.admit_shared(redis, gate, now).await;
        }
        self.admit_local(gate, now)
    }

    fn admit_local(&self, gate: &Gate, now: Micros) -> Result<Admitted, Refusal> {
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
                    refused = Some(gate.refusal(h, wait));
                    break;
                }
            }
            match refused {
                Some(r) => Err(r),
                None => {
                    let mut out = Admitted::new();
                    for (h, (_, def, key)) in gate.hits.iter().enumerate() {
                        let probe = match gate.earlier(h) {
                            Some(e) => out[e].1.probe,
                            None => held(&mut guards, *def, key).and_then(|inst| {
                                // Every instance let it go ahead under these locks: a refusal
                                // cannot come now.
                                let (answer, c) = inst.admit(now);
                                changes.push((*def, key.clone(), c));
                                answer.ok().flatten()
                            }),
                        };
                        out.push(gate.status(h, false, probe));
                    }
                    Ok(out)
                }
            }
        };
        for (def, key, c) in &changes {
            self.inner.emit(armed, *def, key, c);
        }
        result
    }

    /// [`Registry::admit`] for shared breakers.
    #[cfg(feature = "redis")]
    async fn admit_shared(
        &self,
        redis: &flowgate_redis::breakers::RedisBreakers,
        gate: &Gate,
        now: Micros,
    ) -> Result<Admitted, Refusal> {
        let armed = &gate.armed;
        let mut out = Admitted::new();
        for (h, (_, def, key)) in gate.hits.iter().enumerate() {
            let taken = match (gate.earlier(h), armed.states[*def].shared()) {
                (Some(e), _) => Ok(out[e].1.probe),
                (None, Some(s)) if self.inner.sharing() => {
                    if !gate.probe.get(h).copied().unwrap_or(true) {
                        Ok(None)
                    } else {
                        match redis.probe(&s.breaker, key).await {
                            Ok(answer) => {
                                let mut changes = Changes::new();
                                let r = s.probed(key, answer, now, &mut changes);
                                self.inner.emit(armed, *def, key, &changes);
                                r
                            }
                            Err(e) => {
                                self.inner.link.fall_back(&e);
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
                            status.probe.and_then(super::shared::shared_lease),
                            armed.states[*d].shared(),
                        ) {
                            let _ = redis.cancel(&s.breaker, k, lease).await;
                        }
                    }
                    return Err(gate.refusal(h, wait));
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
        let (answer, changes) = armed.states[def].local().admit(key, now);
        self.inner.emit(armed, def, key, &changes);
        answer
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
