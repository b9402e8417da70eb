//! Decision latency in log-linear buckets (four per power of two, so a quantile is within 19 %
//! of the truth): one relaxed increment per decision, read each second into a window from which
//! the recent p50 and p99 are taken.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Buckets: 4 per power of two of nanoseconds, up to 2^40 ns (18 minutes).
const BUCKETS: usize = 4 * 41;

/// The bucket of `ns` nanoseconds.
fn bucket(ns: u64) -> usize {
    if ns < 4 {
        return ns as usize;
    }
    let bits = 64 - ns.leading_zeros() as usize; // ≥ 3
    let sub = ((ns >> (bits - 3)) & 0b11) as usize;
    ((bits - 2) * 4 + sub).min(BUCKETS - 1)
}

/// The upper bound (ns) of bucket `i`.
fn upper(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let bits = i / 4 + 2;
    let sub = (i % 4) as u64;
    ((0b100 | sub) + 1) << (bits - 3)
}

/// The decision latency counters.
pub(super) struct Latency {
    counts: Box<[AtomicU64]>,
    /// The sampler's: the counts at the last sample, and the recent seconds' increments.
    window: parking_lot::Mutex<(Vec<u64>, VecDeque<Vec<u64>>)>,
    seconds: usize,
}

impl Latency {
    /// Counters whose quantiles cover the last `seconds` samples.
    pub(super) fn new(seconds: usize) -> Self {
        Self {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            window: parking_lot::Mutex::new((vec![0; BUCKETS], VecDeque::new())),
            seconds: seconds.max(1),
        }
    }

    /// Counts one decision that took `d`.
    #[inline]
    pub(super) fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[bucket(ns)].fetch_add(1, Relaxed);
    }

    /// Closes a second; returns the window's p50 and p99 in milliseconds (none without
    /// decisions).
    pub(super) fn sample(&self) -> Option<(f64, f64)> {
        let now: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let mut w = self.window.lock();
        let second: Vec<u64> = now.iter().zip(&w.0).map(|(a, b)| a - b.min(a)).collect();
        w.0 = now;
        w.1.push_back(second);
        while w.1.len() > self.seconds {
            w.1.pop_front();
        }
        let mut sum = vec![0u64; BUCKETS];
        for s in &w.1 {
            for (a, b) in sum.iter_mut().zip(s) {
                *a += b;
            }
        }
        let total: u64 = sum.iter().sum();
        if total == 0 {
            return None;
        }
        let q = |p: f64| {
            let rank = (p * total as f64).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, n) in sum.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return upper(i) as f64 / 1e6;
                }
            }
            upper(BUCKETS - 1) as f64 / 1e6
        };
        Some((q(0.5), q(0.99)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_bound_their_values_within_a_quarter() {
        let mut last = 0;
        for ns in (0..100_000u64).chain([1 << 30, (1 << 40) - 1]) {
            let b = bucket(ns);
            assert!(b >= last || ns == 1 << 30, "bucket order at {ns}");
            last = b;
            assert!(upper(b) >= ns, "{ns} over its bucket's bound {}", upper(b));
            assert!(
                upper(b) as f64 <= (ns as f64 * 1.25).max(4.0),
                "{ns}: bound {}",
                upper(b)
            );
        }
    }

    #[test]
    fn quantiles_cover_the_window() {
        let l = Latency::new(2);
        for _ in 0..99 {
            l.record(Duration::from_micros(100));
        }
        l.record(Duration::from_millis(50));
        let (p50, p99) = l.sample().unwrap_or_default();
        assert!((0.1..0.125).contains(&p50), "p50 {p50}");
        assert!((0.1..0.125).contains(&p99), "p99 {p99}");
        for _ in 0..10 {
            l.record(Duration::from_millis(50));
        }
        let (_, p99) = l.sample().unwrap_or_default();
        assert!((50.0..62.5).contains(&p99), "p99 {p99}");
        // The first second leaves the window of two.
        l.sample();
        assert!(l.sample().is_none());
    }
}
