//! A decision against the rules, as a sequence of named steps: match (each item's state key
//! formatted once), the limits in force (schedules at one instant, adaptive counts), the store's
//! items in their roles, the store's answer (or the failure policies'), the trials apart, and
//! the statuses.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use flowgate_core::clock::Micros;
use flowgate_core::ruleset::Matched;
use flowgate_core::store::{Decisions, admitted};
use flowgate_core::{Decision, FailurePolicy, Item, Limit, Request, Store, StoreError};
use smallvec::SmallVec;

use super::Limiter;
use super::recorded::PendingRecord;
use crate::verdict::{Status, Verdict};
use flowgate_core::reservation::Reservation;

/// How an item of a request takes part in its verdict.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Rejects the request when over its limit.
    Enforce,
    /// Evaluated, never rejects (shadow mode).
    Shadow,
    /// Rejects the request only with every other quota-mode item of the request.
    Quota,
}

/// Whether items in `roles` with `decisions` admit the request: every enforced item admits, and
/// if there are quota-mode items, at least one of them does.
pub(super) fn verdict_of(roles: &[Role], decisions: &[Decision]) -> bool {
    let mut quota = (0, 0);
    for (r, d) in roles.iter().zip(decisions) {
        match r {
            Role::Enforce if !d.allowed => return false,
            Role::Quota => quota = (quota.0 + 1, quota.1 + usize::from(d.allowed)),
            _ => {}
        }
    }
    quota.0 == 0 || quota.1 > 0
}

/// The matched rules of a request, one per descriptor that has one.
pub(super) type AllMatched<'r> = SmallVec<[Matched<'r>; 4]>;

/// Each matched rule's limit in force (`None`: unlimited now).
pub(super) type InForce<'l> = SmallVec<[Option<&'l Limit>; 4]>;

/// What the store is asked: one item per matched rule with a limit in force, with its role and
/// its failure policy.
pub(super) struct Batch<'a> {
    pub(super) items: SmallVec<[Item<'a>; 4]>,
    pub(super) roles: SmallVec<[Role; 4]>,
    policies: SmallVec<[FailurePolicy; 4]>,
}

/// The store's answer to a batch: each item's decision, the error when the failure policies
/// decided, and whether the request is admitted.
pub(super) struct Answer {
    pub(super) decisions: Decisions,
    pub(super) error: Option<StoreError>,
    pub(super) allowed: bool,
}

/// The rules' trial limits: each on a state of its own (its key with `~trial` appended) and
/// never rejecting, by descriptor.
type Trials<'l> = SmallVec<[(usize, String, &'l Limit, u64); 2]>;

/// One status per descriptor of `request`, unlimited until a rule decides.
fn unlimited(request: &Request) -> Vec<Status> {
    request
        .descriptors
        .iter()
        .map(|_| Status::unlimited(None))
        .collect()
}

/// Each matched rule's limit in force at `now`: an adaptive rule's key's own (`adapted`), else
/// the rule's (its schedule's at `now`).
fn in_force<'l, 'r: 'l>(
    matched: &AllMatched<'r>,
    adapted: &'l [Option<Limit>],
    now: Micros,
) -> InForce<'l> {
    if adapted.is_empty() {
        return matched.iter().map(|m| m.rule.limit_at(now)).collect();
    }
    matched
        .iter()
        .zip(adapted)
        .map(|(m, a)| a.as_ref().or(m.rule.limit_at(now)))
        .collect()
}

/// The trial limits of the matched rules that have a limit in force.
fn trials<'l>(matched: &AllMatched<'l>, in_force: &InForce<'_>) -> Trials<'l> {
    matched
        .iter()
        .zip(in_force)
        .filter_map(|(m, limit)| {
            let trial = m.rule.trial.as_ref()?;
            limit.map(|_| (m.descriptor, format!("{}~trial", m.key), trial, m.cost))
        })
        .collect()
}

impl<'a> Batch<'a> {
    /// The items of `matched` with a limit in force; each matched rule's status takes its rule
    /// and whether it is in quota mode (the limiter's `global_quota`, or its own).
    fn of<'l: 'a>(
        matched: &'a AllMatched<'_>,
        in_force: &InForce<'l>,
        statuses: &mut [Status],
        global_quota: bool,
    ) -> Self {
        let mut batch = Batch {
            items: SmallVec::new(),
            roles: SmallVec::new(),
            policies: SmallVec::new(),
        };
        for (m, limit) in matched.iter().zip(in_force) {
            let s = &mut statuses[m.descriptor];
            s.rule = Some(Arc::clone(m.rule));
            s.quota = !m.rule.shadow && (global_quota || m.rule.quota_mode);
            if let Some(limit) = *limit {
                batch.policies.push(m.rule.failure);
                batch.items.push(Item {
                    key: &m.key,
                    limit,
                    cost: m.cost,
                    enforce: !m.rule.shadow,
                });
                batch.roles.push(match (m.rule.shadow, s.quota) {
                    (true, _) => Role::Shadow,
                    (false, true) => Role::Quota,
                    (false, false) => Role::Enforce,
                });
            }
        }
        batch
    }
}

