//! [`Reservation`]: an estimate taken by [`Limiter::reserve`], committed with the actual cost.

use std::sync::Arc;
use std::time::Duration;

use flowgate_core::algorithm::{Amount, Charged};
use flowgate_core::clock::Micros;
use flowgate_core::{ChargeItem, Decision, Limit, MemoryStore, Rule, Store, StoreError};
use smallvec::SmallVec;

use crate::breakers::{Outcome, Reported};
use crate::limiter::Limiter;
use crate::verdict::Verdict;

/// What a reservation holds under one rule.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub(crate) rule: Arc<Rule>,
    pub(crate) key: String,
    pub(crate) limit: Limit,
    /// The units the store took (the estimate, or 0 where it took nothing).
    pub(crate) reserved: u64,
    /// The store's instant when they were taken.
    pub(crate) taken: Micros,
}

/// An estimate taken by [`Limiter::reserve`], held until the work's actual cost is known.
///
/// [`commit`](Reservation::commit) gives the estimate back and charges the actual cost, in one
/// batch: an actual cost over the estimate is counted even past the limit, up to the rule's
/// `max_debt` (docs/algorithms.md, "Charges, debt and refunds"), and the requests after it are
/// refused until time pays the debt back; one under it leaves the difference to others.
/// [`cancel`](Reservation::cancel) commits 0 (the work did not run).
///
/// **Dropped without a commit, a reservation commits its estimate**: the work most likely ran
/// (a stream cut short, a handler that returned early or panicked), its cost is unknown, and
/// the estimate is the best figure; committing 0 would let failing requests spend without
/// limit. The commit runs on a task spawned on the Tokio runtime of the thread that drops it;
/// without one (or if that task fails) the estimate simply stays counted where it was taken,
/// and a warning is logged.
#[must_use = "a reservation dropped at once commits its estimate; commit the actual cost"]
pub struct Reservation<S: Store = MemoryStore> {
    limiter: Arc<Limiter<S>>,
    verdict: Verdict,
    held: Vec<Held>,
    estimate: u64,
    reported: bool,
}

/// What a commit did under one rule.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RuleCommit {
    /// The rule.
    pub rule: Arc<Rule>,
    /// The state key it counts under.
    pub key: String,
    /// Units of the estimate given back (those the store took and that still counted).
    pub given_back: u64,
    /// Units of the actual cost counted.
    pub applied: u64,
    /// Units of the actual cost past the rule's `max_debt`, not counted.
    pub dropped: u64,
    /// Units counted beyond the limit after the commit.
    pub debt: u64,
    /// What a check of cost 0 is told now: not allowed while the key is over its limit (in
    /// debt), `retry_after` when it no longer is; `remaining` and `reset_after` as for a check.
    pub decision: Decision,
}

impl RuleCommit {
    /// Whether the key is over its limit after the commit: the next requests are refused.
    pub fn over(&self) -> bool {
        !self.decision.allowed
    }
}

/// What [`Reservation::commit`] did, one entry per rule the reservation held.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Committed {
    /// Per rule, in the order of the request's descriptors.
    pub rules: Vec<RuleCommit>,
}

impl Committed {
    /// The entry with the fewest units remaining (the one a client's headers should show).
    pub fn binding(&self) -> Option<&RuleCommit> {
        self.rules.iter().min_by_key(|r| r.decision.remaining)
    }
}

impl<S: Store> Reservation<S> {
    pub(crate) fn new(
        limiter: Arc<Limiter<S>>,
        verdict: Verdict,
        held: Vec<Held>,
        estimate: u64,
    ) -> Self {
        Self {
            limiter,
            verdict,
            held,
            estimate,
            reported: false,
        }
    }

    /// The verdict that admitted the reservation (its statuses: each rule's limit and what
    /// remained after the estimate was taken, for the answer's headers).
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    /// The estimate reserved.
    pub fn estimate(&self) -> u64 {
        self.estimate
    }

