//! The algorithms, as pure state transitions with no I/O and no clock of their own.
//!
//! Each module offers `check(limit, &state, now, cost) -> Decision`, which never changes the
//! state, and `apply(limit, &mut state, now, cost)`, which records an admitted request. Together
//! they are the transition `(state, now, cost, quota) -> (decision, state')`; splitting them lets a
//! store decide several limits first and commit only when all of them admit. A rejected request
//! never changes the state, and a request of cost 0 only looks.
//!
//! Charges (costs learned after the work, applied past the limit up to a bounded debt) and
//! refunds are [`charge()`], a transition of its own.
//!
//! [`State`] wraps the per-algorithm states for stores that keep many keys of mixed algorithms;
//! [`transition`] is the one-call form for people who own their state.

pub mod charge;
pub mod concurrency;
pub mod fixed_window;
pub mod gcra;
pub mod sliding_log;
pub mod sliding_window;
pub mod warmup;

use std::time::Duration;

use crate::clock::Micros;
use crate::decision::Decision;
use crate::limit::{Algorithm, Limit};

pub use charge::{Amount, ChargeError, Charged, charge, chargeable};
pub use concurrency::{ConcurrencyState, Lease};
pub use fixed_window::FixedWindowState;
pub use gcra::GcraState;
pub use sliding_log::SlidingLogState;
pub use sliding_window::SlidingWindowState;
pub use warmup::WarmupState;

#[inline]
pub(crate) fn us(micros: Micros) -> Duration {
    Duration::from_micros(micros)
}

/// The state of one key under any algorithm, 16 bytes: the small states are inline (a fixed
/// window's count is stored as `u32`, which every limit fits, see [`crate::quota::MAX_LIMIT`]),
/// the ones that grow are boxed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum State {
    /// Never used, or dropped.
    #[default]
    Empty,
    /// `token_bucket` / `leaky_bucket`.
    Gcra(GcraState),
    /// `token_bucket` with warm-up, flattened so that the state stays 16 bytes.
    Warmup {
        /// As [`WarmupState::tat`].
        tat: Micros,
        /// As [`WarmupState::cool_in`].
        cool_in: u32,
    },
    /// `fixed_window`, flattened so that the state stays 16 bytes.
    FixedWindow {
        /// As [`FixedWindowState::end`].
        end: Micros,
        /// As [`FixedWindowState::count`].
        count: u32,
    },
    /// `sliding_window`.
    SlidingWindow(Box<SlidingWindowState>),
    /// `sliding_log`.
    SlidingLog(Box<SlidingLogState>),
    /// `concurrency`.
    Concurrency(Box<ConcurrencyState>),
}

static EMPTY_WINDOW: SlidingWindowState = SlidingWindowState {
    head: 0,
    counts: Vec::new(),
    idle_at: 0,
};
static EMPTY_LOG: SlidingLogState = SlidingLogState {
    entries: std::collections::VecDeque::new(),
    idle_at: 0,
};
static EMPTY_LEASES: ConcurrencyState = ConcurrencyState { leases: Vec::new() };

/// A warm-up bucket's state (a state of another kind counts as empty: cold).
fn warmup_state(state: &State) -> WarmupState {
    match *state {
        State::Warmup { tat, cool_in } => WarmupState { tat, cool_in },
        _ => WarmupState::default(),
    }
}

/// The rejection of a request that can never pass: `limit` is 0, or the cost is above what the
/// limit can ever admit.
fn impossible(l: &Limit) -> Decision {
    Decision {
        allowed: false,
        limit: l.limit(),
        remaining: 0,
        reset_after: Duration::ZERO,
        retry_after: None,
        wait: Duration::ZERO,
        lease: None,
    }
}

/// Decides a request of `cost` units at `now` under `limit`, without changing `state`.
///
/// A state of another algorithm (the rule changed its algorithm) counts as empty.
pub fn check(limit: &Limit, state: &State, now: Micros, cost: u64) -> Decision {
    if limit.limit() == 0 && cost > 0 {
        return impossible(limit);
    }
    match limit.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => match limit.warmup() {
            Some(w) => warmup::check(limit, w, &warmup_state(state), now, cost),
            None => {
                let s = match state {
                    State::Gcra(s) => *s,
                    _ => GcraState::default(),
                };
                gcra::check(limit, &s, now, cost)
            }
        },
        Algorithm::FixedWindow => {
            let s = match *state {
                State::FixedWindow { end, count } => FixedWindowState {
                    end,
                    count: u64::from(count),
                },
                _ => FixedWindowState::default(),
            };
            fixed_window::check(limit, &s, now, cost)
        }
        Algorithm::SlidingWindow => {
            let s = match state {
                State::SlidingWindow(s) => s,
                _ => &EMPTY_WINDOW,
            };
            sliding_window::check(limit, s, now, cost)
        }
        Algorithm::SlidingLog => {
            let s = match state {
                State::SlidingLog(s) => s,
                _ => &EMPTY_LOG,
            };
            sliding_log::check(limit, s, now, cost)
        }
        Algorithm::Concurrency => {
            let s = match state {
                State::Concurrency(s) => s,
                _ => &EMPTY_LEASES,
            };
            concurrency::check(limit, s, now, cost)
        }
    }
}

