//! `token_bucket` with `warmup`: GCRA whose units cost more while the bucket is cold, after
//! Sentinel's `WarmUpController` (itself Guava's `SmoothWarmingUp`), in integer microseconds.
//!
//! # The model
//!
//! Beside the TAT, the state keeps a *cold level* `s` in `0..=top`: Sentinel's stored tokens.
//! With emission interval `T`, burst `b` (tolerance `tau = b * T`), and the warm-up's integers
//! ([`Warmup`]: `extra = round((c - 1) * T)`, `warn`, `ramp`, `top = warn + ramp`):
//!
//! - **Cooling.** While the bucket is full (the TAT is past), every whole `T` of time adds one
//!   level, up to `top`: `s = min(top, s + floor((now - tat) / T))` when `tat < now`. A bucket
//!   never used is at `top`: cold.
//! - **Admission** is plain GCRA on the TAT, whatever the level: a request of `n` units is
//!   admitted when `max(tat, now) + n * T - now <= tau + max_wait` (so the burst, the
//!   largest cost, `retry_after` and delay mode's waits are the token bucket's).
//! - **Cost.** An admitted request takes `n` levels (down to 0) and moves the TAT by `n * T`
//!   plus the cold surcharge of the levels it took: the level `warn + j` (`j` in `1..=ramp`)
//!   costs `extra * j / ramp` more than `T`, so the coldest unit costs `c * T` and a unit at or
//!   below the warning level costs `T`. The surcharge of going from `j0` to `j1` levels above
//!   `warn` is `F(j0) - F(j1)` with `F(j) = floor(extra * j * (j + 1) / (2 * ramp))`: it
//!   telescopes, so `n` units at once cost what `n` units one after another at one instant do.
//!   The surcharge is paid after admission, as Guava's is: it delays the requests after it.
//!
//! # What is admitted when
//!
//! From a cold bucket at `t0` (never used, or idle since `t0 - top * T` or earlier: [`is_idle`])
//! under a steady overload of one-unit requests in reject mode (a request whenever one would be
//! admitted), unit `k` (from 0) is admitted at
//!
//! ```text
//! t_k = t0 + max(0, C_k - (b - 1) * T),   C_k = k * T + F(ramp) - F(max(ramp - k, 0))
//! ```
//!
//! so the number admitted in `[t0, t0 + d)` is `A(d) = #{k : max(0, C_k - (b - 1) * T) < d}`.
//! The first unit costs `c * T`, the `ramp`-th `T + extra / ramp`, and from `k = ramp` on the
//! bucket runs at its full rate; the ramp takes `C_ramp = ramp * T + F(ramp)`, which is `W` to
//! within `(T + extra) / 2` plus a `T` per level lost to rounding `ramp` down. (Under this
//! overload the TAT is never behind `now` once the first unit is admitted, so nothing cools.)
//! Idle again for `top * T` after the TAT, the bucket is cold again.
//!
//! Two bounds follow, checked by the property tests: every request admitted here would be
//! admitted by the same token bucket without warm-up on the same history (the TAT here is never
//! earlier than its TAT); and in the first second after a full idle, whatever the arrivals of
//! one-unit requests, at most `A(1 s)` units are admitted (idle only cools the bucket), which is
//! at most `1 + floor(s1 / max(T, c * T - ceil(extra * g / ramp) - 1))` with
//! `s1 = 1 s + (b - 1) * T` and `g = ceil(s1 / T)`, the units of that span at the full rate: the
//! cold rate, quickened by what the ramp gains within the second. docs/algorithms.md works an
//! example.

use crate::clock::Micros;
use crate::decision::Decision;
use crate::limit::{Limit, Warmup};

use super::gcra::{Reservation, reserve};
use super::us;

/// The state of a warm-up bucket: the TAT and how long after it the bucket is cold again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WarmupState {
    /// Theoretical arrival time, microseconds since the epoch.
    pub tat: Micros,
    /// Microseconds after `tat` until the level reaches `top`: `(top - s) * T` (a bucket takes at
    /// most 2^32 - 1 µs to cool, which [`Warmup`] checks).
    pub cool_in: u32,
}

