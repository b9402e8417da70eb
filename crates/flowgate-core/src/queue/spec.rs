//! A declared queue: what it matches, the rate it releases at, and its bounds.

use std::time::Duration;

use crate::clock::{Micros, micros};
use crate::quota::{MicrosText, Quota};
use crate::rule::Matcher;

/// Default `max_depth`: jobs held (waiting and in flight) per queue instance.
pub const DEFAULT_MAX_DEPTH: u64 = 1_000_000;
/// Default `lease`: how long a worker holds a job before it is given to another.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// Default `max_attempts`: deliveries before a job goes to the dead letters.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Default `retry_backoff`: the first retry's delay after a `nack` without `retry_after`.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(1);
/// The longest automatic retry delay (`retry_backoff` doubles per attempt up to this).
pub const MAX_AUTO_BACKOFF: Duration = Duration::from_secs(3600);
/// Default `max_payload`: bytes per job.
pub const DEFAULT_MAX_PAYLOAD: usize = 64 * 1024;
/// The largest `max_payload` accepted.
pub const MAX_PAYLOAD_LIMIT: usize = 16 * 1024 * 1024;
/// The most jobs with an idempotency key in one submit: a key costs its submit a few
/// microseconds on Redis (read, compared and written in the one atomic call), so a submit of
/// this many stays within a few milliseconds.
pub const MAX_KEYED_BATCH: usize = 1_000;
/// Default `key_retention`: how long an idempotency key is remembered after its job finished.
pub const DEFAULT_KEY_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// The longest `lease`.
pub const MAX_LEASE: Duration = Duration::from_secs(12 * 3600);
/// The longest `retry_backoff` (the automatic retry delay never passes [`MAX_AUTO_BACKOFF`]).
pub const MAX_RETRY_BACKOFF: Duration = MAX_AUTO_BACKOFF;
/// The longest `key_retention`.
pub const MAX_KEY_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest delay a job may be given: a submission's `not_before` at most this long after
/// now, a `nack`'s `retry_after` at most this long. A job parked longer would never reach the
/// dead letters yet count in the depth.
pub const MAX_DELAY: Duration = Duration::from_secs(30 * 24 * 3600);

/// A queue that cannot be declared.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueSpecError {
    /// The rate admits nothing (`0/…`).
    #[error("the rate must release at least 1 job per window")]
    ZeroRate,
    /// A bound that must be at least 1 is 0.
    #[error("`{field}` must be at least 1")]
    Zero {
        /// The field.
        field: &'static str,
    },
    /// The payload bound is above [`MAX_PAYLOAD_LIMIT`].
    #[error("`max_payload` {bytes} is above the maximum of {MAX_PAYLOAD_LIMIT} bytes")]
    PayloadTooLarge {
        /// The bound asked for.
        bytes: usize,
    },
    /// A duration above its maximum ([`MAX_LEASE`], [`MAX_RETRY_BACKOFF`],
    /// [`MAX_KEY_RETENTION`]).
    #[error("`{field}` {} is above the maximum of {}", MicrosText(*.micros), MicrosText(*.max))]
    TooLong {
        /// The field.
        field: &'static str,
        /// The duration asked for, in µs.
        micros: Micros,
        /// The maximum, in µs.
        max: Micros,
    },
    /// An empty domain, name or descriptor key.
    #[error("the domain, the name and every descriptor key must be non-empty")]
    EmptyName,
}

/// A queue declared in the configuration: jobs submitted with a descriptor that matches
/// `pattern` in `domain` go to one queue instance per matched descriptor (one per channel with
/// `match = ["biz=REFUND", "channel"]`), and each instance releases its jobs in submission
/// order, at most one every [`spacing`](QueueSpec::spacing) across the cluster (GCRA, `burst`
/// releases at once after idle).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueSpec {
    /// The domain.
    pub domain: String,
    /// The name, unique among the domain's queues; part of every instance's key.
    pub name: String,
    /// The descriptor pattern (the same matching as rules).
    pub pattern: Vec<Matcher>,
    rate: Quota,
    burst: u64,
    max_depth: u64,
    lease: Micros,
    max_attempts: u32,
    retry_backoff: Micros,
    max_payload: usize,
    key_retention: Micros,
}

