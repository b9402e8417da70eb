//! The limiter: rules + store, and the failure policies; a decision's steps are in `decide.rs`.

use std::sync::Arc;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arc_swap::ArcSwap;
use flowgate_core::{Descriptor, MemoryStore, Request, RuleSet, Store, StoreError};
use smallvec::SmallVec;

use crate::adaptive::{self, Adaptive};
use crate::breakers::{self, Breakers, Outcome, Refusal, Reported};
use crate::permit::{LeaseRef, Permit};
use crate::verdict::{Status, Verdict};

mod charge;
mod decide;
mod recorded;
mod reserve;

pub use recorded::PendingRecord;
pub use reserve::{BadShare, DEFAULT_RESERVE_SHARE, ReserveError};

pub use charge::{ChargeRefusal, ChargeTarget};

/// Decides requests against a set of rules, in a store.
///
/// Cheap to share: wrap it in an [`Arc`] (the tower layer and [`Limiter::acquire`] do). Rules are
/// swapped atomically with [`Limiter::set_rules`]; a request in flight finishes under the rules
/// it started with.
///
/// When the store fails (Redis slow or gone), each rule's
/// [`FailurePolicy`](crate::FailurePolicy) decides: `open` admits, `closed` rejects, `local`
/// decides in this process's memory with the limit divided among the nodes. The verdict's statuses carry the store error so callers can count it.
pub struct Limiter<S: Store = MemoryStore> {
    rules: ArcSwap<RuleSet>,
    store: S,
    fallback: MemoryStore,
    /// Every rule in shadow mode: over the limit, requests are still admitted (Envoy's global
    /// `SHADOW_MODE`).
    global_shadow: AtomicBool,
    /// Every rule in quota mode (Envoy's global `QUOTA_MODE`).
    global_quota: AtomicBool,
    /// The circuit breakers, consulted before the store.
    breakers: breakers::Registry,
    /// Whether some rule in force has an adaptive limit (reports look for it only then).
    any_adaptive: AtomicBool,
    /// The adaptive concurrency limits, per key.
    adaptive: adaptive::Registry,
    /// The share of a rule's limit one reservation may take, as `f64` bits.
    reserve_share: AtomicU64,
    /// Whether some rule in force has `charge = "report"`.
    any_report: AtomicBool,
}

fn any_adaptive(rules: &RuleSet) -> bool {
    rules.rules().iter().any(|r| r.adaptive.is_some())
}

fn any_report(rules: &RuleSet) -> bool {
    rules
        .rules()
        .iter()
        .any(|r| r.charge == flowgate_core::ChargeMode::Report)
}

/// The verdict of a request refused by an open circuit breaker: no rule was asked.
fn circuit_open(request: &Request, r: Refusal) -> Verdict {
    let mut statuses: Vec<Status> = request
        .descriptors
        .iter()
        .map(|_| Status::unlimited(None))
        .collect();
    statuses[r.descriptor] = Status::circuit_open(r.status, r.retry_after);
    Verdict {
        allowed: false,
        statuses,
        wait: std::time::Duration::ZERO,
        shadowed: false,
    }
}

impl<S: Store> Limiter<S> {
    /// A limiter over `rules` in `store`.
    pub fn new(rules: RuleSet, store: S) -> Self {
        Self {
            any_adaptive: AtomicBool::new(any_adaptive(&rules)),
            any_report: AtomicBool::new(any_report(&rules)),
            adaptive: adaptive::Registry::default(),
            rules: ArcSwap::from_pointee(rules),
            store,
            fallback: MemoryStore::new(),
            global_shadow: AtomicBool::new(false),
            global_quota: AtomicBool::new(false),
            breakers: breakers::Registry::default(),
            reserve_share: AtomicU64::new(reserve::DEFAULT_RESERVE_SHARE.to_bits()),
        }
    }

