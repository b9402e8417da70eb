//! Property tests of charges and refunds (docs/algorithms.md, "Charges, debt and refunds"): the
//! debt stays within `max_debt`, time pays it back as documented, refunds stop at empty, a
//! charge of 0 only looks, and a refund undoes a charge.

use std::time::Duration;

use flowgate_core::algorithm::{self, Amount, ChargeError, State};
use flowgate_core::{Algorithm, Limit, Quota};
use proptest::prelude::*;

#[path = "common/chargeable.rs"]
mod chargeable;

use chargeable::{CHARGEABLE, EPOCH, arb_limit, full};

#[derive(Clone, Copy, Debug)]
enum Op {
    Check(u64),
    Charge(u64),
    Refund(u64),
}

fn op(lim: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4u64).prop_map(Op::Check),
        (0..3 * lim + 2).prop_map(Op::Charge),
        (0..3 * lim + 2).prop_map(Op::Refund),
    ]
}

/// Everything a later request can see of `state`: the decisions of costs 0..=3 over the next
/// two windows.
fn seen(l: &Limit, state: &State, now: u64) -> Vec<flowgate_core::Decision> {
    let step = (l.window() / 4).max(1);
    (0..9)
        .flat_map(|k| (0..4).map(move |c| (now + k * step, c)))
        .map(|(t, c)| algorithm::check(l, state, t, c))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn debt_stays_bounded_and_refuses_every_check(
        l in arb_limit(),
        ops in prop::collection::vec((0u64..300_000, op(20)), 1..120),
    ) {
        let mut s = State::default();
        let mut now = EPOCH;
        for (gap, o) in ops {
            now += gap;
            match o {
                Op::Check(c) => { algorithm::transition(&l, &mut s, now, c, 0); }
                Op::Charge(n) | Op::Refund(n) => {
                    let amount = if matches!(o, Op::Charge(_)) { Amount::Charge(n) } else { Amount::Refund(n) };
                    let c = algorithm::charge(&l, &mut s, now, amount).unwrap();
                    prop_assert_eq!(c.applied + c.dropped, n);
                    prop_assert_eq!(c.debt, algorithm::charge::debt(&l, &s, now));
                }
            }
            let debt = algorithm::charge::debt(&l, &s, now);
            prop_assert!(debt <= l.max_debt(), "debt {} > max_debt {}", debt, l.max_debt());
            if debt > 0 {
                prop_assert!(!algorithm::check(&l, &s, now, 1).allowed, "a check passed in debt");
            }
            // Over means in debt: a cost-0 check (Envoy AI Gateway's) is refused exactly then.
            prop_assert_eq!(debt > 0, !algorithm::check(&l, &s, now, 0).allowed);
        }
    }

    #[test]
    fn time_pays_the_debt_back_as_documented(
        l in arb_limit(),
        first in 0u64..100, n in 1u64..80, gap in 0u64..1_000_000,
    ) {
        let mut s = State::default();
        let t0 = EPOCH + gap;
        algorithm::charge(&l, &mut s, t0, Amount::Charge(first)).unwrap();
        let t = t0 + gap / 3;
        let c = algorithm::charge(&l, &mut s, t, Amount::Charge(n)).unwrap();
        let d = c.debt;
        match l.algorithm() {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => {
                // Paid back at the limit's rate: one unit every T, then one more T for a unit.
                let tt = l.emission_interval();
                if d > 0 {
                    prop_assert!(!algorithm::check(&l, &s, t + d * tt - 1, 1).allowed);
                }
                prop_assert_eq!(algorithm::charge::debt(&l, &s, t + d * tt), 0);
                prop_assert!(algorithm::check(&l, &s, t + (d + 1) * tt, 1).allowed);
            }
            // The windows forget the debt with the units: within a window (and a bucket).
            _ => {
                let after = t + l.window() + l.bucket_width();
                prop_assert_eq!(algorithm::charge::debt(&l, &s, after), 0);
                prop_assert!(algorithm::check(&l, &s, after, 1).allowed);
            }
        }
    }

    #[test]
    fn a_refund_stops_at_empty(
        l in arb_limit(),
        ops in prop::collection::vec((0u64..100_000, 0u64..60), 1..20),
        extra in 0u64..100,
    ) {
        let mut s = State::default();
        let mut now = EPOCH;
        for (gap, n) in ops {
            now += gap;
            algorithm::charge(&l, &mut s, now, Amount::Charge(n)).unwrap();
        }
        let held = l.limit() + l.max_debt();
        let r = algorithm::charge(&l, &mut s, now, Amount::Refund(held * 2 + extra + 1)).unwrap();
        prop_assert!(r.dropped > 0);
        prop_assert_eq!(r.debt, 0);
        prop_assert_eq!(algorithm::check(&l, &s, now, 0).remaining, full(&l));
        let again = algorithm::charge(&l, &mut s, now, Amount::Refund(extra)).unwrap();
        prop_assert_eq!(again.applied, 0, "nothing below empty");
    }

    #[test]
    fn a_charge_of_zero_only_looks_and_a_refund_undoes_a_charge(
        l in arb_limit(),
        ops in prop::collection::vec((0u64..300_000, op(20)), 0..40),
        n in 0u64..60,
    ) {
        let mut s = State::default();
        let mut now = EPOCH;
        for (gap, o) in ops {
            now += gap;
            let _ = match o {
                Op::Check(c) => { algorithm::transition(&l, &mut s, now, c, 0); continue; }
                Op::Charge(n) => algorithm::charge(&l, &mut s, now, Amount::Charge(n)),
                Op::Refund(n) => algorithm::charge(&l, &mut s, now, Amount::Refund(n)),
            };
        }
        let before = s.clone();
        for zero in [Amount::Charge(0), Amount::Refund(0)] {
            let c = algorithm::charge(&l, &mut s, now, zero).unwrap();
            prop_assert_eq!((c.applied, c.dropped), (0, 0));
            prop_assert_eq!(&s, &before);
            prop_assert_eq!(c.decision, algorithm::check(&l, &s, now, 0));
        }
        let c = algorithm::charge(&l, &mut s, now, Amount::Charge(n)).unwrap();
        prop_assume!(c.dropped == 0);
        let r = algorithm::charge(&l, &mut s, now, Amount::Refund(n)).unwrap();
        prop_assert_eq!((r.applied, r.dropped), (n, 0));
        prop_assert_eq!(seen(&l, &s, now), seen(&l, &before, now));
    }
}

