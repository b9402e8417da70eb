//! Reservation records in this process's memory: the embedded store's, one node's own.

use std::collections::{BTreeSet, HashMap};

use parking_lot::Mutex;

use super::{Claim, Outstanding, Reservation, ReservationId, Reservations};
use crate::clock::Micros;
use crate::store::StoreError;

/// Where a record stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Open,
    Released,
    Committed,
}

struct Entry {
    /// The record (`None` once committed: a tombstone needs only its phase).
    reservation: Option<Reservation>,
    phase: Phase,
    forget_at: Micros,
}

#[derive(Default)]
struct Records {
    by_id: HashMap<ReservationId, Entry>,
    /// Open records by expiry.
    expiring: BTreeSet<(Micros, ReservationId)>,
    /// Every record by the instant it is forgotten.
    forgetting: BTreeSet<(Micros, ReservationId)>,
    /// Open reservations and their units, per domain and rule (looked up without building a
    /// key: a reservation's put and claim allocate nothing here once its rule is known).
    outstanding: HashMap<String, HashMap<String, (u64, u64)>>,
}

impl Records {
    fn count(&mut self, r: &Reservation, up: bool) {
        for i in &r.items {
            if up {
                let rules = match self.outstanding.get_mut(&i.domain) {
                    Some(rules) => rules,
                    None => self.outstanding.entry(i.domain.clone()).or_default(),
                };
                let e = match rules.get_mut(&i.rule) {
                    Some(e) => e,
                    None => rules.entry(i.rule.clone()).or_default(),
                };
                *e = (e.0 + 1, e.1.saturating_add(i.estimate));
                continue;
            }
            let Some(rules) = self.outstanding.get_mut(&i.domain) else {
                continue;
            };
            if let Some(e) = rules.get_mut(&i.rule) {
                *e = (e.0.saturating_sub(1), e.1.saturating_sub(i.estimate));
                if e.0 == 0 {
                    rules.remove(&i.rule);
                }
            }
            if rules.is_empty() {
                self.outstanding.remove(&i.domain);
            }
        }
    }

    /// Drops the records whose `forget_at` has passed.
    fn forget(&mut self, now: Micros) {
        while let Some((at, id)) = self.forgetting.first().cloned() {
            if at > now {
                break;
            }
            self.forgetting.pop_first();
            if let Some(e) = self.by_id.remove(&id)
                && e.phase == Phase::Open
                && let Some(r) = e.reservation
            {
                self.expiring.remove(&(r.expires, id));
                self.count(&r, false);
            }
        }
    }
}

/// The most records kept at once (open ones and tombstones): each is an outsider's request
/// admitted by a limit, but limits can be large; past it a reservation is refused (the server
/// gives its units back and answers 503) until records are forgotten.
pub const MAX_RECORDS: usize = 1_000_000;

/// Reservation records in memory (see [`super`]); cheap to share behind an `Arc`.
#[derive(Default)]
pub struct MemoryReservations {
    records: Mutex<Records>,
}

