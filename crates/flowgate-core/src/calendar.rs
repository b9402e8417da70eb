//! Calendar periods: days, weeks (from Monday) and months in an IANA time zone, as pure
//! functions of an instant.
//!
//! A period starts at local midnight of its first date (a day's date, a week's Monday, a
//! month's 1st) and ends where the next one starts, so a day is 23 or 25 hours long across a
//! change of daylight saving time. Where local midnight does not exist (the clocks jump over
//! it), the period starts at the first instant after it: the instant of the jump. Where it
//! exists twice (the clocks go back over it), the period starts at the first of them.

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, Days, LocalResult, Months, NaiveDate, NaiveDateTime, TimeZone};
pub use chrono_tz::Tz;

use crate::clock::Micros;

/// A calendar unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CalendarUnit {
    /// From local midnight to the next.
    Day,
    /// From Monday 00:00 to the next Monday's.
    Week,
    /// From the 1st 00:00 to the next month's.
    Month,
}

impl CalendarUnit {
    /// The unit's name in a quota (`500/day`).
    pub fn name(self) -> &'static str {
        match self {
            CalendarUnit::Day => "day",
            CalendarUnit::Week => "week",
            CalendarUnit::Month => "month",
        }
    }

    /// A nominal length in microseconds (24 hours, 7 days, 30 days), for reports that need one
    /// number, such as Envoy's units; decisions use the real periods.
    pub fn nominal_micros(self) -> Micros {
        const DAY: Micros = 86_400_000_000;
        match self {
            CalendarUnit::Day => DAY,
            CalendarUnit::Week => 7 * DAY,
            CalendarUnit::Month => 30 * DAY,
        }
    }
}

impl FromStr for CalendarUnit {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "day" => Ok(CalendarUnit::Day),
            "week" => Ok(CalendarUnit::Week),
            "month" => Ok(CalendarUnit::Month),
            _ => Err(()),
        }
    }
}

/// A calendar unit in a time zone: the periods of a calendar window.
///
/// # Examples
/// ```
/// use flowgate_core::calendar::{Calendar, CalendarUnit, Tz};
/// let paris = Calendar::new(CalendarUnit::Day, Tz::Europe__Paris);
/// // 2026-03-29, the day Paris moves its clocks forward, lasts 23 hours.
/// let noon = 1_774_778_400_000_000; // 2026-03-29 12:00 +02:00
/// let (start, end) = paris.period(noon);
/// assert_eq!(end - start, 23 * 3_600_000_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Calendar {
    unit: CalendarUnit,
    zone: Tz,
}

impl Calendar {
    /// Periods of `unit` in `zone`.
    pub fn new(unit: CalendarUnit, zone: Tz) -> Self {
        Self { unit, zone }
    }

    /// The unit.
    pub fn unit(&self) -> CalendarUnit {
        self.unit
    }

    /// The time zone.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The period containing `now`: its start (inclusive) and end (exclusive), microseconds since
    /// the epoch.
    pub fn period(&self, now: Micros) -> (Micros, Micros) {
        let date = local_date(self.zone, now);
        let mut first = self.first_date(date);
        let mut start = local_midnight(self.zone, first);
        let mut end = local_midnight(self.zone, self.next(first));
        // A date's midnight may come after instants that still show the day before (clocks
        // going back over midnight): such instants belong to the period that has started.
        while now >= end {
            first = self.next(first);
            start = end;
            end = local_midnight(self.zone, self.next(first));
        }
        while now < start {
            first = self.prev(first);
            end = start;
            start = local_midnight(self.zone, first);
        }
        (start, end)
    }

    /// The first date of the period holding `date`.
    fn first_date(&self, date: NaiveDate) -> NaiveDate {
        match self.unit {
            CalendarUnit::Day => date,
            CalendarUnit::Week => {
                date - Days::new(u64::from(date.weekday().num_days_from_monday()))
            }
            CalendarUnit::Month => date.with_day(1).unwrap_or(date),
        }
    }

    fn next(&self, first: NaiveDate) -> NaiveDate {
        match self.unit {
            CalendarUnit::Day => first + Days::new(1),
            CalendarUnit::Week => first + Days::new(7),
            CalendarUnit::Month => first + Months::new(1),
        }
    }

    fn prev(&self, first: NaiveDate) -> NaiveDate {
        match self.unit {
            CalendarUnit::Day => first - Days::new(1),
            CalendarUnit::Week => first - Days::new(7),
            CalendarUnit::Month => first - Months::new(1),
        }
    }
}

impl fmt::Display for Calendar {
    /// `day`, or `day@Asia/Shanghai` outside UTC.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.unit.name())?;
        if self.zone != Tz::UTC {
            write!(f, "@{}", self.zone.name())?;
        }
        Ok(())
    }
}

