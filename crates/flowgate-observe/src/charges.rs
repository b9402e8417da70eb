//! Charges and refunds as the server shows them: units charged, refunded and dropped per rule,
//! charges refused for a store error, and each rule's debt.
//!
//! A rule's debt is the sum, over the keys this node charged, of each key's debt as its last
//! charge or refund found it, paid back since as its algorithm pays it: continuously on a token
//! or leaky bucket (exact: the GCRA pays a debt back at the limit's rate), all at once when the
//! key stops being over on a fixed or sliding window or a sliding log (an upper bound until
//! then). At most [`MAX_KEYS_PER_RULE`] keys are followed per rule (beyond, a key's debt is left
//! out), and a key is forgotten once out of debt.
//!
//! On Redis each node publishes its keys in debt with its figures ([`ChargeMetrics::key_debts`],
//! the [`MAX_PUBLISHED_KEYS`] largest per rule), and the cluster's debt of a rule merges them by
//! key ([`merged_debt`]): a key charged through several nodes counts once, as its latest charge
//! found it.

use std::collections::HashMap;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use flowgate::algorithm::{Amount, Charged};
use flowgate::{Algorithm, ChargeTarget};

/// The most keys in debt followed per rule.
pub const MAX_KEYS_PER_RULE: usize = 10_000;

/// The most keys in debt a node publishes per rule for the cluster's figures (the largest).
pub const MAX_PUBLISHED_KEYS: usize = 1_000;

/// Labels of `flowgate_charge_units_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnitLabels {
    /// The rule's domain.
    pub domain: String,
    /// The rule.
    pub rule: String,
    /// `charge` or `refund`.
    pub kind: &'static str,
    /// `applied` or `dropped` (a charge's units past `max_debt`, a refund's past empty).
    pub result: &'static str,
}

/// Labels of `flowgate_rule_debt`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DebtLabels {
    /// The rule's domain.
    pub domain: String,
    /// The rule.
    pub rule: String,
}

/// Labels of `flowgate_charges_failed_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailedLabels {
    /// `timeout`, `unavailable` or `internal`.
    pub kind: &'static str,
}

/// One key's debt as its last charge found it (published with a node's figures as
/// `[debt, at, until, continuous]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyDebt(
    /// Units beyond the limit then.
    u64,
    /// When (store clock, µs).
    u64,
    /// When the key stops being over (store clock, µs).
    u64,
    /// Paid back continuously (a bucket) rather than all at once at the third field.
    bool,
);

impl KeyDebt {
    fn new(debt: u64, at: u64, until: u64, continuous: bool) -> Self {
        KeyDebt(debt, at, until, continuous)
    }

    /// Its debt at `now` (store clock, µs), paid back as its algorithm pays it.
    pub fn now(&self, now: u64) -> u64 {
        let KeyDebt(debt, at, until, continuous) = *self;
        if now >= until {
            return 0;
        }
        if !continuous || until <= at {
            return debt;
        }
        let left = (until - now) as u128;
        let span = (until - at.min(now)) as u128;
        (u128::from(debt) * left).div_ceil(span) as u64
    }
}

/// A rule's debt at `now` over keys in debt as several nodes saw them: each key once, as its
/// latest charge found it.
pub fn merged_debt<'a>(keys: impl IntoIterator<Item = (&'a str, &'a KeyDebt)>, now: u64) -> u64 {
    let mut latest: HashMap<&str, &KeyDebt> = HashMap::new();
    for (key, d) in keys {
        let e = latest.entry(key).or_insert(d);
        if d.1 > e.1 {
            *e = d;
        }
    }
    latest.values().map(|d| d.now(now)).sum()
}

/// The charges' metric families and the debts followed.
pub struct ChargeMetrics {
    units: Family<UnitLabels, Counter>,
    failed: Family<FailedLabels, Counter>,
    debt: Family<DebtLabels, Gauge>,
    debts: Mutex<HashMap<(String, String), HashMap<String, KeyDebt>>>,
    /// The rules whose debt has a series (the family cannot be listed).
    seen: Mutex<Vec<DebtLabels>>,
}

