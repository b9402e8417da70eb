//! A circuit breaker as a pure state machine: calls' outcomes are reported to it, and it answers
//! whether a call may go ahead.
//!
//! - **Closed**: every call goes ahead. Reports are counted in a sliding window of `buckets`
//!   buckets over `window` (a bucket's reports leave the window whole, one bucket width at a
//!   time; the window never resets at once). After a report, with at least `min_calls` calls in
//!   the window, it opens when the window's **bad share is at least** `threshold`
//!   (`error_ratio`, `slow_call_ratio`), or its **bad count is at least** `threshold`
//!   (`error_count`). "At least", so that a threshold of 1.0 trips when every call failed.
//! - **Open** for `open_for`: every call is refused, with the time left as its retry-after.
//! - **Half-open** when that time has passed: a call goes ahead as a **probe** while fewer than
//!   `probes` probes are admitted and not yet reported; each holds a lease that expires after
//!   `probe_timeout`, and an expired lease frees its place (a probe that never reports cannot
//!   leave the breaker stuck). A probe's failure opens it again for `open_for`; once `probes`
//!   probes have succeeded it closes, with an empty window. Reports of calls that are not probes
//!   are ignored while it is open or half-open (they were admitted before it opened).
//!
//! A call is bad when it failed (`error_ratio`, `error_count`), or when its latency is over
//! `slow_call` (`slow_call_ratio`: strictly slower; a failed call counts as slow too).
//!
//! An open or half-open phase carries why it opened ([`Opened`]): the window's calls and bad
//! calls at the transition, or, after a failed probe, the probes reported in that half-open
//! phase (the failed one included, the one bad call).

use crate::clock::Micros;

/// What makes a call bad, and how the threshold reads.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Strategy {
    /// The share of failed calls.
    ErrorRatio,
    /// The share of calls slower than `slow_call` (failed calls included).
    SlowCallRatio {
        /// A call strictly slower than this is slow.
        slow_call: Micros,
    },
    /// The number of failed calls.
    ErrorCount,
}

/// An invalid breaker.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BreakerError {
    /// A field out of its range.
    #[error("`{field}`: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}

fn invalid(field: &'static str, message: impl Into<String>) -> BreakerError {
    BreakerError::Invalid {
        field,
        message: message.into(),
    }
}

/// A breaker's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakerSpec {
    strategy: Strategy,
    threshold: f64,
    window: Micros,
    buckets: u32,
    min_calls: u64,
    open_for: Micros,
    probes: u32,
    probe_timeout: Micros,
}

/// The default number of buckets of the window.
pub const DEFAULT_BUCKETS: u32 = 10;

