//! `sliding_window`: a ring of counters of width `w = ceil(window / buckets)`, aligned to the
//! Unix epoch.
//!
//! Admits when the sum over **every** bucket that intersects `(now - window, now]` plus `cost` is
//! at most `limit`. That includes the partially expired oldest bucket, so the algorithm never
//! admits more than `limit` in any window of the rule's length (it may admit slightly less: a
//! bucket counts in full until its last instant has left the window). The ring holds
//! `buckets + 1` counters, because a window may touch that many. Memory is O(buckets).

use crate::clock::Micros;
use crate::decision::Decision;
use crate::limit::Limit;

use super::us;

/// Sliding-window state: the newest bucket written and the ring of counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlidingWindowState {
    /// Index (`start / width`) of the newest bucket written.
    pub head: u64,
    /// `buckets + 1` counters; bucket `j` lives at `j % len`. Empty until first used.
    pub counts: Vec<u64>,
    /// When the newest bucket leaves the window.
    pub idle_at: Micros,
}

/// The ring's length for a limit.
#[inline]
fn ring(l: &Limit) -> u64 {
    u64::from(l.buckets()) + 1
}

/// The index of the oldest bucket that intersects `(now - window, now]`.
#[inline]
fn oldest_live(l: &Limit, now: Micros) -> u64 {
    (now + 1).saturating_sub(l.window()) / l.bucket_width()
}

/// The first bucket to count (the oldest live one still held in the ring), if any.
#[inline]
fn first(l: &Limit, s: &SlidingWindowState, now: Micros) -> Option<u64> {
    if s.counts.is_empty() {
        return None;
    }
    let lo = oldest_live(l, now).max((s.head + 1).saturating_sub(ring(l)));
    (lo <= s.head).then_some(lo)
}

#[inline]
fn slot(l: &Limit, j: u64) -> usize {
    (j % ring(l)) as usize
}

/// The instant bucket `j` stops intersecting the window.
#[inline]
fn leaves_at(l: &Limit, j: u64) -> Micros {
    (j + 1) * l.bucket_width() + l.window() - 1
}

/// Decides without changing the state.
pub fn check(l: &Limit, s: &SlidingWindowState, now: Micros, cost: u64) -> Decision {
    let lo = first(l, s, now);
    let sum: u64 = lo.map_or(0, |lo| (lo..=s.head).map(|j| s.counts[slot(l, j)]).sum());
    let allowed = sum + cost <= l.limit();
    let used = if allowed { sum + cost } else { sum };
    let newest = if allowed && cost > 0 {
        Some(s.head.max(now / l.bucket_width()))
    } else {
        lo.and_then(|lo| (lo..=s.head).rev().find(|&j| s.counts[slot(l, j)] > 0))
    };
    let mut retry_after = None;
    if let (false, true, Some(lo)) = (allowed, cost <= l.limit(), lo) {
        let mut freed = 0;
        for j in lo..=s.head {
            let c = s.counts[slot(l, j)];
            if c == 0 {
                continue;
            }
            freed += c;
            if sum - freed + cost <= l.limit() {
                retry_after = Some(us(leaves_at(l, j) - now));
                break;
            }
        }
    }
    Decision {
        allowed,
        limit: l.limit(),
        remaining: l.limit().saturating_sub(used),
        reset_after: newest.map_or(us(0), |j| us(leaves_at(l, j).saturating_sub(now))),
        retry_after,
        wait: us(0),
        lease: None,
    }
}

/// Applies an admitted request: advances the ring to `now`'s bucket and counts the cost there.
pub fn apply(l: &Limit, s: &mut SlidingWindowState, now: Micros, cost: u64) {
    let target = now / l.bucket_width();
    if s.counts.is_empty() {
        s.counts = vec![0; ring(l) as usize];
        s.head = target;
    } else if target > s.head {
        if target - s.head >= ring(l) {
            s.counts.iter_mut().for_each(|c| *c = 0);
        } else {
            for j in s.head + 1..=target {
                let i = slot(l, j);
                s.counts[i] = 0;
            }
        }
        s.head = target;
    }
    // A clock that stepped back counts in the newest bucket (conservative).
    let i = slot(l, s.head);
    s.counts[i] += cost;
    s.idle_at = leaves_at(l, s.head);
}

