//! Reservations: an estimated cost taken at request time, the actual cost committed when the
//! work ends ([`crate::Reservation`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use flowgate_core::algorithm::{ChargeError, chargeable};
use flowgate_core::clock::Micros;
use flowgate_core::{Limit, Request, Rule, Store};

use super::Limiter;
use crate::reservation::{Held, Reservation};
use crate::verdict::Verdict;

/// The share of a rule's limit one reservation may take when none is set (limitador's, and the
/// server's, half).
pub const DEFAULT_RESERVE_SHARE: f64 = 0.5;

/// Why [`Limiter::reserve`] did not reserve.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReserveError {
    /// Refused as a check of cost `estimate` is: over a limit, or refused by a circuit breaker.
    /// The verdict says which rule and when to retry ([`Verdict::retry_after`]); nothing was
    /// taken.
    #[error("rate limited")]
    Refused(Verdict),
    /// The estimate is over the share of a rule's limit one reservation may take
    /// ([`Limiter::set_reserve_share`]); nothing was taken.
    #[error("estimate {estimate} is over rule {rule}'s reservation clamp of {max}")]
    OverClamp {
        /// The rule, `domain/name`.
        rule: String,
        /// The estimate asked for.
        estimate: u64,
        /// The most one reservation may take under that rule.
        max: u64,
    },
    /// A matched rule takes no charges (`concurrency`, a token bucket with warm-up), so no
    /// reservation can be committed to it; nothing was taken.
    #[error("rule {rule} takes no reservations: {reason}")]
    NotChargeable {
        /// The rule, `domain/name`.
        rule: String,
        /// Why its limit takes no charges.
        reason: ChargeError,
    },
}

/// A reservation share outside `(0, 1]`.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("a reservation share must be more than 0 and at most 1, got {0}")]
pub struct BadShare(pub f64);

/// The most one reservation may take under a limit of `limit` units: `share` of it, at least 1.
pub(crate) fn clamp(limit: u64, share: f64) -> u64 {
    ((limit as f64 * share).floor() as u64).max(1)
}

impl<S: Store> Limiter<S> {
    /// Sets the share of a rule's limit that one reservation may take (default
    /// [`DEFAULT_RESERVE_SHARE`], half): an estimate over it is refused with
    /// [`ReserveError::OverClamp`], so that one request cannot hold a whole window.
    ///
    /// # Errors
    /// [`BadShare`] unless `0 < share <= 1`; the share in force is unchanged.
    pub fn set_reserve_share(&self, share: f64) -> Result<(), BadShare> {
        if !(share > 0.0 && share <= 1.0) {
            return Err(BadShare(share));
        }
        self.reserve_share.store(share.to_bits(), Ordering::Relaxed);
        Ok(())
    }

    /// The share of a rule's limit that one reservation may take.
    pub fn reserve_share(&self) -> f64 {
        f64::from_bits(self.reserve_share.load(Ordering::Relaxed))
    }