/// Parses an IANA time zone name (`Asia/Shanghai`, `UTC`).
///
/// # Errors
/// The message to show when the name is unknown.
pub fn parse_zone(name: &str) -> Result<Tz, String> {
    name.parse::<Tz>().map_err(|_| {
        format!("unknown time zone `{name}`: expected an IANA name such as `Asia/Shanghai`, `Europe/Paris` or `UTC`")
    })
}

/// `at` as RFC 3339 text with its offset in `zone` (`2026-11-11T00:00:00+08:00`).
pub fn rfc3339(zone: Tz, at: Micros) -> String {
    let micros = i64::try_from(at).unwrap_or(i64::MAX);
    zone.timestamp_micros(micros).single().map_or_else(
        || at.to_string(),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    )
}

/// The local date and time of `at` in `zone`.
pub fn local_time(zone: Tz, at: Micros) -> NaiveDateTime {
    let micros = i64::try_from(at).unwrap_or(i64::MAX);
    zone.timestamp_micros(micros)
        .single()
        .map_or_else(|| NaiveDateTime::MIN, |t| t.naive_local())
}

fn local_date(zone: Tz, at: Micros) -> NaiveDate {
    local_time(zone, at).date()
}

/// The instant of local midnight starting `date` in `zone` (see the module's documentation).
pub fn local_midnight(zone: Tz, date: NaiveDate) -> Micros {
    first_instant_at(zone, date.and_time(chrono::NaiveTime::MIN))
}

