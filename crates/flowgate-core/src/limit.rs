//! A limit: an algorithm, a quota and its parameters (burst, buckets, mode, `max_wait`,
//! `max_debt`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::clock::Micros;
use crate::error::LimitError;
use crate::quota::{MAX_LIMIT, MAX_WINDOW, Quota};

/// The algorithm a limit runs. See each module in [`crate::algorithm`] for its exact guarantee.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Count per epoch-aligned window. At most `limit` per aligned window; up to 2 x `limit`
    /// in a window that straddles a boundary.
    FixedWindow,
    /// Timestamp and cost of each admitted request. Exactly at most `limit` in every window.
    SlidingLog,
    /// A ring of epoch-aligned counters. Never more than `limit` in any window (conservative).
    SlidingWindow,
    /// GCRA with `burst` (default: `limit`): at most `burst` at once, then the steady rate.
    TokenBucket,
    /// GCRA with `burst` 1 by default: output spaced at `window / limit`; in `delay` mode callers
    /// are told how long to wait for their slot.
    LeakyBucket,
    /// At most `limit` units in flight; each lease expires after `window` if never released.
    Concurrency,
}

impl Algorithm {
    /// Every algorithm, for tests and docs.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
        Algorithm::SlidingWindow,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::Concurrency,
    ];

    /// The configuration name (`fixed_window`, `sliding_log`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::LeakyBucket => "leaky_bucket",
            Algorithm::Concurrency => "concurrency",
        }
    }

    /// Whether `delay` mode is available.
    pub fn supports_delay(self) -> bool {
        matches!(self, Algorithm::TokenBucket | Algorithm::LeakyBucket)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown algorithm name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown algorithm `{0}`: expected fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket or concurrency"
)]
pub struct UnknownAlgorithm(pub String);

impl FromStr for Algorithm {
    type Err = UnknownAlgorithm;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| UnknownAlgorithm(s.to_owned()))
    }
}

/// What happens to a request over the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Reject at once.
    #[default]
    Reject,
    /// Reserve the next free slot and tell the caller how long to wait; reject (reserving
    /// nothing) when the wait would exceed `max_wait`.
    Delay,
}

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

/// The default number of sliding-window buckets.
pub const DEFAULT_BUCKETS: u32 = 10;

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
    fn new(period: Duration, cold_factor: f64, t: Micros) -> Result<Self, LimitError> {
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

/// An algorithm with its quota and parameters, validated, with derived values precomputed.
///
/// # Examples
/// "20/s with burst 5": at most 5 requests at once from a full bucket, and one more every 50 ms.
/// ```
/// use flowgate_core::{Algorithm, Limit, Quota};
/// let limit = Limit::builder(Algorithm::TokenBucket, Quota::per_second(20).unwrap())
///     .burst(5)
///     .build()
///     .unwrap();
/// assert_eq!(limit.burst(), 5);
/// assert_eq!(limit.emission_interval(), 50_000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Limit {
    algorithm: Algorithm,
    quota: Quota,
    burst: u64,
    buckets: u32,
    mode: Mode,
    max_wait: Micros,
    max_debt: u64,
    warmup: Option<Warmup>,
    // Derived.
    emission: Micros,
    bucket_width: Micros,
    emission_div: Divisor,
    max_cost: u64,
    tag: StateTag,
}

/// A divisor with its reciprocal precomputed, so that the hot path divides by multiplying.
/// Compared and hashed by its value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Divisor(strength_reduce::StrengthReducedU64);

impl Divisor {
    fn new(d: u64) -> Self {
        Self(strength_reduce::StrengthReducedU64::new(d.max(1)))
    }

    /// `n / self`.
    #[inline]
    pub(crate) fn div(self, n: u64) -> u64 {
        n / self.0
    }
}

impl PartialEq for Divisor {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Eq for Divisor {}

impl std::hash::Hash for Divisor {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.get().hash(state);
    }
}

/// Builds a [`Limit`]; see [`Limit::builder`].
#[derive(Clone, Debug)]
pub struct LimitBuilder {
    algorithm: Algorithm,
    quota: Quota,
    burst: Option<u64>,
    buckets: u32,
    mode: Mode,
    max_wait: Duration,
    max_debt: Option<u64>,
    warmup: Option<Duration>,
    cold_factor: Option<f64>,
}

