//! An alert's states and transitions, on time passed in (milliseconds since the Unix epoch), so
//! tests drive it with a clock of their own.
//!
//! `inactive` → `pending` when its condition holds → `firing` once it has held for the alert's
//! `for` (at once with `for = 0s`: pending is skipped) → back to `inactive` as soon as the
//! condition does not hold: resolved if it was firing, silently if it was pending. Only firing
//! and resolving are announced.

use serde::{Deserialize, Serialize};

/// Where an alert is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Phase {
    /// Its condition does not hold.
    #[default]
    Inactive,
    /// Its condition holds since `since_ms`, not yet for its duration.
    Pending {
        /// When the condition started to hold.
        since_ms: i64,
    },
    /// It fired at `fired_ms`; its condition holds since `since_ms`.
    Firing {
        /// When the condition started to hold.
        since_ms: i64,
        /// When it fired (Alertmanager's `startsAt`).
        fired_ms: i64,
    },
}

impl Phase {
    /// `inactive`, `pending` or `firing`.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Inactive => "inactive",
            Phase::Pending { .. } => "pending",
            Phase::Firing { .. } => "firing",
        }
    }

    /// Since when it is pending, or firing (when it fired: Alertmanager's `startsAt`, not when
    /// its condition started to hold).
    pub fn since_ms(&self) -> Option<i64> {
        match self {
            Phase::Inactive => None,
            Phase::Pending { since_ms } => Some(*since_ms),
            Phase::Firing { fired_ms, .. } => Some(*fired_ms),
        }
    }

    /// Whether it is firing.
    pub fn is_firing(&self) -> bool {
        matches!(self, Phase::Firing { .. })
    }

    /// The phase after one evaluation at `now_ms` that found the condition `holds`, for an
    /// alert whose duration is `for_ms`; and what is to be announced.
    #[must_use]
    pub fn step(self, holds: bool, now_ms: i64, for_ms: u64) -> (Phase, Option<Transition>) {
        let due = |since_ms: i64| now_ms.saturating_sub(since_ms) >= for_ms as i64;
        match (self, holds) {
            (Phase::Inactive, false) | (Phase::Pending { .. }, false) => (Phase::Inactive, None),
            (Phase::Firing { fired_ms, .. }, false) => (
                Phase::Inactive,
                Some(Transition::Resolved {
                    fired_ms,
                    ended_ms: now_ms,
                }),
            ),
            (Phase::Inactive, true) => {
                Phase::Pending { since_ms: now_ms }.step(true, now_ms, for_ms)
            }
            (Phase::Pending { since_ms }, true) if due(since_ms) => (
                Phase::Firing {
                    since_ms,
                    fired_ms: now_ms,
                },
                Some(Transition::Fired { fired_ms: now_ms }),
            ),
            (p @ Phase::Pending { .. }, true) | (p @ Phase::Firing { .. }, true) => (p, None),
        }
    }
}

/// What an evaluation announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// The alert fired at `fired_ms`.
    Fired {
        /// When.
        fired_ms: i64,
    },
    /// The alert that fired at `fired_ms` resolved at `ended_ms`.
    Resolved {
        /// When it fired.
        fired_ms: i64,
        /// When it resolved.
        ended_ms: i64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the phase through `(now_ms, holds)` steps; answers each step's phase name and
    /// transition.
    fn run(for_ms: u64, steps: &[(i64, bool)]) -> Vec<(&'static str, Option<Transition>)> {
        let mut p = Phase::Inactive;
        steps
            .iter()
            .map(|&(now, holds)| {
                let (next, t) = p.step(holds, now, for_ms);
                p = next;
                (p.name(), t)
            })
            .collect()
    }

    #[test]
    fn pending_then_firing_after_its_duration_then_resolved() {
        let out = run(
            10_000,
            &[
                (0, false),
                (1_000, true),
                (10_999, true),
                (11_000, true),
                (12_000, true),
                (13_000, false),
                (14_000, false),
            ],
        );
        assert_eq!(
            out,
            [
                ("inactive", None),
                ("pending", None),
                ("pending", None),
                ("firing", Some(Transition::Fired { fired_ms: 11_000 })),
                ("firing", None),
                (
                    "inactive",
                    Some(Transition::Resolved {
                        fired_ms: 11_000,
                        ended_ms: 13_000
                    })
                ),
                ("inactive", None),
            ]
        );
    }

    #[test]
    fn pending_that_stops_holding_is_never_announced() {
        let out = run(
            5_000,
            &[(0, true), (4_000, true), (4_500, false), (5_000, true)],
        );
        assert!(out.iter().all(|(_, t)| t.is_none()), "{out:?}");
        assert_eq!(out[3].0, "pending");
        // The duration starts again from the new start.
        let mut p = Phase::Pending { since_ms: 5_000 };
        p = p.step(true, 9_999, 5_000).0;
        assert_eq!(p.name(), "pending");
        assert!(p.step(true, 10_000, 5_000).0.is_firing());
    }

    #[test]
    fn zero_duration_fires_at_once() {
        let out = run(0, &[(7, true), (8, true), (9, false)]);
        assert_eq!(out[0], ("firing", Some(Transition::Fired { fired_ms: 7 })));
        assert_eq!(out[1], ("firing", None));
        assert_eq!(
            out[2],
            (
                "inactive",
                Some(Transition::Resolved {
                    fired_ms: 7,
                    ended_ms: 9
                })
            )
        );
    }

    #[test]
    fn firing_keeps_its_start() {
        let p = Phase::Firing {
            since_ms: 1,
            fired_ms: 2,
        };
        assert_eq!(p.step(true, 100, 0), (p, None));
        assert_eq!(p.since_ms(), Some(2), "since it fired, as its startsAt");
    }
}