/// The units counted in the window at `now`.
pub fn counted(l: &Limit, s: &SlidingWindowState, now: Micros) -> u64 {
    first(l, s, now).map_or(0, |lo| (lo..=s.head).map(|j| s.counts[slot(l, j)]).sum())
}

/// Charges `n` units at `now` in `now`'s bucket, past the limit up to a window's sum of
/// `limit + max_debt`; answers the units applied.
pub fn charge(l: &Limit, s: &mut SlidingWindowState, now: Micros, n: u64) -> u64 {
    let ceiling = l.limit().saturating_add(l.max_debt());
    let applied = n.min(ceiling.saturating_sub(counted(l, s, now)));
    if applied > 0 {
        apply(l, s, now, applied);
    }
    applied
}

/// Gives back up to `n` units counted in the window, newest bucket first, floored at 0; answers
/// the units given back.
pub fn refund(l: &Limit, s: &mut SlidingWindowState, now: Micros, n: u64) -> u64 {
    let Some(lo) = first(l, s, now) else {
        return 0;
    };
    let mut given = 0;
    for j in (lo..=s.head).rev() {
        let c = &mut s.counts[slot(l, j)];
        let take = (n - given).min(*c);
        *c -= take;
        given += take;
        if given == n {
            break;
        }
    }
    given
}

/// Gives back up to `n` units a reservation took at `taken`, from the bucket `taken` fell in,
/// while that bucket still counts at `now`; floored at 0; answers the units given back.
pub fn release(l: &Limit, s: &mut SlidingWindowState, now: Micros, n: u64, taken: Micros) -> u64 {
    let j = taken / l.bucket_width();
    match first(l, s, now) {
        Some(lo) if lo <= j && j <= s.head => {
            let c = &mut s.counts[slot(l, j)];
            let given = n.min(*c);
            *c -= given;
            given
        }
        _ => 0,
    }
}

/// Whether every bucket has left the window.
pub fn is_idle(s: &SlidingWindowState, now: Micros) -> bool {
    s.idle_at <= now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Quota};
    use std::time::Duration;

    fn run(l: &Limit, s: &mut SlidingWindowState, now: Micros, cost: u64) -> Decision {
        let d = check(l, s, now, cost);
        if d.allowed {
            apply(l, s, now, cost);
        }
        d
    }

    #[test]
    fn counts_the_partially_expired_oldest_bucket() {
        // Design §1: a ring that drops the partially expired oldest bucket admits one bucket too
        // many. 10/s in 10 buckets of 100 ms: 10 admitted at 0.95 s; at 1.90 s the window
        // (0.90, 1.90] still holds them all.
        let l = Limit::new(Algorithm::SlidingWindow, "10/s".parse::<Quota>().unwrap()).unwrap();
        let mut s = SlidingWindowState::default();
        for _ in 0..10 {
            assert!(run(&l, &mut s, 950_000, 1).allowed);
        }
        let d = run(&l, &mut s, 1_900_000, 1);
        assert!(!d.allowed, "bucket [0.9, 1.0) still intersects the window");
        // The bucket leaves at 1.0 s + 1 s - 1 us.
        assert_eq!(d.retry_after, Some(Duration::from_micros(99_999)));
        assert!(!run(&l, &mut s, 1_999_998, 1).allowed);
        assert!(run(&l, &mut s, 1_999_999, 1).allowed);
    }

    #[test]
    fn ring_wraps_and_clears() {
        let l = Limit::new(Algorithm::SlidingWindow, "5/s".parse::<Quota>().unwrap()).unwrap();
        let mut s = SlidingWindowState::default();
        let mut t = 0;
        let mut admitted = 0;
        while t < 10_000_000 {
            if run(&l, &mut s, t, 1).allowed {
                admitted += 1;
            }
            t += 37_000;
        }
        assert!((40..=50).contains(&admitted), "{admitted}");
        assert!(is_idle(&s, t + 2_000_000));
    }
}
