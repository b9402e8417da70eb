//! Errors of the core: invalid quotas, limits and rules. Every variant says which value is wrong.

use crate::clock::Micros;

/// A quota or duration that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuotaError {
    /// The window is zero.
    #[error("the window must be longer than zero")]
    ZeroWindow,
    /// The window is longer than [`crate::quota::MAX_WINDOW`].
    #[error("the window ({window} us) is longer than the maximum of ten years")]
    WindowTooLong {
        /// The window asked for, in microseconds.
        window: Micros,
    },
    /// The limit is larger than [`crate::quota::MAX_LIMIT`].
    #[error("the limit {limit} is larger than the maximum of 2^32 - 1")]
    LimitTooLarge {
        /// The limit asked for.
        limit: u64,
    },
    /// Text that is not `<limit>/<window>`.
    #[error("`{text}` is not a quota: write <limit>/<window>, e.g. `20/s`, `1000/1m`, `5/30s`")]
    BadQuota {
        /// The text given.
        text: String,
    },
    /// A calendar window with a count (`5/2day`).
    #[error(
        "`{text}`: a calendar window (day, week, month) takes no count: write e.g. `500/day`, or `2d` for a fixed window of two days"
    )]
    CalendarCount {
        /// The text given.
        text: String,
    },
    /// Text that is not a duration.
    #[error("`{text}` is not a duration: write a whole number and a unit (us, ms, s, m, h, d, w)")]
    BadDuration {
        /// The text given.
        text: String,
    },
}

/// A limit (algorithm + quota + parameters) that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// An invalid quota.
    #[error(transparent)]
    Quota(#[from] QuotaError),
    /// `burst` below 1.
    #[error("burst must be at least 1")]
    ZeroBurst,
    /// `burst` above [`crate::quota::MAX_LIMIT`].
    #[error("burst {burst} is larger than the maximum of 2^32 - 1")]
    BurstTooLarge {
        /// The burst asked for.
        burst: u64,
    },
    /// `buckets` outside 1..=1000, or more buckets than microseconds in the window.
    #[error(
        "buckets must be between 1 and 1000 and no more than the window's microseconds, not {buckets}"
    )]
    BadBuckets {
        /// The bucket count asked for.
        buckets: u32,
    },
    /// `delay` mode on an algorithm that cannot queue.
    #[error("mode `delay` needs token_bucket or leaky_bucket, not {algorithm}")]
    DelayNotSupported {
        /// The algorithm's name.
        algorithm: &'static str,
    },
    /// `max_wait` longer than the longest window.
    #[error("max_wait is longer than the maximum of ten years")]
    MaxWaitTooLong,
    /// A calendar window on an algorithm other than `fixed_window`.
    #[error(
        "a calendar window (day, week, month) needs algorithm fixed_window, not {algorithm}: a rolling window of a calendar unit has no meaning; for a rolling day write `1d`"
    )]
    CalendarNeedsFixedWindow {
        /// The algorithm's name.
        algorithm: &'static str,
    },
    /// `warmup` on an algorithm other than `token_bucket`.
    #[error("warmup needs algorithm token_bucket, not {algorithm}")]
    WarmupNeedsTokenBucket {
        /// The algorithm's name.
        algorithm: &'static str,
    },
    /// A warm-up period shorter than one unit's time (`window / limit`) or longer than an hour.
    #[error("warmup must be at least one unit's time (window / limit) and at most 1h")]
    BadWarmup,
    /// A cold factor of 1 or less (no warm-up), above 100, or not a number.
    #[error("cold_factor must be more than 1 and at most 100")]
    BadColdFactor,
    /// `cold_factor` without `warmup`.
    #[error("cold_factor needs a warmup")]
    ColdFactorWithoutWarmup,
    /// A warm-up with more cold levels than the stores can count exactly.
    #[error(
        "warmup too long for this rate: {levels} cold levels, above 2^26, or more than 71 minutes to cool"
    )]
    WarmupTooLong {
        /// The levels it would have.
        levels: u64,
    },
    /// A `max_debt` the limit's state cannot hold.
    #[error(
        "max_debt {max_debt} is larger than this limit can hold: at most {most} (a window counts up to 2^32 - 1 with its debt; a bucket pays its debt back within ten years)"
    )]
    MaxDebtTooLarge {
        /// The `max_debt` asked for.
        max_debt: u64,
        /// The largest this limit takes.
        most: u64,
    },
    /// A window too short for the limit: the spacing between units would be below one microsecond.
    #[error("{limit} per {window} us is more than one unit per microsecond")]
    RateTooHigh {
        /// The limit.
        limit: u64,
        /// The window in microseconds.
        window: Micros,
    },
}
