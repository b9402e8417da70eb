//! Property tests of the algorithms, on arbitrary arrival schedules and costs.

use std::num::NonZeroU32;
use std::time::Duration;

use flowgate_core::algorithm::{self, State};
use flowgate_core::{Algorithm, Limit, Mode, Quota};
use governor::clock::FakeRelativeClock;
use governor::{Quota as GQuota, RateLimiter};
use proptest::prelude::*;

const EPOCH: u64 = 1_700_000_000_000_000;

/// Arrivals: (gap since the previous arrival in us, cost).
fn schedule(max_gap: u64, max_cost: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0..max_gap, 0..=max_cost), 1..200)
}

fn limit(a: Algorithm, limit: u64, window_ms: u64, burst: Option<u64>, buckets: u32) -> Limit {
    let mut b = Limit::builder(
        a,
        Quota::new(limit, Duration::from_millis(window_ms)).unwrap(),
    )
    .buckets(buckets);
    if let Some(x) = burst {
        b = b.burst(x);
    }
    b.build().unwrap()
}

/// Runs a schedule; returns the admitted (time, cost) pairs.
fn admitted(l: &Limit, sched: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut state = State::default();
    let mut now = EPOCH;
    let mut out = Vec::new();
    for (i, &(gap, cost)) in sched.iter().enumerate() {
        now += gap;
        let before = state.clone();
        let d = algorithm::transition(l, &mut state, now, cost, i as u64 + 1);
        if d.allowed {
            if cost > 0 {
                out.push((now, cost));
            }
        } else {
            assert_eq!(state, before, "a rejection changed the state");
        }
    }
    out
}

