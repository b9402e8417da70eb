//! `token_bucket` and `leaky_bucket`: the Generic Cell Rate Algorithm over one theoretical
//! arrival time (TAT).
//!
//! With emission interval `T = ceil(window / limit)` and tolerance `tau = burst * T`, a request of
//! cost `n` at `now` takes the slot ending at `new_tat = max(tat, now) + n * T` and must wait
//! `wait = max(0, new_tat - now - tau)`.
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
    let base = s.tat.max(now);
    // (a rejection reports the state as it is, an admission the state after it: each is
    // computed on its own path only)
    let rejected = |retry_after| Decision {
        allowed: false,
        limit: l.limit(),
        remaining: l.per_emission((now + tau).saturating_sub(base)),
        reset_after: us(base - now),
        retry_after,
        wait: us(0),
        lease: None,
    };
    if cost > max_cost(l) {
        return rejected(None);
    }
    let new_tat = base + cost * t;
    let wait = (new_tat - now).saturating_sub(tau);
    if wait <= l.max_wait() {
        Decision {
            allowed: true,
            limit: l.limit(),
            remaining: l.per_emission((now + tau).saturating_sub(new_tat)),
            reset_after: us(new_tat - now),
            retry_after: None,
            wait: us(wait),
            lease: None,
        }
    } else {
        // new_tat - tau - max_wait > now here, and since cost*T <= tau + max_wait, base == tat.
        rejected(Some(us(new_tat - tau - l.max_wait() - now)))
    }
}

/// Applies an admitted request: reserves its slot.
#[inline]
pub fn apply(l: &Limit, s: &mut GcraState, now: Micros, cost: u64) {
    s.tat = s.tat.max(now) + cost * l.emission_interval();
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