impl<S: Store> Limiter<S> {
    /// Decides a request against the rules in the store. `now`: the instant the request's
    /// breakers were looked at, if they were (a scheduled rule's limit is then the one in
    /// force at that instant, and the clock is not read again).
    pub(super) async fn decide(&self, request: &Request, now: Option<Micros>) -> Verdict {
        self.decide_recording(request, now, None).await.0
    }

    /// [`Limiter::decide`], writing `pending`'s record with the decision when the store can
    /// ([`Store::decide_recorded`]); answers the record written, if it was.
    pub(super) async fn decide_recording(
        &self,
        request: &Request,
        now: Option<Micros>,
        pending: Option<&PendingRecord>,
    ) -> (Verdict, Option<Reservation>) {
        let rules = self.rules.load();
        let matched = rules.resolve(request);
        let mut statuses = unlimited(request);
        let now = now.unwrap_or_else(|| self.now_for(&matched));
        let adapted = self.adapted(&matched, now);
        let in_force = in_force(&matched, &adapted, now);
        let trials = trials(&matched, &in_force);
        let global_quota = self.global_quota.load(Ordering::Relaxed);
        let batch = Batch::of(&matched, &in_force, &mut statuses, global_quota);
        if batch.items.is_empty() {
            let verdict = Verdict {
                allowed: true,
                statuses,
                wait: Duration::ZERO,
                shadowed: false,
            };
            return (verdict, None);
        }
        let record = pending.and_then(|p| p.record(&matched, &in_force, &batch.roles));
        let (answer, recorded) = match record {
            Some((record, forget_at)) => self.ask_recorded(&batch, record, forget_at).await,
            None => (self.ask(&batch).await, None),
        };
        let trial_rejected = self.ask_trials(&trials).await;
        drop(batch);
        drop(trials);
        let allowed = answer.allowed;
        let wait = self.settle(&mut statuses, matched, in_force, answer);
        for (descriptor, rejected) in trial_rejected {
            statuses[descriptor].trial_rejected = rejected;
        }
        let shadowed = !allowed && self.global_shadow.load(Ordering::Relaxed);
        let verdict = Verdict {
            allowed: allowed || shadowed,
            statuses,
            wait,
            shadowed,
        };
        (verdict, recorded)
    }

    /// The instant the limits in force are read at: a scheduled rule's at the store's clock, so
    /// that every node on one store switches at the same instant; without one, the clock is not
    /// read.
    fn now_for(&self, matched: &AllMatched<'_>) -> Micros {
        if matched.iter().any(|m| m.rule.schedule.is_some()) {
            self.store.now()
        } else {
            0
        }
    }

    /// An adaptive rule's limit: the rule's own with its key's count. A `Vec`, empty and
    /// unallocated without an adaptive rule: a limit is large, and a future holding four inline
    /// would be moved on every request.
    fn adapted(&self, matched: &AllMatched<'_>, now: Micros) -> Vec<Option<Limit>> {
        if !matched.iter().any(|m| m.rule.adaptive.is_some()) {
            return Vec::new();
        }
        matched
            .iter()
            .map(|m| {
                let spec = m.rule.adaptive.as_ref()?;
                let base = m.rule.limit_at(now)?;
                self.adaptive
                    .limit(&m.rule.domain, &m.rule.name, spec, &m.key, base)
            })
            .collect()
    }

