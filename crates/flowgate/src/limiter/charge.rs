//! Charges and refunds through the limiter: a request's descriptors matched against the rules,
//! each matched rule that takes charges given its part (checked first, so that a batch is
//! refused whole before anything is applied), then one store call for a whole batch.
//!
//! A charge takes its own path to the store ([`Store::charge`]): it never waits behind a
//! decision (no lane, no coalescing), and a store known down answers at once.

use std::sync::Arc;

use flowgate_core::algorithm::{self, Amount, Charged};
use flowgate_core::{ChargeItem, Limit, Request, Rule, Store, StoreError};

use super::Limiter;

/// One rule's part of a charge: the descriptor that matched it, the rule, its state key and
/// its limit in force, and what to apply.
#[derive(Clone, Debug)]
pub struct ChargeTarget {
    /// Index of the descriptor in the request.
    pub descriptor: usize,
    /// The rule.
    pub rule: Arc<Rule>,
    /// The rule's state key for the descriptor.
    pub key: String,
    /// The rule's limit in force.
    pub limit: Limit,
    /// The charge or refund.
    pub amount: Amount,
}

/// Why a request cannot be charged: nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChargeRefusal {
    /// No descriptor matches a rule of the domain.
    #[error(
        "the descriptors match no rule of domain `{domain}`: a charge needs a rule to count in"
    )]
    NoRule {
        /// The domain.
        domain: String,
    },
    /// Descriptors match rules, and none of them takes charges.
    #[error("{}", unchargeable(.0))]
    NoneTakesCharges(Vec<(String, String)>),
}

fn unchargeable(rules: &[(String, String)]) -> String {
    let each: Vec<String> = rules
        .iter()
        .map(|(rule, why)| format!("rule `{rule}` takes no charges: {why}"))
        .collect();
    each.join("; ")
}

impl<S: Store> Limiter<S> {
    /// The rules `request` charges with `amount` (each descriptor's own when it gives one): every
    /// matched rule that `takes` and whose algorithm takes charges
    /// ([`algorithm::chargeable`]); a rule unlimited now is skipped (it counts nothing).
    ///
    /// # Errors
    /// [`ChargeRefusal::NoRule`] when no descriptor matches a rule that `takes`;
    /// [`ChargeRefusal::NoneTakesCharges`] naming each matched rule when none takes charges.
    pub fn charge_targets(
        &self,
        request: &Request,
        amount: impl Fn(u64) -> Amount,
        takes: impl Fn(&Rule) -> bool,
    ) -> Result<Vec<ChargeTarget>, ChargeRefusal> {
        let rules = self.rules.load();
        let matched = rules.resolve(request);
        let now = if matched.iter().any(|m| m.rule.schedule.is_some()) {
            self.store.now()
        } else {
            0
        };
        let mut targets = Vec::new();
        let mut refused: Vec<(String, String)> = Vec::new();
        let mut any = false;
        for m in matched.iter().filter(|m| takes(m.rule)) {
            any = true;
            let Some(limit) = m.rule.limit_at(now) else {
                continue;
            };
            if let Err(e) = algorithm::chargeable(limit) {
                if !refused.iter().any(|(r, _)| *r == m.rule.name) {
                    refused.push((m.rule.name.clone(), e.to_string()));
                }
                continue;
            }
            targets.push(ChargeTarget {
                descriptor: m.descriptor,
                rule: Arc::clone(m.rule),
                key: m.key.clone(),
                limit: limit.clone(),
                amount: amount(m.cost),
            });
        }
        if !any {
            return Err(ChargeRefusal::NoRule {
                domain: request.domain.clone(),
            });
        }
        if targets.is_empty() && !refused.is_empty() {
            return Err(ChargeRefusal::NoneTakesCharges(refused));
        }
        Ok(targets)
    }

    /// Applies `targets` (of one request or of a whole batch) in one store call: each
    /// target's answer, in order.
    ///
    /// # Errors
    /// The store's error; on one Redis server or the embedded store nothing is applied then
    /// (on a Redis Cluster, the calls to other slots before the failing one stay applied).
    pub async fn charge(&self, targets: &[ChargeTarget]) -> Result<Vec<Charged>, StoreError> {
        if targets.is_empty() {
            return Ok(Vec::new());
        }
        let items: Vec<ChargeItem<'_>> = targets
            .iter()
            .map(|t| ChargeItem {
                key: &t.key,
                limit: &t.limit,
                amount: t.amount,
            })
            .collect();
        Ok(self.store.charge(&items).await?.into_vec())
    }
}
