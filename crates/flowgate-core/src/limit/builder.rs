//! Building a [`Limit`]: its parameters, their defaults, and their validation.

use std::time::Duration;

use super::{Algorithm, DEFAULT_COLD_FACTOR, Divisor, Limit, Mode, StateTag, Warmup};
use crate::clock::Micros;
use crate::error::LimitError;
use crate::quota::{MAX_LIMIT, MAX_WINDOW, Quota};

/// The default number of sliding-window buckets.
pub const DEFAULT_BUCKETS: u32 = 10;

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
    /// Validates and builds the limit.
    ///
    /// # Errors
    /// [`LimitError`] naming the invalid parameter.
    pub fn build(self) -> Result<Limit, LimitError> {
        let a = self.algorithm;
        let q = self.quota;
        let burst = self.checked_burst()?;
        let max_wait = self.checked_fit()?;
        let w = q.window_micros();
        let emission = if q.limit() == 0 {
            w
        } else {
            w.div_ceil(q.limit())
        };
        let warmup = self.checked_warmup(emission)?;
        let max_debt = max_debt(a, q, emission, self.max_debt)?;
        let delay = self.mode == Mode::Delay && a.supports_delay();
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
            max_cost: burst + if delay { max_wait / emission } else { 0 },
            tag: StateTag::of(a, q, warmup.as_ref(), self.buckets),
        })
    }

    /// The burst, by default and checked: a bucket's (token or leaky) is at least 1 and at most
    /// [`MAX_LIMIT`], and its rate at most one unit a microsecond; any other's is the limit.
    fn checked_burst(&self) -> Result<u64, LimitError> {
        let q = self.quota;
        let burst = match self.algorithm {
            // (a cold bucket takes no burst by default: warm-up exists to spare its dependency)
            Algorithm::TokenBucket if self.warmup.is_some() => self.burst.unwrap_or(1),
            Algorithm::TokenBucket => self.burst.unwrap_or(q.limit().max(1)),
            Algorithm::LeakyBucket => self.burst.unwrap_or(1),
            _ => return Ok(q.limit()),
        };
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
        Ok(burst)
    }

    /// Checks that the algorithm takes the quota and parameters asked (a calendar period, the
    /// `delay` mode, the bucket count); answers `max_wait` in microseconds, checked.
    fn checked_fit(&self) -> Result<Micros, LimitError> {
        let a = self.algorithm;
        if self.quota.calendar().is_some() && a != Algorithm::FixedWindow {
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
        let w = self.quota.window_micros();
        if a == Algorithm::SlidingWindow
            && (self.buckets == 0 || self.buckets > 1000 || u64::from(self.buckets) > w)
        {
            return Err(LimitError::BadBuckets {
                buckets: self.buckets,
            });
        }
        Ok(max_wait)
    }

    /// The warm-up asked, checked, for emission interval `emission`: a token bucket's only, and
    /// a cold factor only with a warm-up.
    fn checked_warmup(&self, emission: Micros) -> Result<Option<Warmup>, LimitError> {
        match (self.warmup, self.cold_factor) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(LimitError::ColdFactorWithoutWarmup),
            (Some(_), _) if self.algorithm != Algorithm::TokenBucket => {
                Err(LimitError::WarmupNeedsTokenBucket {
                    algorithm: self.algorithm.name(),
                })
            }
            (Some(p), c) => Ok(Some(Warmup::new(
                p,
                c.unwrap_or(DEFAULT_COLD_FACTOR),
                emission,
            )?)),
        }
    }
}

/// `max_debt` for a limit, `asked` or by default one window's limit, within what the state can
/// hold: a window's counts are 32 bits (a default above that is clamped to it), and a bucket's
/// debt is paid back within ten years.
pub(super) fn max_debt(
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::q;

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
}
