//! A token bucket's warm-up: its parameters' bounds and the integers its transition reads.

use std::time::Duration;

use crate::clock::Micros;
use crate::error::LimitError;

/// A warm-up's default cold factor (Sentinel's and Guava's): a cold bucket runs at a third of
/// its rate.
pub const DEFAULT_COLD_FACTOR: f64 = 3.0;
/// The largest cold factor.
pub const MAX_COLD_FACTOR: f64 = 100.0;
/// The longest warm-up period: one hour.
pub const MAX_WARMUP: Micros = 3_600_000_000;
/// The most cold levels a warm-up may have, 2^26: the scripts compute `j * (j + 1) / 2` for a
/// level `j`, which must stay exact below 2^53.
pub const MAX_WARMUP_LEVELS: u64 = 1 << 26;

/// A token bucket's warm-up, with the integers its transition reads: see
/// [`crate::algorithm::warmup`] for what they mean and what is admitted when.
///
/// With emission interval `T`, period `W` and cold factor `c` (in thousandths, so that Rust and
/// the scripts compute the same integers):
/// - `extra = round((c - 1) * T)`: what the coldest unit costs above `T`;
/// - `warn = floor(W / ((c - 1) * T))`: Sentinel's warning level (`warningToken`);
/// - `ramp = max(1, floor(2 * W / ((1 + c) * T)))`: the levels above it (Sentinel's
///   `maxToken - warningToken`), the units a cold bucket admits before it is warm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Warmup {
    period: Micros,
    cold_milli: u32,
    extra: Micros,
    warn: u64,
    ramp: u64,
}

impl Warmup {
    /// The warm-up period in microseconds.
    #[inline]
    pub fn period(&self) -> Micros {
        self.period
    }

    /// The cold factor in thousandths (3000 for 3).
    #[inline]
    pub fn cold_milli(&self) -> u32 {
        self.cold_milli
    }

    /// The cold factor.
    pub fn cold_factor(&self) -> f64 {
        f64::from(self.cold_milli) / 1000.0
    }

    /// What the coldest unit costs above the emission interval, microseconds.
    #[inline]
    pub fn extra(&self) -> Micros {
        self.extra
    }

    /// The warning level: a bucket at or below it is warm.
    #[inline]
    pub fn warn(&self) -> u64 {
        self.warn
    }

    /// The levels above the warning level (at least 1).
    #[inline]
    pub fn ramp(&self) -> u64 {
        self.ramp
    }

    /// The coldest level, `warn + ramp`.
    #[inline]
    pub fn top(&self) -> u64 {
        self.warn + self.ramp
    }

    /// The warm-up's integers for emission interval `t`, validated.
    pub(super) fn new(period: Duration, cold_factor: f64, t: Micros) -> Result<Self, LimitError> {
        let w = crate::clock::micros(period);
        // (at least one unit's time: `extra` then stays below 2^52, as the scripts need)
        if w < t.max(1) || w > MAX_WARMUP {
            return Err(LimitError::BadWarmup);
        }
        if !(cold_factor.is_finite() && cold_factor > 1.0 && cold_factor <= MAX_COLD_FACTOR) {
            return Err(LimitError::BadColdFactor);
        }
        // (in (1000, 100_000] after the check above, but for rounding just above 1)
        let cold_milli = (cold_factor * 1000.0).round() as u32;
        if cold_milli <= 1000 {
            return Err(LimitError::BadColdFactor);
        }
        let (cm, t128, w128) = (u128::from(cold_milli), u128::from(t), u128::from(w));
        let big = |x: u128| u64::try_from(x).unwrap_or(u64::MAX);
        let extra = big(((cm - 1000) * t128 + 500) / 1000);
        let warn = big(w128 * 1000 / ((cm - 1000) * t128));
        let ramp = big(2 * w128 * 1000 / ((1000 + cm) * t128)).max(1);
        let top = warn.saturating_add(ramp);
        // The stores keep how long a bucket takes to cool as a u32 of microseconds.
        if top > MAX_WARMUP_LEVELS || top.saturating_mul(t) > u64::from(u32::MAX) {
            return Err(LimitError::WarmupTooLong { levels: top });
        }
        Ok(Self {
            period: w,
            cold_milli,
            extra,
            warn,
            ramp,
        })
    }
}
