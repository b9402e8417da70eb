//! An adaptive concurrency limit: additive increase, multiplicative decrease (Netflix
//! concurrency-limits' `AIMDLimit`), a pure transition fed one call's outcome at a time.
//!
//! For each reported call (its latency `rtt`, whether it failed, and the calls that were out when
//! it started, `inflight`):
//!
//! ```text
//! if failed or rtt > max_latency:
//!     if hold = 0:                  limit ← max(min, limit × backoff),  hold ← inflight
//!     else:                         hold ← hold − 1   (a call out at the last back-off)
//! else:
//!     hold ← max(0, hold − 1)
//!     if inflight ≥ limit / 2:      limit ← min(max, limit + 1 / limit)
//!     else:                         limit unchanged   (the caller is not using the limit)
//! ```
//!
//! So the limit grows by about one call per round trip (one per `limit` reports) and backs off at
//! most once per round trip: the reports of the calls that were out when it backed off carry the
//! overload already acted on (the `hold`). Growing by one per report instead, and backing off on
//! each slow report, doubles the limit per round trip and then collapses it, since a report
//! arrives a round trip after its call started: against the dependency below, with reports
//! arriving as calls end, that swings between 1 and 2 × L.
//!
//! Against a dependency that serves `C` calls at once in `base` and queues the rest (latency
//! `base × inflight ÷ C` beyond `C`), the limit settles where latency crosses `max_latency`:
//! between `0.9 × L − 1` and `L + 1` for `L = C × max_latency ÷ base` (tested below, with each
//! report at once; `crates/flowgate/tests/adaptive.rs` tests it through the limiter with reports
//! arriving as calls end). With **no reports the limit does not move**: it stays where the last
//! report left it, and a node starts from `initial`.
//!
//! Why not Gradient2 (the issue's reference): its reference latency is a long-run average of the
//! latencies themselves, so against a dependency whose latency rises with its queue the average
//! follows the rise, the gradient stays at 1, and the limit drifts to its maximum (simulated against that
//! dependency with a capacity of 10 calls, Gradient2 with its defaults ended at its maximum). AIMD's reference is the caller's own
//! latency bound, which the load cannot move.

/// AIMD's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct AimdSpec {
    /// The limit before any report.
    pub initial: u64,
    /// The smallest limit (at least 1).
    pub min: u64,
    /// The largest limit.
    pub max: u64,
    /// A call slower than this (µs) counts as a sign of overload.
    pub max_latency: f64,
    /// The factor a sign of overload multiplies the limit by (0.9).
    pub backoff: f64,
}

// Validated parameters are finite numbers, never NaN: equality is total.
impl Eq for AimdSpec {}

impl AimdSpec {
    /// Defaults between `min` and `max`, starting at `min`, backing off by 0.9 for calls slower
    /// than `max_latency` µs.
    pub fn new(min: u64, max: u64, max_latency: f64) -> Self {
        Self {
            initial: min,
            min,
            max,
            max_latency,
            backoff: 0.9,
        }
    }
}

/// The adaptive limit's state.
#[derive(Clone, Debug, PartialEq)]
pub struct Aimd {
    spec: AimdSpec,
    limit: f64,
    /// Reports still to come from calls that were out at the last back-off: their signs of
    /// overload are the one already acted on, not new ones.
    hold: u64,
}

impl Aimd {
    /// A limit at `spec.initial`.
    pub fn new(spec: AimdSpec) -> Self {
        let min = spec.min.max(1);
        let limit = spec.initial.clamp(min, spec.max.max(min)) as f64;
        Self {
            spec,
            limit,
            hold: 0,
        }
    }

    /// Its parameters.
    pub fn spec(&self) -> &AimdSpec {
        &self.spec
    }

    /// The limit now, in whole calls.
    pub fn limit(&self) -> u64 {
        self.limit.floor() as u64
    }

    /// Takes one report: a call that took `rtt` µs (or `failed`), started with `inflight` calls
    /// out. Returns the new limit.
    pub fn report(&mut self, rtt: f64, failed: bool, inflight: u64) -> u64 {
        let min = self.spec.min.max(1) as f64;
        let max = (self.spec.max as f64).max(min);
        let held = self.hold > 0;
        self.hold = self.hold.saturating_sub(1);
        if failed || rtt > self.spec.max_latency {
            if !held {
                self.limit = (self.limit * self.spec.backoff).max(min);
                self.hold = inflight;
            }
        } else if inflight as f64 * 2.0 >= self.limit {
            self.limit = (self.limit + 1.0 / self.limit.max(1.0)).min(max);
        }
        self.limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dependency that serves `capacity` calls at once in `base` µs; calls beyond wait their
    /// turn (latency grows with the queue, as a thread pool's does).
    fn latency(base: f64, capacity: f64, inflight: u64) -> f64 {
        base * (inflight as f64 / capacity).max(1.0)
    }

    #[test]
    fn the_limit_settles_where_latency_crosses_its_bound() {
        for (capacity, base, bound) in [
            (10.0, 10_000.0, 20_000.0),
            (50.0, 2_000.0, 5_000.0),
            (200.0, 50_000.0, 60_000.0),
        ] {
            let mut a = Aimd::new(AimdSpec::new(1, 100_000, bound));
            let mut tail = Vec::new();
            for i in 0..80_000 {
                // Callers always want more: each call starts with the limit's calls out.
                let inflight = a.limit();
                a.report(latency(base, capacity, inflight), false, inflight);
                if i >= 60_000 {
                    tail.push(a.limit());
                }
            }
            let l = capacity * bound / base;
            let (lo, hi) = (
                *tail.iter().min().unwrap_or(&0) as f64,
                *tail.iter().max().unwrap_or(&0) as f64,
            );
            assert!(
                lo >= 0.9 * l - 1.0 && hi <= l + 1.0,
                "capacity {capacity}: L {l}, settled in {lo}..={hi}"
            );
        }
    }

    #[test]
    fn failures_back_off_and_an_idle_caller_does_not_grow_it() {
        let mut a = Aimd::new(AimdSpec {
            initial: 40,
            ..AimdSpec::new(2, 100, 1e6)
        });
        for _ in 0..100 {
            a.report(1.0, false, 3);
        }
        assert_eq!(a.limit(), 40, "3 out of 40: not using the limit");
        assert_eq!(a.report(1.0, true, 40), 36);
        for _ in 0..40 {
            a.report(1.0, true, 40);
        }
        assert_eq!(
            a.limit(),
            36,
            "the 40 calls out at the back-off: one sign, acted on"
        );
        assert_eq!(
            a.report(1.0, true, 36),
            32,
            "a later call's failure: 36 × 0.9"
        );
        for _ in 0..36 {
            a.report(1.0, false, 36);
        }
        for _ in 0..100 {
            a.report(1.0, true, 0);
        }
        assert_eq!(a.limit(), 2, "never under min");
        let mut reports = 0;
        while a.limit() < 10 {
            let l = a.limit();
            a.report(1.0, false, l);
            reports += 1;
        }
        assert!(
            (2 + 3 + 4 + 5 + 6 + 7 + 8 + 9..=2 * (2 + 3 + 4 + 5 + 6 + 7 + 8 + 9))
                .contains(&reports),
            "one call more per round trip (limit reports): 2 to 10 in {reports}"
        );
        for _ in 0..20_000 {
            let l = a.limit();
            a.report(1.0, false, l);
        }
        assert_eq!(a.limit(), 100, "never over max");
    }
}
