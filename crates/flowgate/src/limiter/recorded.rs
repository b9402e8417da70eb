//! A decision that writes a reservation's record with it ([`Limiter::check_recorded`]): on a
//! store that can ([`Store::decide_recorded`], a single Redis or Sentinel), a reservation is one
//! round trip instead of a decision and then a record's write.

use flowgate_core::clock::Micros;
use flowgate_core::reservation::{Reservation, ReservationId, Reserved};
use flowgate_core::store::{Decisions, admitted};
use flowgate_core::{Request, Store};

use super::Limiter;
use super::decide::{AllMatched, Answer, Batch, InForce, Role, verdict_of};
use crate::verdict::Verdict;

/// A reservation to record with its decision: all but what it took, which is the decision's
/// (each matched rule with a limit in force, its key and the request's cost).
#[derive(Clone, Debug)]
pub struct PendingRecord {
    /// The reservation's id.
    pub id: ReservationId,
    /// When it expires.
    pub expires: Micros,
    /// When its record (a tombstone after its end) is forgotten.
    pub forget_at: Micros,
    /// The instant its units are taken at (the store's clock).
    pub taken: Micros,
}

impl PendingRecord {
    /// The record of a decision of `matched` (with their limits `in_force`, the batch's
    /// `roles`), and when it is forgotten; `None` when the decision cannot carry it: a shadow
    /// or quota-mode item may be refused in an admitted request (quota mode even decides
    /// twice), and the record must hold exactly what was taken.
    pub(super) fn record(
        &self,
        matched: &AllMatched<'_>,
        in_force: &InForce<'_>,
        roles: &[Role],
    ) -> Option<(Reservation, Micros)> {
        if roles.iter().any(|r| *r != Role::Enforce) {
            return None;
        }
        let items = matched
            .iter()
            .zip(in_force)
            .filter(|(_, limit)| limit.is_some())
            .map(|(m, _)| Reserved {
                key: m.key.clone(),
                domain: m.rule.domain.clone(),
                rule: m.rule.name.clone(),
                estimate: m.cost,
                taken: self.taken,
            })
            .collect();
        let record = Reservation {
            id: self.id.clone(),
            items,
            expires: self.expires,
        };
        Some((record, self.forget_at))
    }
}

impl<S: Store> Limiter<S> {
    /// Decides `request` as [`Limiter::check`] does and, when the store can write records with
    /// its decisions, writes `pending`'s record if it is admitted. Answers the verdict and the
    /// record written, if it was; `None` (the store cannot, the request matches circuit
    /// breakers, shadow or quota-mode rules, or it was refused): the caller writes the record
    /// itself when the verdict admits.
    pub async fn check_recorded(
        &self,
        request: &Request,
        pending: &PendingRecord,
    ) -> (Verdict, Option<Reservation>) {
        tokio::task::consume_budget().await;
        if self.breakers.on() {
            // A breaker may refuse after the store admitted: the record is written apart.
            return (self.check(request).await, None);
        }
        self.decide_recording(request, None, Some(pending)).await
    }

    /// The store's decisions for `batch` (every item enforced) with `record` written if they
    /// admit; when the store fails, each rule's failure policy decides and nothing is written.
    pub(super) async fn ask_recorded(
        &self,
        batch: &Batch<'_>,
        record: Reservation,
        forget_at: Micros,
    ) -> (Answer, Option<Reservation>) {
        match self
            .store
            .decide_recorded(&batch.items, &record, forget_at)
            .await
        {
            Ok((decisions, written)) => {
                let allowed = admitted(&batch.items, &decisions);
                let answer = Answer {
                    decisions,
                    error: None,
                    allowed,
                };
                (answer, written.then_some(record))
            }
            Err(e) => {
                let decisions: Decisions = self.on_failure(batch, &e).into();
                let allowed = verdict_of(&batch.roles, &decisions);
                let answer = Answer {
                    decisions,
                    error: Some(e),
                    allowed,
                };
                (answer, None)
            }
        }
    }
}
