//! Where the store's clock is on this node's: a lease answers its slot on the store's clock
//! (Redis's `TIME`, or the embedded store's clock), and the node must deliver the job when the
//! slot comes on its own.
//!
//! Each answer bounds the offset (store clock minus this node's wall clock): the store read its
//! clock between the request's sending and the answer's arrival, so the offset lies in
//! `[store_now - received, store_now - sent]`. The estimate keeps the intersection of these
//! intervals (widened by 1 ms per second since, for drift), and starts again from the newest
//! interval when they disagree (a clock stepped). Its midpoint is the offset; its half-width is
//! how uncertain a slot's local time is (about half the fastest round trip seen).

use std::time::Duration;

use flowgate_core::Micros;

/// This node's clock, in µs since the epoch (the process's one system clock).
pub(super) fn wall() -> Micros {
    flowgate_core::clock::system_now()
}

/// The bounds of the offset, in µs (signed: the store may be behind).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Offset {
    /// `None` until the first sample.
    bounds: Option<(i128, i128)>,
    /// The wall time of the last sample.
    at: Micros,
}

impl Offset {
    /// Narrows the estimate with an answer read at `store_now`, for a request sent at `sent`
    /// and answered at `received` (this node's wall clock).
    pub(super) fn sample(&mut self, store_now: Micros, sent: Micros, received: Micros) {
        let lo = i128::from(store_now) - i128::from(received.max(sent));
        let hi = i128::from(store_now) - i128::from(sent);
        let drift = i128::from(received.saturating_sub(self.at) / 1_000);
        self.bounds = match self.bounds {
            Some((a, b)) => {
                let (a, b) = (a - drift, b + drift);
                let (lo2, hi2) = (a.max(lo), b.min(hi));
                Some(if lo2 <= hi2 { (lo2, hi2) } else { (lo, hi) })
            }
            None => Some((lo, hi)),
        };
        self.at = received;
    }

    /// How long from `now_wall` (this node) until `store_time` comes, on the estimate; zero if
    /// it has passed. `None` before any sample.
    pub(super) fn until(&self, store_time: Micros, now_wall: Micros) -> Option<Duration> {
        let (lo, hi) = self.bounds?;
        let local = i128::from(store_time) - (lo + hi) / 2;
        let ahead = (local - i128::from(now_wall)).max(0);
        Some(Duration::from_micros(
            u64::try_from(ahead).unwrap_or(u64::MAX),
        ))
    }

    /// How long ago, from `now_wall`, `store_time` passed on the estimate (zero if it has not).
    pub(super) fn since(&self, store_time: Micros, now_wall: Micros) -> Duration {
        let Some((lo, hi)) = self.bounds else {
            return Duration::ZERO;
        };
        let local = i128::from(store_time) - (lo + hi) / 2;
        let behind = (i128::from(now_wall) - local).max(0);
        Duration::from_micros(u64::try_from(behind).unwrap_or(u64::MAX))
    }

    /// Half the estimate's width: how far off a slot's local time may be.
    pub(super) fn uncertainty(&self) -> Duration {
        self.bounds.map_or(Duration::ZERO, |(lo, hi)| {
            Duration::from_micros(u64::try_from((hi - lo) / 2).unwrap_or(0))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrows_to_the_fastest_round_trip_and_restarts_on_a_step() {
        let mut o = Offset::default();
        // Store 5 s ahead; a slow answer (sent 0, received 800) then a fast one (1_000, 1_100).
        o.sample(5_000_400, 0, 800);
        o.sample(5_001_050, 1_000, 1_100);
        assert!(o.uncertainty() <= Duration::from_micros(60));
        // The slot 5_002_000 on the store is at about 2_000 here.
        let wait = o.until(5_002_000, 1_200).unwrap();
        assert!((790..=860).contains(&wait.as_micros()), "{wait:?}");
        assert_eq!(o.since(5_002_000, 1_200), Duration::ZERO);
        // The store's clock steps back by 10 s: the newest interval wins.
        // The store's clock steps back (it now reads 1_000 at about 2_050 here): the newest
        // interval wins.
        o.sample(1_000, 2_000, 2_100);
        assert_eq!(o.uncertainty(), Duration::from_micros(50));
        assert_eq!(o.until(1_500, 2_100), Some(Duration::from_micros(450)));
    }
}