impl LimitBuilder {
    /// Gives a token bucket a warm-up: after idle it admits at `1 / cold_factor` of its rate and
    /// speeds up to the full rate over `period` of steady use (see
    /// [`crate::algorithm::warmup`]). Its burst then defaults to 1.
    pub fn warmup(mut self, period: Duration) -> Self {
        self.warmup = Some(period);
        self
    }

    /// Sets the warm-up's cold factor (default [`DEFAULT_COLD_FACTOR`]); needs a warm-up.
    pub fn cold_factor(mut self, factor: f64) -> Self {
        self.cold_factor = Some(factor);
        self
    }

    /// Sets the burst of a token or leaky bucket (ignored by other algorithms).
    pub fn burst(mut self, burst: u64) -> Self {
        self.burst = Some(burst);
        self
    }

    /// Sets the number of sliding-window buckets (default 10).
    pub fn buckets(mut self, buckets: u32) -> Self {
        self.buckets = buckets;
        self
    }

    /// Sets the mode.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets `max_wait`, the longest a `delay`-mode caller may be asked to wait.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// Sets `max_debt`, the units a charge may count beyond the limit (default: the limit; see
    /// [`crate::algorithm::charge()`]).
    pub fn max_debt(mut self, max_debt: u64) -> Self {
        self.max_debt = Some(max_debt);
        self
    }

    /// Validates and builds the limit.
    ///
    /// # Errors
    /// [`LimitError`] naming the invalid parameter.
    pub fn build(self) -> Result<Limit, LimitError> {
        let a = self.algorithm;
        let q = self.quota;
        let burst = match a {
            // (a cold bucket takes no burst by default: warm-up exists to spare its dependency)
            Algorithm::TokenBucket if self.warmup.is_some() => self.burst.unwrap_or(1),
            Algorithm::TokenBucket => self.burst.unwrap_or(q.limit().max(1)),
            Algorithm::LeakyBucket => self.burst.unwrap_or(1),
            _ => q.limit(),
        };
        if matches!(a, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
            if burst == 0 {
                return Err(LimitError::ZeroBurst);
            }
            if burst > MAX_LIMIT {
                return Err(LimitError::BurstTooLarge { burst });
            }
            if q.limit() > q.window_micros() {
                return Err(LimitError::RateTooHigh {
                    limit: q.limit(),
                    window: q.window_micros(),
                });
            }
        }
        if q.calendar().is_some() && a != Algorithm::FixedWindow {
            return Err(LimitError::CalendarNeedsFixedWindow {
                algorithm: a.name(),
            });
        }
        if self.mode == Mode::Delay && !a.supports_delay() {
            return Err(LimitError::DelayNotSupported {
                algorithm: a.name(),
            });
        }
        let max_wait = crate::clock::micros(self.max_wait);
        if max_wait > MAX_WINDOW {
            return Err(LimitError::MaxWaitTooLong);
        }
        let w = q.window_micros();
        if a == Algorithm::SlidingWindow
            && (self.buckets == 0 || self.buckets > 1000 || u64::from(self.buckets) > w)
        {
            return Err(LimitError::BadBuckets {
                buckets: self.buckets,
            });
        }
        let emission = if q.limit() == 0 {
            w
        } else {
            w.div_ceil(q.limit())
        };
        let warmup = match (self.warmup, self.cold_factor) {
            (None, None) => None,
            (None, Some(_)) => return Err(LimitError::ColdFactorWithoutWarmup),
            (Some(_), _) if a != Algorithm::TokenBucket => {
                return Err(LimitError::WarmupNeedsTokenBucket {
                    algorithm: a.name(),
                });
            }
            (Some(p), c) => Some(Warmup::new(p, c.unwrap_or(DEFAULT_COLD_FACTOR), emission)?),
        };
        let max_debt = max_debt(a, q, emission, self.max_debt)?;
        let tag = match a {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => match warmup {
                Some(wu) => StateTag::Warmup(wu.period, wu.cold_milli),
                None => StateTag::Gcra,
            },
            Algorithm::FixedWindow => match q.calendar() {
                Some(c) => StateTag::CalendarWindow(c),
                None => StateTag::FixedWindow(w),
            },
            Algorithm::SlidingWindow => StateTag::SlidingWindow(w, self.buckets),
            Algorithm::SlidingLog => StateTag::SlidingLog(w),
            Algorithm::Concurrency => StateTag::Concurrency,
        };
        Ok(Limit {
            algorithm: a,
            quota: q,
            burst,
            buckets: self.buckets,
            mode: if a.supports_delay() {
                self.mode
            } else {
                Mode::Reject
            },
            max_wait: if self.mode == Mode::Delay {
                max_wait
            } else {
                0
            },
            max_debt,
            warmup,
            emission,
            bucket_width: w.div_ceil(u64::from(self.buckets.max(1))),
            emission_div: Divisor::new(emission),
            max_cost: burst
                + if self.mode == Mode::Delay && a.supports_delay() {
                    max_wait / emission
                } else {
                    0
                },
            tag,
        })
    }
}