impl BreakerSpec {
    /// A breaker opening on `strategy` at `threshold` over `window`, with at least `min_calls`
    /// calls, open for `open_for`, then admitting `probes` probes whose leases last
    /// `probe_timeout`.
    ///
    /// # Errors
    /// [`BreakerError::Invalid`] naming the field: a ratio threshold outside (0, 1], a count
    /// threshold under 1 or not whole, `min_calls` or `probes` 0, a zero window, `open_for` or
    /// probe timeout, or a window shorter than a millisecond per bucket.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        strategy: Strategy,
        threshold: f64,
        window: Micros,
        min_calls: u64,
        open_for: Micros,
        probes: u32,
        probe_timeout: Micros,
    ) -> Result<Self, BreakerError> {
        match strategy {
            Strategy::ErrorCount => {
                if !(threshold >= 1.0 && threshold.fract() == 0.0 && threshold <= 1e12) {
                    return Err(invalid(
                        "threshold",
                        format!("{threshold}: an error count is a whole number of at least 1"),
                    ));
                }
            }
            Strategy::ErrorRatio | Strategy::SlowCallRatio { .. } => {
                if !(threshold > 0.0 && threshold <= 1.0) {
                    return Err(invalid(
                        "threshold",
                        format!("{threshold}: a ratio is over 0 and at most 1"),
                    ));
                }
            }
        }
        if let Strategy::SlowCallRatio { slow_call: 0 } = strategy {
            return Err(invalid("slow_call", "must be over 0"));
        }
        if min_calls == 0 {
            return Err(invalid("min_calls", "must be at least 1"));
        }
        if probes == 0 {
            return Err(invalid("probes", "must be at least 1"));
        }
        if open_for == 0 {
            return Err(invalid("open_for", "must be over 0"));
        }
        if probe_timeout == 0 {
            return Err(invalid("probe_timeout", "must be over 0"));
        }
        if window < Micros::from(DEFAULT_BUCKETS) * 1000 {
            return Err(invalid(
                "window",
                "must be at least 10ms (10 buckets of 1ms)",
            ));
        }
        Ok(Self {
            strategy,
            threshold,
            window,
            buckets: DEFAULT_BUCKETS,
            min_calls,
            open_for,
            probes,
            probe_timeout,
        })
    }

    /// The strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The threshold.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The window.
    pub fn window(&self) -> Micros {
        self.window
    }

    /// The fewest calls in the window for it to open.
    pub fn min_calls(&self) -> u64 {
        self.min_calls
    }

    /// How long it stays open.
    pub fn open_for(&self) -> Micros {
        self.open_for
    }

    /// Probes admitted at once while half-open.
    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// How long a probe's lease lasts.
    pub fn probe_timeout(&self) -> Micros {
        self.probe_timeout
    }

    fn bucket_width(&self) -> Micros {
        self.window / Micros::from(self.buckets)
    }

    /// Whether a call is bad.
    pub fn is_bad(&self, failed: bool, latency: Micros) -> bool {
        match self.strategy {
            Strategy::ErrorRatio | Strategy::ErrorCount => failed,
            Strategy::SlowCallRatio { slow_call } => failed || latency > slow_call,
        }
    }

    /// Whether a window with `calls` calls of which `bad` are bad opens the breaker.
    pub fn trips(&self, calls: u64, bad: u64) -> bool {
        if calls < self.min_calls || calls == 0 {
            return false;
        }
        match self.strategy {
            Strategy::ErrorCount => bad as f64 >= self.threshold,
            Strategy::ErrorRatio | Strategy::SlowCallRatio { .. } => {
                bad as f64 >= self.threshold * calls as f64
            }
        }
    }
}

/// One bucket of the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bucket {
    /// Its index: its start ÷ the bucket width.
    index: u64,
    calls: u64,
    bad: u64,
}

/// Why a breaker opened: the calls and bad calls that made it open, at the transition (the
/// window's, when it opened from closed; the probes reported while half-open, when a probe
/// failed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Opened {
    /// Calls counted.
    pub calls: u64,
    /// Of them, the bad ones.
    pub bad: u64,
}

/// A breaker's phase, named `closed`, `open` or `half_open` ([`Phase::name`], its `Display`)
/// wherever it is shown: logs, metrics' labels, JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Calls go ahead; reports are counted.
    Closed,
    /// Calls are refused until the open time has passed.
    Open,
    /// Probes go ahead.
    HalfOpen,
}

impl Phase {
    /// Every phase, closed first.
    pub const ALL: [Phase; 3] = [Phase::Closed, Phase::Open, Phase::HalfOpen];

    /// `closed`, `open` or `half_open`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Closed => "closed",
            Phase::Open => "open",
            Phase::HalfOpen => "half_open",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A breaker's state: its phase, with what the phase holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Calls go ahead; reports are counted.
    Closed,
    /// Calls are refused until `until`.
    Open {
        /// When it turns half-open.
        until: Micros,
        /// Why it opened.
        opened: Opened,
    },
    /// Probes go ahead.
    HalfOpen {
        /// The probes admitted and not reported: lease and deadline.
        leases: Vec<(u64, Micros)>,
        /// Probes that succeeded.
        succeeded: u32,
        /// Why it opened last.
        opened: Opened,
    },
}

impl State {
    /// Its phase.
    pub fn phase(&self) -> Phase {
        match self {
            State::Closed => Phase::Closed,
            State::Open { .. } => Phase::Open,
            State::HalfOpen { .. } => Phase::HalfOpen,
        }
    }

