//! An alert's condition, read from one [`StatsView`]: whether it holds, and the value it was
//! read from (shown beside the alert).
//!
//! - A rule alert reads the rule's [`RuleStats::rejection_ratio`] and its request rate
//!   (`admitted_rate + rejected_rate`), both over the last
//!   [`RECENT_SECONDS`](crate::observe::view::RECENT_SECONDS): it holds while the ratio is
//!   strictly above the threshold and the rate is at least `min_rate`.
//! - A queue alert reads the oldest age (or the depth) of the queue's instances, the largest:
//!   it holds while that is strictly above the threshold.
//! - A store alert holds while [`StoreStats::degraded`](crate::observe::view::StoreStats).
//!
//! A rule or queue absent from the view (no figures yet, or not declared any more) does not
//! hold.
//!
//! [`RuleStats::rejection_ratio`]: crate::observe::view::RuleStats::rejection_ratio

use super::spec::AlertKind;
use crate::observe::view::StatsView;

/// What one evaluation read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// Whether the condition holds.
    pub holds: bool,
    /// The value read (a ratio, an age in seconds, a depth, 1 or 0 for the store), if any.
    pub value: Option<f64>,
}

/// The condition `kind` as `view` shows it.
pub fn read(kind: &AlertKind, view: &StatsView) -> Reading {
    match kind {
        AlertKind::Rule {
            domain,
            rule,
            ratio,
            min_rate,
        } => {
            let Some(r) = view
                .rules
                .iter()
                .find(|r| &r.domain == domain && &r.name == rule)
            else {
                return Reading {
                    holds: false,
                    value: None,
                };
            };
            let rate = r.admitted_rate + r.rejected_rate;
            Reading {
                holds: rate >= *min_rate && r.rejection_ratio > *ratio,
                value: Some(r.rejection_ratio),
            }
        }
        AlertKind::QueueAge {
            domain,
            queue,
            seconds,
        } => {
            let oldest = queues(view, domain, queue)
                .filter_map(|q| q.oldest_age_s)
                .reduce(f64::max);
            Reading {
                holds: oldest.is_some_and(|a| a > *seconds),
                value: oldest,
            }
        }
        AlertKind::QueueDepth {
            domain,
            queue,
            depth,
        } => {
            let deepest = queues(view, domain, queue).map(|q| q.depth).max();
            Reading {
                holds: deepest.is_some_and(|d| d > *depth),
                value: deepest.map(|d| d as f64),
            }
        }
        AlertKind::StoreDegraded => Reading {
            holds: view.store.degraded,
            value: Some(f64::from(u8::from(view.store.degraded))),
        },
    }
}

fn queues<'v>(
    view: &'v StatsView,
    domain: &'v str,
    queue: &'v str,
) -> impl Iterator<Item = &'v crate::observe::view::QueueStats> {
    view.queues
        .iter()
        .filter(move |q| q.domain == domain && q.queue == queue)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::view::{QueueStats, RuleStats};

    fn rule_view(admitted_rate: f64, rejected_rate: f64) -> StatsView {
        let total = admitted_rate + rejected_rate;
        StatsView {
            rules: vec![RuleStats {
                domain: "api".into(),
                name: "per-client".into(),
                admitted_rate,
                rejected_rate,
                rejection_ratio: if total > 0.0 {
                    rejected_rate / total
                } else {
                    0.0
                },
                ..RuleStats::default()
            }],
            ..StatsView::default()
        }
    }

    fn rule(ratio: f64, min_rate: f64) -> AlertKind {
        AlertKind::Rule {
            domain: "api".into(),
            rule: "per-client".into(),
            ratio,
            min_rate,
        }
    }

    #[test]
    fn rule_ratio_is_strictly_above_at_the_minimum_rate() {
        // 1 admitted, 1 rejected per second: ratio 0.5, rate 2.
        let v = rule_view(1.0, 1.0);
        assert!(!read(&rule(0.5, 1.0), &v).holds, "0.5 is not above 0.5");
        assert!(read(&rule(0.49, 1.0), &v).holds);
        assert_eq!(read(&rule(0.49, 1.0), &v).value, Some(0.5));
        assert!(
            read(&rule(0.49, 2.0), &v).holds,
            "a rate of 2 is at least 2"
        );
        assert!(!read(&rule(0.49, 2.5), &v).holds, "below the minimum rate");
        // All rejected, at a rate under the minimum: 1 of 1 does not page.
        let v = rule_view(0.0, 0.2);
        assert!(!read(&rule(0.5, 1.0), &v).holds);
        assert!(read(&rule(0.5, 0.2), &v).holds);
        assert!(read(&rule(0.99, 0.0), &rule_view(0.0, 1.0)).holds);
    }

    #[test]
    fn a_rule_without_figures_does_not_hold() {
        let other = AlertKind::Rule {
            domain: "api".into(),
            rule: "other".into(),
            ratio: 0.0,
            min_rate: 0.0,
        };
        let r = read(&other, &rule_view(0.0, 100.0));
        assert_eq!(
            r,
            Reading {
                holds: false,
                value: None
            }
        );
    }

    #[test]
    fn queues_read_their_worst_instance() {
        let q = |instance: &str, depth, age| QueueStats {
            instance: instance.into(),
            domain: "d".into(),
            queue: "q".into(),
            depth,
            oldest_age_s: age,
            ..QueueStats::default()
        };
        let v = StatsView {
            queues: vec![
                q("a", 10, Some(5.0)),
                q("b", 1000, Some(400.0)),
                q("c", 3, None),
            ],
            ..StatsView::default()
        };
        let age = |seconds| AlertKind::QueueAge {
            domain: "d".into(),
            queue: "q".into(),
            seconds,
        };
        let depth = |depth| AlertKind::QueueDepth {
            domain: "d".into(),
            queue: "q".into(),
            depth,
        };
        assert_eq!(
            read(&age(300.0), &v),
            Reading {
                holds: true,
                value: Some(400.0)
            }
        );
        assert!(!read(&age(400.0), &v).holds);
        assert!(read(&depth(999), &v).holds);
        assert!(!read(&depth(1000), &v).holds);
        assert!(!read(&age(0.0), &StatsView::default()).holds);
    }

    #[test]
    fn store_degraded() {
        let mut v = StatsView::default();
        assert!(!read(&AlertKind::StoreDegraded, &v).holds);
        v.store.degraded = true;
        assert!(read(&AlertKind::StoreDegraded, &v).holds);
    }
}
