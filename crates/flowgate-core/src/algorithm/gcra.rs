//! `token_bucket` and `leaky_bucket`, and the queues' release schedule: the Generic Cell Rate
//! Algorithm over one theoretical arrival time (TAT).
//!
//! [`reserve`] is the algorithm, written once for every caller (the limiter here, the queues in
//! [`crate::queue::release`]; the Redis scripts' twin is `reserve` in `gcra.lua`). Its one
//! convention: with emission interval `T` and burst `b`, the tolerance is `tau = b * T`. A
//! request of `span = n * T` at `now` takes the slot ending at `new_tat = max(tat, now) + span`
//! and must wait `wait = max(0, new_tat - now - tau)`; it is admitted when `wait <= max_wait`.
//!
//! For the limiter, `T = ceil(window / limit)` and `n` is the request's cost:
//!
//! - `reject` mode admits when `wait == 0`: from a full bucket `burst` units pass at once, then one
//!   unit every `T`. "20/s with burst 5" admits 5 at once and then one every 50 ms; after 250 ms of
//!   silence the bucket is full again. A cost above `burst` can never pass.
//! - `delay` mode admits when `wait <= max_wait` and reserves the slot: queued callers are spaced
//!   exactly `T` apart in reservation order and each is told its `wait`.
//!
//! A rejection changes nothing. `retry_after` is exact: `tat + n*T - tau - max_wait - now`.

use crate::clock::Micros;
use crate::decision::Decision;
use crate::limit::Limit;

use super::us;

/// GCRA state: the theoretical arrival time, 0 when never used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcraState {
    /// Theoretical arrival time, microseconds since the epoch.
    pub tat: Micros,
}

/// What [`reserve`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// Admitted: the request's slot starts `wait` µs after `now` (0 within the tolerance), and the
    /// TAT becomes `tat`.
    Admitted {
        /// µs from `now` to the request's slot, at most `max_wait`.
        wait: Micros,
        /// The new TAT.
        tat: Micros,
    },
    /// Refused: the slot is further than `max_wait` ahead; it is within reach `retry_after` µs
    /// from `now`. Nothing is reserved.
    Rejected {
        /// µs until the same request would be admitted.
        retry_after: Micros,
    },
}

/// GCRA's one step: a request of `span` µs of the schedule (`cost * T`) at `now`, on a TAT of
/// `tat`, with tolerance `tau = burst * T`, admitted when its wait is at most `max_wait`. See the
/// [module documentation](self).
///
/// `tat.max(now) + span` must not overflow: the limiter bounds `span` by its largest cost, and
/// every instant stays below 2^53.
///
/// # Examples
/// ```
/// use flowgate_core::algorithm::gcra::{Reservation, reserve};
/// // T = 100 µs, burst 3 (tau 300): three at once after idle, then one per 100 µs.
/// let mut tat = 0;
/// for _ in 0..3 {
///     let Reservation::Admitted { wait: 0, tat: t } = reserve(tat, 1_000, 100, 300, 0) else {
///         panic!("a burst of 3");
///     };
///     tat = t;
/// }
/// assert_eq!(reserve(tat, 1_000, 100, 300, 0), Reservation::Rejected { retry_after: 100 });
/// assert_eq!(
///     reserve(tat, 1_000, 100, 300, 250),
///     Reservation::Admitted { wait: 100, tat: 1_400 }
/// );
/// ```
#[inline]
pub fn reserve(
    tat: Micros,
    now: Micros,
    span: Micros,
    tau: Micros,
    max_wait: Micros,
) -> Reservation {
    let new_tat = tat.max(now) + span;
    let wait = (new_tat - now).saturating_sub(tau);
    if wait <= max_wait {
        Reservation::Admitted { wait, tat: new_tat }
    } else {
        Reservation::Rejected {
            retry_after: wait - max_wait,
        }
    }
}

/// The largest cost that can ever be admitted: `burst`, plus in delay mode the units that fit
/// in `max_wait`.
#[inline]
pub fn max_cost(l: &Limit) -> u64 {
    l.max_cost()
}

/// Decides a request of `cost` units at `now` without changing the state.
#[inline]
pub fn check(l: &Limit, s: &GcraState, now: Micros, cost: u64) -> Decision {
    let t = l.emission_interval();
    let tau = l.burst() * t;
    // (a rejection reports the state as it is, an admission the state after it: each is
    // computed on its own path only)
    let rejected = |retry_after| {
        let base = s.tat.max(now);
        Decision {
            allowed: false,
            limit: l.limit(),
            remaining: l.per_emission((now + tau).saturating_sub(base)),
            reset_after: us(base - now),
            retry_after,
            wait: us(0),
            lease: None,
        }
    };
    if cost > max_cost(l) {
        return rejected(None);
    }
    match reserve(s.tat, now, cost * t, tau, l.max_wait()) {
        Reservation::Admitted { wait, tat } => Decision {
            allowed: true,
            limit: l.limit(),
            remaining: l.per_emission((now + tau).saturating_sub(tat)),
            reset_after: us(tat - now),
            retry_after: None,
            wait: us(wait),
            lease: None,
        },
        Reservation::Rejected { retry_after } => rejected(Some(us(retry_after))),
    }
}

