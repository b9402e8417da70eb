//! What a limit's state means ([`StateTag`]), which decides whether a counter carries over a
//! change of its rule's limit.

use std::fmt;

use super::{Algorithm, Warmup};
use crate::clock::Micros;
use crate::quota::Quota;

/// What a limit's state means: two limits with the same tag read each other's state, so a rule
/// whose limit changes keeps its counter exactly when the tag stays the same.
///
/// The tag names the state's type and whatever fixes the meaning of the numbers in it:
/// - token and leaky buckets share one GCRA state (a theoretical arrival time, an instant that
///   means the same under any rate or burst): `g`;
/// - a token bucket with warm-up adds its cold level to the TAT, a level read against one
///   warm-up period and cold factor: `g`, the period and the factor in thousandths (`g30s/3000`);
/// - a fixed window's count belongs to a window of one length: `f` and the window (`f1s`, `f30s`),
///   or to a calendar period: `f`, the unit and the zone outside UTC (`fday`,
///   `fmonth@Asia/Shanghai`);
/// - a sliding window's ring has buckets of one width: `W`, the window and the bucket count
///   (`W1s/10`);
/// - a sliding log's entries are read against one window: `S` and the window (`S1m`);
/// - concurrency leases carry their own expiry, so a new lease TTL keeps the leases in flight
///   (forgetting them would admit more than the limit): `c`.
///
/// The limit itself, the burst, the mode and `max_wait` are not part of it: a counter carries
/// over a change of any of them. [`fmt::Display`] writes the tag as it ends a Redis key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StateTag {
    /// `token_bucket` and `leaky_bucket`.
    Gcra,
    /// `token_bucket` with warm-up: its period in microseconds and cold factor in thousandths.
    Warmup(Micros, u32),
    /// `fixed_window` with its window in microseconds.
    FixedWindow(Micros),
    /// `fixed_window` over calendar periods.
    CalendarWindow(crate::calendar::Calendar),
    /// `sliding_window` with its window in microseconds and bucket count.
    SlidingWindow(Micros, u32),
    /// `sliding_log` with its window in microseconds.
    SlidingLog(Micros),
    /// `concurrency`.
    Concurrency,
}

impl fmt::Display for StateTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::quota::MicrosText as T;
        match *self {
            StateTag::Gcra => f.write_str("g"),
            StateTag::Warmup(p, c) => write!(f, "g{}/{c}", T(p)),
            StateTag::FixedWindow(w) => write!(f, "f{}", T(w)),
            StateTag::CalendarWindow(c) => write!(f, "f{c}"),
            StateTag::SlidingWindow(w, b) => write!(f, "W{}/{b}", T(w)),
            StateTag::SlidingLog(w) => write!(f, "S{}", T(w)),
            StateTag::Concurrency => f.write_str("c"),
        }
    }
}

impl StateTag {
    /// The tag of a limit of `algorithm` over `quota`, with its warm-up and sliding-window
    /// bucket count.
    pub(super) fn of(
        algorithm: Algorithm,
        quota: Quota,
        warmup: Option<&Warmup>,
        buckets: u32,
    ) -> Self {
        let w = quota.window_micros();
        match algorithm {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => match warmup {
                Some(wu) => StateTag::Warmup(wu.period(), wu.cold_milli()),
                None => StateTag::Gcra,
            },
            Algorithm::FixedWindow => match quota.calendar() {
                Some(c) => StateTag::CalendarWindow(c),
                None => StateTag::FixedWindow(w),
            },
            Algorithm::SlidingWindow => StateTag::SlidingWindow(w, buckets),
            Algorithm::SlidingLog => StateTag::SlidingLog(w),
            Algorithm::Concurrency => StateTag::Concurrency,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::limit::{Algorithm, Limit, q};

    #[test]
    fn state_tags_keep_counters_across_limits_not_windows() {
        let tag = |a, text: &str| Limit::new(a, q(text)).unwrap().state_tag();
        assert_eq!(
            tag(Algorithm::FixedWindow, "5/s"),
            tag(Algorithm::FixedWindow, "10/s")
        );
        assert_ne!(
            tag(Algorithm::FixedWindow, "5/s"),
            tag(Algorithm::FixedWindow, "5/2s")
        );
        assert_ne!(
            tag(Algorithm::FixedWindow, "5/s"),
            tag(Algorithm::SlidingLog, "5/s")
        );
        assert_eq!(
            tag(Algorithm::TokenBucket, "5/s"),
            tag(Algorithm::LeakyBucket, "9/m")
        );
        let sw = |b| {
            Limit::builder(Algorithm::SlidingWindow, q("5/s"))
                .buckets(b)
                .build()
                .unwrap()
                .state_tag()
        };
        assert_ne!(sw(10), sw(20));
        let day = |zone| {
            Limit::new(Algorithm::FixedWindow, q("5/day").with_zone(zone))
                .unwrap()
                .state_tag()
        };
        assert_ne!(day(crate::Tz::UTC), day(crate::Tz::Asia__Shanghai));
        assert_ne!(day(crate::Tz::UTC), tag(Algorithm::FixedWindow, "5/1d"));
        assert_eq!(
            day(crate::Tz::Asia__Shanghai).to_string(),
            "fday@Asia/Shanghai"
        );
        assert_eq!(
            tag(Algorithm::FixedWindow, "5/month"),
            tag(Algorithm::FixedWindow, "50/month")
        );
        assert_eq!(
            tag(Algorithm::Concurrency, "5/s"),
            tag(Algorithm::Concurrency, "7/30s")
        );
        for (t, text) in [
            (tag(Algorithm::TokenBucket, "5/s"), "g"),
            (tag(Algorithm::FixedWindow, "5/30s"), "f30s"),
            (sw(10), "W1s/10"),
            (tag(Algorithm::SlidingLog, "5/m"), "S1m"),
            (tag(Algorithm::Concurrency, "5/s"), "c"),
        ] {
            assert_eq!(t.to_string(), text);
        }
    }
}
