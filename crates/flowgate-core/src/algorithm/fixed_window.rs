//! `fixed_window`: one counter per window, windows aligned to the Unix epoch so every node agrees
//! where a window starts, or calendar periods (a day, a week from Monday, a month) in a time
//! zone ([`crate::calendar`]).
//!
//! Admits when `count + cost <= limit`. Guarantee: at most `limit` in each aligned window, but up
//! to `2 x limit` in a window of the same length that straddles a boundary (`limit` at the end of
//! one window and `limit` at the start of the next). Cheap: one counter per key.

use crate::clock::Micros;
use crate::decision::Decision;
use crate::limit::Limit;

use super::us;

/// Fixed-window state: the end of the window counted and its count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FixedWindowState {
    /// End of the window counted, microseconds since the epoch (a multiple of the window, or the
    /// end of a calendar period).
    pub end: Micros,
    /// Units admitted in that window.
    pub count: u64,
}

/// The end of the window holding `now`.
#[inline]
pub fn window_end(l: &Limit, now: Micros) -> Micros {
    match l.quota().calendar() {
        Some(c) => c.period(now).1,
        None => (now / l.window() + 1) * l.window(),
    }
}

/// The end of the current window and its count.
#[inline]
fn current(l: &Limit, s: &FixedWindowState, now: Micros) -> (Micros, u64) {
    let end = window_end(l, now);
    // A clock that stepped back keeps counting in the newer window (conservative).
    if s.end >= end {
        (s.end, s.count)
    } else {
        (end, 0)
    }
}

/// Decides without changing the state.
#[inline]
pub fn check(l: &Limit, s: &FixedWindowState, now: Micros, cost: u64) -> Decision {
    let (end, count) = current(l, s, now);
    let allowed = count + cost <= l.limit();
    let used = if allowed { count + cost } else { count };
    Decision {
        allowed,
        limit: l.limit(),
        remaining: l.limit().saturating_sub(used),
        reset_after: if used > 0 { us(end - now) } else { us(0) },
        retry_after: (!allowed && cost <= l.limit()).then(|| us(end - now)),
        wait: us(0),
        lease: None,
    }
}

/// Applies an admitted request.
#[inline]
pub fn apply(l: &Limit, s: &mut FixedWindowState, now: Micros, cost: u64) {
    let (end, count) = current(l, s, now);
    *s = FixedWindowState {
        end,
        count: count + cost,
    };
}

/// Charges `n` units at `now`, past the limit up to `limit + max_debt` (and the 32 bits the memory
/// store keeps a count in); answers the units applied.
pub fn charge(l: &Limit, s: &mut FixedWindowState, now: Micros, n: u64) -> u64 {
    let (end, count) = current(l, s, now);
    let ceiling = (l.limit() + l.max_debt()).min(crate::quota::MAX_LIMIT);
    let applied = n.min(ceiling.saturating_sub(count));
    if applied > 0 {
        *s = FixedWindowState {
            end,
            count: count + applied,
        };
    }
    applied
}

/// Gives back up to `n` units of the current window, floored at 0; answers the units given back.
pub fn refund(l: &Limit, s: &mut FixedWindowState, now: Micros, n: u64) -> u64 {
    let (end, count) = current(l, s, now);
    let given = n.min(count);
    if given > 0 {
        *s = FixedWindowState {
            end,
            count: count - given,
        };
    }
    given
}

/// Gives back up to `n` units a reservation took at `taken`: only while the window counted at
/// `now` is the window of `taken` (once it ended, its units count no more); floored at 0;
/// answers the units given back.
pub fn release(l: &Limit, s: &mut FixedWindowState, now: Micros, n: u64, taken: Micros) -> u64 {
    if current(l, s, now).0 != window_end(l, taken) {
        return 0;
    }
    refund(l, s, now, n)
}

/// The units counted beyond the limit at `now`.
pub fn debt(l: &Limit, s: &FixedWindowState, now: Micros) -> u64 {
    current(l, s, now).1.saturating_sub(l.limit())
}

/// Whether the state is empty at `now`.
#[inline]
pub fn is_idle(s: &FixedWindowState, now: Micros) -> bool {
    s.count == 0 || s.end <= now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Quota};
    use std::time::Duration;

    #[test]
    fn admits_exactly_limit_not_limit_plus_one() {
        // Design §1: `limit >= count` after counting admits limit + 1.
        let l = Limit::new(Algorithm::FixedWindow, "3/s".parse::<Quota>().unwrap()).unwrap();
        let mut s = FixedWindowState::default();
        let now = 7_000_000 + 250_000;
        for _ in 0..3 {
            assert!(check(&l, &s, now, 1).allowed);
            apply(&l, &mut s, now, 1);
        }
        let d = check(&l, &s, now, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Some(Duration::from_millis(750)));
        assert!(!check(&l, &s, 7_999_999, 1).allowed);
        assert!(check(&l, &s, 8_000_000, 1).allowed);
    }

    #[test]
    fn straddling_boundary_admits_two_limits_as_documented() {
        let l = Limit::new(Algorithm::FixedWindow, "2/s".parse::<Quota>().unwrap()).unwrap();
        let mut s = FixedWindowState::default();
        let mut admitted = 0;
        for now in [1_999_999, 1_999_999, 2_000_000, 2_000_000] {
            if check(&l, &s, now, 1).allowed {
                apply(&l, &mut s, now, 1);
                admitted += 1;
            }
        }
        assert_eq!(admitted, 4, "2 x limit within 2 us across the boundary");
    }

    #[test]
    fn a_calendar_day_counts_from_local_midnight_to_the_next() {
        // Europe/Paris, 2026-03-29: 23 hours, from 2026-03-28T23:00Z to 2026-03-29T22:00Z.
        let q = "2/day"
            .parse::<Quota>()
            .unwrap()
            .with_zone(crate::Tz::Europe__Paris);
        let l = Limit::new(Algorithm::FixedWindow, q).unwrap();
        let midnight = 1_774_738_800_000_000;
        let next = midnight + 23 * 3_600_000_000;
        let mut s = FixedWindowState::default();
        for now in [midnight, next - 1] {
            assert!(check(&l, &s, now, 1).allowed);
            apply(&l, &mut s, now, 1);
        }
        let d = check(&l, &s, next - 1, 1);
        assert_eq!((d.allowed, d.retry_after), (false, Some(us(1))));
        assert!(
            !check(&l, &s, midnight - 1, 1).allowed,
            "an earlier clock counts here too"
        );
        assert!(check(&l, &s, next, 1).allowed);
        assert_eq!(check(&l, &s, next, 1).reset_after, us(24 * 3_600_000_000));
    }
}