impl MemoryReservations {
    /// No records.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records kept (open or tombstones).
    pub fn len(&self) -> usize {
        self.records.lock().by_id.len()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn put_now(&self, r: &Reservation, forget_at: Micros) -> Result<(), StoreError> {
        let mut rec = self.records.lock();
        if rec.by_id.len() >= MAX_RECORDS {
            return Err(StoreError::Unavailable(format!(
                "the reservation records are full ({MAX_RECORDS} kept until they are forgotten)"
            )));
        }
        if rec.by_id.contains_key(&r.id) {
            return Err(StoreError::Internal(format!(
                "a record exists under reservation id {}",
                r.id
            )));
        }
        rec.expiring.insert((r.expires, r.id.clone()));
        rec.forgetting.insert((forget_at, r.id.clone()));
        rec.count(r, true);
        rec.by_id.insert(
            r.id.clone(),
            Entry {
                reservation: Some(r.clone()),
                phase: Phase::Open,
                forget_at,
            },
        );
        Ok(())
    }

    fn claim_now(&self, id: &ReservationId, now: Micros) -> Claim {
        let mut rec = self.records.lock();
        rec.forget(now);
        let Some(e) = rec.by_id.get_mut(id) else {
            return Claim::Unknown;
        };
        let phase = std::mem::replace(&mut e.phase, Phase::Committed);
        let Some(reservation) = e.reservation.take() else {
            return Claim::Committed;
        };
        match phase {
            Phase::Committed => Claim::Committed,
            Phase::Released => Claim::Released(reservation),
            Phase::Open => {
                rec.expiring.remove(&(reservation.expires, id.clone()));
                rec.count(&reservation, false);
                let expired = reservation.expires <= now;
                Claim::Open {
                    reservation,
                    expired,
                }
            }
        }
    }

    fn unclaim_now(&self, claimed: &Claim) {
        let (r, phase) = match claimed {
            Claim::Open { reservation, .. } => (reservation, Phase::Open),
            Claim::Released(r) => (r, Phase::Released),
            Claim::Committed | Claim::Unknown => return,
        };
        let mut rec = self.records.lock();
        let Some(e) = rec.by_id.get_mut(&r.id) else {
            return;
        };
        if e.phase != Phase::Committed {
            return;
        }
        e.phase = phase;
        e.reservation = Some(r.clone());
        if phase == Phase::Open {
            rec.expiring.insert((r.expires, r.id.clone()));
            rec.count(r, true);
        }
    }

    /// As on Redis, where there is no record a tombstone makes a later put of the id fail.
    fn cancel_now(&self, r: &Reservation, forget_at: Micros) -> bool {
        let mut rec = self.records.lock();
        let Some(e) = rec.by_id.get_mut(&r.id) else {
            rec.forgetting.insert((forget_at, r.id.clone()));
            rec.by_id.insert(
                r.id.clone(),
                Entry {
                    reservation: None,
                    phase: Phase::Committed,
                    forget_at,
                },
            );
            return true;
        };
        match std::mem::replace(&mut e.phase, Phase::Committed) {
            Phase::Open => {
                e.reservation = None;
                rec.expiring.remove(&(r.expires, r.id.clone()));
                rec.count(r, false);
                true
            }
            phase => {
                e.phase = phase;
                false
            }
        }
    }

    fn expire_now(&self, now: Micros, max: usize) -> Vec<Reservation> {
        let mut rec = self.records.lock();
        let mut out = Vec::new();
        while out.len() < max {
            let Some((at, id)) = rec.expiring.first().cloned() else {
                break;
            };
            if at > now {
                break;
            }
            rec.expiring.pop_first();
            let Some(e) = rec.by_id.get_mut(&id) else {
                continue;
            };
            // (the expiring index holds open records only, each with its reservation)
            let Some(r) = e.reservation.clone() else {
                continue;
            };
            e.phase = Phase::Released;
            debug_assert!(e.forget_at >= at);
            rec.count(&r, false);
            out.push(r);
        }
        rec.forget(now);
        out
    }

    fn outstanding_now(&self) -> Vec<Outstanding> {
        let rec = self.records.lock();
        let mut out: Vec<Outstanding> = rec
            .outstanding
            .iter()
            .flat_map(|(domain, rules)| {
                rules.iter().map(|(rule, &(count, units))| Outstanding {
                    domain: domain.clone(),
                    rule: rule.clone(),
                    count,
                    units,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.domain, &a.rule).cmp(&(&b.domain, &b.rule)));
        out
    }
}

impl Reservations for MemoryReservations {
    async fn put(&self, reservation: &Reservation, forget_at: Micros) -> Result<(), StoreError> {
        self.put_now(reservation, forget_at)
    }

    async fn claim(&self, id: &ReservationId, now: Micros) -> Result<Claim, StoreError> {
        Ok(self.claim_now(id, now))
    }

    async fn unclaim(&self, claimed: &Claim) -> Result<(), StoreError> {
        self.unclaim_now(claimed);
        Ok(())
    }

    async fn cancel(
        &self,
        reservation: &Reservation,
        forget_at: Micros,
    ) -> Result<bool, StoreError> {
        Ok(self.cancel_now(reservation, forget_at))
    }

    async fn expire(&self, now: Micros, max: usize) -> Result<Vec<Reservation>, StoreError> {
        Ok(self.expire_now(now, max))
    }

    async fn outstanding(&self) -> Result<Vec<Outstanding>, StoreError> {
        Ok(self.outstanding_now())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Reserved;
    use super::*;

    fn reservation(expires: Micros, estimate: u64) -> Reservation {
        Reservation {
            id: ReservationId::random().unwrap(),
            items: vec![Reserved {
                key: "llm:tokens:key=a".into(),
                domain: "llm".into(),
                rule: "tokens".into(),
                estimate,
                taken: 0,
            }],
            expires,
        }
    }

    #[test]
    fn a_commit_claims_once_and_a_tombstone_answers_after() {
        let m = MemoryReservations::new();
        let r = reservation(100, 7);
        m.put_now(&r, 200).unwrap();
        assert_eq!(m.outstanding_now()[0].units, 7);
        let first = m.claim_now(&r.id, 50);
        assert_eq!(
            first,
            Claim::Open {
                reservation: r.clone(),
                expired: false
            }
        );
        assert!(m.outstanding_now().is_empty());
        assert_eq!(m.claim_now(&r.id, 60), Claim::Committed);
        assert!(
            m.expire_now(150, 10).is_empty(),
            "a committed one never expires"
        );
        assert_eq!(m.claim_now(&r.id, 200), Claim::Unknown, "forgotten");
        assert!(m.is_empty());
    }

    #[test]
    fn expiry_releases_once_then_a_commit_only_charges() {
        let m = MemoryReservations::new();
        let (a, b) = (reservation(100, 3), reservation(300, 4));
        m.put_now(&a, 400).unwrap();
        m.put_now(&b, 600).unwrap();
        assert!(m.expire_now(99, 10).is_empty());
        assert_eq!(m.expire_now(100, 10), vec![a.clone()]);
        assert!(m.expire_now(100, 10).is_empty(), "released once");
        assert_eq!(m.outstanding_now()[0].units, 4);
        assert_eq!(m.claim_now(&a.id, 150), Claim::Released(a.clone()));
        assert_eq!(
            m.claim_now(&b.id, 350),
            Claim::Open {
                reservation: b.clone(),
                expired: true
            }
        );
    }

    #[test]
    fn an_unclaimed_commit_can_be_retried() {
        let m = MemoryReservations::new();
        let r = reservation(100, 5);
        m.put_now(&r, 200).unwrap();
        let c = m.claim_now(&r.id, 10);
        m.unclaim_now(&c);
        assert_eq!(m.outstanding_now()[0].count, 1);
        assert_eq!(m.claim_now(&r.id, 20), c);
    }
}