impl QueueSpec {
    /// A queue with the default bounds: burst 1, `max_depth` 1,000,000, lease 30 s, 5 attempts,
    /// retry backoff 1 s, payloads up to 64 KiB, idempotency keys kept 24 h after their job.
    ///
    /// # Errors
    /// [`QueueSpecError::ZeroRate`] for a rate of 0; [`QueueSpecError::EmptyName`].
    pub fn new(
        domain: impl Into<String>,
        name: impl Into<String>,
        pattern: Vec<Matcher>,
        rate: Quota,
    ) -> Result<Self, QueueSpecError> {
        let spec = Self {
            domain: domain.into(),
            name: name.into(),
            pattern,
            rate,
            burst: 1,
            max_depth: DEFAULT_MAX_DEPTH,
            lease: micros(DEFAULT_LEASE),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            retry_backoff: micros(DEFAULT_RETRY_BACKOFF),
            max_payload: DEFAULT_MAX_PAYLOAD,
            key_retention: micros(DEFAULT_KEY_RETENTION),
        };
        spec.check()
    }

    fn check(self) -> Result<Self, QueueSpecError> {
        if self.rate.limit() == 0 {
            return Err(QueueSpecError::ZeroRate);
        }
        if self.domain.is_empty()
            || self.name.is_empty()
            || self.pattern.is_empty()
            || self.pattern.iter().any(|m| m.key.is_empty())
        {
            return Err(QueueSpecError::EmptyName);
        }
        for (field, v) in [
            ("burst", self.burst),
            ("max_depth", self.max_depth),
            ("lease", self.lease),
            ("max_attempts", u64::from(self.max_attempts)),
            ("max_payload", self.max_payload as u64),
        ] {
            if v == 0 {
                return Err(QueueSpecError::Zero { field });
            }
        }
        if self.max_payload > MAX_PAYLOAD_LIMIT {
            return Err(QueueSpecError::PayloadTooLarge {
                bytes: self.max_payload,
            });
        }
        for (field, v, max) in [
            ("lease", self.lease, MAX_LEASE),
            ("retry_backoff", self.retry_backoff, MAX_RETRY_BACKOFF),
            ("key_retention", self.key_retention, MAX_KEY_RETENTION),
        ] {
            let max = micros(max);
            if v > max {
                return Err(QueueSpecError::TooLong {
                    field,
                    micros: v,
                    max,
                });
            }
        }
        Ok(self)
    }

    /// Sets the burst: how many releases may follow each other at once after idle (default 1).
    ///
    /// # Errors
    /// [`QueueSpecError::Zero`] for 0.
    pub fn with_burst(mut self, burst: u64) -> Result<Self, QueueSpecError> {
        self.burst = burst;
        self.check()
    }

    /// Sets the most jobs held, waiting and in flight (dead letters not counted).
    ///
    /// # Errors
    /// [`QueueSpecError::Zero`] for 0.
    pub fn with_max_depth(mut self, max_depth: u64) -> Result<Self, QueueSpecError> {
        self.max_depth = max_depth;
        self.check()
    }

    /// Sets the lease (visibility timeout): a job not acked within it is delivered again.
    ///
    /// # Errors
    /// [`QueueSpecError::Zero`] for a lease shorter than 1 µs, [`QueueSpecError::TooLong`] above
    /// [`MAX_LEASE`] (12 h).
    pub fn with_lease(mut self, lease: Duration) -> Result<Self, QueueSpecError> {
        self.lease = micros(lease);
        self.check()
    }

    /// Sets how many deliveries a job gets before it goes to the dead letters.
    ///
    /// # Errors
    /// [`QueueSpecError::Zero`] for 0.
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Result<Self, QueueSpecError> {
        self.max_attempts = max_attempts;
        self.check()
    }

    /// Sets the first automatic retry delay (doubled per attempt, at most 1 h).
    ///
    /// # Errors
    /// [`QueueSpecError::TooLong`] above [`MAX_RETRY_BACKOFF`] (1 h).
    pub fn with_retry_backoff(mut self, backoff: Duration) -> Result<Self, QueueSpecError> {
        self.retry_backoff = micros(backoff);
        self.check()
    }

    /// Sets the largest payload, in bytes.
    ///
    /// # Errors
    /// [`QueueSpecError::Zero`] or [`QueueSpecError::PayloadTooLarge`].
    pub fn with_max_payload(mut self, bytes: usize) -> Result<Self, QueueSpecError> {
        self.max_payload = bytes;
        self.check()
    }

    /// Sets how long an idempotency key is remembered after its job finished (acked or purged).
    ///
    /// # Errors
    /// [`QueueSpecError::TooLong`] above [`MAX_KEY_RETENTION`] (30 days).
    pub fn with_key_retention(mut self, retention: Duration) -> Result<Self, QueueSpecError> {
        self.key_retention = micros(retention);
        self.check()
    }