/// The first instant whose local time in `zone` is `local` or, when the clocks jump over it,
/// the instant of the jump (the first instant after it).
pub fn first_instant_at(zone: Tz, local: NaiveDateTime) -> Micros {
    let to_micros = |t: chrono::DateTime<Tz>| u64::try_from(t.timestamp_micros()).unwrap_or(0);
    match zone.from_local_datetime(&local) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => to_micros(t),
        LocalResult::None => {
            // In a gap: the first local time that exists after it is the jump's instant. Gaps
            // are whole minutes (at most a day, as Samoa's in 2011); find the minute, then the
            // second.
            let exists = |l: NaiveDateTime| match zone.from_local_datetime(&l) {
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t),
                LocalResult::None => None,
            };
            let mut l = local;
            for _ in 0..(2 * 24 * 60) {
                l += chrono::TimeDelta::minutes(1);
                if exists(l).is_some() {
                    let mut s = l - chrono::TimeDelta::minutes(1);
                    loop {
                        s += chrono::TimeDelta::seconds(1);
                        if let Some(t) = exists(s) {
                            return to_micros(t);
                        }
                    }
                }
            }
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Micros = 3_600_000_000;

    /// The instant of an RFC 3339 text.
    fn at(text: &str) -> Micros {
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_micros() as Micros
    }

    fn period(unit: CalendarUnit, zone: Tz, now: &str) -> (Micros, Micros) {
        Calendar::new(unit, zone).period(at(now))
    }

    #[test]
    fn days_across_paris_changes_of_time() {
        use CalendarUnit::Day;
        let paris = Tz::Europe__Paris;
        // Spring forward (2026-03-29, 02:00 -> 03:00): 23 hours.
        let (s, e) = period(Day, paris, "2026-03-29T12:00:00+02:00");
        assert_eq!(
            (s, e),
            (
                at("2026-03-29T00:00:00+01:00"),
                at("2026-03-30T00:00:00+02:00")
            )
        );
        assert_eq!(e - s, 23 * HOUR);
        // Fall back (2026-10-25, 03:00 -> 02:00): 25 hours; both 02:30s are in it.
        let (s, e) = period(Day, paris, "2026-10-25T02:30:00+02:00");
        assert_eq!(e - s, 25 * HOUR);
        assert_eq!(period(Day, paris, "2026-10-25T02:30:00+01:00"), (s, e));
        // The last microsecond of a day and the first of the next.
        assert_eq!(period(Day, paris, "2026-10-25T23:59:59.999999+01:00").1, e);
        assert_eq!(period(Day, paris, "2026-10-26T00:00:00+01:00").0, e);
    }

    #[test]
    fn weeks_and_months_in_new_york() {
        let ny = Tz::America__New_York;
        // 2026-03-08 is a Sunday, when New York springs forward: the week from Monday 03-02
        // lasts 7 days less an hour.
        let (s, e) = period(CalendarUnit::Week, ny, "2026-03-08T12:00:00-04:00");
        assert_eq!(s, at("2026-03-02T00:00:00-05:00"));
        assert_eq!(e, at("2026-03-09T00:00:00-04:00"));
        assert_eq!(e - s, 7 * 24 * HOUR - HOUR);
        // November 2026 holds the fall back (11-01): 30 days and an hour.
        let (s, e) = period(CalendarUnit::Month, ny, "2026-11-15T00:00:00-05:00");
        assert_eq!(s, at("2026-11-01T00:00:00-04:00"));
        assert_eq!(e, at("2026-12-01T00:00:00-05:00"));
        assert_eq!(e - s, 30 * 24 * HOUR + HOUR);
        // A Monday at 00:00 starts its week.
        let monday = at("2026-11-02T00:00:00-05:00");
        assert_eq!(
            Calendar::new(CalendarUnit::Week, ny).period(monday).0,
            monday
        );
    }

    #[test]
    fn month_ends_and_leap_years() {
        use CalendarUnit::Month;
        let utc = Tz::UTC;
        let feb = |y: i32| {
            let (s, e) = period(Month, utc, &format!("{y}-02-10T00:00:00Z"));
            (e - s) / (24 * HOUR)
        };
        assert_eq!(
            (feb(2024), feb(2026), feb(2100), feb(2000)),
            (29, 28, 28, 29)
        );
        // The last microsecond of January and the first of February.
        let (_, e) = period(Month, utc, "2026-01-31T23:59:59.999999Z");
        assert_eq!(e, at("2026-02-01T00:00:00Z"));
        assert_eq!(period(Month, utc, "2026-02-01T00:00:00Z").0, e);
        // December into January.
        let shanghai = Tz::Asia__Shanghai;
        let (s, e) = period(Month, shanghai, "2026-12-31T23:00:00+08:00");
        assert_eq!(
            (s, e),
            (
                at("2026-12-01T00:00:00+08:00"),
                at("2027-01-01T00:00:00+08:00")
            )
        );
    }

    #[test]
    fn a_midnight_that_does_not_exist_starts_at_the_jump() {
        // America/Sao_Paulo moved its clocks forward at midnight (2018-11-04 00:00 -> 01:00).
        let sp = Tz::America__Sao_Paulo;
        let (s, e) = period(CalendarUnit::Day, sp, "2018-11-04T12:00:00-02:00");
        assert_eq!(s, at("2018-11-04T01:00:00-02:00"));
        assert_eq!(e - s, 23 * HOUR);
        // Samoa skipped 2011-12-30 altogether: the 29th ends when the 31st starts.
        let samoa = Tz::Pacific__Apia;
        let (s, e) = period(CalendarUnit::Day, samoa, "2011-12-29T12:00:00-10:00");
        assert_eq!(e - s, 24 * HOUR);
        assert_eq!(e, at("2011-12-31T00:00:00+14:00"));
    }

    #[test]
    fn a_midnight_that_exists_twice_starts_at_the_first() {
        // America/Havana went back from 2022-11-06 01:00 to 00:00: that midnight came twice,
        // and the day starts at the first (25 hours).
        let havana = Tz::America__Havana;
        let (s, e) = period(CalendarUnit::Day, havana, "2022-11-06T00:30:00-05:00");
        assert_eq!(s, at("2022-11-06T00:00:00-04:00"));
        assert_eq!(e, at("2022-11-07T00:00:00-05:00"));
        assert_eq!(e - s, 25 * HOUR);
        // Asia/Tehran went back from 2022-09-22 00:00 to 2022-09-21 23:00: the 21st lasts 25
        // hours, and the 22nd starts at the only midnight shown.
        let tehran = Tz::Asia__Tehran;
        let (s, e) = period(CalendarUnit::Day, tehran, "2022-09-21T23:30:00+03:30");
        assert_eq!(s, at("2022-09-21T00:00:00+04:30"));
        assert_eq!(e, at("2022-09-22T00:00:00+03:30"));
        assert_eq!(e - s, 25 * HOUR);
    }

    #[test]
    fn instants_as_text() {
        let t = at("2026-11-11T00:00:00+08:00");
        assert_eq!(rfc3339(Tz::Asia__Shanghai, t), "2026-11-11T00:00:00+08:00");
        assert_eq!(rfc3339(Tz::UTC, t + 1_500), "2026-11-10T16:00:00.001500Z");
    }

    #[test]
    fn names_and_zones() {
        assert!(parse_zone("Asia/Shanghai").is_ok());
        let e = parse_zone("Mars/Olympus").unwrap_err();
        assert!(e.contains("Mars/Olympus") && e.contains("IANA"), "{e}");
        let c = Calendar::new(CalendarUnit::Month, Tz::Asia__Shanghai);
        assert_eq!(c.to_string(), "month@Asia/Shanghai");
        assert_eq!(Calendar::new(CalendarUnit::Day, Tz::UTC).to_string(), "day");
    }
}