    /// Why it opened last (`None` while closed).
    pub fn opened(&self) -> Option<Opened> {
        match self {
            State::Closed => None,
            State::Open { opened, .. } | State::HalfOpen { opened, .. } => Some(*opened),
        }
    }
}

/// The answer to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Go ahead (closed).
    Call,
    /// Go ahead as a probe holding this lease; report with it.
    Probe(u64),
    /// Refused; try again after this long.
    Refused {
        /// Until the breaker may admit a call.
        retry_after: Micros,
    },
}

/// A change of phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The phase left.
    pub from: Phase,
    /// The phase entered.
    pub to: Phase,
}

/// A breaker: its parameters and state.
#[derive(Clone, Debug)]
pub struct Breaker {
    spec: BreakerSpec,
    state: State,
    buckets: Vec<Bucket>,
    next_lease: u64,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(spec: BreakerSpec) -> Self {
        let n = spec.buckets as usize;
        Self {
            spec,
            state: State::Closed,
            buckets: vec![Bucket::default(); n],
            next_lease: 1,
        }
    }

    /// Its parameters.
    pub fn spec(&self) -> &BreakerSpec {
        &self.spec
    }

    /// Its state at `now` (open turns half-open once its time has passed).
    pub fn state(&mut self, now: Micros) -> &State {
        self.advance(now);
        &self.state
    }

    /// The window's calls and bad calls at `now`.
    pub fn window(&self, now: Micros) -> (u64, u64) {
        let current = now / self.spec.bucket_width();
        let oldest = current.saturating_sub(u64::from(self.spec.buckets) - 1);
        self.buckets
            .iter()
            .filter(|b| b.index >= oldest && b.index <= current && b.calls > 0)
            .fold((0, 0), |(c, b), x| (c + x.calls, b + x.bad))
    }

    fn set(&mut self, state: State) -> Option<Transition> {
        let from = self.state.phase();
        let to = state.phase();
        if let State::Closed = state {
            self.buckets.iter_mut().for_each(|b| *b = Bucket::default());
        }
        self.state = state;
        (from != to).then_some(Transition { from, to })
    }

    /// Open past its time turns half-open; expired probe leases free their place.
    fn advance(&mut self, now: Micros) -> Option<Transition> {
        match &mut self.state {
            State::Open { until, opened } if now >= *until => {
                let opened = *opened;
                self.set(State::HalfOpen {
                    leases: Vec::new(),
                    succeeded: 0,
                    opened,
                })
            }
            State::HalfOpen { leases, .. } => {
                leases.retain(|(_, deadline)| *deadline > now);
                None
            }
            _ => None,
        }
    }

    /// Whether a call may go ahead at `now`, and the change of phase it caused.
    pub fn admit(&mut self, now: Micros) -> (Admit, Option<Transition>) {
        let t = self.advance(now);
        let probes = self.spec.probes;
        let timeout = self.spec.probe_timeout;
        let answer = match &mut self.state {
            State::Closed => Admit::Call,
            State::Open { until, .. } => Admit::Refused {
                retry_after: *until - now,
            },
            State::HalfOpen {
                leases, succeeded, ..
            } => {
                if leases.len() as u32 + *succeeded < probes {
                    let lease = self.next_lease;
                    self.next_lease += 1;
                    leases.push((lease, now + timeout));
                    Admit::Probe(lease)
                } else {
                    let first = leases.iter().map(|l| l.1).min().unwrap_or(now + timeout);
                    Admit::Refused {
                        retry_after: first.saturating_sub(now).max(1),
                    }
                }
            }
        };
        (answer, t)
    }