/// Applies an admitted request: reserves its slot (the TAT [`reserve`] answers, with no bound on
/// the wait since the request was admitted).
#[inline]
pub fn apply(l: &Limit, s: &mut GcraState, now: Micros, cost: u64) {
    if let Reservation::Admitted { tat, .. } =
        reserve(s.tat, now, cost * l.emission_interval(), 0, Micros::MAX)
    {
        s.tat = tat;
    }
}

/// Charges `n` units at `now`: pushes the TAT `n * T` further, at most to
/// `now + tau + max_debt * T` (whole units); answers the units applied.
pub fn charge(l: &Limit, s: &mut GcraState, now: Micros, n: u64) -> u64 {
    let t = l.emission_interval();
    let base = s.tat.max(now);
    let ceiling = now + (l.burst() + l.max_debt()) * t;
    let applied = n.min(ceiling.saturating_sub(base) / t);
    if applied > 0 {
        s.tat = base + applied * t;
    }
    applied
}

/// Gives back up to `n` units: pulls the TAT back `n * T`, never before `now` (a full bucket);
/// answers the units given back (a part of a unit counts as one).
pub fn refund(l: &Limit, s: &mut GcraState, now: Micros, n: u64) -> u64 {
    if s.tat <= now {
        return 0;
    }
    let t = l.emission_interval();
    let given = n.min((s.tat - now).div_ceil(t));
    s.tat = s.tat.saturating_sub(given * t).max(now);
    given
}

/// The units the bucket owes at `now`: the TAT beyond `now + tau`, a part of a unit counting
/// as one.
pub fn debt(l: &Limit, s: &GcraState, now: Micros) -> u64 {
    let t = l.emission_interval();
    s.tat.saturating_sub(now + l.burst() * t).div_ceil(t)
}

/// Whether the state is back to empty (a full bucket) at `now`.
#[inline]
pub fn is_idle(s: &GcraState, now: Micros) -> bool {
    s.tat <= now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Mode, Quota};
    use std::time::Duration;

    fn limit(a: Algorithm, q: &str, burst: Option<u64>, max_wait_ms: Option<u64>) -> Limit {
        let mut b = Limit::builder(a, q.parse::<Quota>().unwrap());
        if let Some(x) = burst {
            b = b.burst(x);
        }
        if let Some(ms) = max_wait_ms {
            b = b.mode(Mode::Delay).max_wait(Duration::from_millis(ms));
        }
        b.build().unwrap()
    }

    fn run(l: &Limit, s: &mut GcraState, now: Micros, cost: u64) -> Decision {
        let d = check(l, s, now, cost);
        if d.allowed {
            apply(l, s, now, cost);
        }
        d
    }

    #[test]
    fn twenty_per_second_with_burst_five() {
        let l = limit(Algorithm::TokenBucket, "20/s", Some(5), None);
        let mut s = GcraState::default();
        let t0 = 1_000_000_000;
        for i in 0..5 {
            let d = run(&l, &mut s, t0, 1);
            assert!(d.allowed);
            assert_eq!(d.remaining, 4 - i);
        }
        let d = run(&l, &mut s, t0, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Some(Duration::from_millis(50)));
        assert!(!run(&l, &mut s, t0 + 49_999, 1).allowed);
        assert!(run(&l, &mut s, t0 + 50_000, 1).allowed);
        // 250 ms of silence refills the whole bucket.
        assert_eq!(check(&l, &s, t0 + 300_000, 0).remaining, 5);
    }

    #[test]
    fn cost_above_burst_is_impossible_not_retry() {
        let l = limit(Algorithm::TokenBucket, "20/s", Some(5), None);
        let d = check(&l, &GcraState::default(), 10, 6);
        assert!(d.is_impossible());
    }

    #[test]
    fn leaky_bucket_delay_spaces_callers() {
        // 1/s refund channel, queue up to 10 s.
        let l = limit(Algorithm::LeakyBucket, "1/s", None, Some(10_000));
        let mut s = GcraState::default();
        let now = 5_000_000;
        for i in 0..11 {
            let d = run(&l, &mut s, now, 1);
            assert!(d.allowed, "caller {i}");
            assert_eq!(d.wait, Duration::from_secs(i));
        }
        let d = run(&l, &mut s, now, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Some(Duration::from_secs(1)));
        let before = s;
        let _ = check(&l, &s, now, 1);
        assert_eq!(s, before, "a rejection reserves nothing");
    }

    #[test]
    fn rejection_leaves_state_unchanged() {
        let l = limit(Algorithm::TokenBucket, "2/s", None, None);
        let mut s = GcraState::default();
        run(&l, &mut s, 100, 2);
        let snapshot = s;
        assert!(!run(&l, &mut s, 100, 1).allowed);
        assert_eq!(s, snapshot);
    }
}
