//! The figures of one failover, drawn from what the load saw ([`super::load::Seen`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use super::load::{Check, LIMIT, NODES, RULES, Seen};

/// One rule's figures around one failover.
#[derive(Debug, Clone)]
pub struct RuleFigures {
    pub rule: &'static str,
    pub policy: &'static str,
    /// First and last decision by the failure policy, in ms after the kill; `None`: none.
    pub fallback: Option<(u64, u64)>,
    /// Decisions by the policy, and of them admitted.
    pub by_policy: usize,
    pub admitted_by_policy: usize,
    /// Admitted beyond the limit, summed over the windows (1 s) of the failover.
    pub over_admitted: u64,
    /// What the policy allows beyond the limit over those windows (`None`: anything).
    pub allowance: Option<u64>,
    /// The longest a check took during the failover, ms.
    pub slowest_ms: u64,
    /// The most a node admitted by the policy in one window.
    pub most_by_policy_in_a_window: u64,
    /// Windows (1 s) entirely after the last fallback whose admitted count exceeded the limit.
    pub over_after: usize,
    /// From the promotion to the first window that starts after the last fallback: when the
    /// limit is exact again (ms; negative: before the promotion).
    pub exact_after_promotion_ms: i64,
}

/// One failover's figures.
#[derive(Debug, Clone)]
pub struct Figures {
    pub what: String,
    pub promoted_after_ms: u64,
    pub rules: Vec<RuleFigures>,
}

impl Figures {
    /// The figures of the failover that killed at `killed` and was promoted at `promoted`
    /// (Unix ms), from the checks made until `until`.
    pub fn of(what: &str, seen: &Seen, killed: u64, promoted: u64, until: u64) -> Self {
        let checks: Vec<&Check> = seen
            .checks
            .iter()
            .filter(|c| c.at >= killed && c.at < until)
            .collect();
        let rules = (0..RULES.len())
            .map(|r| rule_figures(r, &checks, killed, promoted))
            .collect();
        Figures {
            what: what.to_owned(),
            promoted_after_ms: promoted.saturating_sub(killed),
            rules,
        }
    }

    /// The longest window of decisions by the failure policies, ms (first to last fallback).
    pub fn window_ms(&self) -> u64 {
        self.rules
            .iter()
            .filter_map(|r| r.fallback.map(|(a, b)| b - a))
            .max()
            .unwrap_or(0)
    }
}