/// The largest sum of costs in any window `(t - w, t]`.
fn max_in_any_window(adm: &[(u64, u64)], w: u64) -> u64 {
    let mut best = 0;
    for (i, &(t, _)) in adm.iter().enumerate() {
        let sum: u64 = adm[..=i]
            .iter()
            .filter(|&&(s, _)| s + w > t)
            .map(|&(_, c)| c)
            .sum();
        best = best.max(sum);
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn sliding_log_never_exceeds_limit_in_any_window(
        lim in 1u64..20, window_ms in 1u64..2000, sched in schedule(300_000, 4)
    ) {
        let l = limit(Algorithm::SlidingLog, lim, window_ms, None, 10);
        let adm = admitted(&l, &sched);
        prop_assert!(max_in_any_window(&adm, l.window()) <= lim);
    }

    #[test]
    fn sliding_window_never_exceeds_limit_in_any_window(
        lim in 1u64..20, window_ms in 1u64..2000, buckets in 1u32..12, sched in schedule(300_000, 4)
    ) {
        let l = limit(Algorithm::SlidingWindow, lim, window_ms, None, buckets);
        let adm = admitted(&l, &sched);
        prop_assert!(max_in_any_window(&adm, l.window()) <= lim);
    }

    #[test]
    fn fixed_window_never_exceeds_limit_per_aligned_window(
        lim in 1u64..20, window_ms in 1u64..2000, sched in schedule(300_000, 4)
    ) {
        let l = limit(Algorithm::FixedWindow, lim, window_ms, None, 10);
        let adm = admitted(&l, &sched);
        let w = l.window();
        let mut per: std::collections::HashMap<u64, u64> = Default::default();
        for (t, c) in adm {
            *per.entry(t / w).or_default() += c;
        }
        prop_assert!(per.values().all(|&s| s <= lim));
        // And at most 2 x limit in any unaligned window, as documented.
    }

    #[test]
    fn token_bucket_admits_at_most_burst_plus_rate(
        lim in 1u64..20, window_ms in 1u64..2000, burst in 1u64..10, sched in schedule(300_000, 4)
    ) {
        let l = limit(Algorithm::TokenBucket, lim, window_ms, Some(burst), 10);
        let adm = admitted(&l, &sched);
        let t = l.emission_interval();
        // In any span [a, b] of admissions: sum <= burst + (b - a) / T.
        for i in 0..adm.len() {
            let mut sum = 0;
            for j in i..adm.len() {
                sum += adm[j].1;
                prop_assert!(sum <= burst + (adm[j].0 - adm[i].0) / t, "span {i}..={j}");
            }
        }
    }

    #[test]
    fn concurrency_never_exceeds_limit_in_flight(
        lim in 1u64..10, sched in schedule(5_000_000, 3)
    ) {
        // Leases are never released here, so in-flight = admitted in the last TTL.
        let l = limit(Algorithm::Concurrency, lim, 30_000, None, 10);
        let adm = admitted(&l, &sched);
        prop_assert!(max_in_any_window(&adm, l.window()) <= lim);
    }

    #[test]
    fn retry_after_is_exact(
        alg in prop::sample::select(vec![
            Algorithm::FixedWindow, Algorithm::SlidingLog, Algorithm::SlidingWindow,
            Algorithm::TokenBucket, Algorithm::LeakyBucket, Algorithm::Concurrency,
        ]),
        delay in any::<bool>(),
        lim in 1u64..10, window_ms in 1u64..2000, burst in 1u64..5, max_wait_ms in 0u64..500,
        sched in schedule(200_000, 3), probe in 1u64..4,
    ) {
        let mut b = Limit::builder(alg, Quota::new(lim, Duration::from_millis(window_ms)).unwrap());
        if alg.supports_delay() {
            b = b.burst(burst);
            if delay {
                b = b.mode(Mode::Delay).max_wait(Duration::from_millis(max_wait_ms));
            }
        }
        let l = b.build().unwrap();
        let mut state = State::default();
        let mut now = EPOCH;
        for (i, &(gap, cost)) in sched.iter().enumerate() {
            now += gap;
            algorithm::transition(&l, &mut state, now, cost, i as u64 + 1);
        }
        let d = algorithm::check(&l, &state, now, probe);
        if let Some(r) = d.retry_after {
            prop_assert!(!d.allowed);
            let r = r.as_micros() as u64;
            prop_assert!(r >= 1);
            prop_assert!(algorithm::check(&l, &state, now + r, probe).allowed, "passes at retry_after");
            prop_assert!(!algorithm::check(&l, &state, now + r - 1, probe).allowed, "fails just before");
        } else if !d.allowed {
            // Never: it must fail even after every state has expired.
            prop_assert!(!algorithm::check(&l, &state, now + 100 * l.window() + 1_000_000_000, probe).allowed);
        }
    }

    #[test]
    fn token_bucket_agrees_with_governor(
        per_ms in 1u64..100, burst in 1u32..10, sched in schedule(50_000, 3)
    ) {
        // One unit every `per_ms` ms, burst `burst`: governor's Quota::with_period + allow_burst.
        let t_us = per_ms * 1000;
        let ours = Limit::builder(Algorithm::TokenBucket, Quota::new(1, Duration::from_micros(t_us)).unwrap())
            .burst(u64::from(burst))
            .build()
            .unwrap();
        let clock = FakeRelativeClock::default();
        clock.advance(Duration::from_secs(1000));
        let gq = GQuota::with_period(Duration::from_micros(t_us)).unwrap()
            .allow_burst(NonZeroU32::new(burst).unwrap());
        let gov = RateLimiter::direct_with_clock(gq, clock.clone());
        let mut state = State::default();
        let mut now = EPOCH;
        for (i, &(gap, cost)) in sched.iter().enumerate() {
            now += gap;
            clock.advance(Duration::from_micros(gap));
            let Some(n) = NonZeroU32::new(cost as u32) else { continue };
            let d = algorithm::transition(&ours, &mut state, now, cost, 0);
            match gov.check_n(n) {
                Err(_) => prop_assert!(d.is_impossible(), "step {i}: governor says never"),
                Ok(Ok(())) => prop_assert!(d.allowed, "step {i}: governor admits"),
                Ok(Err(not_until)) => {
                    prop_assert!(!d.allowed, "step {i}: governor rejects");
                    use governor::clock::Clock as _;
                    let wait = not_until.wait_time_from(clock.now());
                    prop_assert_eq!(d.retry_after, Some(wait), "step {}", i);
                }
            }
        }
    }
}

/// A token bucket with warm-up: `lim` per `window_ms`, `burst`, `warmup_ms`, cold factor in
/// thousandths; `None` when the parameters are refused.
fn warm(lim: u64, window_ms: u64, burst: u64, warmup_ms: u64, cold_milli: u32) -> Option<Limit> {
    Limit::builder(
        Algorithm::TokenBucket,
        Quota::new(lim, Duration::from_millis(window_ms)).ok()?,
    )
    .burst(burst)
    .warmup(Duration::from_millis(warmup_ms))
    .cold_factor(f64::from(cold_milli) / 1000.0)
    .build()
    .ok()
}

/// docs/algorithms.md's closed form, computed here from the parameters alone: after a full idle
/// at 0, under a steady overload of one-unit requests, unit `k` is admitted at
/// `max(0, C_k - (b - 1) * T)`, `C_k = k * T + F(ramp) - F(max(ramp - k, 0))`,
/// `F(j) = floor(extra * j * (j + 1) / (2 * ramp))`.
fn ramp_instant(l: &Limit, k: u64) -> u64 {
    let w = l.warmup().unwrap();
    let t = l.emission_interval();
    let (extra, ramp) = (u128::from(w.extra()), u128::from(w.ramp()));
    let f = |j: u128| extra * (j * (j + 1) / 2) / ramp;
    let k128 = u128::from(k);
    let c = k128 * u128::from(t) + f(ramp) - f(ramp.saturating_sub(k128));
    u64::try_from(c.saturating_sub(u128::from((l.burst() - 1) * t))).unwrap()
}

/// `A(d)`: how many units the closed form admits in `[0, d)`.
fn ramp_count(l: &Limit, d: u64) -> u64 {
    let mut k = 0;
    while ramp_instant(l, k) < d {
        k += 1;
    }
    k
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    /// Every request a warm-up bucket admits, the same bucket without warm-up admits on the
    /// same history: never more than the full limit's GCRA.
    #[test]
    fn warmup_admits_nothing_the_plain_bucket_would_not(
        lim in 1u64..300, window_ms in 100u64..2000, burst in 1u64..8,
        warmup_ms in 1u64..5000, cold_milli in 1001u32..10_000, delay_ms in prop::option::of(0u64..500),
        sched in schedule(200_000, 4)
    ) {
        let l = warm(lim, window_ms, burst, warmup_ms, cold_milli);
        prop_assume!(l.is_some(), "refused parameters");
        let l = l.unwrap();
        let mut pb = Limit::builder(l.algorithm(), l.quota()).burst(burst);
        let (l, plain) = match delay_ms {
            Some(ms) => {
                let d = Duration::from_millis(ms);
                let lb = Limit::builder(l.algorithm(), l.quota()).burst(burst)
                    .warmup(Duration::from_millis(warmup_ms))
                    .cold_factor(f64::from(cold_milli) / 1000.0);
                pb = pb.mode(Mode::Delay).max_wait(d);
                (lb.mode(Mode::Delay).max_wait(d).build().unwrap(), pb.build().unwrap())
            }
            None => (l, pb.build().unwrap()),
        };
        let (mut ws, mut ps) = (State::default(), State::default());
        let mut now = EPOCH;
        for (i, &(gap, cost)) in sched.iter().enumerate() {
            now += gap;
            let before = ws.clone();
            let d = algorithm::transition(&l, &mut ws, now, cost, 0);
            if d.allowed {
                let p = algorithm::transition(&plain, &mut ps, now, cost, 0);
                prop_assert!(p.allowed, "request {i}: admitted with warm-up, not without");
                prop_assert!(d.wait >= p.wait, "request {i}: a shorter wait than without warm-up");
            } else {
                prop_assert_eq!(&ws, &before, "a rejection changed the state");
            }
        }
    }

    /// Under a steady overload after a full idle (a one-unit request at every instant one
    /// would be admitted: retried at once after an admission, after `retry_after` after a
    /// rejection), unit `k` is admitted exactly at the documented instant, through the ramp and
    /// beyond it.
    #[test]
    fn warmup_admits_at_the_documented_instants(
        lim in 1u64..300, window_ms in 100u64..2000, burst in 1u64..8,
        warmup_ms in 1u64..3000, cold_milli in prop_oneof![Just(3000u32), 1001u32..10_000],
        idle in prop::option::of(0u64..1_000_000_000),
    ) {
        let l = warm(lim, window_ms, burst, warmup_ms, cold_milli);
        prop_assume!(l.is_some(), "refused parameters");
        let l = l.unwrap();
        let mut state = State::default();
        let t0 = EPOCH;
        if let Some(idle) = idle {
            // A used bucket, idle long enough to be cold again: top * T after its TAT.
            let w = l.warmup().unwrap();
            let cold_in = w.top() * l.emission_interval();
            algorithm::transition(&l, &mut state, t0 - cold_in - idle - 1_000_000, 1, 0);
            prop_assume!(algorithm::is_idle(&state, t0));
        }
        let mut now = t0;
        let units = l.warmup().unwrap().ramp() + 2 * burst + 20;
        for k in 0..units {
            loop {
                let d = algorithm::transition(&l, &mut state, now, 1, 0);
                if d.allowed {
                    break;
                }
                now += d.retry_after.unwrap().as_micros() as u64;
            }
            prop_assert_eq!(now - t0, ramp_instant(&l, k), "unit {}", k);
        }
    }

    /// After a full idle, whatever the arrivals of one-unit requests, the first second from the
    /// first admission holds at most `A(1 s)` units, and `A(1 s)` is at most
    /// `1 + (1 s + (b - 1) T) / max(T, c T - ceil(extra * g / ramp) - 1)` with `g` the units of
    /// a second at the full rate, `ceil((1 s + (b - 1) T) / T)`.
    #[test]
    fn warmup_first_second_is_bounded(
        lim in 1u64..300, window_ms in 100u64..2000, burst in 1u64..8,
        warmup_ms in 1u64..20_000, cold_milli in 1001u32..10_000,
        sched in prop::collection::vec(0u64..40_000, 1..400),
    ) {
        let l = warm(lim, window_ms, burst, warmup_ms, cold_milli);
        prop_assume!(l.is_some(), "refused parameters");
        let l = l.unwrap();
        let mut state = State::default();
        let mut now = EPOCH;
        let mut first = None;
        let mut count = 0;
        for gap in sched {
            now += gap;
            if algorithm::transition(&l, &mut state, now, 1, 0).allowed {
                let t0 = *first.get_or_insert(now);
                if now < t0 + 1_000_000 {
                    count += 1;
                }
            }
        }
        let a = ramp_count(&l, 1_000_000);
        prop_assert!(count <= a, "{} admitted in the first second, A(1 s) = {}", count, a);
        let w = l.warmup().unwrap();
        let t = l.emission_interval();
        let span = 1_000_000 + (burst - 1) * t;
        let g = span.div_ceil(t);
        let slowest = (t + w.extra()).saturating_sub((w.extra() * g).div_ceil(w.ramp()) + 1);
        prop_assert!(a <= 1 + span / slowest.max(t), "A(1 s) = {} above the bound", a);
    }
}