/// Records an admitted request of `cost` units at `now`; `lease` is the id granted by a
/// `concurrency` limit (ignored by the others). Does nothing for cost 0.
pub fn apply(limit: &Limit, state: &mut State, now: Micros, cost: u64, lease: u64) {
    if cost == 0 {
        return;
    }
    match limit.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => match limit.warmup() {
            Some(w) => {
                let mut s = warmup_state(state);
                warmup::apply(limit, w, &mut s, now, cost);
                *state = State::Warmup {
                    tat: s.tat,
                    cool_in: s.cool_in,
                };
            }
            None => {
                if !matches!(state, State::Gcra(_)) {
                    *state = State::Gcra(GcraState::default());
                }
                if let State::Gcra(s) = state {
                    gcra::apply(limit, s, now, cost);
                }
            }
        },
        Algorithm::FixedWindow => {
            let mut s = match *state {
                State::FixedWindow { end, count } => FixedWindowState {
                    end,
                    count: u64::from(count),
                },
                _ => FixedWindowState::default(),
            };
            fixed_window::apply(limit, &mut s, now, cost);
            // count <= limit <= MAX_LIMIT = u32::MAX, checked before apply.
            *state = State::FixedWindow {
                end: s.end,
                count: u32::try_from(s.count).unwrap_or(u32::MAX),
            };
        }
        Algorithm::SlidingWindow => {
            if !matches!(state, State::SlidingWindow(_)) {
                *state = State::SlidingWindow(Box::default());
            }
            if let State::SlidingWindow(s) = state {
                sliding_window::apply(limit, s, now, cost);
            }
        }
        Algorithm::SlidingLog => {
            if !matches!(state, State::SlidingLog(_)) {
                *state = State::SlidingLog(Box::default());
            }
            if let State::SlidingLog(s) = state {
                sliding_log::apply(limit, s, now, cost);
            }
        }
        Algorithm::Concurrency => {
            if !matches!(state, State::Concurrency(_)) {
                *state = State::Concurrency(Box::default());
            }
            if let State::Concurrency(s) = state {
                concurrency::apply(limit, s, now, cost, lease);
            }
        }
    }
}

/// The transition in one call: decides and, when admitted, records the request.
///
/// # Examples
/// ```
/// use flowgate_core::{algorithm, Algorithm, Limit, Quota, State};
/// let limit = Limit::new(Algorithm::SlidingLog, "2/s".parse::<Quota>().unwrap()).unwrap();
/// let mut state = State::default();
/// assert!(algorithm::transition(&limit, &mut state, 0, 1, 0).allowed);
/// assert!(algorithm::transition(&limit, &mut state, 1, 1, 0).allowed);
/// assert!(!algorithm::transition(&limit, &mut state, 2, 1, 0).allowed);
/// ```
pub fn transition(
    limit: &Limit,
    state: &mut State,
    now: Micros,
    cost: u64,
    lease: u64,
) -> Decision {
    let mut d = check(limit, state, now, cost);
    if d.allowed {
        apply(limit, state, now, cost, lease);
        if limit.algorithm() == Algorithm::Concurrency && cost > 0 {
            d.lease = Some(lease);
        }
    }
    d
}

/// Releases a `concurrency` lease; returns whether it was held.
pub fn release(state: &mut State, lease: u64) -> bool {
    match state {
        State::Concurrency(s) => concurrency::release(s, lease),
        _ => false,
    }
}

/// Whether `state` is back to empty at `now`, so a store may drop it. Every state knows when it
/// empties, so this needs no limit.
pub fn is_idle(state: &State, now: Micros) -> bool {
    match state {
        State::Empty => true,
        State::Gcra(s) => gcra::is_idle(s, now),
        State::Warmup { tat, cool_in } => warmup::is_idle(
            &WarmupState {
                tat: *tat,
                cool_in: *cool_in,
            },
            now,
        ),
        State::FixedWindow { end, count } => fixed_window::is_idle(
            &FixedWindowState {
                end: *end,
                count: u64::from(*count),
            },
            now,
        ),
        State::SlidingWindow(s) => sliding_window::is_idle(s, now),
        State::SlidingLog(s) => sliding_log::is_idle(s, now),
        State::Concurrency(s) => concurrency::is_idle(s, now),
    }
}