    /// Reports the call's outcome and latency to the circuit breakers the request matched,
    /// once (a second report is ignored), as [`crate::Permit::report`]. Never waits.
    pub fn report(&mut self, ok: bool, latency: Duration) -> Reported {
        if std::mem::replace(&mut self.reported, true) {
            return Reported::default();
        }
        let outcome = if ok { Outcome::Ok } else { Outcome::Error };
        self.limiter.report_verdict(&self.verdict, outcome, latency)
    }

    /// Commits the actual cost: under each rule, gives back the estimate (as far as it still
    /// counts: [`Amount::release`]) and charges `actual`, all rules in one store batch.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot apply the batch; nothing was applied then, and the
    /// estimate stays counted where it was taken (as a dropped reservation's would).
    pub async fn commit(mut self, actual: u64) -> Result<Committed, StoreError> {
        let held = std::mem::take(&mut self.held);
        commit(&self.limiter, &held, actual).await
    }

    /// Commits `actual` on a task of its own, for code that cannot wait (a response body's
    /// poll, a `Drop`): spawned on the current Tokio runtime; without one, the commit is not
    /// applied, the estimate stays counted where it was taken, and a warning is logged. A
    /// failed commit is logged.
    pub fn commit_later(mut self, actual: u64) {
        let held = std::mem::take(&mut self.held);
        if !held.is_empty() {
            spawn_commit(Arc::clone(&self.limiter), held, actual);
        }
    }

    /// Cancels the reservation: commits 0 (the work did not run; the estimate is given back).
    ///
    /// # Errors
    /// As [`Reservation::commit`].
    pub async fn cancel(self) -> Result<Committed, StoreError> {
        self.commit(0).await
    }
}

impl<S: Store> std::fmt::Debug for Reservation<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("estimate", &self.estimate)
            .field("held", &self.held)
            .field("verdict", &self.verdict)
            .finish_non_exhaustive()
    }
}

impl<S: Store> Drop for Reservation<S> {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let held = std::mem::take(&mut self.held);
        tracing::debug!(
            estimate = self.estimate,
            "reservation dropped uncommitted: committing its estimate"
        );
        spawn_commit(Arc::clone(&self.limiter), held, self.estimate);
    }
}

/// Commits `actual` on a task of the current Tokio runtime; without one, logs that the
/// estimate stays counted where it was taken.
fn spawn_commit<S: Store>(limiter: Arc<Limiter<S>>, held: Vec<Held>, actual: u64) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            actual,
            "reservation committed outside a Tokio runtime: not applied, its estimate stays counted where it was taken"
        );
        return;
    };
    runtime.spawn(async move {
        if let Err(error) = commit(&limiter, &held, actual).await {
            tracing::warn!(
                %error,
                actual,
                "a reservation's commit failed: its estimate stays counted where it was taken"
            );
        }
    });
}

/// Gives back each rule's reserved units and charges `actual`, in one batch.
async fn commit<S: Store>(
    limiter: &Limiter<S>,
    held: &[Held],
    actual: u64,
) -> Result<Committed, StoreError> {
    if held.is_empty() {
        return Ok(Committed::default());
    }
    let mut items: SmallVec<[ChargeItem<'_>; 8]> = SmallVec::new();
    for h in held {
        if h.reserved > 0 {
            items.push(ChargeItem {
                key: &h.key,
                limit: &h.limit,
                amount: Amount::release(h.reserved, h.taken),
            });
        }
        items.push(ChargeItem {
            key: &h.key,
            limit: &h.limit,
            amount: Amount::Charge(actual),
        });
    }
    let charges = limiter.store().charge(&items).await?;
    let mut answers = charges.into_iter();
    let mut rules = Vec::with_capacity(held.len());
    for h in held {
        let given_back = if h.reserved > 0 {
            answers.next().map_or(0, |c: Charged| c.applied)
        } else {
            0
        };
        let Some(c) = answers.next() else {
            return Err(StoreError::Internal(
                "the store answered fewer charges than it was given".to_owned(),
            ));
        };
        rules.push(RuleCommit {
            rule: Arc::clone(&h.rule),
            key: h.key.clone(),
            given_back,
            applied: c.applied,
            dropped: c.dropped,
            debt: c.debt,
            decision: c.decision,
        });
    }
    Ok(Committed { rules })
}
