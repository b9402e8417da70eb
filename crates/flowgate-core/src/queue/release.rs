//! When a queue may release its next job: GCRA ([`crate::algorithm::gcra::reserve`], the
//! limiter's own step) on the queue's theoretical arrival time (TAT), one job per emission
//! interval (the queue's spacing), with the slot reserved ahead of time.
//!
//! A release is a request of one unit: with tolerance `tau = burst × spacing`, the next release
//! is allowed from `tat + spacing - tau` on, and moves the TAT to `max(tat, now) + spacing`. With
//! burst 1 no two releases are closer than the spacing, and a backlog of N drains in
//! (N - 1) × spacing. A worker asking `horizon` ahead of the slot reserves it (GCRA's `max_wait`):
//! the release happens at `slot` exactly (the store holds the job until then), so releases stay
//! on the schedule however late the worker's timer fires.

use crate::algorithm::gcra::{Reservation, reserve};
use crate::clock::Micros;

/// The outcome of asking for the next slot at `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Released at `at` (>= now); the TAT becomes `tat`.
    Reserved {
        /// The release instant.
        at: Micros,
        /// The new TAT.
        tat: Micros,
    },
    /// The next slot is more than `horizon` ahead: ask again after this many µs.
    Later(Micros),
}

/// The next release slot for a queue with TAT `tat`, asked at `now`, reserving at most `horizon`
/// ahead; `tau` is `burst × spacing`.
#[inline]
pub fn next_slot(tat: Micros, now: Micros, spacing: Micros, tau: Micros, horizon: Micros) -> Slot {
    match reserve(tat, now, spacing, tau, horizon) {
        Reservation::Admitted { wait, tat } => Slot::Reserved {
            at: now + wait,
            tat,
        },
        Reservation::Rejected { retry_after } => Slot::Later(retry_after),
    }
}

/// The earliest instant, from `now` on, of the next release: the slot [`next_slot`] would give
/// with no bound on the horizon.
#[inline]
pub fn first_slot(tat: Micros, now: Micros, spacing: Micros, tau: Micros) -> Micros {
    match next_slot(tat, now, spacing, tau, Micros::MAX) {
        Slot::Reserved { at, .. } => at,
        Slot::Later(_) => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_one_spaces_every_release() {
        let (mut tat, now) = (0, 1_000);
        let mut at = Vec::new();
        // Reserving up to 250 ahead: three slots, then the fourth (300 ahead) is 50 too far.
        while let Slot::Reserved { at: a, tat: t } = next_slot(tat, now, 100, 100, 250) {
            at.push(a);
            tat = t;
        }
        assert_eq!(at, vec![1_000, 1_100, 1_200]);
        assert_eq!(next_slot(tat, now, 100, 100, 250), Slot::Later(50));
        assert_eq!(first_slot(tat, now, 100, 100), 1_300);
    }

    #[test]
    fn burst_after_idle_then_steady() {
        // burst 3: tau = 300; after idle, three at once, then one per 100.
        let mut tat = 0;
        let now = 10_000;
        let mut at = Vec::new();
        while let Slot::Reserved { at: a, tat: t } = next_slot(tat, now, 100, 300, 0) {
            at.push(a);
            tat = t;
        }
        assert_eq!(at, vec![10_000, 10_000, 10_000]);
        assert_eq!(next_slot(tat, now, 100, 300, 0), Slot::Later(100));
        assert_eq!(
            next_slot(tat, now + 100, 100, 300, 0),
            Slot::Reserved {
                at: 10_100,
                tat: 10_400
            }
        );
    }

    #[test]
    fn a_late_ask_loses_the_slot_it_missed() {
        // Released at 0, next due at 100; asked at 250: released at 250, next at 350.
        assert_eq!(
            next_slot(100, 250, 100, 100, 0),
            Slot::Reserved { at: 250, tat: 350 }
        );
        assert_eq!(first_slot(100, 250, 100, 100), 250);
    }
}