/// What `state` holds at `now`, in the unit of [`capacity`]: what the key would gain if its state
/// were dropped. (Microseconds of a bucket's debt for `token_bucket` and `leaky_bucket`, a
/// warm-up bucket's too: dropping its state would make it cold, which admits less; units
/// counted for the others, an upper bound for a sliding window, whose oldest bucket may be
/// partly out.) 0 when the state is idle.
pub fn held(state: &State, now: Micros) -> u64 {
    if is_idle(state, now) {
        return 0;
    }
    match state {
        State::Empty => 0,
        State::Gcra(s) => s.tat.saturating_sub(now),
        State::Warmup { tat, .. } => tat.saturating_sub(now),
        State::FixedWindow { count, .. } => u64::from(*count),
        State::SlidingWindow(s) => s.counts.iter().sum(),
        State::SlidingLog(s) => s.entries.iter().map(|e| e.1).sum(),
        State::Concurrency(s) => s
            .leases
            .iter()
            .filter(|l| l.expires > now)
            .map(|l| l.cost)
            .sum(),
    }
}

/// When `state` empties if nothing more is recorded: a later time means a more recent use (to the
/// window's bucket for a sliding window, to the window for a fixed one).
pub fn empties_at(state: &State) -> Micros {
    match state {
        State::Empty => 0,
        State::Gcra(s) => s.tat,
        State::Warmup { tat, cool_in } => tat + u64::from(*cool_in),
        State::FixedWindow { end, .. } => *end,
        State::SlidingWindow(s) => s.idle_at,
        State::SlidingLog(s) => s.idle_at,
        State::Concurrency(s) => s.leases.iter().map(|l| l.expires).max().unwrap_or(0),
    }
}

/// What a full state of `limit` holds, in the unit of [`held`]: `held / capacity` is how close a
/// key is to its limit, comparable across limits and algorithms.
pub fn capacity(limit: &Limit) -> u64 {
    match limit.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => {
            limit.burst().saturating_mul(limit.emission_interval())
        }
        _ => limit.limit(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quota;

    #[test]
    fn a_full_state_holds_its_capacity() {
        for a in Algorithm::ALL {
            let l = Limit::new(a, "4/s".parse::<Quota>().unwrap()).unwrap();
            let mut s = State::default();
            assert_eq!(held(&s, 10), 0, "{a}");
            transition(&l, &mut s, 10, 1, 1);
            let one = held(&s, 10);
            let mut lease = 2;
            while transition(&l, &mut s, 10, 1, lease).allowed {
                lease += 1;
            }
            assert!(one > 0 && one <= capacity(&l), "{a}: {one}");
            assert_eq!(held(&s, 10), capacity(&l), "{a}");
            assert_eq!(held(&s, 10 + 2_000_000), 0, "{a}: idle two windows later");
        }
    }

    #[test]
    fn limit_zero_blocks_everything_but_peeks() {
        for a in Algorithm::ALL {
            let l = Limit::new(a, "0/s".parse::<Quota>().unwrap()).unwrap();
            let mut s = State::default();
            assert!(transition(&l, &mut s, 10, 1, 1).is_impossible(), "{a}");
            assert!(transition(&l, &mut s, 10, 0, 1).allowed, "{a} peek");
            assert_eq!(s, State::Empty, "{a}");
        }
    }

    #[test]
    fn peek_never_changes_state() {
        for a in Algorithm::ALL {
            let l = Limit::new(a, "3/s".parse::<Quota>().unwrap()).unwrap();
            let mut s = State::default();
            transition(&l, &mut s, 10, 2, 1);
            let before = s.clone();
            let d = transition(&l, &mut s, 11, 0, 2);
            assert!(d.allowed, "{a}");
            assert_eq!(d.remaining, 1, "{a}");
            assert_eq!(s, before, "{a}");
        }
    }

    #[test]
    fn state_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<State>(), 16);
    }

    #[test]
    fn a_changed_algorithm_starts_from_empty() {
        let fw = Limit::new(Algorithm::FixedWindow, "1/s".parse::<Quota>().unwrap()).unwrap();
        let tb = Limit::new(Algorithm::TokenBucket, "1/s".parse::<Quota>().unwrap()).unwrap();
        let mut s = State::default();
        assert!(transition(&fw, &mut s, 10, 1, 0).allowed);
        assert!(transition(&tb, &mut s, 10, 1, 0).allowed);
        assert!(matches!(s, State::Gcra(_)));
    }
}
