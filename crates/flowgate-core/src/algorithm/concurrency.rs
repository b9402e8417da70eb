//! `concurrency`: at most `limit` units in flight, held as leases that expire.
//!
//! Admits when the costs of unexpired leases plus `cost` are at most `limit`, and grants a lease
//! that the caller releases when done. A lease held by a crashed client expires `window` after it
//! was granted (the quota's window is the lease TTL). `retry_after` is the time until enough
//! leases expire: an upper bound, since a release may come sooner.

use crate::clock::Micros;
use crate::decision::Decision;
use crate::limit::Limit;

use super::us;

/// One lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The lease's id, unique within its key.
    pub id: u64,
    /// Units held.
    pub cost: u64,
    /// When the lease expires, microseconds since the epoch.
    pub expires: Micros,
}

/// Concurrency state: the leases granted and not yet released (some may have expired).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConcurrencyState {
    /// Leases, in order of grant.
    pub leases: Vec<Lease>,
}

fn in_flight(s: &ConcurrencyState, now: Micros) -> u64 {
    s.leases
        .iter()
        .filter(|l| l.expires > now)
        .map(|l| l.cost)
        .sum()
}

/// Decides without changing the state.
pub fn check(l: &Limit, s: &ConcurrencyState, now: Micros, cost: u64) -> Decision {
    let held = in_flight(s, now);
    let allowed = held + cost <= l.limit();
    let used = if allowed { held + cost } else { held };
    let mut newest = s.leases.iter().map(|x| x.expires).max().unwrap_or(0);
    if allowed && cost > 0 {
        newest = newest.max(now + l.window());
    }
    let mut retry_after = None;
    if !allowed && cost <= l.limit() {
        let mut live: Vec<_> = s.leases.iter().filter(|x| x.expires > now).collect();
        live.sort_by_key(|x| x.expires);
        let mut freed = 0;
        for x in live {
            freed += x.cost;
            if held - freed + cost <= l.limit() {
                retry_after = Some(us(x.expires - now));
                break;
            }
        }
    }
    Decision {
        allowed,
        limit: l.limit(),
        remaining: l.limit().saturating_sub(used),
        reset_after: us(newest.saturating_sub(now)),
        retry_after,
        wait: us(0),
        lease: None,
    }
}

/// Applies an admitted request: drops expired leases and grants lease `id`.
pub fn apply(l: &Limit, s: &mut ConcurrencyState, now: Micros, cost: u64, id: u64) {
    s.leases.retain(|x| x.expires > now);
    s.leases.push(Lease {
        id,
        cost,
        expires: now + l.window(),
    });
}

/// Releases lease `id`; returns whether it was held.
pub fn release(s: &mut ConcurrencyState, id: u64) -> bool {
    let before = s.leases.len();
    s.leases.retain(|x| x.id != id);
    s.leases.len() != before
}

/// Whether no lease is live.
pub fn is_idle(s: &ConcurrencyState, now: Micros) -> bool {
    s.leases.iter().all(|x| x.expires <= now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Quota};
    use std::time::Duration;

    #[test]
    fn leases_release_and_expire() {
        let l = Limit::new(Algorithm::Concurrency, "2/30s".parse::<Quota>().unwrap()).unwrap();
        let mut s = ConcurrencyState::default();
        for id in 1..=2 {
            assert!(check(&l, &s, 0, 1).allowed);
            apply(&l, &mut s, 0, 1, id);
        }
        let d = check(&l, &s, 10, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Some(Duration::from_micros(30_000_000 - 10)));
        assert!(release(&mut s, 1));
        assert!(!release(&mut s, 1));
        assert!(check(&l, &s, 10, 1).allowed);
        // A crashed holder's lease expires after its TTL.
        assert!(check(&l, &s, 30_000_000, 2).allowed);
        assert!(is_idle(&s, 30_000_000));
    }
}
