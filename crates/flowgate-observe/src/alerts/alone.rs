//! Evaluating alone while the cluster's lease cannot be held, and handing the alerts back to the
//! cluster when it can.
//!
//! While Redis does not answer, no node can hold the lease, so each node evaluates the alerts on
//! its own figures, starting from the states it knew (the cluster's, as it last read them), and
//! announces its own transitions. Every node sends the same labels for the same alert, so the
//! same fingerprint: Alertmanager merges them into one alert (and webhook receivers pair them).
//!
//! When Redis answers again, one rule keeps every `resolved`:
//! - **The newest knowledge wins.** The node that takes the lease starts from its own states
//!   if it evaluated alone (they are newer than any stored before the outage), the stored ones
//!   filling the alerts it lacks; otherwise from the stored states, its own copy filling the
//!   alerts Redis lost (a Redis restarted empty). An alert known firing is thus resolved, with
//!   its first `startsAt`, when its condition stops holding, and not announced again.
//! - **A follower resolves what it alone announced.** An alert this node announced firing while
//!   alone, which the cluster's stored states do not show firing in two reads in a row (the
//!   evaluator writes them each second), is resolved by this node. One the cluster's stored
//!   states show firing is the evaluator's to resolve; this node logs when it has.

use std::collections::BTreeMap;

use super::machine::Transition;
use super::{Announcement, Stored};
use flowgate_config::alert::AlertSpec;

/// Reads in a row that must miss an alert before its follower resolves it.
const MISSES: u8 = 2;

/// One alert this node announced firing while alone.
struct Fired {
    spec: AlertSpec,
    fired_ms: i64,
    misses: u8,
}

/// Whether this node evaluates alone, and what it announced meanwhile.
#[derive(Default)]
pub(super) struct Alone {
    on: bool,
    fired: BTreeMap<String, Fired>,
    /// Alerts it announced firing alone that the cluster's evaluator took over (shown firing
    /// in the stored states): it resolves them, and this node logs when it has.
    handed: BTreeMap<String, ()>,
}

impl Alone {
    /// Whether it evaluates alone now.
    pub(super) fn is_on(&self) -> bool {
        self.on
    }

    /// It cannot hold the lease: answers whether it just started to evaluate alone.
    pub(super) fn enter(&mut self) -> bool {
        !std::mem::replace(&mut self.on, true)
    }

    /// It can hold the lease or follow again: answers whether it evaluated alone until now.
    pub(super) fn leave(&mut self) -> bool {
        std::mem::replace(&mut self.on, false)
    }

    /// Keeps what this node announced while alone: firings to resolve, resolutions done.
    pub(super) fn announced(&mut self, out: &[Announcement]) {
        for a in out {
            match a.transition {
                Transition::Fired { fired_ms } => {
                    self.fired.insert(
                        a.spec.name.clone(),
                        Fired {
                            spec: a.spec.clone(),
                            fired_ms,
                            misses: 0,
                        },
                    );
                }
                Transition::Resolved { .. } => {
                    self.fired.remove(&a.spec.name);
                }
            }
        }
    }

    /// This node evaluates for the cluster now: the alerts it announced alone are in the states
    /// it starts from, and resolve with them.
    pub(super) fn hand_over(&mut self) {
        self.fired.clear();
        self.handed.clear();
    }

    /// As a follower that read `stored`: the alerts it announced alone, taken over by the
    /// cluster's evaluator, that the stored states no longer show firing (the evaluator
    /// resolved them).
    pub(super) fn resolved_by_cluster(&mut self, stored: &BTreeMap<String, Stored>) -> Vec<String> {
        let mut out = Vec::new();
        self.handed.retain(|name, ()| {
            let firing = stored.get(name).is_some_and(|s| s.phase.is_firing());
            if !firing {
                out.push(name.clone());
            }
            firing
        });
        out
    }

    /// As a follower that read `stored` at `now_ms`: the resolutions of the alerts it announced
    /// alone that the cluster has not shown firing [`MISSES`] times in a row.
    pub(super) fn follow(
        &mut self,
        stored: &BTreeMap<String, Stored>,
        now_ms: i64,
    ) -> Vec<Announcement> {
        let mut out = Vec::new();
        let handed = &mut self.handed;
        self.fired.retain(|name, f| {
            if stored.get(name).is_some_and(|s| s.phase.is_firing()) {
                // The cluster's evaluator has it: it resolves it.
                handed.insert(name.clone(), ());
                return false;
            }
            f.misses += 1;
            if f.misses < MISSES {
                return true;
            }
            out.push(Announcement {
                spec: f.spec.clone(),
                transition: Transition::Resolved {
                    fired_ms: f.fired_ms,
                    ended_ms: now_ms,
                },
                reading: super::condition::Reading::default(),
            });
            false
        });
        out
    }
}

