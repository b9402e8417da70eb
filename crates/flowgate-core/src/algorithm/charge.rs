//! Charges and refunds: costs learned after the work is done, applied even past the limit up to
//! a bounded debt, and costs given back, floored at empty (docs/algorithms.md, "Charges, debt
//! and refunds").
//!
//! A charge never fails for being over the limit: the units beyond `limit + max_debt` are
//! dropped and reported. It is a transition of its own, apart from [`super::check`] and
//! [`super::apply`], so that ordinary checks pay nothing for it.

use crate::clock::Micros;
use crate::decision::Decision;
use crate::limit::{Algorithm, Limit};

use super::{
    FixedWindowState, GcraState, State, check, fixed_window, gcra, sliding_log, sliding_window,
};

/// What a charge does to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amount {
    /// Counts units, even past the limit, up to `max_debt` beyond it.
    Charge(u64),
    /// Gives units back (Envoy's `is_negative_hits`), floored at empty.
    Refund(u64),
    /// Gives back the `units` a reservation took at `taken` (an admitted decision of cost
    /// `units`), as far as they still count: never more than `units`, never units of a window
    /// that has ended (docs/algorithms.md, "Releasing a reservation").
    Release {
        /// The units the reservation took.
        units: u64,
        /// The instant it took them, on the store's clock.
        taken: Micros,
    },
}

impl Amount {
    /// Gives back `units` that a reservation took at `taken`, as far as they still count now
    /// (the units of a window that has ended count no more, and are not given back).
    pub fn release(units: u64, taken: Micros) -> Amount {
        Amount::Release { units, taken }
    }

    /// The units asked for.
    pub fn units(self) -> u64 {
        match self {
            Amount::Charge(n) | Amount::Refund(n) => n,
            Amount::Release { units, .. } => units,
        }
    }

    /// Whether the amount gives units back (a refund or a release).
    pub fn gives_back(self) -> bool {
        !matches!(self, Amount::Charge(_))
    }
}

/// What a charge or refund did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Charged {
    /// Units counted (a charge) or given back (a refund).
    pub applied: u64,
    /// Units not applied: a charge's units past `max_debt`, a refund's units past empty.
    pub dropped: u64,
    /// Units counted beyond the limit after it.
    pub debt: u64,
    /// What a check of cost 0 is told now: not allowed means the key is over its limit (in
    /// debt), and `retry_after` is when it no longer is; `remaining` and `reset_after` as for
    /// any check.
    pub decision: Decision,
}

/// Why a limit takes no charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChargeError {
    /// The algorithm has no meaning for a cost learned afterwards.
    #[error("{algorithm} takes no charges or refunds: {why}")]
    Unsupported {
        /// The algorithm, as rules name it.
        algorithm: &'static str,
        /// Why, and what to use instead.
        why: &'static str,
    },
}

/// Whether `limit` takes charges and refunds (see the module documentation).
///
/// # Errors
/// [`ChargeError::Unsupported`] for `concurrency` and for a token bucket with a warm-up.
pub fn chargeable(limit: &Limit) -> Result<(), ChargeError> {
    match limit.algorithm() {
        Algorithm::Concurrency => Err(ChargeError::Unsupported {
            algorithm: "concurrency",
            why: "it counts work in flight, given back when the work ends, so a cost learned after the work has nothing to count; charge a rate limit beside it",
        }),
        Algorithm::TokenBucket if limit.warmup().is_some() => Err(ChargeError::Unsupported {
            algorithm: "token_bucket with warmup",
            why: "its rate depends on how warm it is, so a debt has no rate to be paid back at; charge a plain token_bucket beside it",
        }),
        _ => Ok(()),
    }
}

