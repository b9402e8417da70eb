//! Scheduled limits: overrides of a rule's limit by date range, day of week and time of day, in
//! the rule's time zone, as pure functions of an instant.
//!
//! Each [`Override`] holds a limit and up to three conditions, each checked on the local date
//! and time of the instant: `dates` (an inclusive range of local dates), `days` (days of the
//! week) and `hours` (a range of local times, `22:00-06:00` wrapping midnight; its start
//! included, its end not). The first override whose conditions all hold is in force; when none
//! does, the rule's base limit is. Times that the clocks skip (a change of time) never show, so
//! a range starting in the gap starts at the jump; times the clocks show twice are in a range
//! both times.

use std::fmt;

use chrono::{Datelike, Days, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Weekday};

use crate::calendar::{Tz, first_instant_at, local_midnight, local_time};
use crate::clock::Micros;
use crate::limit::Limit;

/// How far [`Schedule::next_change`] looks ahead: 400 days, so a yearly date is always seen.
pub const HORIZON_DAYS: u64 = 400;

/// A range of local times, `start` included and `end` not; wraps midnight when `end <= start`
/// (`22:00-06:00`), and `00:00-00:00` is the whole day.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hours {
    /// The first local time in the range.
    pub start: NaiveTime,
    /// The first local time after it.
    pub end: NaiveTime,
}

impl Hours {
    /// Parses `HH:MM-HH:MM` (24-hour, `24:00` as an end meaning midnight).
    ///
    /// # Errors
    /// A message saying what is expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("`{text}` is not a range of local times: write e.g. \"22:00-06:00\"");
        let (a, b) = text.split_once('-').ok_or_else(bad)?;
        let time = |t: &str| {
            let t = t.trim();
            if t == "24:00" {
                return Ok(NaiveTime::MIN);
            }
            NaiveTime::parse_from_str(t, "%H:%M").map_err(|_| bad())
        };
        Ok(Hours {
            start: time(a)?,
            end: time(b)?,
        })
    }

    /// Whether the local time `t` is in the range.
    pub fn contains(&self, t: NaiveTime) -> bool {
        if self.start < self.end {
            self.start <= t && t < self.end
        } else {
            t >= self.start || t < self.end
        }
    }
}

impl fmt::Display for Hours {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}",
            self.start.format("%H:%M"),
            self.end.format("%H:%M")
        )
    }
}

/// An inclusive range of local dates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dates {
    /// The first date.
    pub first: NaiveDate,
    /// The last date.
    pub last: NaiveDate,
}

impl Dates {
    /// Parses `YYYY-MM-DD..YYYY-MM-DD` (or one date).
    ///
    /// # Errors
    /// A message saying what is expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "`{text}` is not a range of dates: write e.g. \"2026-11-11..2026-11-12\" (both included)"
            )
        };
        let date = |t: &str| NaiveDate::parse_from_str(t.trim(), "%Y-%m-%d").map_err(|_| bad());
        let (first, last) = match text.split_once("..") {
            Some((a, b)) => (date(a)?, date(b)?),
            None => (date(text)?, date(text)?),
        };
        if last < first {
            return Err(format!("`{text}`: the last date is before the first"));
        }
        Ok(Dates { first, last })
    }
}

impl fmt::Display for Dates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.first, self.last)
    }
}

/// Parses a day of the week: `mon`, `tue`, ... `sun` (or the full English name).
///
/// # Errors
/// A message saying what is expected.
pub fn parse_day(text: &str) -> Result<Weekday, String> {
    text.trim().parse::<Weekday>().map_err(|_| {
        format!("`{text}` is not a day of the week: write mon, tue, wed, thu, fri, sat or sun")
    })
}

/// The short name of a day of the week (`mon`).
pub fn day_name(d: Weekday) -> &'static str {
    ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][d.num_days_from_monday() as usize]
}

/// A limit in force when its conditions hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    /// The limit; `None` means unlimited.
    pub limit: Option<Limit>,
    /// The local dates it applies on (all when `None`).
    pub dates: Option<Dates>,
    /// The days of the week it applies on (all when empty).
    pub days: Vec<Weekday>,
    /// The local times it applies at (all when `None`).
    pub hours: Option<Hours>,
}