impl ChargeMetrics {
    /// The families, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            units: Family::default(),
            failed: Family::default(),
            debt: Family::default(),
            debts: Mutex::new(HashMap::new()),
            seen: Mutex::new(Vec::new()),
        };
        for kind in ["timeout", "unavailable", "internal"] {
            let _ = m.failed.get_or_create(&FailedLabels { kind });
        }
        registry.register(
            "flowgate_charge_units",
            "Units charged and refunded per rule: applied, or dropped (a charge past max_debt, a refund past empty)",
            m.units.clone(),
        );
        registry.register(
            "flowgate_charges_failed",
            "Charges and refunds not applied because the store could not answer, by error kind",
            m.failed.clone(),
        );
        registry.register(
            "flowgate_rule_debt",
            "Units charged beyond each rule's limit and not yet paid back by time, over the keys this node charged",
            m.debt.clone(),
        );
        m
    }

    /// Records one rule's charge or refund `t`, answered `c` at `now` (the store's clock).
    pub fn charged(&self, t: &ChargeTarget, c: &Charged, now: u64) {
        let (domain, rule, key, limit) = (&t.rule.domain, &t.rule.name, &t.key, &t.limit);
        let kind = match t.amount {
            Amount::Charge(_) => "charge",
            Amount::Refund(_) => "refund",
            Amount::Release { .. } => "release",
        };
        for (result, n) in [("applied", c.applied), ("dropped", c.dropped)] {
            self.units
                .get_or_create(&UnitLabels {
                    domain: domain.clone(),
                    rule: rule.clone(),
                    kind,
                    result,
                })
                .inc_by(n);
        }
        let mut debts = self.debts.lock();
        let rule_key = (domain.clone(), rule.clone());
        // A key out of debt is kept at 0 (until it would have stopped being over) when a refund
        // or a release paid it back, or when it was followed: that 0 is newer than what other
        // nodes published of it, and the cluster's merge takes it. A plain charge not in debt
        // is not followed.
        let known = debts
            .get(&rule_key)
            .is_some_and(|keys| keys.contains_key(key.as_str()));
        if c.debt == 0 && !known && matches!(t.amount, Amount::Charge(_)) {
            return;
        }
        let keys = debts.entry(rule_key).or_default();
        if keys.len() >= MAX_KEYS_PER_RULE && !keys.contains_key(key.as_str()) {
            keys.retain(|_, d| d.2 > now);
            if keys.len() >= MAX_KEYS_PER_RULE {
                return;
            }
        }
        let over_for = c
            .decision
            .retry_after
            .unwrap_or(c.decision.reset_after)
            .as_micros() as u64;
        keys.insert(
            key.clone(),
            KeyDebt::new(
                c.debt,
                now,
                now.saturating_add(over_for),
                matches!(
                    limit.algorithm(),
                    Algorithm::TokenBucket | Algorithm::LeakyBucket
                ),
            ),
        );
    }

    /// Counts a charge not applied for the store's error of `kind`.
    pub fn failed(&self, kind: &'static str) {
        self.failed.get_or_create(&FailedLabels { kind }).inc();
    }

    /// Each rule's debt at `now` (store clock), rules in debt only; keys out of debt are
    /// forgotten.
    pub fn debts(&self, now: u64) -> Vec<((String, String), u64)> {
        let mut debts = self.debts.lock();
        debts.retain(|_, keys| {
            keys.retain(|_, d| d.2 > now);
            !keys.is_empty()
        });
        debts
            .iter()
            .map(|(rule, keys)| (rule.clone(), keys.values().map(|d| d.now(now)).sum()))
            .filter(|(_, d)| *d > 0)
            .collect()
    }

    /// One rule's keys in debt at `now` (store clock), the [`MAX_PUBLISHED_KEYS`] largest, as
    /// this node last charged them, and those a refund paid back here (at 0, so that the
    /// cluster's merge forgets what other nodes published of them): what it publishes.
    pub fn key_debts(&self, domain: &str, rule: &str, now: u64) -> Vec<(String, KeyDebt)> {
        let debts = self.debts.lock();
        let Some(keys) = debts.get(&(domain.to_owned(), rule.to_owned())) else {
            return Vec::new();
        };
        let mut out: Vec<(String, KeyDebt)> = keys
            .iter()
            .filter(|(_, d)| d.2 > now)
            .map(|(k, d)| (k.clone(), *d))
            .collect();
        if out.len() > MAX_PUBLISHED_KEYS {
            out.sort_unstable_by_key(|(_, d)| std::cmp::Reverse(d.now(now)));
            out.truncate(MAX_PUBLISHED_KEYS);
        }
        out
    }

    /// One rule's debt at `now` (store clock).
    pub fn rule_debt(&self, domain: &str, rule: &str, now: u64) -> u64 {
        let debts = self.debts.lock();
        debts
            .get(&(domain.to_owned(), rule.to_owned()))
            .map_or(0, |keys| keys.values().map(|d| d.now(now)).sum())
    }

    /// Sets `flowgate_rule_debt` from the debts at `now` (store clock); a rule out of debt reads
    /// 0 (its series stays once it has been in debt).
    pub fn refresh(&self, now: u64) {
        let debts = self.debts(now);
        let mut seen = self.seen.lock();
        for labels in seen.iter() {
            self.debt.get_or_create(labels).set(0);
        }
        for ((domain, rule), d) in debts {
            let labels = DebtLabels { domain, rule };
            self.debt
                .get_or_create(&labels)
                .set(i64::try_from(d).unwrap_or(i64::MAX));
            if !seen.contains(&labels) {
                seen.push(labels);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use std::sync::Arc;

    use flowgate::decision::Decision;
    use flowgate::{Algorithm, Limit, Quota, Rule};

    use super::*;

    fn charged(debt: u64, retry_ms: u64) -> Charged {
        let mut decision = Decision::UNLIMITED;
        decision.allowed = debt == 0;
        decision.retry_after = (debt > 0).then(|| Duration::from_millis(retry_ms));
        Charged {
            applied: debt,
            dropped: 0,
            debt,
            decision,
        }
    }

    #[test]
    fn a_buckets_debt_is_paid_back_continuously_a_windows_at_once() {
        let m = ChargeMetrics::register(&mut Registry::default());
        let q: Quota = "10/s".parse().unwrap();
        let tb = Limit::new(Algorithm::TokenBucket, q).unwrap();
        let fw = Limit::new(Algorithm::FixedWindow, q).unwrap();
        let t = |rule: &str, key: &str, limit: &Limit, amount| ChargeTarget {
            descriptor: 0,
            rule: Arc::new(Rule::new("d", rule, Vec::new(), Some(limit.clone()))),
            key: key.to_owned(),
            limit: limit.clone(),
            amount,
        };
        let c = Amount::Charge(10);
        m.charged(&t("tb", "k", &tb, c), &charged(10, 1000), 0);
        m.charged(&t("fw", "k", &fw, c), &charged(10, 1000), 0);
        assert_eq!(m.rule_debt("d", "tb", 500_000), 5);
        assert_eq!(m.rule_debt("d", "fw", 500_000), 10);
        assert_eq!(m.rule_debt("d", "fw", 1_000_000), 0);
        m.charged(&t("tb", "k2", &tb, c), &charged(4, 400), 500_000);
        assert_eq!(m.rule_debt("d", "tb", 500_000), 9);
        let refund = t("tb", "k", &tb, Amount::Refund(10));
        m.charged(&refund, &charged(0, 0), 600_000);
        assert_eq!(m.rule_debt("d", "tb", 600_000), 3);
        assert_eq!(m.debts(2_000_000), vec![]);
    }

    #[test]
    fn the_clusters_debt_counts_each_key_once_as_its_latest_charge_found_it() {
        // Node a charged k at 0 (debt 10, over until 1 s); node b charged k again at 0.5 s
        // (debt 12) and k2 (debt 4, a window: all at once at 2 s).
        let a = [("k", KeyDebt::new(10, 0, 1_000_000, true))];
        let b = [
            ("k", KeyDebt::new(12, 500_000, 1_500_000, true)),
            ("k2", KeyDebt::new(4, 500_000, 2_000_000, false)),
        ];
        let all = || a.iter().chain(b.iter()).map(|(k, d)| (*k, d));
        assert_eq!(merged_debt(all(), 500_000), 12 + 4);
        assert_eq!(
            merged_debt(all(), 1_000_000),
            6 + 4,
            "k paid back continuously"
        );
        assert_eq!(merged_debt(all(), 1_600_000), 4);
        assert_eq!(merged_debt(all(), 2_000_000), 0);
        // Read in the other order, the same.
        let rev = || b.iter().chain(a.iter()).map(|(k, d)| (*k, d));
        assert_eq!(merged_debt(rev(), 500_000), 16);
    }

    #[test]
    fn a_node_publishes_its_largest_keys_in_debt() {
        let m = ChargeMetrics::register(&mut Registry::default());
        let q: Quota = "10/s".parse().unwrap();
        let fw = Limit::new(Algorithm::FixedWindow, q).unwrap();
        let rule = Arc::new(Rule::new("d", "fw", Vec::new(), Some(fw.clone())));
        for i in 0..(MAX_PUBLISHED_KEYS as u64 + 5) {
            let t = ChargeTarget {
                descriptor: 0,
                rule: rule.clone(),
                key: format!("k{i}"),
                limit: fw.clone(),
                amount: Amount::Charge(1),
            };
            m.charged(&t, &charged(i + 1, 1000), 0);
        }
        let published = m.key_debts("d", "fw", 1);
        assert_eq!(published.len(), MAX_PUBLISHED_KEYS);
        assert!(
            published.iter().all(|(_, d)| d.now(1) > 5),
            "the largest kept"
        );
        assert!(m.key_debts("d", "other", 1).is_empty());
    }
}
