//! Property tests of releases (docs/algorithms.md, "Releasing a reservation"): a reservation
//! decided at `t0` and released at `t1 >= t0` leaves a key that answers every later check as the
//! key without the reservation would, or more strictly, never more permissively; never more than
//! the reservation's units are given back; a release of 0 changes nothing.

use flowgate_core::algorithm::{self, Amount, State};
use flowgate_core::{Algorithm, Decision, Limit, Quota};
use proptest::prelude::*;

#[path = "common/chargeable.rs"]
mod chargeable;

use chargeable::{EPOCH, arb_limit, full};

/// What builds the key's state before the reservation.
#[derive(Clone, Copy, Debug)]
enum Op {
    Check(u64),
    Charge(u64),
    Refund(u64),
    Release(u64, u64),
}

fn op(lim: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..lim + 2).prop_map(Op::Check),
        (0..2 * lim + 2).prop_map(Op::Charge),
        (0..lim + 2).prop_map(Op::Refund),
        (0..lim + 2, 0u64..400_000).prop_map(|(n, ago)| Op::Release(n, ago)),
    ]
}

/// Everything a later request can see of `state` from `from` on: the decisions of every cost
/// up to one past a full key, over the next two and a half windows.
fn seen(l: &Limit, state: &State, from: u64) -> Vec<(u64, u64, Decision)> {
    let step = (l.window() / 8).max(1);
    (0..21)
        .flat_map(|k| (0..=full(l) + 1).map(move |c| (from + k * step, c)))
        .map(|(t, c)| (t, c, algorithm::check(l, state, t, c)))
        .collect()
}

/// The state `ops` leave, from `EPOCH`, and the instant after the last.
fn build(l: &Limit, ops: &[(u64, Op)]) -> (State, u64) {
    let mut s = State::default();
    let mut now = EPOCH;
    for &(gap, o) in ops {
        now += gap;
        let amount = match o {
            Op::Check(c) => {
                algorithm::transition(l, &mut s, now, c, 0);
                continue;
            }
            Op::Charge(n) => Amount::Charge(n),
            Op::Refund(n) => Amount::Refund(n),
            Op::Release(n, ago) => Amount::release(n, now - ago),
        };
        algorithm::charge(l, &mut s, now, amount).unwrap();
    }
    (s, now)
}