    /// The release rate.
    pub fn rate(&self) -> Quota {
        self.rate
    }

    /// The time between two releases, `ceil(window / limit)` µs: rounded up, so the rate is never
    /// exceeded.
    pub fn spacing(&self) -> Micros {
        self.rate.window_micros().div_ceil(self.rate.limit().max(1))
    }

    /// GCRA's tolerance, `burst × spacing`, the limiter's convention (see
    /// [`crate::algorithm::gcra`]): a release may come up to `(burst - 1) × spacing` ahead of the
    /// steady schedule.
    pub fn tau(&self) -> Micros {
        self.burst.saturating_mul(self.spacing())
    }

    /// The burst.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The most jobs held, waiting and in flight.
    pub fn max_depth(&self) -> u64 {
        self.max_depth
    }

    /// The lease, in µs.
    pub fn lease(&self) -> Micros {
        self.lease
    }

    /// Deliveries before the dead letters.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The first automatic retry delay, in µs.
    pub fn retry_backoff(&self) -> Micros {
        self.retry_backoff
    }

    /// The automatic retry delay after delivery `attempt` (1-based) failed:
    /// `retry_backoff × 2^(attempt - 1)`, at most one hour.
    pub fn backoff_after(&self, attempt: u32) -> Micros {
        let cap = micros(MAX_AUTO_BACKOFF).max(self.retry_backoff);
        let shift = attempt.saturating_sub(1).min(40);
        self.retry_backoff.saturating_mul(1 << shift).min(cap)
    }

    /// The largest payload, in bytes.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// How long an idempotency key is kept after its job finished, in µs.
    pub fn key_retention(&self) -> Micros {
        self.key_retention
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rate: &str) -> QueueSpec {
        QueueSpec::new(
            "d",
            "q",
            vec![Matcher::parse("channel")],
            rate.parse().unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn spacing_is_rounded_up_and_tau_follows_burst() {
        assert_eq!(spec("1/s").spacing(), 1_000_000);
        assert_eq!(spec("3/s").spacing(), 333_334);
        assert_eq!(spec("20/s").tau(), 50_000);
        assert_eq!(spec("20/s").with_burst(3).unwrap().tau(), 150_000);
    }

    #[test]
    fn bad_bounds_are_refused() {
        let zero = QueueSpec::new("d", "q", vec![Matcher::parse("c")], "0/s".parse().unwrap());
        assert_eq!(zero, Err(QueueSpecError::ZeroRate));
        assert_eq!(
            spec("1/s").with_max_depth(0),
            Err(QueueSpecError::Zero { field: "max_depth" })
        );
        assert!(spec("1/s").with_max_payload(MAX_PAYLOAD_LIMIT + 1).is_err());
        assert_eq!(
            QueueSpec::new("", "q", vec![Matcher::parse("c")], "1/s".parse().unwrap()),
            Err(QueueSpecError::EmptyName)
        );
    }

    #[test]
    fn durations_past_their_maximum_are_refused_naming_field_and_maximum() {
        let hour = Duration::from_secs(3600);
        assert!(spec("1/s").with_lease(12 * hour).is_ok());
        let e = spec("1/s").with_lease(12 * hour + Duration::from_micros(1));
        assert_eq!(
            e,
            Err(QueueSpecError::TooLong {
                field: "lease",
                micros: 12 * 3_600_000_000 + 1,
                max: 12 * 3_600_000_000,
            })
        );
        let e = spec("1/s").with_lease(13 * hour).unwrap_err();
        assert_eq!(e.to_string(), "`lease` 13h is above the maximum of 12h");
        assert!(spec("1/s").with_retry_backoff(hour).is_ok());
        let e = spec("1/s").with_retry_backoff(hour + Duration::from_secs(1));
        assert_eq!(
            e.unwrap_err().to_string(),
            "`retry_backoff` 3601s is above the maximum of 1h"
        );
        assert!(spec("1/s").with_key_retention(MAX_KEY_RETENTION).is_ok());
        let e = spec("1/s").with_key_retention(MAX_KEY_RETENTION + Duration::from_millis(1));
        assert_eq!(
            e.unwrap_err().to_string(),
            "`key_retention` 2592000001ms is above the maximum of 30d"
        );
    }

    #[test]
    fn backoff_doubles_up_to_an_hour() {
        let s = spec("1/s");
        assert_eq!(s.backoff_after(1), 1_000_000);
        assert_eq!(s.backoff_after(3), 4_000_000);
        assert_eq!(s.backoff_after(30), 3_600_000_000);
    }
}