    /// Reports a call's outcome at `now`: `probe` is the lease it was admitted with, if any.
    /// Returns the change of phase it caused.
    pub fn report(
        &mut self,
        now: Micros,
        probe: Option<u64>,
        failed: bool,
        latency: Micros,
    ) -> Option<Transition> {
        let t = self.advance(now);
        let bad = self.spec.is_bad(failed, latency);
        let probes = self.spec.probes;
        let changed = match &mut self.state {
            State::Closed => {
                let width = self.spec.bucket_width();
                let index = now / width;
                let slot = (index % u64::from(self.spec.buckets)) as usize;
                let b = &mut self.buckets[slot];
                if b.index != index {
                    *b = Bucket {
                        index,
                        calls: 0,
                        bad: 0,
                    };
                }
                b.calls += 1;
                b.bad += u64::from(bad);
                let (calls, bad) = self.window(now);
                if self.spec.trips(calls, bad) {
                    self.set(State::Open {
                        until: now + self.spec.open_for,
                        opened: Opened { calls, bad },
                    })
                } else {
                    None
                }
            }
            State::Open { .. } => None,
            State::HalfOpen {
                leases, succeeded, ..
            } => {
                let held = probe.and_then(|p| leases.iter().position(|l| l.0 == p));
                match held {
                    None => None,
                    Some(i) => {
                        leases.swap_remove(i);
                        if bad {
                            let opened = Opened {
                                calls: u64::from(*succeeded) + 1,
                                bad: 1,
                            };
                            self.set(State::Open {
                                until: now + self.spec.open_for,
                                opened,
                            })
                        } else {
                            *succeeded += 1;
                            if *succeeded >= probes {
                                self.set(State::Closed)
                            } else {
                                None
                            }
                        }
                    }
                }
            }
        };
        changed.or(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Micros = 1000;
    const S: Micros = 1_000_000;

    fn spec(strategy: Strategy, threshold: f64) -> BreakerSpec {
        BreakerSpec::new(strategy, threshold, 10 * S, 4, 30 * S, 2, 5 * S).unwrap_or_else(|e| {
            panic!("{e}");
        })
    }

    #[test]
    fn an_error_ratio_of_one_trips_when_every_call_failed() {
        let mut b = Breaker::new(spec(Strategy::ErrorRatio, 1.0));
        for i in 0..3 {
            assert_eq!(
                b.report(i * MS, None, true, 0),
                None,
                "fewer than min_calls"
            );
        }
        let t = b.report(3 * MS, None, true, 0);
        assert_eq!(
            t,
            Some(Transition {
                from: Phase::Closed,
                to: Phase::Open
            })
        );
        assert_eq!(
            b.admit(4 * MS).0,
            Admit::Refused {
                retry_after: 30 * S - MS
            }
        );
    }

    #[test]
    fn the_ratio_is_at_least_the_threshold() {
        let mut b = Breaker::new(spec(Strategy::ErrorRatio, 0.5));
        b.report(0, None, false, 0);
        b.report(1, None, true, 0);
        b.report(2, None, false, 0);
        assert_eq!(b.state(3), &State::Closed);
        // 2 of 4: exactly the threshold.
        assert!(b.report(3, None, true, 0).is_some());
    }

    #[test]
    fn slow_calls_are_strictly_slower() {
        let mut b = Breaker::new(spec(
            Strategy::SlowCallRatio {
                slow_call: 800 * MS,
            },
            0.5,
        ));
        for i in 0..4 {
            b.report(i, None, false, 800 * MS);
        }
        assert_eq!(b.state(5), &State::Closed);
        b.report(6, None, false, 800 * MS + 1);
        b.report(7, None, false, 900 * MS);
        b.report(8, None, false, 801 * MS);
        assert!(b.report(9, None, false, 2 * S).is_some(), "4 slow of 8");
    }

    #[test]
    fn an_error_count_counts_failures_not_ratio() {
        let mut b = Breaker::new(spec(Strategy::ErrorCount, 3.0));
        for i in 0..20 {
            b.report(i, None, false, 0);
        }
        b.report(21, None, true, 0);
        b.report(22, None, true, 0);
        assert_eq!(b.state(23), &State::Closed);
        assert!(b.report(24, None, true, 0).is_some());
    }

    #[test]
    fn the_window_slides_bucket_by_bucket() {
        let mut b = Breaker::new(spec(Strategy::ErrorCount, 3.0));
        b.report(0, None, true, 0);
        b.report(S, None, true, 0);
        for i in 0..4 {
            b.report(2 * S + i, None, false, 0);
        }
        // At 10 s the first bucket (0–1 s) has left: 1 failure in the window.
        assert_eq!(b.window(10 * S), (5, 1));
        assert_eq!(b.report(10 * S, None, true, 0), None);
        // At 10.5 s the 1–2 s bucket is still in: 1 + 1 = 2, a third opens it.
        assert!(b.report(10 * S + S / 2, None, true, 0).is_some());
    }

    fn open(b: &mut Breaker) -> Micros {
        for i in 0..4 {
            b.report(i, None, true, 0);
        }
        assert!(matches!(b.state(4), State::Open { .. }));
        30 * S + 3
    }

    #[test]
    fn half_open_admits_exactly_the_probes_and_closes_when_they_succeed() {
        let mut b = Breaker::new(spec(Strategy::ErrorRatio, 0.5));
        let until = open(&mut b);
        assert!(matches!(
            b.admit(until - 1).0,
            Admit::Refused { retry_after: 1 }
        ));
        let (first, t) = b.admit(until);
        assert_eq!(t.map(|t| t.to), Some(Phase::HalfOpen));
        let Admit::Probe(p1) = first else {
            panic!("{first:?}")
        };
        let Admit::Probe(p2) = b.admit(until + 1).0 else {
            panic!("second probe")
        };
        assert!(matches!(b.admit(until + 2).0, Admit::Refused { .. }));
        // A report that is not a probe's is ignored.
        assert_eq!(b.report(until + 3, None, true, 0), None);
        assert_eq!(b.report(until + 4, Some(p1), false, 0), None);
        // One succeeded, one out: still no third.
        assert!(matches!(b.admit(until + 5).0, Admit::Refused { .. }));
        let t = b.report(until + 6, Some(p2), false, 0);
        assert_eq!(t.map(|t| t.to), Some(Phase::Closed));
        assert_eq!(b.window(until + 7), (0, 0), "closed with an empty window");
    }

    #[test]
    fn a_failed_probe_opens_it_again() {
        let mut b = Breaker::new(spec(Strategy::ErrorRatio, 0.5));
        let until = open(&mut b);
        let Admit::Probe(p) = b.admit(until).0 else {
            panic!()
        };
        let t = b.report(until + 1, Some(p), true, 0);
        assert_eq!(
            t.map(|t| (t.from, t.to)),
            Some((Phase::HalfOpen, Phase::Open))
        );
        assert_eq!(
            b.admit(until + 2).0,
            Admit::Refused {
                retry_after: 30 * S - 1
            }
        );
    }

    #[test]
    fn a_probe_that_never_reports_frees_its_place_when_its_lease_expires() {
        let mut b = Breaker::new(spec(Strategy::ErrorRatio, 0.5));
        let until = open(&mut b);
        let Admit::Probe(lost) = b.admit(until).0 else {
            panic!()
        };
        let Admit::Probe(_) = b.admit(until).0 else {
            panic!()
        };
        assert_eq!(
            b.admit(until + 1).0,
            Admit::Refused {
                retry_after: 5 * S - 1
            }
        );
        let Admit::Probe(again) = b.admit(until + 5 * S).0 else {
            panic!("the expired lease freed a place")
        };
        assert_ne!(again, lost);
        // The lost probe's late report is ignored.
        assert_eq!(b.report(until + 5 * S + 1, Some(lost), true, 0), None);
    }

    /// Why it opened: the window at the transition, kept while half-open; after a failed
    /// probe, the probes of that half-open phase; nothing once closed.
    #[test]
    fn an_open_breaker_says_why_it_opened() {
        let mut b = Breaker::new(spec(Strategy::ErrorRatio, 0.5));
        for i in 0..5 {
            b.report(i, None, false, 0);
        }
        assert_eq!(b.state(5).opened(), None);
        for i in 5..10 {
            b.report(i, None, true, 0);
        }
        let why = Opened { calls: 10, bad: 5 };
        assert_eq!(b.state(10).opened(), Some(why), "5 bad of 10 opened it");
        let until = 9 + 30 * S;
        let (Admit::Probe(p1), _) = b.admit(until) else {
            panic!("a probe")
        };
        assert_eq!(b.state(until).opened(), Some(why), "half-open keeps it");
        let Admit::Probe(p2) = b.admit(until).0 else {
            panic!("a second probe")
        };
        b.report(until + 1, Some(p1), false, 0);
        b.report(until + 2, Some(p2), true, 0);
        assert_eq!(
            b.state(until + 3).opened(),
            Some(Opened { calls: 2, bad: 1 }),
            "one probe succeeded, the second failed"
        );
        let again = until + 2 + 30 * S;
        let Admit::Probe(p1) = b.admit(again).0 else {
            panic!()
        };
        let Admit::Probe(p2) = b.admit(again).0 else {
            panic!()
        };
        b.report(again, Some(p1), false, 0);
        b.report(again, Some(p2), false, 0);
        assert_eq!(b.state(again).opened(), None, "closed");
    }

    #[test]
    fn bad_parameters_name_their_field() {
        let e = |s: Result<BreakerSpec, BreakerError>| match s {
            Err(BreakerError::Invalid { field, .. }) => field,
            Ok(_) => "none",
        };
        assert_eq!(
            e(BreakerSpec::new(Strategy::ErrorRatio, 1.5, S, 1, S, 1, S)),
            "threshold"
        );
        assert_eq!(
            e(BreakerSpec::new(Strategy::ErrorRatio, 0.0, S, 1, S, 1, S)),
            "threshold"
        );
        assert_eq!(
            e(BreakerSpec::new(Strategy::ErrorCount, 2.5, S, 1, S, 1, S)),
            "threshold"
        );
        assert_eq!(
            e(BreakerSpec::new(Strategy::ErrorRatio, 0.5, S, 0, S, 1, S)),
            "min_calls"
        );
        assert_eq!(
            e(BreakerSpec::new(Strategy::ErrorRatio, 0.5, S, 1, S, 0, S)),
            "probes"
        );
        assert_eq!(
            e(BreakerSpec::new(
                Strategy::ErrorRatio,
                0.5,
                5 * MS,
                1,
                S,
                1,
                S
            )),
            "window"
        );
        assert_eq!(
            e(BreakerSpec::new(
                Strategy::ErrorRatio,
                f64::NAN,
                S,
                1,
                S,
                1,
                S
            )),
            "threshold"
        );
    }

    mod props {
        use super::{Admit, Breaker, BreakerSpec, Micros, S, State};
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Admit,
            Report { failed: bool, probe: bool },
            Wait(Micros),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                3 => Just(Op::Admit),
                3 => any::<(bool, bool)>().prop_map(|(failed, probe)| Op::Report { failed, probe }),
                1 => (1..40 * S).prop_map(Op::Wait),
            ]
        }

        proptest! {
            /// Whatever happens, no more than `probes` probes are out at once while half-open,
            /// and a refusal's retry-after is never zero.
            #[test]
            fn never_more_probes_than_allowed(ops in proptest::collection::vec(op(), 1..400), probes in 1u32..4) {
                let spec = BreakerSpec::new(crate::breaker::Strategy::ErrorRatio, 0.5, 10 * S, 2, 30 * S, probes, 5 * S).unwrap();
                let mut b = Breaker::new(spec);
                let mut now = 0;
                let mut out: Vec<(u64, Micros)> = Vec::new();
                for op in ops {
                    match op {
                        Op::Admit => match b.admit(now).0 {
                            Admit::Probe(p) => out.push((p, now + 5 * S)),
                            Admit::Refused { retry_after } => prop_assert!(retry_after > 0),
                            Admit::Call => {}
                        },
                        Op::Report { failed, probe } => {
                            let p = if probe { out.pop().map(|p| p.0) } else { None };
                            b.report(now, p, failed, 0);
                        }
                        Op::Wait(d) => now += d,
                    }
                    out.retain(|(_, deadline)| *deadline > now);
                    if let State::HalfOpen { leases, succeeded, .. } = b.state(now).clone() {
                        prop_assert!(leases.len() as u32 + succeeded <= probes);
                    }
                }
            }
        }
    }
}
