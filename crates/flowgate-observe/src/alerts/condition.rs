//! An alert's condition, read from one [`StatsView`]: whether it holds, and the value it was
//! read from (shown beside the alert).
//!
//! - A rule alert reads the rule's [`RuleStats::rejection_ratio`] and its request rate
//!   (`admitted_rate + rejected_rate`), both over the last
//!   [`RECENT_SECONDS`](crate::view::RECENT_SECONDS): it holds while the ratio is
//!   strictly above the threshold and the rate is at least `min_rate`.
//! - A queue alert reads the oldest age (or the depth) of the queue's instances, the largest:
//!   it holds while that is strictly above the threshold.
//! - A store alert holds while [`StoreStats::degraded`](crate::view::StoreStats).
//! - A breaker alert holds while any instance of the breaker is open or half-open; its value is
//!   the number of such instances.
//!
//! A rule or queue absent from the view (no figures yet, or not declared any more) does not
//! hold.
//!
//! [`RuleStats::rejection_ratio`]: crate::view::RuleStats::rejection_ratio

use crate::view::StatsView;
use flowgate_config::alert::AlertKind;

/// How many of the heaviest (rejected descriptors, breaker instances) a message names.
pub const WHO_MAX: usize = 3;

/// What one evaluation read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// Whether the condition holds.
    pub holds: bool,
    /// The value read (a ratio, an age in seconds, a depth, 1 or 0 for the store, a number of
    /// breaker instances), if any.
    pub value: Option<f64>,
    /// The value with its unit, rounded, for people: `62.5 % rejected at 20.0 req/s`,
    /// `oldest job 5m 12s`, `1,204 jobs`.
    pub text: Option<String>,
    /// Who it is about: the rule's most rejected descriptors with their rates, the queue's
    /// worst instance, the breaker's instances not closed.
    pub who: Option<String>,
}

impl Reading {
    fn none() -> Self {
        Self::default()
    }
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
                return Reading::none();
            };
            let rate = r.admitted_rate + r.rejected_rate;
            let who: Vec<String> = r
                .top_rejected
                .iter()
                .take(WHO_MAX)
                .map(|h| format!("{} {}/s", h.descriptor, one_decimal(h.rate)))
                .collect();
            Reading {
                holds: rate >= *min_rate && r.rejection_ratio > *ratio,
                value: Some(r.rejection_ratio),
                text: Some(format!(
                    "{} % rejected at {} req/s",
                    one_decimal(r.rejection_ratio * 100.0),
                    one_decimal(rate)
                )),
                who: (!who.is_empty()).then(|| who.join(", ")),
            }
        }
        AlertKind::RuleDebt { domain, rule, debt } => {
            let Some(r) = view
                .rules
                .iter()
                .find(|r| &r.domain == domain && &r.name == rule)
            else {
                return Reading::none();
            };
            Reading {
                holds: r.debt > *debt,
                value: Some(r.debt as f64),
                text: Some(format!(
                    "{} units charged past the limit, not yet paid back",
                    thousands(r.debt)
                )),
                who: None,
            }
        }
        AlertKind::QueueAge {
            domain,
            queue,
            seconds,
        } => {
            let oldest = queues(view, domain, queue)
                .filter_map(|q| q.oldest_age_s.map(|a| (a, q)))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            Reading {
                holds: oldest.is_some_and(|(a, _)| a > *seconds),
                value: oldest.map(|(a, _)| a),
                text: oldest.map(|(a, _)| format!("oldest job waiting {}", age_text(a))),
                who: oldest.map(|(_, q)| q.instance.clone()),
            }
        }
        AlertKind::QueueDepth {
            domain,
            queue,
            depth,
        } => {
            let deepest = queues(view, domain, queue).max_by_key(|q| q.depth);
            Reading {
                holds: deepest.is_some_and(|q| q.depth > *depth),
                value: deepest.map(|q| q.depth as f64),
                text: deepest.map(|q| format!("{} jobs", thousands(q.depth))),
                who: deepest.map(|q| q.instance.clone()),
            }
        }
        AlertKind::StoreDegraded => Reading {
            holds: view.store.degraded,
            value: Some(f64::from(u8::from(view.store.degraded))),
            text: Some(if view.store.degraded {
                format!(
                    "the {} store is failing: decisions follow the rules' failure policies",
                    view.store.kind
                )
            } else {
                format!("the {} store answers", view.store.kind)
            }),
            who: None,
        },
        AlertKind::Breaker { domain, breaker } => {
            let open: Vec<&crate::view::BreakerView> = view
                .breakers
                .iter()
                .filter(|b| &b.domain == domain && &b.name == breaker && b.phase != "closed")
                .collect();
            let who: Vec<String> = open
                .iter()
                .take(WHO_MAX)
                .map(|b| {
                    let phase = b.phase.replace('_', "-");
                    let why = match (b.opened_bad, b.opened_calls) {
                        (Some(bad), Some(calls)) => format!(", opened on {bad} bad of {calls}"),
                        _ => String::new(),
                    };
                    let refused = if b.refused_rate > 0.0 {
                        format!(", refusing {}/s", one_decimal(b.refused_rate))
                    } else {
                        String::new()
                    };
                    format!("{} ({phase}{why}{refused})", b.key)
                })
                .collect();
            Reading {
                holds: !open.is_empty(),
                value: Some(open.len() as f64),
                text: Some(match open.len() {
                    1 => "1 instance open or half-open".to_owned(),
                    n => format!("{n} instances open or half-open"),
                }),
                who: (!who.is_empty()).then(|| who.join(", ")),
            }
        }
    }
}