/// Whether `l` must answer exactly as without the reservation after releasing it at `t1`.
fn exact(l: &Limit, t0: u64, t1: u64) -> bool {
    match l.algorithm() {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => true,
        Algorithm::FixedWindow => {
            algorithm::fixed_window::window_end(l, t0) == algorithm::fixed_window::window_end(l, t1)
        }
        // Exact too when the clock never steps back, as here (the units are taken from the
        // bucket or entry that counted them, or have left with it).
        Algorithm::SlidingWindow | Algorithm::SlidingLog => true,
        Algorithm::Concurrency => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn a_released_reservation_leaves_the_key_no_more_permissive(
        l in arb_limit(),
        ops in prop::collection::vec((0u64..300_000, op(20)), 0..40),
        wanted in 1u64..20,
        gap in prop_oneof![Just(0u64), 0u64..3_000, 0u64..5_000_000],
    ) {
        let (without, t0) = build(&l, &ops);
        // The largest estimate up to `wanted` the key admits at t0.
        let e = (1..=wanted).rev().find(|&e| algorithm::check(&l, &without, t0, e).allowed);
        prop_assume!(e.is_some());
        let e = e.unwrap_or_default();
        let mut with = without.clone();
        prop_assert!(algorithm::transition(&l, &mut with, t0, e, 0).allowed);
        let t1 = t0 + gap;
        let r = algorithm::charge(&l, &mut with, t1, Amount::release(e, t0)).unwrap();
        prop_assert!(r.applied <= e, "gave back {} of {}", r.applied, e);
        prop_assert_eq!(r.applied + r.dropped, e);
        let (got, want) = (seen(&l, &with, t1), seen(&l, &without, t1));
        if exact(&l, t0, t1) {
            for (g, w) in got.iter().zip(&want) {
                prop_assert_eq!(g, w, "at {} cost {}: released {} of {} taken at {}", g.0, g.1, r.applied, e, t0);
            }
        }
        for ((t, c, g), (_, _, w)) in got.iter().zip(&want) {
            prop_assert!(!g.allowed || w.allowed, "at {t} cost {c}: admitted only after the release");
            prop_assert!(g.remaining <= w.remaining, "at {t} cost {c}: more remaining after the release");
        }
    }

    #[test]
    fn a_release_never_gives_back_more_than_its_units_and_zero_changes_nothing(
        l in arb_limit(),
        ops in prop::collection::vec((0u64..300_000, op(20)), 0..40),
        n in 0u64..30,
        ago in 0u64..3_000_000,
    ) {
        let (mut s, now) = build(&l, &ops);
        let before = s.clone();
        let zero = algorithm::charge(&l, &mut s, now, Amount::release(0, now - ago)).unwrap();
        prop_assert_eq!((zero.applied, zero.dropped), (0, 0));
        prop_assert_eq!(&s, &before);
        let r = algorithm::charge(&l, &mut s, now, Amount::release(n, now - ago)).unwrap();
        prop_assert!(r.applied <= n);
        prop_assert_eq!(r.applied + r.dropped, n);
    }
}

/// Whether units taken at `taken` count no more at `now`: their window ended, their bucket or
/// log entry left the window (never for a token or leaky bucket, where time gives units back).
fn gone(l: &Limit, taken: u64, now: u64) -> bool {
    use algorithm::fixed_window::window_end;
    match l.algorithm() {
        Algorithm::FixedWindow => window_end(l, taken) != window_end(l, now),
        Algorithm::SlidingWindow => {
            taken / l.bucket_width() < (now + 1).saturating_sub(l.window()) / l.bucket_width()
        }
        Algorithm::SlidingLog => taken + l.window() <= now,
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn units_that_count_no_more_are_not_given_back(
        l in arb_limit(),
        ops in prop::collection::vec((0u64..300_000, op(20)), 0..40),
        n in 1u64..30,
        ago in 0u64..3_000_000,
    ) {
        let (mut s, now) = build(&l, &ops);
        let taken = now - ago;
        prop_assume!(gone(&l, taken, now));
        let before = seen(&l, &s, now);
        let r = algorithm::charge(&l, &mut s, now, Amount::release(n, taken)).unwrap();
        prop_assert_eq!((r.applied, r.dropped), (0, n));
        prop_assert_eq!(seen(&l, &s, now), before);
    }
}

fn fixed(q: &str) -> Limit {
    Limit::new(Algorithm::FixedWindow, q.parse::<Quota>().unwrap()).unwrap()
}

#[test]
fn a_fixed_window_gives_back_in_the_same_window_only() {
    let l = fixed("10/s");
    let mut s = State::default();
    let t0 = EPOCH + 100_000;
    assert!(algorithm::transition(&l, &mut s, t0, 3, 0).allowed);
    assert!(algorithm::transition(&l, &mut s, t0, 6, 0).allowed);
    let r = algorithm::charge(&l, &mut s, t0 + 800_000, Amount::release(6, t0)).unwrap();
    assert_eq!((r.applied, r.dropped, r.decision.remaining), (6, 0, 7));
    // The next window: the reservation's units count no more, so none are given back.
    assert!(algorithm::transition(&l, &mut s, EPOCH + 1_000_000, 9, 0).allowed);
    let r = algorithm::charge(&l, &mut s, EPOCH + 1_000_001, Amount::release(3, t0)).unwrap();
    assert_eq!((r.applied, r.dropped, r.decision.remaining), (0, 3, 1));
}

#[test]
fn a_sliding_window_gives_back_from_the_bucket_taken_while_it_counts() {
    // 4/s in 4 buckets of 250 ms.
    let l = Limit::builder(Algorithm::SlidingWindow, "4/s".parse::<Quota>().unwrap())
        .buckets(4)
        .build()
        .unwrap();
    let mut s = State::default();
    assert!(algorithm::transition(&l, &mut s, EPOCH, 1, 0).allowed);
    assert!(algorithm::transition(&l, &mut s, EPOCH + 300_000, 3, 0).allowed);
    // Released from the bucket of EPOCH + 300 ms, not the older one.
    let r = algorithm::charge(
        &l,
        &mut s,
        EPOCH + 600_000,
        Amount::release(5, EPOCH + 300_000),
    )
    .unwrap();
    assert_eq!((r.applied, r.dropped, r.decision.remaining), (3, 2, 3));
    // The first bucket has left once its last instant is out of the window.
    let r = algorithm::charge(&l, &mut s, EPOCH + 1_249_999, Amount::release(1, EPOCH)).unwrap();
    assert_eq!(r.applied, 0);
}

#[test]
fn a_sliding_log_removes_the_reservations_entry_while_it_is_logged() {
    let l = Limit::new(Algorithm::SlidingLog, "5/s".parse::<Quota>().unwrap()).unwrap();
    let mut s = State::default();
    assert!(algorithm::transition(&l, &mut s, EPOCH, 2, 0).allowed);
    assert!(algorithm::transition(&l, &mut s, EPOCH + 10, 3, 0).allowed);
    let r = algorithm::charge(&l, &mut s, EPOCH + 20, Amount::release(4, EPOCH)).unwrap();
    assert_eq!((r.applied, r.dropped, r.decision.remaining), (2, 2, 2));
    let State::SlidingLog(log) = &s else {
        panic!("a sliding log");
    };
    assert_eq!(
        log.entries.iter().copied().collect::<Vec<_>>(),
        [(EPOCH + 10, 3)]
    );
    let r = algorithm::charge(
        &l,
        &mut s,
        EPOCH + 1_000_010,
        Amount::release(3, EPOCH + 10),
    )
    .unwrap();
    assert_eq!(r.applied, 0, "the entry has left the window");
}

#[test]
fn a_token_bucket_moves_the_schedule_back_no_earlier_than_now() {
    let l = Limit::new(Algorithm::TokenBucket, "10/s".parse::<Quota>().unwrap()).unwrap();
    let mut s = State::default();
    assert!(algorithm::transition(&l, &mut s, EPOCH, 8, 0).allowed);
    // 500 ms later time already gave 5 of the 8 units back: 3 are left to give.
    let r = algorithm::charge(&l, &mut s, EPOCH + 500_000, Amount::release(8, EPOCH)).unwrap();
    assert_eq!((r.applied, r.dropped, r.decision.remaining), (3, 5, 10));
}