impl Override {
    /// Whether it applies at the local date and time `t`.
    pub fn applies(&self, t: NaiveDateTime) -> bool {
        let date = t.date();
        self.dates.is_none_or(|d| d.first <= date && date <= d.last)
            && (self.days.is_empty() || self.days.contains(&date.weekday()))
            && self.hours.is_none_or(|h| h.contains(t.time()))
    }
}

/// A rule's overrides in its time zone.
///
/// # Examples
/// ```
/// use flowgate_core::schedule::{Dates, Override, Schedule};
/// use flowgate_core::{Algorithm, Limit, Quota, Tz};
/// let promo = Limit::new(Algorithm::TokenBucket, "100/s".parse::<Quota>().unwrap()).unwrap();
/// let schedule = Schedule::new(
///     Tz::Asia__Shanghai,
///     vec![Override {
///         limit: Some(promo),
///         dates: Some(Dates::parse("2026-11-11").unwrap()),
///         days: vec![],
///         hours: None,
///     }],
/// );
/// let before = 1_794_326_399_999_999; // 2026-11-10T23:59:59.999999+08:00
/// assert_eq!(schedule.in_force(before), None);
/// assert_eq!(schedule.next_change(before), Some((before + 1, Some(0))));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    zone: Tz,
    overrides: Vec<Override>,
}

impl Schedule {
    /// Overrides in `zone`, the first that applies winning.
    pub fn new(zone: Tz, overrides: Vec<Override>) -> Self {
        Self { zone, overrides }
    }

    /// The time zone.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The overrides, in order.
    pub fn overrides(&self) -> &[Override] {
        &self.overrides
    }

    /// The override in force at `at` (its index), or `None` for the base limit.
    pub fn in_force(&self, at: Micros) -> Option<usize> {
        let t = local_time(self.zone, at);
        self.overrides.iter().position(|o| o.applies(t))
    }

    /// The first instant after `at` at which another override (or the base limit) comes into
    /// force, and which; `None` when nothing changes within [`HORIZON_DAYS`].
    ///
    /// What is in force changes only where the local date or time crosses a bound of some
    /// condition (midnight, an `hours` start or end) or where the clocks change: those instants
    /// are visited in order, a day at a time.
    pub fn next_change(&self, at: Micros) -> Option<(Micros, Option<usize>)> {
        let now = self.in_force(at);
        let mut times: Vec<NaiveTime> = vec![NaiveTime::MIN];
        for h in self.overrides.iter().filter_map(|o| o.hours) {
            times.extend([h.start, h.end]);
        }
        times.sort_unstable();
        times.dedup();
        let mut date = local_time(self.zone, at).date();
        let mut candidates: Vec<Micros> = Vec::new();
        for _ in 0..=HORIZON_DAYS {
            candidates.clear();
            for &t in &times {
                let local = date.and_time(t);
                candidates.push(first_instant_at(self.zone, local));
                // A time shown twice: its second instant too.
                if let chrono::LocalResult::Ambiguous(_, second) =
                    self.zone.from_local_datetime(&local)
                {
                    candidates.push(u64::try_from(second.timestamp_micros()).unwrap_or(0));
                }
            }
            let next = date + Days::new(1);
            candidates.extend(self.changes_of_time(
                local_midnight(self.zone, date),
                local_midnight(self.zone, next),
            ));
            candidates.sort_unstable();
            for &c in candidates.iter().filter(|&&c| c > at) {
                let then = self.in_force(c);
                if then != now {
                    return Some((c, then));
                }
            }
            date = next;
        }
        None
    }