    /// Reserves `estimate` units for `request`: decided as [`Limiter::check`] decides a request
    /// of cost `estimate` (all or nothing, every descriptor's own cost replaced by it), and when
    /// admitted the estimate is taken under each rule the request matches, until the
    /// [`Reservation`] is committed with the actual cost ([`Reservation::commit`]), cancelled,
    /// or dropped (which commits the estimate; see [`Reservation`]).
    ///
    /// Only rules that take charges can be reserved against (fixed and sliding windows, sliding
    /// log, token and leaky buckets): a request matching a `concurrency` rule or a token bucket
    /// with warm-up is refused whole with [`ReserveError::NotChargeable`], whatever else it
    /// matches. Limit requests and tokens with two requests (or two layers): one checked, one
    /// reserved. Descriptors matching no rule, or a rule without a limit in force, are
    /// unlimited, as in a check; a reservation matching nothing commits nothing.
    ///
    /// # Errors
    /// [`ReserveError::Refused`] with the verdict when over a limit;
    /// [`ReserveError::OverClamp`] when the estimate is over a rule's share
    /// ([`Limiter::set_reserve_share`]); [`ReserveError::NotChargeable`]. Nothing is taken then.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use flowgate::{Algorithm, Descriptor, Limit, Limiter, Matcher, MemoryStore, Quota, Request, Rule, RuleSet};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let tpm = Limit::new(Algorithm::FixedWindow, "1000/m".parse::<Quota>().unwrap()).unwrap();
    /// let rules = RuleSet::new(vec![Rule::new("llm", "tokens", vec![Matcher::parse("key")], Some(tpm))]).unwrap();
    /// let limiter = Arc::new(Limiter::new(rules, MemoryStore::new()));
    /// let req = Request::new("llm", vec![Descriptor::new([("key", "alice")])]);
    ///
    /// // Reserve the most the answer may cost, do the work, commit what it cost.
    /// let reservation = limiter.reserve(&req, 400).await.unwrap();
    /// let committed = reservation.commit(120).await.unwrap();
    /// assert_eq!(committed.rules[0].given_back, 400);
    /// assert_eq!(committed.rules[0].decision.remaining, 880);
    ///
    /// // Two reservations of 400 fill what is left of 880 ...
    /// let a = limiter.reserve(&req, 400).await.unwrap();
    /// let b = limiter.reserve(&req, 400).await.unwrap();
    /// // ... so a third is refused, with the time to retry.
    /// let refused = limiter.reserve(&req, 400).await.unwrap_err();
    /// assert!(matches!(refused, flowgate::ReserveError::Refused(v) if v.retry_after().is_some()));
    /// // Over half the limit is refused whatever is left.
    /// assert!(matches!(limiter.reserve(&req, 501).await, Err(flowgate::ReserveError::OverClamp { max: 500, .. })));
    /// a.cancel().await.unwrap();
    /// b.commit(400).await.unwrap();
    /// # }
    /// ```
    pub async fn reserve(
        self: &Arc<Self>,
        request: &Request,
        estimate: u64,
    ) -> Result<Reservation<S>, ReserveError> {
        // The instant the reservation is taken at: the store's, so that a commit after a
        // window ended knows which window the estimate went to.
        let now = self.store.now();
        let share = self.reserve_share();
        {
            let rules = self.rules.load();
            let matched = rules.resolve(request);
            let limits = matched
                .iter()
                .filter_map(|m| Some((&**m.rule, m.rule.limit_at(now)?, m.key.as_str())));
            reservable(limits, estimate, share)?;
        }
        let mut costed = request.clone().with_cost(estimate);
        for d in &mut costed.descriptors {
            d.cost = None;
        }
        let verdict = self.check(&costed).await;
        if !verdict.allowed {
            return Err(ReserveError::Refused(verdict));
        }
        // The rules may have been swapped between the look above and the decision: the limits
        // that decided must take the reservation too, or what was taken is given back.
        let decided = verdict
            .statuses
            .iter()
            .filter_map(|s| Some((&**s.rule.as_ref()?, s.limit.as_ref()?, s.key.as_str())));
        if let Err(e) = reservable(decided, estimate, share) {
            self.undo(&verdict, estimate, now).await;
            return Err(e);
        }
        let held = held(&verdict, estimate, now);
        Ok(Reservation::new(Arc::clone(self), verdict, held, estimate))
    }

    /// Gives back what an admitted verdict took that cannot be a reservation: its leases, and
    /// the estimate under the limits that take charges.
    async fn undo(self: &Arc<Self>, verdict: &Verdict, estimate: u64, now: Micros) {
        for s in &verdict.statuses {
            if let (Some(lease), Some(limit)) = (s.decision.lease, &s.limit) {
                let _ = self.release_key(&s.key, limit, lease).await;
            }
        }
        let mut held = held(verdict, estimate, now);
        held.retain(|h| chargeable(&h.limit).is_ok());
        let _ = Reservation::new(Arc::clone(self), verdict.clone(), held, estimate)
            .cancel()
            .await;
    }
}

/// Whether a reservation of `estimate` may be taken under `limits` (each with its rule and the
/// key it takes on): each takes charges, and what each key takes is within its clamp (the
/// estimate, times the descriptors that take it on that key).
fn reservable<'a>(
    limits: impl Iterator<Item = (&'a Rule, &'a Limit, &'a str)>,
    estimate: u64,
    share: f64,
) -> Result<(), ReserveError> {
    let mut taken: Vec<(&str, u64)> = Vec::new();
    for (rule, limit, key) in limits {
        let name = || format!("{}/{}", rule.domain, rule.name);
        chargeable(limit).map_err(|reason| ReserveError::NotChargeable {
            rule: name(),
            reason,
        })?;
        let on_key = match taken.iter_mut().find(|(k, _)| *k == key) {
            Some((_, units)) => {
                *units = units.saturating_add(estimate);
                *units
            }
            None => {
                taken.push((key, estimate));
                estimate
            }
        };
        let max = clamp(limit.limit(), share);
        if on_key > max {
            return Err(ReserveError::OverClamp {
                rule: name(),
                estimate: on_key,
                max,
            });
        }
    }
    Ok(())
}

/// What an admitted reservation holds under each limited rule: the estimate where the store
/// took it (not where global shadow mode admitted a refused request, a shadow rule refused it,
/// or the store failed and a failure policy decided).
fn held(verdict: &Verdict, estimate: u64, taken: Micros) -> Vec<Held> {
    verdict
        .statuses
        .iter()
        .filter_map(|s| {
            let limit = s.limit.clone()?;
            let took = !verdict.shadowed && s.error.is_none() && s.decision.allowed;
            Some(Held {
                rule: Arc::clone(s.rule.as_ref()?),
                key: s.key.clone(),
                limit,
                reserved: if took { estimate } else { 0 },
                taken,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::clamp;

    #[test]
    fn the_clamp_is_a_share_of_the_limit_and_at_least_one() {
        assert_eq!(clamp(10_000, 0.5), 5_000);
        assert_eq!(clamp(101, 0.5), 50);
        assert_eq!(clamp(1, 0.5), 1);
        assert_eq!(clamp(100, 1.0), 100);
    }
}