    /// The store's decisions for `batch`, all or nothing; when the store fails, each rule's
    /// failure policy decides. With quota-mode items, a request refused only by some of them is
    /// decided again without those, as quota mode admits it then.
    async fn ask(&self, batch: &Batch<'_>) -> Answer {
        let (mut decisions, error): (Decisions, _) = match self.store.decide(&batch.items).await {
            Ok(d) => (d, None),
            Err(e) => (self.on_failure(batch, &e).into(), Some(e)),
        };
        let mut allowed = admitted(&batch.items, &decisions);
        if !allowed && error.is_none() && verdict_of(&batch.roles, &decisions) {
            // The store took nothing: some quota-mode item is over its limit, but another is
            // not. Decide again without the exhausted ones, all or nothing as ever.
            let keep: SmallVec<[usize; 4]> = (0..batch.items.len())
                .filter(|&i| batch.roles[i] != Role::Quota || decisions[i].allowed)
                .collect();
            let again: SmallVec<[Item<'_>; 4]> = keep.iter().map(|&i| batch.items[i]).collect();
            if let Ok(second) = self.store.decide(&again).await {
                allowed = admitted(&again, &second);
                for (&i, d) in keep.iter().zip(second) {
                    decisions[i] = d;
                }
            }
        } else if !allowed {
            allowed = error.is_some() && verdict_of(&batch.roles, &decisions);
        }
        Answer {
            decisions,
            error,
            allowed,
        }
    }

    /// Whether each trial limit would have rejected its descriptor, in a batch of their own
    /// (what a trial would reject does not depend on what the rules did). A store that fails
    /// counts no would-be rejection.
    async fn ask_trials(&self, trials: &Trials<'_>) -> SmallVec<[(usize, bool); 2]> {
        if trials.is_empty() {
            return SmallVec::new();
        }
        let items: SmallVec<[Item<'_>; 2]> = trials
            .iter()
            .map(|(_, key, limit, cost)| Item {
                key,
                limit,
                cost: *cost,
                enforce: false,
            })
            .collect();
        match self.store.decide(&items).await {
            Ok(ds) => trials
                .iter()
                .zip(ds)
                .map(|((descriptor, ..), d)| (*descriptor, !d.allowed))
                .collect(),
            Err(_) => SmallVec::new(),
        }
    }

    /// Moves each limited rule's key, limit and decision to its status (the matched rules with
    /// a limit in force are the batch's items, in order), tells the adaptive limits the calls
    /// in flight the store saw, and answers the longest wait of an admitted request.
    fn settle(
        &self,
        statuses: &mut [Status],
        matched: AllMatched<'_>,
        in_force: InForce<'_>,
        answer: Answer,
    ) -> Duration {
        let Answer {
            decisions,
            error,
            allowed,
        } = answer;
        let mut wait = Duration::ZERO;
        let limited = matched
            .into_iter()
            .zip(in_force)
            .filter_map(|(m, l)| Some((m, l?.clone())));
        for ((m, limit), d) in limited.zip(decisions) {
            if allowed {
                wait = wait.max(d.wait);
            }
            if m.rule.adaptive.is_some() && error.is_none() {
                // The calls in flight the store saw: held after this one if the request went
                // ahead, held without it otherwise.
                let held = d.limit.saturating_sub(d.remaining);
                let held = if d.allowed && !allowed {
                    held.saturating_sub(m.cost)
                } else {
                    held
                };
                self.adaptive.decided(&m.key, held);
            }
            let s = &mut statuses[m.descriptor];
            s.key = m.key;
            s.limit = Some(limit);
            s.decision = d;
            s.error.clone_from(&error);
        }
        wait
    }

    /// Decides the items of a failed store call by each rule's failure policy.
    pub(super) fn on_failure(&self, batch: &Batch<'_>, error: &StoreError) -> Vec<Decision> {
        let (items, policies) = (&batch.items, &batch.policies);
        // Per call at debug level: under an outage this runs for every request. The store says
        // once, at warn level, when it becomes degraded and when it recovers.
        tracing::debug!(%error, "store failed; failure policies decide");
        let by_policy = |d: &FailurePolicy, item: &Item<'_>| {
            let mut dec = Decision::UNLIMITED;
            dec.limit = item.limit.limit();
            dec.remaining = item.limit.limit();
            if *d == FailurePolicy::Closed && item.cost > 0 {
                dec.allowed = false;
                dec.remaining = 0;
            }
            dec
        };
        let mut out: Vec<Decision> = items
            .iter()
            .zip(policies)
            .map(|(i, p)| by_policy(p, i))
            .collect();
        let closed_blocks = items.iter().zip(&out).any(|(i, d)| i.enforce && !d.allowed);
        let local: Vec<usize> = (0..items.len())
            .filter(|&i| matches!(policies[i], FailurePolicy::Local { .. }))
            .collect();
        if !closed_blocks && !local.is_empty() {
            let shares: Vec<_> = local
                .iter()
                .map(|&i| match policies[i] {
                    FailurePolicy::Local { nodes } => items[i].limit.divided(nodes),
                    _ => items[i].limit.clone(),
                })
                .collect();
            let local_items: Vec<Item<'_>> = local
                .iter()
                .zip(&shares)
                .map(|(&i, l)| Item {
                    limit: l,
                    ..items[i]
                })
                .collect();
            match self.fallback.decide_now(&local_items) {
                Ok(ds) => {
                    for (&i, d) in local.iter().zip(ds) {
                        out[i] = d;
                    }
                }
                Err(_) => {
                    // The fallback is full: the local rules fail closed.
                    for &i in &local {
                        out[i] = by_policy(&FailurePolicy::Closed, &items[i]);
                    }
                }
            }
        }
        out
    }
}