/// `F(j) = floor(extra * j * (j + 1) / (2 * ramp))`: the surcharge of the `j` levels above the
/// warning level.
#[inline]
pub fn surcharge_below(w: &Warmup, j: u64) -> Micros {
    let p = u128::from(j) * u128::from(j + 1) / 2;
    let f = u128::from(w.extra()) * p / u128::from(w.ramp());
    u64::try_from(f).unwrap_or(u64::MAX)
}

/// The levels above the warning level at level `s`.
#[inline]
fn above(w: &Warmup, s: u64) -> u64 {
    s.saturating_sub(w.warn()).min(w.ramp())
}

/// The cold level at `now`: the state's, plus what the time since its TAT cooled.
#[inline]
pub fn level(w: &Warmup, t: Micros, s: &WarmupState, now: Micros) -> u64 {
    let top = w.top();
    let stored = top - top.min(u64::from(s.cool_in) / t);
    if s.tat < now {
        top.min(stored + (now - s.tat) / t)
    } else {
        stored
    }
}

/// Where the bucket's cooling stands at `now`, in microseconds: `level * T`, plus, below `top`
/// and with the TAT past, the time since the last whole `T` of cooling. A state at TAT
/// `now - position % T` and level `position / T` cools from `now` on exactly as `s` does: what
/// a refund restores (the Redis Cluster compensation).
pub fn position(w: &Warmup, t: Micros, s: &WarmupState, now: Micros) -> u64 {
    let level = level(w, t, s, now);
    let partial = if s.tat < now && level < w.top() {
        (now - s.tat) % t
    } else {
        0
    };
    level * t + partial
}

/// The surcharge of taking `cost` units from level `s`, and the level after.
#[inline]
fn take(w: &Warmup, s: u64, cost: u64) -> (Micros, u64) {
    let after = s.saturating_sub(cost);
    (
        surcharge_below(w, above(w, s)) - surcharge_below(w, above(w, after)),
        after,
    )
}

/// Decides a request of `cost` units at `now` without changing the state.
#[inline]
pub fn check(l: &Limit, w: &Warmup, s: &WarmupState, now: Micros, cost: u64) -> Decision {
    let t = l.emission_interval();
    let tau = l.burst() * t;
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
    if cost > l.max_cost() {
        return rejected(None);
    }
    if cost == 0 {
        // A look: GCRA's, but always admitted (the surcharge may put the TAT further than
        // `now + tau + max_wait`, where GCRA's own TAT never is).
        let base = s.tat.max(now);
        return Decision {
            allowed: true,
            wait: us((base - now).saturating_sub(tau).min(l.max_wait())),
            ..rejected(None)
        };
    }
    match reserve(s.tat, now, cost * t, tau, l.max_wait()) {
        Reservation::Admitted { wait, tat } => {
            let (extra, _) = take(w, level(w, t, s, now), cost);
            let tat = tat + extra;
            Decision {
                allowed: true,
                limit: l.limit(),
                remaining: l.per_emission((now + tau).saturating_sub(tat)),
                reset_after: us(tat - now),
                retry_after: None,
                wait: us(wait),
                lease: None,
            }
        }
        Reservation::Rejected { retry_after } => rejected(Some(us(retry_after))),
    }
}

/// Applies an admitted request: the TAT moves by `cost * T` and the surcharge of the levels
/// taken; the level falls by `cost`.
#[inline]
pub fn apply(l: &Limit, w: &Warmup, s: &mut WarmupState, now: Micros, cost: u64) {
    let t = l.emission_interval();
    let (extra, after) = take(w, level(w, t, s, now), cost);
    s.tat = s.tat.max(now) + cost * t + extra;
    // (top * T fits in u32: checked when the limit was built)
    s.cool_in = u32::try_from((w.top() - after) * t).unwrap_or(u32::MAX);
}

