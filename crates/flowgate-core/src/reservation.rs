//! Reservations: an estimated cost taken at request time, committed with the actual cost when
//! the work ends, or released when it expires uncommitted (issue 40, `POST /v1/reserve` and
//! `/v1/commit`).
//!
//! The units are taken by an ordinary all-or-nothing decision (so a reservation's units are in
//! the counters every node reads: admission counts the outstanding reservations). This module
//! keeps the *records*: what each reservation took, where, and until when, so that exactly one
//! of its commit or its expiry gives the units back ([`crate::algorithm::Amount::release`]).
//!
//! A record lives on after its reservation ends (committed, or released by the sweeper), as a
//! tombstone, until its `forget_at`: a second commit is then told it was committed, and a commit
//! of an expired reservation is told so (and still counts its cost).
//!
//! Implementations: [`MemoryReservations`] here, `RedisReservations` in `flowgate-redis` (shared
//! by every node on one Redis, so a reservation made on one node can be committed on another).
//! Each takes the instant it is told (`now`, the limit store's clock) rather than reading one.

mod memory;
mod record;

use std::future::Future;

pub use self::memory::{MAX_RECORDS, MemoryReservations};
pub use self::record::{BadId, DecodeError, Reservation, ReservationId, Reserved};

use crate::clock::Micros;
use crate::store::StoreError;

/// What claiming a reservation for its commit found. A claim is atomic and happens once: the
/// first claim of an open or released record ends it; every later claim answers
/// [`Claim::Committed`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The reservation still held its units (`expired`: its expiry had passed, but no sweeper
    /// had released it yet): the commit gives them back and charges the actual cost.
    Open {
        /// The reservation.
        reservation: Reservation,
        /// Whether its expiry had passed.
        expired: bool,
    },
    /// A sweeper had released its units at its expiry: the commit only charges.
    Released(Reservation),
    /// It was committed already.
    Committed,
    /// No such reservation (never made, or forgotten).
    Unknown,
}

/// The reservations outstanding (open, units held) under one rule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outstanding {
    /// The rule's domain.
    pub domain: String,
    /// The rule's name.
    pub rule: String,
    /// Open reservations holding units under it.
    pub count: u64,
    /// The units they hold.
    pub units: u64,
}

/// Where reservation records live (see the module documentation).
pub trait Reservations: Send + Sync + 'static {
    /// Records `reservation`, open until its `expires`, remembered until `forget_at`.
    ///
    /// # Errors
    /// [`StoreError`] when it cannot be recorded; nothing is recorded then.
    fn put(
        &self,
        reservation: &Reservation,
        forget_at: Micros,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Claims reservation `id` for its commit at `now` (see [`Claim`]).
    ///
    /// # Errors
    /// [`StoreError`] when the records cannot be read; nothing is claimed then.
    fn claim(
        &self,
        id: &ReservationId,
        now: Micros,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// Undoes a claim whose commit could not be applied, so that a retry can commit:
    /// `claimed` is what [`Reservations::claim`] answered (an open claim holds units again,
    /// a released one is released again). Does nothing for other claims.
    ///
    /// # Errors
    /// [`StoreError`] when the records cannot be written.
    fn unclaim(&self, claimed: &Claim) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Ends `reservation`'s record before anyone was given its id, after its
    /// [`Reservations::put`] failed (a put that timed out may still be applied): claims the
    /// record if the put was applied after all, and where there is none makes sure none can be
    /// written later (on Redis, a tombstone kept until `forget_at`: a put still in flight
    /// then fails). Answers whether the caller gives the units back: true unless a sweeper
    /// released them already. So the units are given back once, whichever of the put and the
    /// cancel Redis applies first.
    ///
    /// # Errors
    /// [`StoreError`] when the records cannot be read or written: the caller then leaves the
    /// units to time (giving them back could give them back twice).
    fn cancel(
        &self,
        reservation: &Reservation,
        forget_at: Micros,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Releases up to `max` open reservations whose expiry is at or before `now`, each
    /// exactly once (across every node sharing the records), and answers them: the caller
    /// gives their units back.
    ///
    /// # Errors
    /// [`StoreError`] when the records cannot be read; nothing is released then.
    fn expire(
        &self,
        now: Micros,
        max: usize,
    ) -> impl Future<Output = Result<Vec<Reservation>, StoreError>> + Send;

    /// The open reservations per rule.
    ///
    /// # Errors
    /// [`StoreError`] when the records cannot be read.
    fn outstanding(&self) -> impl Future<Output = Result<Vec<Outstanding>, StoreError>> + Send;
}