/// `x` rounded to one decimal, without a trailing `.0` for whole numbers above 100.
fn one_decimal(x: f64) -> String {
    if x >= 100.0 && (x - x.round()).abs() < 0.05 {
        format!("{:.0}", x.round())
    } else {
        format!("{x:.1}")
    }
}

/// `n` with a comma every three digits: `1,204`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An age in seconds for people, to its two largest units: `37s`, `5m 12s`, `1h 03m`, `2d 4h`.
pub fn age_text(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

fn queues<'v>(
    view: &'v StatsView,
    domain: &'v str,
    queue: &'v str,
) -> impl Iterator<Item = &'v crate::view::QueueStats> {
    view.queues
        .iter()
        .filter(move |q| q.domain == domain && q.queue == queue)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{QueueStats, RuleStats};

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

    #[test]
    fn a_debt_alert_holds_while_the_rules_debt_is_above_its_bound() {
        let kind = AlertKind::RuleDebt {
            domain: "api".into(),
            rule: "per-client".into(),
            debt: 100,
        };
        let mut view = rule_view(0.0, 0.0);
        for (debt, holds) in [(0, false), (100, false), (101, true), (5000, true)] {
            view.rules[0].debt = debt;
            let r = read(&kind, &view);
            assert_eq!(r.holds, holds, "{debt}");
            assert_eq!(r.value, Some(debt as f64));
        }
        assert_eq!(
            read(&kind, &view).text.as_deref(),
            Some("5,000 units charged past the limit, not yet paid back")
        );
        view.rules.clear();
        assert!(!read(&kind, &view).holds, "no such rule in the view");
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
    fn a_breaker_alert_holds_while_an_instance_is_not_closed() {
        use crate::view::BreakerView;
        let kind = AlertKind::Breaker {
            domain: "payments".into(),
            breaker: "wpg".into(),
        };
        let view = |phases: &[&str]| StatsView {
            breakers: phases
                .iter()
                .map(|p| BreakerView {
                    domain: "payments".into(),
                    name: "wpg".into(),
                    phase: (*p).into(),
                    ..BreakerView::default()
                })
                .collect(),
            ..StatsView::default()
        };
        assert!(!read(&kind, &view(&[])).holds);
        assert!(!read(&kind, &view(&["closed", "closed"])).holds);
        let r = read(&kind, &view(&["closed", "open", "half_open"]));
        assert!(r.holds);
        assert_eq!(r.value, Some(2.0));
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
        assert_eq!(r, Reading::none());
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
        let r = read(&age(300.0), &v);
        assert_eq!((r.holds, r.value), (true, Some(400.0)));
        assert_eq!(r.text.as_deref(), Some("oldest job waiting 6m 40s"));
        assert_eq!(r.who.as_deref(), Some("b"));
        let r = read(&depth(999), &v);
        assert_eq!(r.text.as_deref(), Some("1,000 jobs"));
        assert_eq!(r.who.as_deref(), Some("b"));
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

    #[test]
    fn messages_name_who_with_units() {
        use crate::view::Hitter;
        let mut v = rule_view(7.5, 12.5);
        v.rules[0].top_rejected = ["client=hot", "client=7", "client=9", "client=1"]
            .iter()
            .zip([10.04, 1.25, 0.96, 0.2])
            .map(|(d, rate)| Hitter {
                descriptor: (*d).into(),
                rate,
                error: 0.0,
            })
            .collect();
        let r = read(&rule(0.5, 1.0), &v);
        assert_eq!(r.text.as_deref(), Some("62.5 % rejected at 20.0 req/s"));
        assert_eq!(
            r.who.as_deref(),
            Some("client=hot 10.0/s, client=7 1.2/s, client=9 1.0/s"),
            "the three heaviest, one decimal"
        );
        assert_eq!(read(&rule(0.5, 1.0), &rule_view(1.0, 0.0)).who, None);
        assert_eq!(age_text(0.4), "0s");
        assert_eq!(age_text(59.6), "1m 00s");
        assert_eq!(age_text(312.0), "5m 12s");
        assert_eq!(age_text(3_780.0), "1h 03m");
        assert_eq!(age_text(187_200.0), "2d 4h");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(one_decimal(250.0), "250");
        assert_eq!(one_decimal(0.04), "0.0");
    }

    #[test]
    fn a_breaker_message_names_its_instances() {
        use crate::view::BreakerView;
        let kind = AlertKind::Breaker {
            domain: "payments".into(),
            breaker: "wpg".into(),
        };
        let b = |key: &str, phase: &str| BreakerView {
            domain: "payments".into(),
            name: "wpg".into(),
            key: key.into(),
            phase: phase.into(),
            ..BreakerView::default()
        };
        let mut wpg = b("payments:wpg:channel=WPG", "open");
        wpg.opened_calls = Some(6);
        wpg.opened_bad = Some(3);
        wpg.refused_rate = 19.96;
        let v = StatsView {
            breakers: vec![
                wpg,
                b("payments:wpg:channel=ADY", "closed"),
                b("payments:wpg:channel=STR", "half_open"),
            ],
            ..StatsView::default()
        };
        let r = read(&kind, &v);
        assert_eq!(r.text.as_deref(), Some("2 instances open or half-open"));
        assert_eq!(
            r.who.as_deref(),
            Some(
                "payments:wpg:channel=WPG (open, opened on 3 bad of 6, refusing 20.0/s), payments:wpg:channel=STR (half-open)"
            )
        );
    }
}
