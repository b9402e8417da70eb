//! The algorithm a limit runs, and what it does to a request over the limit.

use std::fmt;
use std::str::FromStr;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>(), Ok(a));
        }
        assert_eq!(
            "sliding_log".parse::<Algorithm>(),
            Ok(Algorithm::SlidingLog)
        );
        assert!("gcra".parse::<Algorithm>().is_err());
    }
}