    /// The circuit breakers: set them, share them through Redis, watch their transitions and
    /// their instances ([`crate::breakers`]).
    pub fn breakers(&self) -> Breakers<'_, S> {
        Breakers::new(&self.breakers, &self.store)
    }

    /// The adaptive concurrency limits: share them through Redis, read them per key
    /// ([`crate::adaptive`]).
    pub fn adaptive(&self) -> Adaptive<'_> {
        Adaptive::new(&self.adaptive)
    }

    /// Reports a protected call's outcome and latency to the circuit breakers its descriptors
    /// match in `domain`, and to the adaptive limit of the `concurrency` rule each matches;
    /// `probe` is the lease it was admitted with as a half-open breaker's probe
    /// ([`crate::breakers::BreakerStatus::probe`]). Never waits: each state is a short lock.
    /// Answers how many breaker instances and adaptive limits counted it (none: nothing
    /// matched).
    pub fn report(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
        outcome: Outcome,
        latency: std::time::Duration,
        probe: Option<u64>,
    ) -> Reported {
        let failed = outcome == Outcome::Error;
        let mut out = if self.breakers.on() {
            self.breakers.report(
                domain,
                descriptors,
                failed,
                latency,
                probe,
                self.store.now(),
            )
        } else {
            Reported::default()
        };
        if self.any_adaptive.load(Ordering::Relaxed) {
            let rules = self.rules.load();
            let mut done: SmallVec<[String; 2]> = SmallVec::new();
            for d in descriptors {
                let Some(rule) = rules.find(domain, d) else {
                    continue;
                };
                let Some(spec) = &rule.adaptive else {
                    continue;
                };
                let key = flowgate_core::ruleset::rule_state_key(domain, rule, d);
                if done.contains(&key) {
                    continue;
                }
                self.adapt(domain, &rule.name, spec, &key, failed, latency, &mut out);
                done.push(key);
            }
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn adapt(
        &self,
        domain: &str,
        rule: &str,
        spec: &flowgate_core::adaptive::AimdSpec,
        key: &str,
        failed: bool,
        latency: std::time::Duration,
        out: &mut Reported,
    ) {
        if self
            .adaptive
            .report(domain, rule, spec, key, failed, latency)
        {
            out.adaptive += 1;
        } else {
            out.dropped += 1;
        }
    }

    /// Reports the outcome of a call admitted by `verdict` to the breakers that admitted it.
    pub(crate) fn report_verdict(
        &self,
        verdict: &Verdict,
        outcome: Outcome,
        latency: std::time::Duration,
    ) -> Reported {
        let failed = outcome == Outcome::Error;
        let mut out = if self.breakers.on() {
            self.breakers.report_statuses(
                verdict.statuses.iter().filter_map(|s| s.breaker.as_ref()),
                failed,
                latency,
                self.store.now(),
            )
        } else {
            Reported::default()
        };
        for s in &verdict.statuses {
            let Some(rule) = &s.rule else { continue };
            let Some(spec) = &rule.adaptive else {
                continue;
            };
            if s.decision.lease.is_some() {
                self.adapt(
                    &rule.domain,
                    &rule.name,
                    spec,
                    &s.key,
                    failed,
                    latency,
                    &mut out,
                );
            }
        }
        out
    }

    /// Global shadow mode: requests over a limit are still admitted (their statuses still say
    /// over limit, and the state evolves as if they had been rejected: they take nothing).
    pub fn set_global_shadow(&self, on: bool) {
        self.global_shadow.store(on, Ordering::Relaxed);
    }

    /// Global quota mode: every rule is in quota mode (see [`flowgate_core::Rule::quota_mode`]).
    pub fn set_global_quota(&self, on: bool) {
        self.global_quota.store(on, Ordering::Relaxed);
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The memory store that rules with the `local` failure policy fall back to.
    pub fn fallback_store(&self) -> &MemoryStore {
        &self.fallback
    }

    /// Whether some rule in force takes a request's cost as a charge (`charge = "report"`,
    /// [`flowgate_core::ChargeMode::Report`]): one relaxed load, for front ends that look for
    /// such rules only then.
    pub fn any_report_rule(&self) -> bool {
        self.any_report.load(Ordering::Relaxed)
    }

    /// The rules in force.
    pub fn rules(&self) -> Arc<RuleSet> {
        self.rules.load_full()
    }

    /// Replaces the rules, atomically. Counters of rules whose state key is unchanged carry on.
    pub fn set_rules(&self, rules: RuleSet) {
        self.any_adaptive
            .store(any_adaptive(&rules), Ordering::Relaxed);
        self.any_report.store(any_report(&rules), Ordering::Relaxed);
        self.rules.store(Arc::new(rules));
    }

    /// Decides a request and records it if admitted.
    ///
    /// In `delay` mode the verdict's `wait` is how long the caller must wait before proceeding
    /// (use [`Limiter::acquire`] to have it waited). `concurrency` rules grant leases that must be
    /// released with [`Limiter::release`] (or use [`Limiter::acquire`], whose permit releases
    /// them on drop).
    ///
    /// Each call spends one unit of the task's Tokio budget, as a socket read would: a decision
    /// answered in process (memory store, blocked-keys cache) completes without waiting, and a
    /// task deciding in a loop would otherwise never hand its thread back to the runtime.
    ///
    /// With circuit breakers: a request matching an open breaker (or a half-open one with no
    /// probe free) is refused without asking the store, its status saying which breaker
    /// ([`Verdict::circuit_open`]); a request the store admits takes a probe of each half-open
    /// breaker it matches (its status holds the lease to report with).
    pub async fn check(&self, request: &Request) -> Verdict {
        tokio::task::consume_budget().await;
        if !self.breakers.on() {
            return self.decide(request, None).await;
        }
        // One instant for the whole decision: the breakers' look and admission, the rules'
        // schedules.
        let now = self.store.now();
        let (gate, refusal) = self.breakers.gate(request, now);
        if gate.is_empty() {
            return self.decide(request, Some(now)).await;
        }
        if let Some(r) = refusal {
            return circuit_open(request, r);
        }
        let mut verdict = self.decide(request, Some(now)).await;
        if !verdict.allowed {
            return verdict;
        }
        // Boxed: the admission's future is about 1.4 KB, which every decision's future would
        // otherwise carry, with breakers or without.
        match Box::pin(self.breakers.admit(&gate, now)).await {
            Ok(admitted) => {
                for (descriptor, status) in admitted {
                    verdict.statuses[descriptor].breaker = Some(status);
                }
                verdict
            }
            Err(r) => {
                // A breaker opened between the look and the admission: the store counted the
                // request, which does not go ahead; its concurrency leases are given back.
                for s in &verdict.statuses {
                    if let (Some(lease), Some(limit)) = (s.decision.lease, &s.limit) {
                        let _ = self.release_key(&s.key, limit, lease).await;
                    }
                }
                circuit_open(request, r)
            }
        }
    }

    /// Decides a request and, when admitted, waits for its slot (`delay` mode) before returning
    /// a [`Permit`] that releases its `concurrency` leases when dropped.
    ///
    /// # Errors
    /// The rejecting [`Verdict`] when the request is not admitted.
    ///
    /// # Cancel safety
    /// Dropping the future while it waits gives up the wait but not the reserved slot (the slot
    /// is already counted, as a sent request would be); leases are released.
    pub async fn acquire(self: &Arc<Self>, request: &Request) -> Result<Permit<S>, Verdict> {
        let verdict = self.check(request).await;
        if !verdict.allowed {
            return Err(verdict);
        }
        let leases: Vec<LeaseRef> = verdict
            .statuses
            .iter()
            .filter_map(|s| {
                let lease = s.decision.lease?;
                let limit = s.limit.clone()?;
                Some(LeaseRef {
                    key: s.key.clone(),
                    limit,
                    lease,
                })
            })
            .collect();
        let permit = Permit::new(Arc::clone(self), verdict, leases);
        if !permit.verdict().wait.is_zero() {
            tokio::time::sleep(permit.verdict().wait).await;
        }
        Ok(permit)
    }

    /// Releases a `concurrency` lease granted to `descriptor` in `domain`; answers whether it was
    /// held (false when unknown, expired, or already released).
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be reached.
    pub async fn release(
        &self,
        domain: &str,
        descriptor: &Descriptor,
        lease: u64,
    ) -> Result<bool, StoreError> {
        let rules = self.rules.load();
        let Some(rule) = rules.find(domain, descriptor) else {
            return Ok(false);
        };
        // The limit in force, or the rule's own when a schedule makes it unlimited now (a lease
        // taken before is released all the same: leases are kept whatever the limit).
        let Some(limit) = rule.limit_at(self.store.now()).or(rule.limit.as_ref()) else {
            return Ok(false);
        };
        // The rule's counter: one shared by every value of a `share_threshold` entry.
        let key = flowgate_core::ruleset::rule_state_key(domain, rule, descriptor);
        self.release_key(&key, limit, lease).await
    }

    pub(crate) async fn release_key(
        &self,
        key: &str,
        limit: &flowgate_core::Limit,
        lease: u64,
    ) -> Result<bool, StoreError> {
        let released = self.store.release(key, limit, lease).await?;
        if released {
            self.adaptive.released(key);
        }
        Ok(released)
    }
}