/// The states the node taking the lease starts from: `mine` first when it evaluated alone
/// (`was_alone`), else `stored` first; the other fills the alerts the first lacks, and a firing
/// alert is never replaced by the other's inactive or pending one.
pub(super) fn merge(
    stored: BTreeMap<String, Stored>,
    mine: BTreeMap<String, Stored>,
    was_alone: bool,
) -> BTreeMap<String, Stored> {
    let (mut first, second) = if was_alone {
        (mine, stored)
    } else {
        (stored, mine)
    };
    for (name, s) in second {
        let keep = first
            .get(&name)
            .is_some_and(|f| f.phase.is_firing() || !s.phase.is_firing());
        if !keep {
            first.insert(name, s);
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::super::machine::Phase;
    use super::*;

    fn firing(fired_ms: i64) -> Stored {
        Stored {
            phase: Phase::Firing {
                since_ms: fired_ms,
                fired_ms,
            },
            value: None,
        }
    }

    fn states(list: &[(&str, Stored)]) -> BTreeMap<String, Stored> {
        list.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect()
    }

    #[test]
    fn a_redis_restarted_empty_keeps_what_the_node_knew_firing() {
        let mine = states(&[("a", firing(1)), ("b", Stored::default())]);
        let merged = merge(BTreeMap::new(), mine.clone(), false);
        assert_eq!(merged, mine);
    }

    #[test]
    fn the_newest_knowledge_wins() {
        let stored = states(&[("a", firing(1)), ("b", Stored::default()), ("c", firing(3))]);
        let mine = states(&[("a", Stored::default()), ("b", firing(2))]);
        // Alone during the outage: its own states are the newest; the stored fill the gaps, and
        // a firing one is never replaced by an inactive one.
        let merged = merge(stored.clone(), mine.clone(), true);
        assert_eq!(merged["a"], firing(1), "firing is not forgotten");
        assert_eq!(merged["b"], firing(2));
        assert_eq!(merged["c"], firing(3));
        // Not alone: the stored states first.
        let merged = merge(stored, mine, false);
        assert_eq!(merged["a"], firing(1));
        assert_eq!(
            merged["b"],
            firing(2),
            "its firing is not replaced by inactive"
        );
        assert_eq!(merged["c"], firing(3));
    }

    #[test]
    fn a_follower_resolves_what_it_alone_announced_after_two_misses() {
        let spec = |name: &str| AlertSpec {
            name: name.into(),
            kind: flowgate_config::alert::AlertKind::StoreDegraded,
            for_ms: 0,
            webhooks: vec![],
            alertmanagers: vec![],
            severity: None,
            summary: None,
            description: None,
        };
        let fired = |name: &str, at| Announcement {
            spec: spec(name),
            transition: Transition::Fired { fired_ms: at },
            reading: super::super::condition::Reading::default(),
        };
        let mut alone = Alone::default();
        assert!(alone.enter());
        assert!(!alone.enter());
        alone.announced(&[fired("kept", 10), fired("dropped", 11), fired("done", 12)]);
        alone.announced(&[Announcement {
            transition: Transition::Resolved {
                fired_ms: 12,
                ended_ms: 13,
            },
            ..fired("done", 12)
        }]);
        assert!(alone.leave());
        let stored = states(&[("kept", firing(5))]);
        assert!(
            alone.follow(&stored, 20).is_empty(),
            "one miss is not enough"
        );
        let out = alone.follow(&stored, 21);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].spec.name, "dropped");
        assert_eq!(
            out[0].transition,
            Transition::Resolved {
                fired_ms: 11,
                ended_ms: 21
            }
        );
        assert!(
            alone.follow(&BTreeMap::new(), 22).is_empty(),
            "nothing left"
        );
        // `kept`, taken over by the cluster's evaluator: this node only notes its resolution.
        assert!(
            alone.resolved_by_cluster(&stored).is_empty(),
            "still firing"
        );
        let resolved = states(&[("kept", Stored::default())]);
        assert_eq!(alone.resolved_by_cluster(&resolved), ["kept"]);
        assert!(
            alone.resolved_by_cluster(&resolved).is_empty(),
            "noted once"
        );
    }
}