/// Charges, refunds or releases `amount` at `now` under `limit`: a charge is applied even past
/// the limit, up to `limit.max_debt()` beyond it; a refund is floored at empty; a release gives
/// back a reservation's units as far as they still count at `now`. An amount of 0 only looks.
/// A state of another algorithm counts as empty.
///
/// # Errors
/// [`ChargeError`] when the limit takes no charges ([`chargeable`]); the state is unchanged.
///
/// # Examples
/// ```
/// use flowgate_core::algorithm::{self, Amount};
/// use flowgate_core::{Algorithm, Limit, Quota, State};
/// let limit = Limit::builder(Algorithm::FixedWindow, "100/m".parse::<Quota>().unwrap())
///     .max_debt(50)
///     .build()
///     .unwrap();
/// let mut state = State::default();
/// let c = algorithm::charge(&limit, &mut state, 0, Amount::Charge(180)).unwrap();
/// assert_eq!((c.applied, c.dropped, c.debt, c.decision.allowed), (150, 30, 50, false));
/// let r = algorithm::charge(&limit, &mut state, 0, Amount::Refund(200)).unwrap();
/// assert_eq!((r.applied, r.dropped, r.debt, r.decision.allowed), (150, 50, 0, true));
/// ```
pub fn charge(
    limit: &Limit,
    state: &mut State,
    now: Micros,
    amount: Amount,
) -> Result<Charged, ChargeError> {
    chargeable(limit)?;
    let applied = match amount.units() {
        0 => 0,
        n => change(limit, state, now, amount, n),
    };
    Ok(Charged {
        applied,
        dropped: amount.units() - applied,
        debt: debt(limit, state, now),
        decision: check(limit, state, now, 0),
    })
}

/// Applies `n > 0` units of `amount` to a chargeable limit's state; answers the units applied.
fn change(limit: &Limit, state: &mut State, now: Micros, amount: Amount, n: u64) -> u64 {
    let charging = matches!(amount, Amount::Charge(_));
    let taken = match amount {
        Amount::Release { taken, .. } => Some(taken),
        _ => None,
    };
    match limit.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => {
            let mut s = match state {
                State::Gcra(s) => *s,
                _ => GcraState::default(),
            };
            // A release is a refund here: the TAT holds no trace of when units were taken, and
            // whatever time already gave back is floored at `now`.
            let applied = if charging {
                gcra::charge(limit, &mut s, now, n)
            } else {
                gcra::refund(limit, &mut s, now, n)
            };
            if applied > 0 {
                *state = State::Gcra(s);
            }
            applied
        }
        Algorithm::FixedWindow => {
            let mut s = fixed(state);
            let applied = match taken {
                _ if charging => fixed_window::charge(limit, &mut s, now, n),
                Some(taken) => fixed_window::release(limit, &mut s, now, n, taken),
                None => fixed_window::refund(limit, &mut s, now, n),
            };
            if applied > 0 {
                // count <= MAX_LIMIT = u32::MAX, bounded by fixed_window::charge.
                *state = State::FixedWindow {
                    end: s.end,
                    count: u32::try_from(s.count).unwrap_or(u32::MAX),
                };
            }
            applied
        }
        Algorithm::SlidingWindow => {
            if !matches!(state, State::SlidingWindow(_)) {
                if !charging {
                    return 0;
                }
                *state = State::SlidingWindow(Box::default());
            }
            let State::SlidingWindow(s) = state else {
                return 0;
            };
            match taken {
                _ if charging => sliding_window::charge(limit, s, now, n),
                Some(taken) => sliding_window::release(limit, s, now, n, taken),
                None => sliding_window::refund(limit, s, now, n),
            }
        }
        Algorithm::SlidingLog => {
            if !matches!(state, State::SlidingLog(_)) {
                if !charging {
                    return 0;
                }
                *state = State::SlidingLog(Box::default());
            }
            let State::SlidingLog(s) = state else {
                return 0;
            };
            match taken {
                _ if charging => sliding_log::charge(limit, s, now, n),
                Some(taken) => sliding_log::release(limit, s, now, n, taken),
                None => sliding_log::refund(limit, s, now, n),
            }
        }
        // Refused by `chargeable`.
        Algorithm::Concurrency => 0,
    }
}

fn fixed(state: &State) -> FixedWindowState {
    match *state {
        State::FixedWindow { end, count } => FixedWindowState {
            end,
            count: u64::from(count),
        },
        _ => FixedWindowState::default(),
    }
}

/// The units `state` holds beyond `limit` at `now` (0 for the algorithms that take no charges).
pub fn debt(limit: &Limit, state: &State, now: Micros) -> u64 {
    match (limit.algorithm(), state) {
        (Algorithm::TokenBucket | Algorithm::LeakyBucket, State::Gcra(s)) => {
            gcra::debt(limit, s, now)
        }
        (Algorithm::FixedWindow, State::FixedWindow { .. }) => {
            fixed_window::debt(limit, &fixed(state), now)
        }
        (Algorithm::SlidingWindow, State::SlidingWindow(s)) => {
            sliding_window::counted(limit, s, now).saturating_sub(limit.limit())
        }
        (Algorithm::SlidingLog, State::SlidingLog(s)) => {
            sliding_log::counted(limit, s, now).saturating_sub(limit.limit())
        }
        _ => 0,
    }
}