#[test]
fn a_charge_past_the_debt_bound_is_applied_up_to_it_and_the_rest_dropped() {
    let q = "10/s".parse::<Quota>().unwrap();
    for a in CHARGEABLE {
        let l = Limit::builder(a, q).max_debt(5).build().unwrap();
        let mut s = State::default();
        let c = algorithm::charge(&l, &mut s, EPOCH, Amount::Charge(40)).unwrap();
        let burst = full(&l);
        assert_eq!(
            (c.applied, c.dropped, c.debt),
            (burst + 5, 40 - burst - 5, 5),
            "{a}"
        );
        assert!(!c.decision.allowed, "{a}: over");
        let c = algorithm::charge(&l, &mut s, EPOCH + 1, Amount::Charge(3)).unwrap();
        assert_eq!(
            (c.applied, c.dropped, c.debt),
            (0, 3, 5),
            "{a}: at the bound"
        );
    }
}

#[test]
fn the_default_debt_is_one_windows_limit() {
    let q = "30/m".parse::<Quota>().unwrap();
    for a in CHARGEABLE {
        assert_eq!(Limit::new(a, q).unwrap().max_debt(), 30, "{a}");
    }
    let huge = Quota::new(u64::from(u32::MAX) - 7, Duration::from_secs(3600)).unwrap();
    let fw = Limit::new(Algorithm::FixedWindow, huge).unwrap();
    assert_eq!(fw.max_debt(), 7, "clamped to what a 32-bit count holds");
    assert!(
        Limit::builder(Algorithm::FixedWindow, huge)
            .max_debt(8)
            .build()
            .unwrap_err()
            .to_string()
            .contains("max_debt 8 is larger than this limit can hold: at most 7")
    );
    let slow = "1/d".parse::<Quota>().unwrap();
    assert!(
        Limit::builder(Algorithm::TokenBucket, slow)
            .max_debt(10_000)
            .build()
            .is_err(),
        "a debt paid back over 27 years"
    );
}

#[test]
fn concurrency_and_warm_up_refuse_charges_and_change_nothing() {
    let q = "10/s".parse::<Quota>().unwrap();
    let warm = Limit::builder(Algorithm::TokenBucket, q)
        .warmup(Duration::from_secs(10))
        .build()
        .unwrap();
    let conc = Limit::new(Algorithm::Concurrency, q).unwrap();
    for l in [warm, conc] {
        let mut s = State::default();
        algorithm::transition(&l, &mut s, EPOCH, 1, 1);
        let before = s.clone();
        for amount in [Amount::Charge(3), Amount::Refund(1), Amount::Charge(0)] {
            let e = algorithm::charge(&l, &mut s, EPOCH, amount).unwrap_err();
            assert!(matches!(e, ChargeError::Unsupported { .. }));
            assert!(e.to_string().contains("takes no charges"), "{e}");
        }
        assert_eq!(s, before);
    }
}

#[test]
fn a_token_bucket_in_debt_is_paid_back_at_its_rate() {
    // 10/s, burst 10, max_debt 10: a charge of 30 from full leaves 10 owed, one every 100 ms.
    let l = Limit::new(Algorithm::TokenBucket, "10/s".parse::<Quota>().unwrap()).unwrap();
    let mut s = State::default();
    let c = algorithm::charge(&l, &mut s, EPOCH, Amount::Charge(30)).unwrap();
    assert_eq!((c.applied, c.dropped, c.debt), (20, 10, 10));
    assert_eq!(c.decision.retry_after, Some(Duration::from_secs(1)));
    let d = |t: u64| algorithm::charge::debt(&l, &s, EPOCH + t);
    assert_eq!(
        (d(0), d(99_999), d(100_000), d(950_000), d(1_000_000)),
        (10, 10, 9, 1, 0)
    );
    assert!(!algorithm::check(&l, &s, EPOCH + 1_099_999, 1).allowed);
    assert!(algorithm::check(&l, &s, EPOCH + 1_100_000, 1).allowed);
}

#[test]
fn a_fixed_window_in_debt_refuses_until_its_end_as_envoy_ratelimit_does() {
    let l = Limit::new(Algorithm::FixedWindow, "100/m".parse::<Quota>().unwrap()).unwrap();
    let mut s = State::default();
    let start = 29_000_000 * 60_000_000;
    assert!(algorithm::transition(&l, &mut s, start, 0, 0).allowed);
    let c = algorithm::charge(&l, &mut s, start + 1, Amount::Charge(150)).unwrap();
    assert_eq!((c.applied, c.debt, c.decision.allowed), (150, 50, false));
    assert!(!algorithm::check(&l, &s, start + 59_999_999, 1).allowed);
    assert!(algorithm::check(&l, &s, start + 60_000_000, 100).allowed);
}
