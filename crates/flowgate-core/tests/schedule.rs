//! `Schedule::next_change` against `Schedule::in_force`, on random schedules in zones with
//! changes of time (at midnight, twice at midnight, whole hours, half hours): the limit in force
//! is the same from `t` up to the change, and another one at the change.

use chrono::{NaiveTime, Weekday};
use flowgate_core::schedule::{Dates, Hours, Override, Schedule};
use flowgate_core::{Algorithm, Limit, Quota, Tz};
use proptest::prelude::*;

/// Zones and a day (00:00Z, microseconds) a little before one of their changes of time.
const NEAR_CHANGES: [(Tz, u64); 8] = [
    (Tz::Europe__Paris, 1_666_915_200_000_000), // 2022-10-28 (back on the 30th)
    (Tz::Europe__Paris, 1_679_616_000_000_000), // 2023-03-24 (forward on the 26th)
    (Tz::America__New_York, 1_667_520_000_000_000), // 2022-11-04 (back on the 6th)
    (Tz::America__Havana, 1_667_520_000_000_000), // 2022-11-04 (back at 01:00 on the 6th)
    (Tz::America__Havana, 1_678_406_400_000_000), // 2023-03-10 (forward at 00:00 on the 12th)
    (Tz::Asia__Tehran, 1_663_545_600_000_000),  // 2022-09-19 (back at 24:00 on the 21st)
    (Tz::Australia__Lord_Howe, 1_680_220_800_000_000), // 2023-03-31 (back half an hour)
    (Tz::Asia__Shanghai, 1_667_520_000_000_000), // no change
];

/// A quarter hour, mostly one near the changes of time (which happen between 23:00 and 03:00).
fn time() -> impl Strategy<Value = NaiveTime> {
    let near = (0u32..16).prop_map(|q| (23 * 60 + q * 15) % (24 * 60));
    let any = (0u32..96).prop_map(|q| q * 15);
    prop_oneof![3 => near, 1 => any]
        .prop_map(|m| NaiveTime::from_hms_opt(m / 60, m % 60, 0).unwrap())
}

fn an_override() -> impl Strategy<Value = Override> {
    let some_days = prop::collection::vec(0u8..7, 1..4).prop_map(|d| {
        d.into_iter()
            .map(|i| Weekday::try_from(i).unwrap())
            .collect::<Vec<_>>()
    });
    let days = prop_oneof![3 => Just(Vec::new()), 1 => some_days];
    let hours = prop::option::weighted(
        0.9,
        (time(), time()).prop_map(|(start, end)| Hours { start, end }),
    );
    let dates = prop::option::weighted(
        0.2,
        (0u64..60, 0u64..5).prop_map(|(from, len)| {
            let first =
                chrono::NaiveDate::from_ymd_opt(2022, 9, 1).unwrap() + chrono::Days::new(from * 7);
            Dates {
                first,
                last: first + chrono::Days::new(len),
            }
        }),
    );
    (1u64..100, days, hours, dates).prop_map(|(n, days, hours, dates)| Override {
        limit: Some(Limit::new(Algorithm::FixedWindow, Quota::per_second(n).unwrap()).unwrap()),
        dates,
        days,
        hours,
    })
}

proptest! {
    // (a change of time that alone switches the limit is rare among random schedules: many
    // cases, each cheap)
    #![proptest_config(ProptestConfig { cases: 5000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn nothing_changes_before_the_next_change_and_something_does_at_it(
        (zone, day) in prop::sample::select(NEAR_CHANGES.to_vec()),
        overrides in prop::collection::vec(an_override(), 1..4),
        // Up to four days after `day`, by the quarter hour, plus some microseconds; or anywhere
        // in the 425 days from 2022-09-01.
        anywhere in prop::bool::weighted(0.2),
        quarter in 0u64..(4 * 24 * 4),
        minute in 0u64..(425 * 24 * 60),
        micros in 0u64..900_000_000,
        samples in prop::collection::vec(0.0f64..1.0, 40),
    ) {
        let s = Schedule::new(zone, overrides);
        let t = if anywhere {
            1_661_990_400_000_000 + minute * 60_000_000 + micros
        } else {
            day + quarter * 900_000_000 + micros
        };
        let now = s.in_force(t);
        if let Some((c, then)) = s.next_change(t) {
            prop_assert!(c > t);
            prop_assert_eq!(s.in_force(c), then);
            prop_assert_ne!(then, now);
            prop_assert_eq!(s.in_force(c - 1), now, "just before {}", c);
            for f in samples {
                let x = t + ((c - t) as f64 * f) as u64;
                if x < c {
                    prop_assert_eq!(s.in_force(x), now, "at {} before the change at {}", x, c);
                }
            }
            // Every bound and change of time is on a quarter hour of UTC: a step of a quarter
            // hour visits every stretch of one limit in force (for four days).
            let mut x = t;
            while x < c && x < t + 4 * 86_400_000_000 {
                prop_assert_eq!(s.in_force(x), now, "at {} before the change at {}", x, c);
                x += 900_000_000;
            }
        } else {
            // Nothing within the horizon: the sampled instants of the next 400 days agree.
            for f in samples {
                let x = t + (f * 400.0 * 86_400e6) as u64;
                prop_assert_eq!(s.in_force(x), now, "at {}", x);
            }
        }
    }
}