fn rule_figures(rule: usize, checks: &[&Check], killed: u64, promoted: u64) -> RuleFigures {
    let (name, _, policy) = RULES[rule];
    let mine: Vec<&Check> = checks.iter().copied().filter(|c| c.rule == rule).collect();
    let fallbacks: Vec<u64> = mine.iter().filter(|c| c.policy).map(|c| c.at).collect();
    let fallback = fallbacks
        .first()
        .zip(fallbacks.last())
        .map(|(a, b)| (a - killed, b - killed));
    // Admitted per window (Unix second), all nodes; by the policy per window and node.
    let mut admitted: BTreeMap<u64, u64> = BTreeMap::new();
    let mut by_policy: HashMap<(u64, usize), u64> = HashMap::new();
    for c in mine.iter().filter(|c| c.allowed) {
        *admitted.entry(c.window).or_default() += 1;
        if c.policy {
            *by_policy.entry((c.window, c.node)).or_default() += 1;
        }
    }
    let windows: HashSet<u64> = mine.iter().filter(|c| c.policy).map(|c| c.window).collect();
    let over_admitted = windows
        .iter()
        .map(|w| admitted.get(w).copied().unwrap_or(0).saturating_sub(LIMIT))
        .sum();
    let allowance = match policy {
        "open" => None,
        "closed" => Some(0),
        _ => {
            // Each node falling back in a window admits up to its share of the limit.
            let nodes_in: HashSet<(u64, usize)> = mine
                .iter()
                .filter(|c| c.policy)
                .map(|c| (c.window, c.node))
                .collect();
            Some(nodes_in.len() as u64 * LIMIT.div_ceil(NODES))
        }
    };
    let last = mine.iter().filter(|c| c.policy).map(|c| c.window).max();
    let after = last.map_or(killed / 1000, |l| l + 1);
    // (windows are not in the order of the answers: a window's last answers may come after the
    // next window's first)
    let end = mine.iter().map(|c| c.window).max().unwrap_or(0).max(after);
    let over_after = admitted
        .range(after..end)
        .filter(|(_, n)| **n > LIMIT)
        .count();
    RuleFigures {
        rule: name,
        policy,
        fallback,
        by_policy: fallbacks.len(),
        admitted_by_policy: mine.iter().filter(|c| c.policy && c.allowed).count(),
        over_admitted,
        allowance,
        slowest_ms: mine.iter().map(|c| c.took).max().unwrap_or(0),
        most_by_policy_in_a_window: by_policy.values().copied().max().unwrap_or(0),
        over_after,
        exact_after_promotion_ms: (after * 1000) as i64 - promoted as i64,
    }
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: promoted {} ms after the kill",
            self.what, self.promoted_after_ms
        )?;
        for r in &self.rules {
            let window = r.fallback.map_or("none".to_owned(), |(a, b)| {
                format!("{a}..{b} ms after the kill ({} ms)", b - a)
            });
            let allowance = r.allowance.map_or("anything".to_owned(), |a| a.to_string());
            writeln!(
                f,
                "  {:<6} failure={:<6} by policy: {window}, {} decisions ({} admitted); \
                 over-admitted {} (policy allows {allowance}); exact again {} ms after the \
                 promotion; windows over the limit after: {}; slowest answer {} ms",
                r.rule,
                r.policy,
                r.by_policy,
                r.admitted_by_policy,
                r.over_admitted,
                r.exact_after_promotion_ms,
                r.over_after,
                r.slowest_ms
            )?;
        }
        Ok(())
    }
}

/// The queue's figures over the whole run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFigures {
    pub submitted: usize,
    pub submit_failed: usize,
    pub delivered: usize,
    /// Jobs submitted with a 200 and never delivered.
    pub lost: Vec<u64>,
    /// Deliveries whose ack failed (a 503 when no replica took it: the ack may have been
    /// stored, and the job then is not delivered again).
    pub ack_failed: usize,
    /// Jobs delivered again after an ack answered 200.
    pub after_ack: Vec<u64>,
    /// Deliveries beyond the first (a lease expired, an ack that failed: allowed).
    pub redelivered: usize,
}

impl QueueFigures {
    pub fn of(seen: &Seen) -> Self {
        let mut acked_at: HashMap<u64, u64> = HashMap::new();
        for (j, t) in &seen.acked {
            acked_at.entry(*j).or_insert(*t);
        }
        let distinct: HashSet<u64> = seen.delivered.iter().map(|(j, _, _)| *j).collect();
        let lost = seen
            .submitted
            .iter()
            .map(|(j, _)| *j)
            .filter(|j| !distinct.contains(j))
            .collect();
        let after_ack = seen
            .delivered
            .iter()
            .filter(|(j, t, _)| acked_at.get(j).is_some_and(|a| t > a))
            .map(|(j, _, _)| *j)
            .collect();
        QueueFigures {
            ack_failed: seen.delivered.len() - seen.acked.len(),
            submitted: seen.submitted.len(),
            submit_failed: seen.submit_failed.len(),
            delivered: seen.delivered.len(),
            lost,
            after_ack,
            redelivered: seen.delivered.len() - distinct.len(),
        }
    }
}

impl fmt::Display for QueueFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "queue: {} jobs submitted (200), {} submits failed (503: maybe stored), {} \
             deliveries ({} again: an ack that failed or a lease that expired; {} acks \
             failed); lost: {}, delivered again after their ack: {}",
            self.submitted,
            self.submit_failed,
            self.delivered,
            self.redelivered,
            self.ack_failed,
            self.lost.len(),
            self.after_ack.len()
        )
    }
}
