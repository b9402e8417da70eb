//! Charges and refunds through the server, whichever front end they came through (`cost` in
//! `POST /v1/report` and `flowgate.v1.Reports/Report`, a `ShouldRateLimit` under a rule with
//! `charge = "report"`, `is_negative_hits`): the cost checked, the rules it goes to, and one
//! store call for a whole batch, counted in the metrics.
//!
//! When the store cannot answer, nothing is charged and the caller is told so (503,
//! `UNAVAILABLE`), counted in `flowgate_charges_failed_total`: a charge is never decided by a
//! failure policy, since admitting or refusing means nothing for work already done. Charges
//! take their own path to the store ([`flowgate::Limiter::charge`]): never behind a decision,
//! answered at once while Redis is known down, given up at the store's deadline otherwise.

use flowgate::algorithm::{Amount, Charged};
use flowgate::store::StoreError;
use flowgate::{ChargeRefusal, ChargeTarget, Descriptor, Request, Rule};

use crate::rule_charge::{ChargeKind, ChargedUnder, RuleCharge};
use crate::state::AppState;

/// The largest cost one report charges or refunds: the largest count a limit holds (32 bits),
/// beyond which a cost is a unit error (bytes sent as bits, a timestamp sent as a count).
pub(crate) const MAX_COST: u64 = crate::limits::MAX_COST;

/// A report's cost, checked: units, charged or refunded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cost {
    /// The units, at most [`MAX_COST`].
    pub(crate) units: u64,
    /// Given back (Envoy's `is_negative_hits`), floored at empty.
    pub(crate) refund: bool,
}

impl Cost {
    /// The store's amount for `units`.
    pub(crate) fn amount(refund: bool, units: u64) -> Amount {
        if refund {
            Amount::Refund(units)
        } else {
            Amount::Charge(units)
        }
    }
}

/// A report's cost sent as a JSON number, checked as [`whole_units`]; a negative one is told
/// how a report gives units back.
pub(crate) fn cost_units(n: &serde_json::Number) -> Result<u64, String> {
    whole_units(n).map_err(|e| {
        if is_negative(n) {
            format!("{e}; to give units back send `\"refund\": true` with a positive cost")
        } else {
            e
        }
    })
}

/// Units sent as a JSON number (a cost, an estimate), checked: a whole number from 0 to
/// [`MAX_COST`], with an error that says which rule the number broke. A whole number written
/// as a float (`100.0`, `1e3`, as clients that count in doubles send it) is that number.
pub(crate) fn whole_units(n: &serde_json::Number) -> Result<u64, String> {
    let whole = n.as_u64().or_else(|| {
        let f = n.as_f64()?;
        // (the cast saturates: a huge float is past the maximum, as it should read)
        (f >= 0.0 && f.fract() == 0.0).then_some(f as u64)
    });
    if let Some(u) = whole {
        return if u <= MAX_COST {
            Ok(u)
        } else {
            Err(format!(
                "{n} units is more than a limit can count (at most {MAX_COST}): is it in the rule's units?"
            ))
        };
    }
    if is_negative(n) {
        return Err(format!(
            "{n} is negative: units are a whole number from 0 to {MAX_COST}"
        ));
    }
    Err(format!(
        "{n} is not a whole number of units: units are a whole number from 0 to {MAX_COST}"
    ))
}

fn is_negative(n: &serde_json::Number) -> bool {
    n.as_i64().is_some_and(|i| i < 0) || n.as_f64().is_some_and(|f| f < 0.0)
}

/// One rule's part of a charge, as applied.
#[derive(Clone, Debug)]
pub(crate) struct Applied {
    /// Index of the descriptor that matched the rule.
    pub(crate) descriptor: usize,
    /// The rule.
    pub(crate) rule: std::sync::Arc<Rule>,
    /// The rule's state key for the descriptor.
    pub(crate) key: String,
    /// The rule's limit it was charged under.
    pub(crate) limit: flowgate::Limit,
    /// What was asked.
    pub(crate) amount: Amount,
    /// What the store did.
    pub(crate) charged: Charged,
}

impl Applied {
    /// What a report's answer tells of it.
    pub(crate) fn answer(&self) -> RuleCharge {
        let at = ChargedUnder {
            domain: self.rule.domain.clone(),
            rule: self.rule.name.clone(),
            key: self.key.clone(),
            descriptor: Some(self.descriptor),
        };
        RuleCharge::new(at, ChargeKind::of(&self.amount), 0, &self.charged)
    }
}

/// The rules `domain` and `descriptors` charge with `cost` (every matched rule whose
/// algorithm takes charges, and that `takes`).
///
/// # Errors
/// A message naming what is wrong: no rule matched, or none that takes charges (each named).
pub(crate) fn plan(
    state: &AppState,
    request: &Request,
    refund: bool,
    takes: impl Fn(&Rule) -> bool,
) -> Result<Vec<ChargeTarget>, ChargeRefusal> {
    state
        .limiter
        .charge_targets(request, |units| Cost::amount(refund, units), takes)
}

/// A request of `domain` and `descriptors` whose cost is `units` (each descriptor's own when it
/// gives one).
pub(crate) fn request(domain: String, descriptors: Vec<Descriptor>, units: u64) -> Request {
    Request {
        domain,
        descriptors,
        cost: units,
    }
}

/// Applies the planned charges of a batch in one store call, and counts them; answers each
/// plan's rules' charges, in order.
///
/// # Errors
/// The store's error: nothing was charged (on a Redis Cluster, slots before the failing one
/// may keep theirs), counted in `flowgate_charges_failed_total`.
pub(crate) async fn apply(
    state: &AppState,
    plans: Vec<Vec<ChargeTarget>>,
) -> Result<Vec<Vec<Applied>>, StoreError> {
    let all: Vec<ChargeTarget> = plans.iter().flatten().cloned().collect();
    let charged = match state.limiter.charge(&all).await {
        Ok(c) => c,
        Err(e) => {
            state.metrics.charges.failed(error_kind(&e));
            return Err(e);
        }
    };
    let now = flowgate::store::Store::now(state.limiter.store());
    let mut answers = charged.into_iter();
    let mut out = Vec::with_capacity(plans.len());
    for plan in plans {
        let mut rules = Vec::with_capacity(plan.len());
        for t in plan {
            let Some(c) = answers.next() else { break };
            state.metrics.charges.charged(&t, &c, now);
            rules.push(Applied {
                descriptor: t.descriptor,
                rule: t.rule,
                key: t.key,
                limit: t.limit,
                amount: t.amount,
                charged: c,
            });
        }
        out.push(rules);
    }
    Ok(out)
}

/// The kind of a store error, as the metrics and the answers name it: `timeout`,
/// `unavailable` or `internal` (the error's own text stays in the log).
pub(crate) fn error_kind(e: &StoreError) -> &'static str {
    match e {
        StoreError::Timeout => "timeout",
        StoreError::Internal(_) => "internal",
        _ => "unavailable",
    }
}
