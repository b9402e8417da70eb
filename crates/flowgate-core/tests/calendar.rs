//! Calendar periods on random instants in zones with changes of time: periods tile time (each
//! holds its instants, ends where the next starts) and start at local midnight of their first
//! date (a Monday, a 1st), or at the first instant after it where the clocks skip it.

use chrono::{Datelike, NaiveTime, Weekday};
use flowgate_core::Tz;
use flowgate_core::calendar::{Calendar, CalendarUnit, local_time};
use proptest::prelude::*;

const ZONES: [Tz; 8] = [
    Tz::UTC,
    Tz::Europe__Paris,
    Tz::America__New_York,
    Tz::America__Havana,
    Tz::America__Sao_Paulo,
    Tz::Asia__Tehran,
    Tz::Australia__Lord_Howe,
    Tz::Pacific__Apia,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn periods_tile_time_from_local_midnights(
        zone in prop::sample::select(ZONES.to_vec()),
        unit in prop::sample::select(vec![CalendarUnit::Day, CalendarUnit::Week, CalendarUnit::Month]),
        // 2010 .. 2030
        t in 1_262_304_000_000_000u64..1_893_456_000_000_000,
    ) {
        let c = Calendar::new(unit, zone);
        let (s, e) = c.period(t);
        prop_assert!(s <= t && t < e, "{} not in [{}, {})", t, s, e);
        prop_assert_eq!(c.period(s), (s, e));
        prop_assert_eq!(c.period(e - 1), (s, e));
        prop_assert_eq!(c.period(e).0, e);
        prop_assert_eq!(c.period(s - 1).1, s);
        let hours = (e - s) / 3_600_000_000;
        // A change of time moves a period's length by up to two hours; a week or month may
        // also lose a whole day (Apia skipped 2011-12-30).
        let (min, max) = match unit {
            CalendarUnit::Day => (22, 26),
            CalendarUnit::Week => (7 * 24 - 26, 7 * 24 + 2),
            CalendarUnit::Month => (28 * 24 - 26, 31 * 24 + 2),
        };
        prop_assert!((min..=max).contains(&hours), "{} hours", hours);
        // The start shows the first date's midnight, or a time just after a skipped one
        // (Apia skipped a whole day).
        let start = local_time(zone, s);
        let before = local_time(zone, s - 1);
        let first_date = |d: chrono::NaiveDate| match unit {
            CalendarUnit::Day => true,
            CalendarUnit::Week => d.weekday() == Weekday::Mon,
            CalendarUnit::Month => d.day() == 1,
        };
        if start.time() == NaiveTime::MIN {
            prop_assert!(first_date(start.date()), "starts on {}", start);
        } else {
            // Skipped: the instant before shows an earlier date.
            prop_assert!(before.date() < start.date(), "{} then {}", before, start);
            prop_assert!(start.time() <= NaiveTime::from_hms_opt(1, 0, 0).unwrap() || zone == Tz::Pacific__Apia, "starts at {}", start);
        }
    }
}

/// Apia skipped Friday 2011-12-30: that week, Monday 26 to Monday 2 January, lasts six days.
#[test]
fn a_week_that_lost_a_day_lasts_six_days() {
    let c = Calendar::new(CalendarUnit::Week, Tz::Pacific__Apia);
    let (s, e) = c.period(1_324_893_600_000_000); // 2011-12-26T10:00Z
    assert_eq!(
        local_time(Tz::Pacific__Apia, s).to_string(),
        "2011-12-26 00:00:00"
    );
    assert_eq!(
        local_time(Tz::Pacific__Apia, e).to_string(),
        "2012-01-02 00:00:00"
    );
    assert_eq!(e - s, 6 * 86_400_000_000);
}