/// Whether the state is back to empty (a full and cold bucket) at `now`.
#[inline]
pub fn is_idle(s: &WarmupState, now: Micros) -> bool {
    s.tat + u64::from(s.cool_in) <= now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Quota};
    use std::time::Duration;

    fn limit(q: &str, burst: u64, warmup_s: u64, c: f64) -> Limit {
        Limit::builder(Algorithm::TokenBucket, q.parse::<Quota>().unwrap())
            .burst(burst)
            .warmup(Duration::from_secs(warmup_s))
            .cold_factor(c)
            .build()
            .unwrap()
    }

    fn run(l: &Limit, s: &mut WarmupState, now: Micros, cost: u64) -> bool {
        let w = *l.warmup().unwrap();
        let d = check(l, &w, s, now, cost);
        if d.allowed {
            apply(l, &w, s, now, cost);
        }
        d.allowed
    }

    #[test]
    fn sentinel_levels() {
        // 100/s, 10 s, c = 3: T = 10 ms; Sentinel's warningToken 10 * 100 / 2 = 500 and
        // maxToken 500 + 2 * 10 * 100 / 4 = 1000.
        let l = limit("100/s", 1, 10, 3.0);
        let w = l.warmup().unwrap();
        assert_eq!(
            (w.extra(), w.warn(), w.ramp(), w.top()),
            (20_000, 500, 500, 1000)
        );
        // The whole ramp's surcharge: extra * (ramp + 1) / 2.
        assert_eq!(surcharge_below(w, 500), 20_000 * 501 / 2);
    }

    #[test]
    fn cold_then_warm_then_cold() {
        let l = limit("100/s", 1, 10, 3.0);
        let mut s = WarmupState::default();
        let t0 = 1_000_000_000;
        assert!(run(&l, &mut s, t0, 1));
        // The first unit cost c * T = 30 ms: the next is admitted 30 ms later, not 10.
        assert!(!run(&l, &mut s, t0 + 10_000, 1));
        assert!(!run(&l, &mut s, t0 + 29_999, 1));
        assert!(run(&l, &mut s, t0 + 30_000, 1));
        // Steady overload: one try per ms until the ramp is over, then full speed.
        let mut now = t0 + 30_000;
        let mut admitted = 2;
        while admitted < 500 {
            now += 1_000;
            admitted += u64::from(run(&l, &mut s, now, 1));
        }
        // Warm: one unit every T = 10 ms.
        let mut at = Vec::new();
        for _ in 0..1_000 {
            now += 1_000;
            if run(&l, &mut s, now, 1) {
                at.push(now);
            }
        }
        assert!(at.windows(2).all(|p| p[1] - p[0] == 10_000), "{at:?}");
        // n units taken from level 1000: idle n * T after the TAT, cold again.
        let cool = (500 + at.len() as u64) * 10_000;
        assert_eq!(u64::from(s.cool_in), cool);
        assert!(!is_idle(&s, s.tat + cool - 1));
        assert!(is_idle(&s, s.tat + cool));
        now = s.tat + cool;
        assert!(run(&l, &mut s, now, 1));
        assert!(!run(&l, &mut s, now + 29_000, 1));
    }

    /// docs/algorithms.md's table: 100/s, 30 s, c = 3, burst 1, a request whenever one would
    /// be admitted.
    #[test]
    fn the_documented_ramp() {
        let l = limit("100/s", 1, 30, 3.0);
        let mut s = WarmupState::default();
        let t0 = 1_000_000_000;
        let mut now = t0;
        let mut per_second = vec![0u64; 32];
        while now < t0 + 32_000_000 {
            let w = *l.warmup().unwrap();
            let d = check(&l, &w, &s, now, 1);
            if d.allowed {
                apply(&l, &w, &mut s, now, 1);
                per_second[((now - t0) / 1_000_000) as usize] += 1;
            } else {
                now += d.retry_after.unwrap().as_micros() as u64;
            }
        }
        let documented = [
            (1, 34),
            (2, 34),
            (3, 35),
            (5, 36),
            (10, 39),
            (15, 44),
            (20, 51),
            (25, 63),
            (28, 77),
            (29, 85),
            (30, 94),
            (31, 99),
            (32, 100),
        ];
        for (second, count) in documented {
            assert_eq!(per_second[second - 1], count, "second {second}");
        }
    }

    #[test]
    fn rejection_and_peek_leave_state_unchanged() {
        let l = limit("10/s", 2, 5, 3.0);
        let mut s = WarmupState::default();
        assert!(run(&l, &mut s, 100, 2));
        let snapshot = s;
        assert!(!run(&l, &mut s, 101, 1));
        assert!(run(&l, &mut s, 101, 0));
        assert_eq!(s, snapshot);
    }
}
