//! Where the server keeps reservation records: in this process with the embedded store, in
//! Redis (shared by the cluster) with Redis.

use flowgate::clock::Micros;
use flowgate::records::{
    Claim, MemoryReservations, Outstanding, Reservation, ReservationId, Reservations,
};
use flowgate::store::StoreError;
use flowgate_redis::RedisReservations;

use crate::backend::Backend;

/// The records, beside the store the limits live in.
pub(crate) enum Records {
    /// This process's.
    Memory(MemoryReservations),
    /// The cluster's, on Redis.
    Redis(RedisReservations),
}

impl Records {
    /// The records that go with `backend`.
    pub(crate) fn for_backend(backend: &Backend) -> Self {
        match backend {
            Backend::Memory(_) => Records::Memory(MemoryReservations::new()),
            Backend::Redis(r) => Records::Redis(r.reservations()),
        }
    }
}

impl Reservations for Records {
    async fn put(&self, r: &Reservation, forget_at: Micros) -> Result<(), StoreError> {
        match self {
            Records::Memory(m) => m.put(r, forget_at).await,
            Records::Redis(x) => x.put(r, forget_at).await,
        }
    }

    async fn claim(&self, id: &ReservationId, now: Micros) -> Result<Claim, StoreError> {
        match self {
            Records::Memory(m) => m.claim(id, now).await,
            Records::Redis(x) => x.claim(id, now).await,
        }
    }

    async fn unclaim(&self, claimed: &Claim) -> Result<(), StoreError> {
        match self {
            Records::Memory(m) => m.unclaim(claimed).await,
            Records::Redis(x) => x.unclaim(claimed).await,
        }
    }

    async fn cancel(&self, r: &Reservation, forget_at: Micros) -> Result<bool, StoreError> {
        match self {
            Records::Memory(m) => m.cancel(r, forget_at).await,
            Records::Redis(x) => x.cancel(r, forget_at).await,
        }
    }

    async fn expire(&self, now: Micros, max: usize) -> Result<Vec<Reservation>, StoreError> {
        match self {
            Records::Memory(m) => m.expire(now, max).await,
            Records::Redis(x) => x.expire(now, max).await,
        }
    }

    async fn outstanding(&self) -> Result<Vec<Outstanding>, StoreError> {
        match self {
            Records::Memory(m) => m.outstanding().await,
            Records::Redis(x) => x.outstanding().await,
        }
    }
}
