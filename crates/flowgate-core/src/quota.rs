//! Quotas (`limit` units per `window`) and their textual form (`20/s`, `1000/1m`, `5/30s`, and
//! the calendar windows `500/day`, `100/week`, `1000/month`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::calendar::{Calendar, CalendarUnit, Tz};
use crate::clock::Micros;
use crate::error::QuotaError;

/// The longest window Flowgate accepts: ten years. Keeps every product of times and counts below
/// 2^53, so the Redis scripts (Lua doubles) compute exactly what the Rust code computes.
pub const MAX_WINDOW: Micros = 10 * 366 * 86_400 * 1_000_000;

/// The largest limit (and burst) Flowgate accepts: 2^32 - 1 units per window (so a fixed
/// window's count fits in 32 bits and a key's state in 16 bytes).
pub const MAX_LIMIT: u64 = u32::MAX as u64;

/// `limit` units per `window`.
///
/// The window is a length (aligned to the Unix epoch by the algorithms), or a calendar period
/// in a time zone ([`Quota::calendar`]: `500/day` counts from local midnight to the next).
///
/// A limit of 0 is valid and blocks everything (as `requests_per_unit: 0` does in
/// envoyproxy/ratelimit). "Unlimited" is not a quota: a rule without one is unlimited.
///
/// # Examples
/// ```
/// use flowgate_core::Quota;
/// use std::time::Duration;
/// let q: Quota = "5/30s".parse().unwrap();
/// assert_eq!(q.limit(), 5);
/// assert_eq!(q.window(), Duration::from_secs(30));
/// assert_eq!(q.to_string(), "5/30s");
/// assert!("5/0s".parse::<Quota>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    limit: u64,
    /// The window's length; for a calendar window, its nominal length.
    window: Micros,
    calendar: Option<Calendar>,
}

impl Quota {
    /// `limit` units per `window`.
    ///
    /// # Errors
    /// [`QuotaError`] when the window is zero or longer than [`MAX_WINDOW`], or the limit is above
    /// [`MAX_LIMIT`].
    pub fn new(limit: u64, window: Duration) -> Result<Self, QuotaError> {
        let window_us = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
        Self::from_micros(limit, window_us)
    }

    /// `limit` units per `window` microseconds.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub fn from_micros(limit: u64, window: Micros) -> Result<Self, QuotaError> {
        if window == 0 {
            return Err(QuotaError::ZeroWindow);
        }
        if window > MAX_WINDOW {
            return Err(QuotaError::WindowTooLong { window });
        }
        if limit > MAX_LIMIT {
            return Err(QuotaError::LimitTooLarge { limit });
        }
        Ok(Self {
            limit,
            window,
            calendar: None,
        })
    }

    /// `limit` units per calendar period of `unit` in `zone` (see [`crate::calendar`]).
    ///
    /// # Errors
    /// [`QuotaError::LimitTooLarge`] when the limit is above [`MAX_LIMIT`].
    pub fn per_calendar(limit: u64, unit: CalendarUnit, zone: Tz) -> Result<Self, QuotaError> {
        let mut q = Self::from_micros(limit, unit.nominal_micros())?;
        q.calendar = Some(Calendar::new(unit, zone));
        Ok(q)
    }

    /// This quota with another limit, its window unchanged.
    ///
    /// # Errors
    /// [`QuotaError::LimitTooLarge`] when the limit is above [`MAX_LIMIT`].
    pub fn with_limit(self, limit: u64) -> Result<Self, QuotaError> {
        if limit > MAX_LIMIT {
            return Err(QuotaError::LimitTooLarge { limit });
        }
        Ok(Self { limit, ..self })
    }

    /// The calendar periods of a calendar window; `None` for a window of fixed length.
    #[inline]
    pub fn calendar(&self) -> Option<Calendar> {
        self.calendar
    }

    /// This quota with its calendar window in `zone` (a window of fixed length is unchanged).
    pub fn with_zone(mut self, zone: Tz) -> Self {
        if let Some(c) = self.calendar {
            self.calendar = Some(Calendar::new(c.unit(), zone));
        }
        self
    }

    /// `limit` per second.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub fn per_second(limit: u64) -> Result<Self, QuotaError> {
        Self::from_micros(limit, 1_000_000)
    }

    /// Units admitted per window.
    #[inline]
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window (for a calendar window, its nominal length: 24 hours, 7 days, 30 days).
    #[inline]
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.window)
    }

    /// The window in microseconds (for a calendar window, its nominal length).
    #[inline]
    pub fn window_micros(&self) -> Micros {
        self.window
    }
}

const UNITS: [(&str, Micros); 10] = [
    ("us", 1),
    ("ms", 1_000),
    ("s", 1_000_000),
    ("m", 60_000_000),
    ("h", 3_600_000_000),
    ("d", 86_400_000_000),
    ("w", 7 * 86_400_000_000),
    ("sec", 1_000_000),
    ("min", 60_000_000),
    ("hour", 3_600_000_000),
];

/// Parses a duration such as `500ms`, `30s`, `1m`, `2h`, `1d`, `1w` (also `sec`, `min`, `hour`).
///
/// # Errors
/// [`QuotaError::BadDuration`] when the text is not a whole number followed by a unit.
pub fn parse_duration(text: &str) -> Result<Duration, QuotaError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = if num.is_empty() {
        1
    } else {
        num.parse().map_err(|_| QuotaError::BadDuration {
            text: text.to_owned(),
        })?
    };
    let unit = unit.trim();
    let per = UNITS
        .iter()
        .find(|(u, _)| *u == unit)
        .map(|(_, m)| *m)
        .ok_or_else(|| QuotaError::BadDuration {
            text: text.to_owned(),
        })?;
    let us = n
        .checked_mul(per)
        .ok_or(QuotaError::WindowTooLong { window: u64::MAX })?;
    Ok(Duration::from_micros(us))
}