/// `max_debt` for a limit, `asked` or by default one window's limit, within what the state can
/// hold: a window's counts are 32 bits (a default above that is clamped to it), and a bucket's
/// debt is paid back within ten years.
fn max_debt(
    a: Algorithm,
    q: Quota,
    emission: Micros,
    asked: Option<u64>,
) -> Result<u64, LimitError> {
    let most = match a {
        Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
            MAX_LIMIT - q.limit()
        }
        Algorithm::TokenBucket | Algorithm::LeakyBucket => MAX_WINDOW / emission.max(1),
        _ => MAX_LIMIT,
    };
    match asked {
        None => Ok(q.limit().min(most)),
        Some(d) if d > most => Err(LimitError::MaxDebtTooLarge { max_debt: d, most }),
        Some(d) => Ok(d),
    }
}

impl Limit {
    /// Starts building a limit of `algorithm` with `quota`.
    pub fn builder(algorithm: Algorithm, quota: Quota) -> LimitBuilder {
        LimitBuilder {
            algorithm,
            quota,
            burst: None,
            buckets: DEFAULT_BUCKETS,
            mode: Mode::Reject,
            max_wait: Duration::ZERO,
            max_debt: None,
            warmup: None,
            cold_factor: None,
        }
    }

    /// A limit with default parameters.
    ///
    /// # Errors
    /// As [`LimitBuilder::build`].
    pub fn new(algorithm: Algorithm, quota: Quota) -> Result<Self, LimitError> {
        Self::builder(algorithm, quota).build()
    }

    /// The algorithm.
    #[inline]
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The quota.
    #[inline]
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The quota's limit.
    #[inline]
    pub fn limit(&self) -> u64 {
        self.quota.limit()
    }

    /// The window in microseconds (for `concurrency`, the lease TTL).
    #[inline]
    pub fn window(&self) -> Micros {
        self.quota.window_micros()
    }

    /// `max_debt`: the units a charge may count beyond the limit.
    #[inline]
    pub fn max_debt(&self) -> u64 {
        self.max_debt
    }

    /// The `max_debt` this limit has when none is asked for: its limit, within what its state
    /// holds.
    pub fn default_max_debt(&self) -> u64 {
        max_debt(self.algorithm, self.quota, self.emission, None).unwrap_or(self.max_debt)
    }

    /// The burst: for token and leaky buckets the bucket's size in units; otherwise the limit.
    #[inline]
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The number of sliding-window buckets.
    #[inline]
    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// The mode.
    #[inline]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// `max_wait` in microseconds (0 in `reject` mode).
    #[inline]
    pub fn max_wait(&self) -> Micros {
        self.max_wait
    }

    /// A token bucket's warm-up, if it has one.
    #[inline]
    pub fn warmup(&self) -> Option<&Warmup> {
        self.warmup.as_ref()
    }

    /// GCRA's emission interval `T = ceil(window / limit)` in microseconds: the spacing of units
    /// at the steady rate (rounded up, so the rate is never exceeded).
    #[inline]
    pub fn emission_interval(&self) -> Micros {
        self.emission
    }

    /// This limit shared evenly among `nodes` (the `local` failure policy): the limit and burst
    /// divided by `nodes`, rounded down but at least 1 (a limit of 0 stays 0), so that the nodes
    /// together admit no more than the whole limit unless it is below `nodes`.
    pub fn divided(&self, nodes: u32) -> Limit {
        let n = u64::from(nodes.max(1));
        let share = |x: u64| if x == 0 { 0 } else { (x / n).max(1) };
        let quota = self
            .quota
            .with_limit(share(self.limit()))
            .unwrap_or(self.quota);
        let mut b = Limit::builder(self.algorithm, quota)
            .buckets(self.buckets)
            .mode(self.mode)
            .max_wait(Duration::from_micros(self.max_wait))
            .max_debt(share(self.max_debt));
        if matches!(
            self.algorithm,
            Algorithm::TokenBucket | Algorithm::LeakyBucket
        ) {
            b = b.burst(share(self.burst).max(1));
        }
        if let Some(w) = self.warmup {
            b = b
                .warmup(Duration::from_micros(w.period))
                .cold_factor(w.cold_factor());
        }
        b.build().unwrap_or_else(|_| self.clone())
    }

