//! `sliding_log`: the timestamp and cost of each admitted request in the last window.
//!
//! Admits when the costs in `(now - window, now]` plus `cost` are at most `limit`. Exact: never
//! more than `limit` in any window of that length, whatever its alignment. Memory grows with the
//! number of distinct admission instants in a window (at most `limit` entries).
//!
//! The request is checked *before* it is logged, so rejected requests never fill the window, and
//! entries carry their cost, so two requests in the same microsecond count twice (design §1).

use std::collections::VecDeque;

use crate::clock::Micros;
use crate::decision::Decision;
use crate::limit::Limit;

use super::us;

/// Sliding-log state: admitted `(timestamp, cost)` entries, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlidingLogState {
    /// Entries `(microseconds since the epoch, cost)`, in order of time.
    pub entries: VecDeque<(Micros, u64)>,
    /// When the newest entry leaves the window.
    pub idle_at: Micros,
}

/// Index of the first live entry and the sum of live costs at `now`.
#[inline]
fn live(l: &Limit, s: &SlidingLogState, now: Micros) -> (usize, u64) {
    let horizon = now.saturating_sub(l.window()); // entries at or before it have left
    let first = s
        .entries
        .partition_point(|&(ts, _)| ts <= horizon && now >= l.window());
    let sum = s.entries.range(first..).map(|&(_, c)| c).sum();
    (first, sum)
}

/// Decides without changing the state.
pub fn check(l: &Limit, s: &SlidingLogState, now: Micros, cost: u64) -> Decision {
    let (first, sum) = live(l, s, now);
    let allowed = sum + cost <= l.limit();
    let used = if allowed { sum + cost } else { sum };
    let newest = if allowed && cost > 0 {
        Some(now.max(s.entries.back().map_or(0, |e| e.0)))
    } else {
        s.entries.range(first..).next_back().map(|e| e.0)
    };
    let mut retry_after = None;
    if !allowed && cost <= l.limit() {
        let mut freed = 0;
        for &(ts, c) in s.entries.range(first..) {
            freed += c;
            if sum - freed + cost <= l.limit() {
                retry_after = Some(us(ts + l.window() - now));
                break;
            }
        }
    }
    Decision {
        allowed,
        limit: l.limit(),
        remaining: l.limit().saturating_sub(used),
        reset_after: newest.map_or(us(0), |ts| us((ts + l.window()).saturating_sub(now))),
        retry_after,
        wait: us(0),
        lease: None,
    }
}

/// Applies an admitted request: drops expired entries and logs this one.
pub fn apply(l: &Limit, s: &mut SlidingLogState, now: Micros, cost: u64) {
    let (first, _) = live(l, s, now);
    s.entries.drain(..first);
    match s.entries.back_mut() {
        // Same instant (or a clock that stepped back): merge, keeping the log ordered.
        Some(back) if back.0 >= now => back.1 += cost,
        _ => s.entries.push_back((now, cost)),
    }
    s.idle_at = s.entries.back().map_or(0, |e| e.0) + l.window();
}

/// The units logged in the window at `now`.
pub fn counted(l: &Limit, s: &SlidingLogState, now: Micros) -> u64 {
    live(l, s, now).1
}

/// Charges `n` units at `now` as one entry, past the limit up to a window's sum of
/// `limit + max_debt`; answers the units applied.
pub fn charge(l: &Limit, s: &mut SlidingLogState, now: Micros, n: u64) -> u64 {
    let ceiling = l.limit().saturating_add(l.max_debt());
    let applied = n.min(ceiling.saturating_sub(counted(l, s, now)));
    if applied > 0 {
        apply(l, s, now, applied);
    }
    applied
}

/// Gives back up to `n` units of the live entries, newest first, floored at an empty log;
/// answers the units given back.
pub fn refund(l: &Limit, s: &mut SlidingLogState, now: Micros, n: u64) -> u64 {
    let (first, _) = live(l, s, now);
    s.entries.drain(..first);
    let mut given = 0;
    while given < n {
        let Some(back) = s.entries.back_mut() else {
            break;
        };
        let take = (n - given).min(back.1);
        back.1 -= take;
        given += take;
        if back.1 == 0 {
            s.entries.pop_back();
        }
    }
    s.idle_at = s.entries.back().map_or(0, |e| e.0 + l.window());
    given
}

/// Gives back up to `n` units a reservation took at `taken`, from the entry that logged it (the
/// first at or after `taken`: a request is logged at the newest instant if the clock stepped
/// back), while `taken` is still in the window at `now`; an emptied entry leaves the log;
/// answers the units given back.
pub fn release(l: &Limit, s: &mut SlidingLogState, now: Micros, n: u64, taken: Micros) -> u64 {
    let (first, _) = live(l, s, now);
    if now >= l.window() && taken <= now - l.window() {
        return 0;
    }
    let Some(i) = (first..s.entries.len()).find(|&i| s.entries[i].0 >= taken) else {
        return 0;
    };
    let given = n.min(s.entries[i].1);
    s.entries[i].1 -= given;
    if s.entries[i].1 == 0 {
        s.entries.remove(i);
        s.idle_at = s.entries.back().map_or(0, |e| e.0 + l.window());
    }
    given
}

/// Whether every entry has left the window.
pub fn is_idle(s: &SlidingLogState, now: Micros) -> bool {
    s.idle_at <= now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Quota};
    use std::time::Duration;

    fn l(q: &str) -> Limit {
        Limit::new(Algorithm::SlidingLog, q.parse::<Quota>().unwrap()).unwrap()
    }

    fn run(l: &Limit, s: &mut SlidingLogState, now: Micros, cost: u64) -> Decision {
        let d = check(l, s, now, cost);
        if d.allowed {
            apply(l, s, now, cost);
        }
        d
    }

    #[test]
    fn same_microsecond_requests_both_count() {
        // Design §1: a timestamp as ZSET member collapses same-instant requests.
        let l = l("2/s");
        let mut s = SlidingLogState::default();
        assert!(run(&l, &mut s, 5_000_000, 1).allowed);
        assert!(run(&l, &mut s, 5_000_000, 1).allowed);
        assert!(!run(&l, &mut s, 5_000_000, 1).allowed);
    }

    #[test]
    fn rejected_requests_never_fill_the_window() {
        // Design §1: logging before checking starves everyone under sustained overload.
        let l = l("2/s");
        let mut s = SlidingLogState::default();
        run(&l, &mut s, 0, 2);
        for i in 1..1000 {
            assert!(!run(&l, &mut s, i * 100, 1).allowed);
        }
        assert_eq!(s.entries.len(), 1);
        assert!(run(&l, &mut s, 1_000_000, 1).allowed);
    }

    #[test]
    fn exact_retry_after() {
        let l = l("3/s");
        let mut s = SlidingLogState::default();
        run(&l, &mut s, 10_000_000, 1);
        run(&l, &mut s, 10_200_000, 1);
        run(&l, &mut s, 10_400_000, 1);
        let d = run(&l, &mut s, 10_500_000, 2);
        assert_eq!(d.retry_after, Some(Duration::from_millis(700)));
        assert!(!check(&l, &s, 11_199_999, 2).allowed);
        assert!(check(&l, &s, 11_200_000, 2).allowed);
        assert!(check(&l, &s, 10_500_000, 4).is_impossible());
    }
}
