//! The store interface: where limit state lives and how a batch of limits is decided atomically.

use std::future::Future;

use smallvec::SmallVec;

use crate::algorithm::{Amount, Charged};
use crate::clock::Micros;
use crate::decision::Decision;
use crate::limit::Limit;
use crate::reservation::Reservation;

/// One limit to decide within a request.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    /// The state key (see [`crate::ruleset::state_key`]).
    pub key: &'a str,
    /// The limit.
    pub limit: &'a Limit,
    /// Units to take (0 only looks).
    pub cost: u64,
    /// Whether a rejection blocks the request; `false` for shadow rules, which are evaluated and
    /// charged when they admit, but never block.
    pub enforce: bool,
}

/// One charge, refund or release within a report (see [`crate::algorithm::charge()`]).
#[derive(Clone, Copy, Debug)]
pub struct ChargeItem<'a> {
    /// The state key (see [`crate::ruleset::state_key`]).
    pub key: &'a str,
    /// The limit; it must take charges ([`crate::algorithm::chargeable`]).
    pub limit: &'a Limit,
    /// Units to count (past the limit, up to its `max_debt`) or to give back.
    pub amount: Amount,
}

/// One answer per charge item, in the order of the items.
pub type Charges = SmallVec<[Charged; 4]>;

/// One decision per item, in the order of the items.
pub type Decisions = SmallVec<[Decision; 4]>;

/// Whether a batch of decisions admits the request: every enforced item admitted it.
pub fn admitted(items: &[Item<'_>], decisions: &[Decision]) -> bool {
    items
        .iter()
        .zip(decisions)
        .all(|(i, d)| d.allowed || !i.enforce)
}

/// Why a store could not decide.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store did not answer within its deadline.
    #[error("the store did not answer within its deadline")]
    Timeout,
    /// The store cannot be reached (connection refused or lost, server loading, cluster down).
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// The store answered something unexpected (a script error, a malformed reply).
    #[error("the store failed: {0}")]
    Internal(String),
    /// A write is on the primary, but fewer replicas than required acknowledged it in time
    /// (`--redis-wait-replicas`): a failover may lose it. Flowgate's own finding, so callers
    /// may be told it whole.
    #[error(
        "written on the primary, but {acked} of the {required} replicas required acknowledged it within {timeout_ms} ms: it may be lost if the primary fails"
    )]
    NotReplicated {
        /// Replicas that acknowledged the write.
        acked: u64,
        /// Replicas required.
        required: u32,
        /// How long the write waited for them.
        timeout_ms: u64,
    },
}

impl StoreError {
    /// What a caller may be told of the error: its kind, without the store's own message (an
    /// address, a refused password, an OS error), which is for the operator's log.
    pub fn summary(&self) -> &'static str {
        match self {
            StoreError::Timeout => "the store did not answer within its deadline",
            StoreError::Unavailable(_) => "the store is unavailable",
            StoreError::Internal(_) => "the store failed",
            StoreError::NotReplicated { .. } => "the write did not reach the replicas required",
        }
    }

    /// Whether the error is a missed deadline.
    pub fn is_timeout(&self) -> bool {
        matches!(self, StoreError::Timeout)
    }
}

/// Where limit state lives.
///
/// A store decides a batch of items **all-or-nothing**: it returns one [`Decision`] per item, and
/// it records the batch only if every enforced item admits it ([`admitted`]); otherwise it
/// changes nothing at all. Shadow items that admit are recorded with the batch; shadow items that
/// reject are not. Implementations: [`crate::MemoryStore`] here, the Redis store in
/// `flowgate-redis`. The conformance suite in `flowgate-testkit` holds every store to the same
/// decisions.
pub trait Store: Send + Sync + 'static {
    /// Decides `items` atomically; see the trait's documentation.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot decide; nothing is recorded then.
    fn decide(
        &self,
        items: &[Item<'_>],
    ) -> impl Future<Output = Result<Decisions, StoreError>> + Send;

    /// Decides `items` as [`Store::decide`] and, when it admits them ([`admitted`]), writes
    /// reservation `record`'s record (a tombstone until `forget_at`) in the same atomic step,
    /// so that a reservation is one round trip to the store. Answers the decisions and whether
    /// the record was written. A store that cannot write records with its decisions (the
    /// default, and Redis Cluster, whose records live in a slot of their own) answers `false`:
    /// the caller then writes the record itself ([`crate::reservation::Reservations::put`]).
    ///
    /// # Errors
    /// As [`Store::decide`]; nothing is recorded then.
    fn decide_recorded(
        &self,
        items: &[Item<'_>],
        record: &Reservation,
        forget_at: Micros,
    ) -> impl Future<Output = Result<(Decisions, bool), StoreError>> + Send {
        let _ = (record, forget_at);
        async move { Ok((self.decide(items).await?, false)) }
    }

    /// The store's clock: the instant it decides at now. The limiter reads it to pick each
    /// rule's scheduled limit, so that every node sharing a store switches at the same instant.
    /// By default this process's real clock; the memory store answers its own clock, the Redis
    /// store its estimate of Redis's `TIME`.
    fn now(&self) -> Micros {
        crate::clock::system_now()
    }

    /// Applies `items`, charges, refunds and releases, each to its key (docs/algorithms.md,
    /// "Charges, debt and refunds"): never refused for being over the limit. The batch is checked whole:
    /// if any item's limit takes no charges, the store answers [`StoreError::Internal`] naming
    /// it and changes nothing (callers check [`crate::algorithm::chargeable`] first, to tell
    /// their users). A store that cannot take charges answers that error for every batch, the
    /// default.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot apply them; nothing is applied then, but on Redis
    /// Cluster, which applies a report spanning slots slot by slot, the slots before the one
    /// that failed keep their charges (a timeout may also hide a charge that was applied).
    fn charge(
        &self,
        items: &[ChargeItem<'_>],
    ) -> impl Future<Output = Result<Charges, StoreError>> + Send {
        let _ = items;
        std::future::ready(Err(StoreError::Internal(
            "this store takes no charges".to_owned(),
        )))
    }

    /// Releases a `concurrency` lease; answers whether it was held.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be reached.
    fn release(
        &self,
        key: &str,
        limit: &Limit,
        lease: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}
