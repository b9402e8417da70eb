//! Commits on a single Redis (or Sentinel) in one script call: the record claimed and its
//! release and charge applied together ([`RedisReservations::commit`]), so that a commit is
//! applied whole or not at all, even when the call times out.
//!
//! The call must name what it charges, which the record holds: the node that made a
//! reservation keeps it ([`Recent`]) until its commit, so that a commit on that node is one
//! call; a commit on another node reads the record first (two calls).

use std::collections::HashMap;

use flowgate::clock::Micros;
use flowgate::records::{Claim, Reservation, ReservationId};
use flowgate::store::StoreError;
use flowgate_redis::{AtomicCommit, RedisReservations};

use super::{Committed, Reserve, ReserveError, applied, batch, limits};
use crate::state::AppState;

/// The most reservations a node keeps for its own commits; past it (many reservations
/// committed on other nodes, or never), a commit reads its record first.
const MAX_RECENT: usize = 100_000;

/// How often a commit finds its record changed under it (a sweeper's release between the read
/// and the call, or another node's commit) before it gives up: each change is a claim, and a
/// record is claimed at most twice (released, then committed).
const MAX_TRIES: usize = 3;

/// The reservations this node made, until their commit here or their record is forgotten.
#[derive(Default)]
pub(super) struct Recent {
    kept: parking_lot::Mutex<HashMap<ReservationId, (Reservation, Micros)>>,
}

impl Recent {
    /// Keeps `r` (made at `now`, its record forgotten at `forget_at`) for its commit here.
    pub(super) fn keep(&self, r: &Reservation, now: Micros, forget_at: Micros) {
        let mut kept = self.kept.lock();
        if kept.len() >= MAX_RECENT {
            kept.retain(|_, (_, forget)| *forget > now);
            if kept.len() >= MAX_RECENT {
                return;
            }
        }
        kept.insert(r.id.clone(), (r.clone(), forget_at));
    }

    /// Takes reservation `id` if this node made it.
    fn take(&self, id: &ReservationId) -> Option<Reservation> {
        self.kept.lock().remove(id).map(|(r, _)| r)
    }
}

impl Reserve {
    /// Commits `id` with `cost` in one script call (after a read of the record when another
    /// node made it). `None`: no such record.
    pub(super) async fn commit_atomic(
        &self,
        state: &AppState,
        records: &RedisReservations,
        id: &ReservationId,
        cost: u64,
        now: Micros,
    ) -> Result<Option<Committed>, ReserveError> {
        let mut read = match self.recent.take(id) {
            Some(reservation) => Claim::Open {
                expired: reservation.expires <= now,
                reservation,
            },
            None => records.peek(id, now).await.map_err(ReserveError::Store)?,
        };
        for _ in 0..MAX_TRIES {
            let (r, release) = match &read {
                Claim::Open { reservation, .. } => (reservation, true),
                Claim::Released(r) => (r, false),
                Claim::Committed => return Err(ReserveError::Committed(id.clone())),
                Claim::Unknown => return Ok(None),
            };
            let limits = limits(state, r);
            let items = batch(r, &limits, Some(cost), release);
            match records.commit(&read, now, &items).await {
                Ok(AtomicCommit::Done { expired, charges }) => {
                    let applied = applied(r, &limits, charges, Some(cost), release);
                    return Ok(Some(Committed {
                        expired: expired || !release,
                        reserved: true,
                        applied,
                    }));
                }
                Ok(AtomicCommit::Changed(now_read)) => read = now_read,
                Err(e) => return Err(ReserveError::Store(e)),
            }
        }
        Err(ReserveError::Store(StoreError::Unavailable(format!(
            "reservation {id} changed under its commit {MAX_TRIES} times: try again"
        ))))
    }
}