/// Formats a duration in microseconds in the largest unit that divides it (`30s`, `1m`, `250ms`).
pub fn format_micros(us: Micros) -> String {
    MicrosText(us).to_string()
}

/// [`format_micros`] as a [`fmt::Display`], which writes without allocating.
#[derive(Clone, Copy, Debug)]
pub struct MicrosText(pub Micros);

impl fmt::Display for MicrosText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0;
        for (unit, per) in [
            ("d", 86_400_000_000u64),
            ("h", 3_600_000_000),
            ("m", 60_000_000),
            ("s", 1_000_000),
            ("ms", 1_000),
        ] {
            if us >= per && us.is_multiple_of(per) {
                return write!(f, "{}{unit}", us / per);
            }
        }
        write!(f, "{us}us")
    }
}

impl FromStr for Quota {
    type Err = QuotaError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (limit, window) = s
            .split_once('/')
            .ok_or_else(|| QuotaError::BadQuota { text: s.to_owned() })?;
        let limit: u64 = limit
            .trim()
            .parse()
            .map_err(|_| QuotaError::BadQuota { text: s.to_owned() })?;
        let w = window.trim();
        if let Ok(unit) = w.parse::<CalendarUnit>() {
            return Quota::per_calendar(limit, unit, Tz::UTC);
        }
        let count = w.trim_start_matches(|c: char| c.is_ascii_digit());
        if count.len() < w.len() && count.trim().parse::<CalendarUnit>().is_ok() {
            return Err(QuotaError::CalendarCount { text: s.to_owned() });
        }
        // The error quotes the whole quota, so that an empty or partial window shows in place.
        let window = parse_duration(window).map_err(|e| match e {
            QuotaError::BadDuration { .. } => QuotaError::BadDuration { text: s.to_owned() },
            e => e,
        })?;
        Quota::new(limit, window)
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = self.calendar {
            return write!(f, "{}/{}", self.limit, c.unit().name());
        }
        let w = format_micros(self.window);
        let w = w
            .strip_prefix('1')
            .filter(|r| r.starts_with(|c: char| c.is_ascii_alphabetic()));
        match w {
            Some(unit) => write!(f, "{}/{unit}", self.limit),
            None => write!(f, "{}/{}", self.limit, format_micros(self.window)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_n_times_unit() {
        for (text, limit, window) in [
            ("20/s", 20, 1_000_000),
            ("1000/1m", 1000, 60_000_000),
            ("5/30s", 5, 30_000_000),
            ("1/1h", 1, 3_600_000_000),
            ("3/1d", 3, 86_400_000_000),
            ("20/500ms", 20, 500_000),
            ("0/s", 0, 1_000_000),
        ] {
            let q: Quota = text.parse().unwrap();
            assert_eq!((q.limit(), q.window_micros()), (limit, window), "{text}");
        }
    }

    #[test]
    fn rejects_bad_quotas_precisely() {
        assert_eq!("5/0s".parse::<Quota>(), Err(QuotaError::ZeroWindow));
        assert!(matches!(
            "x/s".parse::<Quota>(),
            Err(QuotaError::BadQuota { .. })
        ));
        assert!(matches!(
            "5/3fortnights".parse::<Quota>(),
            Err(QuotaError::BadDuration { .. })
        ));
        assert!(matches!(
            "5".parse::<Quota>(),
            Err(QuotaError::BadQuota { .. })
        ));
        assert!(matches!(
            "5/99999999999d".parse::<Quota>(),
            Err(QuotaError::WindowTooLong { .. })
        ));
        assert!(matches!(
            "99999999999999999/s".parse::<Quota>(),
            Err(QuotaError::LimitTooLarge { .. })
        ));
        assert!(matches!(
            "5/18446744073709551615d".parse::<Quota>(),
            Err(QuotaError::BadDuration { .. } | QuotaError::WindowTooLong { .. })
        ));
    }

    #[test]
    fn calendar_windows_take_no_count() {
        for (text, unit) in [
            ("500/day", CalendarUnit::Day),
            ("100/week", CalendarUnit::Week),
            ("1000/month", CalendarUnit::Month),
        ] {
            let q: Quota = text.parse().unwrap();
            assert_eq!(q.calendar(), Some(Calendar::new(unit, Tz::UTC)), "{text}");
            assert_eq!(q.to_string(), text);
            let shanghai = q.with_zone(Tz::Asia__Shanghai);
            assert_eq!(shanghai.calendar().unwrap().zone(), Tz::Asia__Shanghai);
            assert_eq!(shanghai.to_string(), text);
        }
        assert_eq!(
            "3/day".parse::<Quota>().unwrap().window_micros(),
            86_400_000_000
        );
        assert!(matches!(
            "5/2day".parse::<Quota>(),
            Err(QuotaError::CalendarCount { .. })
        ));
        // `1d` stays a fixed, epoch-aligned window.
        let d: Quota = "3/1d".parse().unwrap();
        assert_eq!((d.calendar(), d.with_zone(Tz::Asia__Shanghai)), (None, d));
    }

    #[test]
    fn displays_round_trip() {
        for text in ["20/s", "1000/m", "5/30s", "1/h", "3/d", "20/500ms", "7/90s"] {
            let q: Quota = text.parse().unwrap();
            assert_eq!(q.to_string().parse::<Quota>().unwrap(), q, "{text}");
        }
        assert_eq!("5/30s".parse::<Quota>().unwrap().to_string(), "5/30s");
        assert_eq!("5/1s".parse::<Quota>().unwrap().to_string(), "5/s");
    }
}