    /// The instants in `[from, to)` where the zone's offset changes (at most a few a day).
    fn changes_of_time(&self, from: Micros, to: Micros) -> Vec<Micros> {
        let offset = |t: Micros| {
            let micros = i64::try_from(t).unwrap_or(i64::MAX);
            self.zone
                .timestamp_micros(micros)
                .single()
                .map(|d| d.naive_local().and_utc().timestamp() - d.timestamp())
        };
        let mut out = Vec::new();
        let (mut lo, hi) = (from, to.saturating_sub(1));
        while lo < hi && offset(lo) != offset(hi) {
            // The first instant with the offset of `hi`, by bisection.
            let (mut a, mut b) = (lo, hi);
            let target = offset(hi);
            let start = offset(lo);
            while b - a > 1 {
                let m = a + (b - a) / 2;
                if offset(m) == start {
                    a = m;
                } else {
                    b = m;
                }
            }
            out.push(b);
            if offset(b) == target {
                break;
            }
            lo = b;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Quota};

    fn at(text: &str) -> Micros {
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_micros() as Micros
    }

    fn limit(q: &str) -> Option<Limit> {
        Some(Limit::new(Algorithm::FixedWindow, q.parse::<Quota>().unwrap()).unwrap())
    }

    fn night_and_promo(zone: Tz) -> Schedule {
        Schedule::new(
            zone,
            vec![
                Override {
                    limit: limit("100/s"),
                    dates: Some(Dates::parse("2026-11-11..2026-11-11").unwrap()),
                    days: vec![],
                    hours: None,
                },
                Override {
                    limit: limit("40/s"),
                    dates: None,
                    days: vec![Weekday::Sat, Weekday::Sun],
                    hours: Some(Hours::parse("22:00-06:00").unwrap()),
                },
            ],
        )
    }

    #[test]
    fn first_matching_override_wins() {
        let s = night_and_promo(Tz::Asia__Shanghai);
        // 2026-11-11 is a Wednesday: the promotion all day.
        assert_eq!(s.in_force(at("2026-11-11T00:00:00+08:00")), Some(0));
        assert_eq!(s.in_force(at("2026-11-11T23:59:59+08:00")), Some(0));
        assert_eq!(s.in_force(at("2026-11-12T00:00:00+08:00")), None);
        // Saturday 2026-11-14: the night rate from 22:00, then Sunday until 06:00.
        assert_eq!(s.in_force(at("2026-11-14T21:59:59+08:00")), None);
        assert_eq!(s.in_force(at("2026-11-14T22:00:00+08:00")), Some(1));
        assert_eq!(s.in_force(at("2026-11-15T05:59:59+08:00")), Some(1));
        assert_eq!(s.in_force(at("2026-11-15T06:00:00+08:00")), None);
        // Friday night is not a Saturday: 22:00 Friday is the base limit...
        assert_eq!(s.in_force(at("2026-11-13T23:00:00+08:00")), None);
        // ... and Saturday from 00:00 to 06:00 is the night rate (each condition is read on the
        // instant's own local date and time).
        assert_eq!(s.in_force(at("2026-11-14T01:00:00+08:00")), Some(1));
    }

    #[test]
    fn next_change_finds_each_switch() {
        let s = night_and_promo(Tz::Asia__Shanghai);
        // (from, the next change, what is in force then): each change is the next one's start.
        let changes = [
            (
                "2026-11-10T12:00:00+08:00",
                "2026-11-11T00:00:00+08:00",
                Some(0),
            ),
            (
                "2026-11-11T00:00:00+08:00",
                "2026-11-12T00:00:00+08:00",
                None,
            ),
            (
                "2026-11-12T00:00:00+08:00",
                "2026-11-14T00:00:00+08:00",
                Some(1),
            ),
            (
                "2026-11-14T00:00:00+08:00",
                "2026-11-14T06:00:00+08:00",
                None,
            ),
            (
                "2026-11-14T06:00:00+08:00",
                "2026-11-14T22:00:00+08:00",
                Some(1),
            ),
        ];
        for (from, next, then) in changes {
            assert_eq!(
                s.next_change(at(from)),
                Some((at(next), then)),
                "from {from}"
            );
        }
        // Nothing ever applies: no change.
        let never = Schedule::new(
            Tz::UTC,
            vec![Override {
                limit: limit("1/s"),
                dates: Some(Dates::parse("2020-01-01").unwrap()),
                days: vec![],
                hours: None,
            }],
        );
        assert_eq!(never.next_change(at("2026-01-01T00:00:00Z")), None);
    }

    #[test]
    fn hours_across_changes_of_time() {
        let night = |zone| {
            Schedule::new(
                zone,
                vec![Override {
                    limit: limit("5/s"),
                    dates: None,
                    days: vec![],
                    hours: Some(Hours::parse("02:30-03:00").unwrap()),
                }],
            )
        };
        // Paris skips 02:00-03:00 on 2026-03-29: 02:30 never shows, the range is empty that
        // day; the next one starts on the 30th.
        let paris = night(Tz::Europe__Paris);
        let t = at("2026-03-29T01:00:00+01:00");
        assert_eq!(
            paris.next_change(t),
            Some((at("2026-03-30T02:30:00+02:00"), Some(0)))
        );
        // Paris shows 02:00-03:00 twice on 2026-10-25: the range is in force both times.
        let t = at("2026-10-25T01:00:00+02:00");
        let first = at("2026-10-25T02:30:00+02:00");
        assert_eq!(paris.next_change(t), Some((first, Some(0))));
        let end_first = at("2026-10-25T03:00:00+02:00");
        assert_eq!(end_first, at("2026-10-25T02:00:00+01:00"));
        assert_eq!(paris.next_change(first), Some((end_first, None)));
        let second = at("2026-10-25T02:30:00+01:00");
        assert_eq!(paris.next_change(end_first), Some((second, Some(0))));
        assert_eq!(
            paris.next_change(second),
            Some((at("2026-10-25T03:00:00+01:00"), None))
        );
        // New York's range 01:30-03:00 on its fall back (2026-11-01, 02:00 EDT -> 01:00 EST):
        // in force from 01:30 EDT; the clocks going back to 01:00 leave it until they show
        // 01:30 again, then it lasts until 03:00 EST.
        let ny = Schedule::new(
            Tz::America__New_York,
            vec![Override {
                limit: limit("5/s"),
                dates: None,
                days: vec![],
                hours: Some(Hours::parse("01:30-03:00").unwrap()),
            }],
        );
        let start = at("2026-11-01T01:30:00-04:00");
        assert_eq!(ny.next_change(start - 1), Some((start, Some(0))));
        let back = at("2026-11-01T01:00:00-05:00");
        assert_eq!(ny.next_change(start), Some((back, None)));
        let again = at("2026-11-01T01:30:00-05:00");
        assert_eq!(ny.next_change(back), Some((again, Some(0))));
        assert_eq!(
            ny.next_change(again),
            Some((at("2026-11-01T03:00:00-05:00"), None))
        );
    }

    #[test]
    fn a_change_of_time_alone_can_switch() {
        // 00:30-01:15 in New York on 2026-11-01: it ends at 01:15 EDT; at 02:00 EDT the clocks
        // go back to 01:00 EST, inside the range again: it is in force again from the change
        // of time itself, an instant no bound of the range names.
        let ny = Schedule::new(
            Tz::America__New_York,
            vec![Override {
                limit: limit("5/s"),
                dates: None,
                days: vec![],
                hours: Some(Hours::parse("00:30-01:15").unwrap()),
            }],
        );
        let end = at("2026-11-01T01:15:00-04:00");
        assert_eq!(ny.next_change(end - 1), Some((end, None)));
        let back = at("2026-11-01T01:00:00-05:00");
        assert_eq!(
            ny.next_change(end),
            Some((back, Some(0))),
            "the change of time"
        );
        assert_eq!(
            ny.next_change(back),
            Some((at("2026-11-01T01:15:00-05:00"), None))
        );
    }

    #[test]
    fn parses_and_refuses() {
        assert_eq!(
            Hours::parse("22:00-06:00").unwrap().to_string(),
            "22:00-06:00"
        );
        assert!(Hours::parse("22:00").is_err());
        assert!(Hours::parse("25:00-06:00").is_err());
        assert!(
            Hours::parse("00:00-24:00")
                .unwrap()
                .contains(NaiveTime::MIN)
        );
        assert_eq!(
            Dates::parse("2026-11-11..2026-11-12").unwrap().to_string(),
            "2026-11-11..2026-11-12"
        );
        assert!(Dates::parse("2026-11-12..2026-11-11").is_err());
        assert!(Dates::parse("2026-13-01").is_err());
        assert_eq!(parse_day("sat"), Ok(Weekday::Sat));
        assert!(parse_day("caturday").is_err());
        assert_eq!(day_name(Weekday::Sun), "sun");
    }
}
