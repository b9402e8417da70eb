//! What a charge did under one rule, as every answer tells it: `POST /v1/report`'s
//! `charges[i].rules[j]`, `POST /v1/commit`'s `rules[j]` and `flowgate.v1.Reports/Report`'s
//! `RuleCharged`. One object, every field always present, so that a client types it once.

use std::time::Duration;

use flowgate::algorithm::{Amount, Charged};
use serde::Serialize;
use utoipa::ToSchema;

/// `charge` or `refund`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ChargeKind {
    /// Units counted, even past the limit, up to `max_debt` beyond it.
    Charge,
    /// Units given back, floored at empty.
    Refund,
}

impl ChargeKind {
    /// The kind of `amount` (a reservation's release gives units back: a refund).
    pub(crate) fn of(amount: &Amount) -> Self {
        match amount {
            Amount::Charge(_) => ChargeKind::Charge,
            Amount::Refund(_) | Amount::Release { .. } => ChargeKind::Refund,
        }
    }
}

/// Where a charge went: the rule, its state key, and the descriptor that matched it.
pub(crate) struct ChargedUnder {
    /// The rule's domain.
    pub(crate) domain: String,
    /// The rule's name.
    pub(crate) rule: String,
    /// The rule's state key for the descriptor.
    pub(crate) key: String,
    /// Index of the descriptor in the report that matched the rule; `None` for a commit.
    pub(crate) descriptor: Option<usize>,
}

/// What a charge did under one rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct RuleCharge {
    /// The rule's domain.
    pub(crate) domain: String,
    /// The rule's name.
    pub(crate) rule: String,
    /// The rule's state key (`domain:rule:descriptor`).
    pub(crate) key: String,
    /// Index of the descriptor in the report's request that matched the rule; `null` in a
    /// commit.
    #[schema(required = true, minimum = 0)]
    pub(crate) descriptor: Option<usize>,
    /// A charge or a refund.
    pub(crate) kind: ChargeKind,
    /// Units of the reservation's estimate given back (a commit; 0 when the reservation had
    /// expired and been given back already, and in a report).
    pub(crate) released: u64,
    /// Units counted (a charge) or given back (a refund).
    pub(crate) applied: u64,
    /// Units not applied: a charge's past the rule's `max_debt`, a refund's past empty.
    pub(crate) dropped: u64,
    /// Units counted beyond the limit now (paid back by time).
    pub(crate) debt: u64,
    /// Whether the key is over its limit now (in debt): a check of it is refused until
    /// `retry_after_ms`.
    pub(crate) over: bool,
    /// Units a check may still take now.
    pub(crate) remaining: u64,
    /// When `over`: milliseconds until a check of the key is admitted again (rounded up);
    /// `null` when not over.
    #[schema(required = true, minimum = 0)]
    pub(crate) retry_after_ms: Option<u64>,
}

/// `d` in whole milliseconds, rounded up: a client that waits that long is not early.
fn millis_up(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

impl RuleCharge {
    /// The answer for `charged`, a `kind` applied under `at`, after `released` units of a
    /// reservation were given back there.
    pub(crate) fn new(
        at: ChargedUnder,
        kind: ChargeKind,
        released: u64,
        charged: &Charged,
    ) -> Self {
        let d = &charged.decision;
        let over = !d.allowed;
        Self {
            domain: at.domain,
            rule: at.rule,
            key: at.key,
            descriptor: at.descriptor,
            kind,
            released,
            applied: charged.applied,
            dropped: charged.dropped,
            debt: charged.debt,
            over,
            remaining: d.remaining,
            retry_after_ms: over.then(|| millis_up(d.retry_after.unwrap_or(d.reset_after))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowgate::decision::Decision;

    fn charged(allowed: bool, retry_after: Option<Duration>) -> Charged {
        Charged {
            applied: 10,
            dropped: 0,
            debt: if allowed { 0 } else { 5 },
            decision: Decision {
                allowed,
                remaining: if allowed { 90 } else { 0 },
                retry_after,
                reset_after: Duration::from_secs(60),
                ..Decision::UNLIMITED
            },
        }
    }

    fn under() -> ChargedUnder {
        ChargedUnder {
            domain: "llm".into(),
            rule: "tokens".into(),
            key: "llm:tokens:api_key=k1".into(),
            descriptor: None,
        }
    }

    #[test]
    fn retry_after_is_a_whole_number_of_milliseconds_only_when_over() {
        let ok = RuleCharge::new(under(), ChargeKind::Charge, 0, &charged(true, None));
        assert_eq!((ok.over, ok.retry_after_ms), (false, None));
        let wait = Some(Duration::from_micros(1_500));
        let over = RuleCharge::new(under(), ChargeKind::Charge, 0, &charged(false, wait));
        assert_eq!((over.over, over.retry_after_ms), (true, Some(2)));
        let never = RuleCharge::new(under(), ChargeKind::Charge, 0, &charged(false, None));
        assert_eq!(
            never.retry_after_ms,
            Some(60_000),
            "the reset when no retry is told"
        );
    }

    #[test]
    fn every_field_is_serialized_even_when_null() {
        let c = RuleCharge::new(under(), ChargeKind::Refund, 3, &charged(true, None));
        let v = serde_json::to_value(&c).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 12, "{v}");
        assert!(
            v["descriptor"].is_null() && v["retry_after_ms"].is_null(),
            "{v}"
        );
        assert_eq!(v["kind"], "refund");
    }
}
