//! Time as Flowgate sees it: integer microseconds since the Unix epoch, read through an injectable
//! [`Clock`].
//!
//! Every algorithm takes `now` as an argument and never reads a clock itself. Stores own a clock:
//! the memory store reads a [`Clock`], the Redis store reads Redis's `TIME`. Tests inject a
//! [`ManualClock`] and never sleep.
//!
//! Microseconds (not nanoseconds) because that is the resolution of Redis's `TIME`, and the
//! conformance suite requires the memory store and the Redis scripts to agree decision for
//! decision. `u64` microseconds since 1970 fit in a Lua double exactly until the year 2255.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch.
pub type Micros = u64;

/// Converts a [`Duration`] to whole microseconds, saturating.
#[inline]
pub fn micros(d: Duration) -> Micros {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A source of the current time in microseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Micros;
}

/// The real clock: the wall clock read once at start, advanced by a fast monotonic counter
/// (`quanta`, the TSC where it is reliable).
///
/// Monotonic within a process, so a limiter never sees time go backwards; aligned to the Unix
/// epoch, so fixed windows start at the same instants on every node.
#[derive(Clone, Debug)]
pub struct SystemClock {
    clock: quanta::Clock,
    start_raw: u64,
    start_epoch: Micros,
}

impl SystemClock {
    /// Creates a clock anchored to the wall clock now.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let start_raw = clock.raw();
        #[allow(clippy::disallowed_methods)] // the one place that reads the wall clock
        let start_epoch = micros(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or(Duration::ZERO),
        );
        Self {
            clock,
            start_raw,
            start_epoch,
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Micros {
        let elapsed = self.clock.delta_as_nanos(self.start_raw, self.clock.raw());
        self.start_epoch + elapsed / 1_000
    }
}

/// The process's [`SystemClock`], read by [`system_now`].
static SYSTEM: std::sync::LazyLock<SystemClock> = std::sync::LazyLock::new(SystemClock::new);

/// The real clock's reading (one [`SystemClock`] per process).
pub fn system_now() -> Micros {
    SYSTEM.now()
}

/// A clock that moves only when told to; clones share the same time.
///
/// # Examples
/// ```
/// use flowgate_core::{Clock, ManualClock};
/// use std::time::Duration;
/// let clock = ManualClock::new(1_000_000);
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(clock.now(), 1_005_000);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock showing `now` microseconds since the epoch.
    pub fn new(now: Micros) -> Self {
        Self(Arc::new(AtomicU64::new(now)))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(micros(by), Ordering::SeqCst);
    }

    /// Sets the clock to an absolute time (it may go backwards: tests of clock steps use this).
    pub fn set(&self, now: Micros) {
        self.0.store(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Micros {
        self.0.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    #[inline]
    fn now(&self) -> Micros {
        (**self).now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_epoch_aligned_and_monotonic() {
        let c = SystemClock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        // After 2020-01-01 and before 2100-01-01.
        assert!(a > 1_577_836_800_000_000 && a < 4_102_444_800_000_000);
    }

    #[test]
    fn manual_clock_clones_share_time() {
        let c = ManualClock::new(10);
        let d = c.clone();
        c.advance(Duration::from_micros(5));
        assert_eq!(d.now(), 15);
        d.set(3);
        assert_eq!(c.now(), 3);
    }
}