    /// What this limit's state means ([`StateTag`]): a rule's counter carries over a change of
    /// its limit exactly when the tag is unchanged. Fixed when the limit is built: the stores
    /// read it on every decision.
    #[inline]
    pub fn state_tag(&self) -> StateTag {
        self.tag
    }

    /// For token and leaky buckets, the largest cost that can ever be admitted: `burst`, plus in
    /// `delay` mode the units that fit in `max_wait`.
    #[inline]
    pub fn max_cost(&self) -> u64 {
        self.max_cost
    }

    /// `n / emission_interval`, by multiplication.
    #[inline]
    pub(crate) fn per_emission(&self, n: u64) -> u64 {
        self.emission_div.div(n)
    }

    /// The sliding window's bucket width `ceil(window / buckets)` in microseconds.
    #[inline]
    pub fn bucket_width(&self) -> Micros {
        self.bucket_width
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quota {
        s.parse().unwrap()
    }

    #[test]
    fn validates_parameters() {
        let tb = |b| {
            Limit::builder(Algorithm::TokenBucket, q("20/s"))
                .burst(b)
                .build()
        };
        assert_eq!(tb(0), Err(LimitError::ZeroBurst));
        assert!(matches!(tb(1 << 33), Err(LimitError::BurstTooLarge { .. })));
        assert_eq!(tb(5).unwrap().burst(), 5);
        assert_eq!(
            Limit::builder(Algorithm::FixedWindow, q("20/s"))
                .mode(Mode::Delay)
                .build(),
            Err(LimitError::DelayNotSupported {
                algorithm: "fixed_window"
            })
        );
        assert!(matches!(
            Limit::builder(Algorithm::SlidingWindow, q("20/s"))
                .buckets(0)
                .build(),
            Err(LimitError::BadBuckets { buckets: 0 })
        ));
        assert!(matches!(
            Limit::new(Algorithm::TokenBucket, q("2000000/s")),
            Err(LimitError::RateTooHigh { .. })
        ));
        for a in Algorithm::ALL {
            let r = Limit::new(a, q("500/day"));
            assert_eq!(r.is_ok(), a == Algorithm::FixedWindow, "{a}");
        }
        assert!(
            Limit::new(Algorithm::SlidingLog, q("5/month"))
                .unwrap_err()
                .to_string()
                .contains("1d")
        );
    }

    #[test]
    fn divided_among_nodes() {
        let l = Limit::builder(Algorithm::TokenBucket, q("20/s"))
            .burst(6)
            .build()
            .unwrap();
        let d = l.divided(3);
        assert_eq!((d.limit(), d.burst(), d.window()), (6, 2, 1_000_000));
        let day = Limit::new(Algorithm::FixedWindow, q("90/day")).unwrap();
        assert_eq!(day.divided(3).quota(), q("30/day"));
        assert_eq!(
            Limit::new(Algorithm::FixedWindow, q("1/s"))
                .unwrap()
                .divided(4)
                .limit(),
            1
        );
        assert_eq!(
            Limit::new(Algorithm::FixedWindow, q("0/s"))
                .unwrap()
                .divided(4)
                .limit(),
            0
        );
    }

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

    #[test]
    fn defaults() {
        assert_eq!(
            Limit::new(Algorithm::TokenBucket, q("20/s"))
                .unwrap()
                .burst(),
            20
        );
        assert_eq!(
            Limit::new(Algorithm::LeakyBucket, q("20/s"))
                .unwrap()
                .burst(),
            1
        );
        let sw = Limit::new(Algorithm::SlidingWindow, q("20/s")).unwrap();
        assert_eq!((sw.buckets(), sw.bucket_width()), (10, 100_000));
        // T rounds up: 3 per second is one unit every 333_334 us, never faster than asked.
        assert_eq!(
            Limit::new(Algorithm::TokenBucket, q("3/s"))
                .unwrap()
                .emission_interval(),
            333_334
        );
        assert_eq!(
            "sliding_log".parse::<Algorithm>(),
            Ok(Algorithm::SlidingLog)
        );
        assert!("gcra".parse::<Algorithm>().is_err());
    }
}
