//! Failed credentials, slowed per source: each source address may present [`BUDGET`] wrong
//! tokens at once, then one every [`REFILL`]; while it has none left, its requests to routes
//! that need a credential are refused (429 with `Retry-After`) before their token is even
//! compared, so a guesser gets no answer to its guesses. Routes that need no credential, and
//! so every decision of a server whose `decide` scope is open, never look here.
//!
//! The budget is a token bucket in Flowgate's own embedded store, keyed by the source (IPv4
//! address, or IPv6 /64 prefix: one host holds a whole /64), capped at [`MAX_SOURCES`]: at the
//! cap, the source closest to a full budget is forgotten first, which is the one least worth
//! remembering.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flowgate::clock::{Clock, SystemClock};
use flowgate::store::Item;
use flowgate::{Algorithm, Limit, MemoryStore, Quota};

/// The wrong tokens a source may present at once.
pub const BUDGET: u64 = 20;
/// How often a source gets one more attempt back.
pub const REFILL: Duration = Duration::from_secs(3);
/// The most sources remembered.
pub const MAX_SOURCES: usize = 65_536;

/// Failed attempts by source.
pub struct Attempts<C: Clock = SystemClock> {
    store: MemoryStore<C>,
    limit: Limit,
    /// When the last wrong token came (the store's clock, µs; 0: never). A source is out of
    /// attempts only within `BUDGET × REFILL` of its last wrong token, so while none came that
    /// recently, a right token is read without looking its source up.
    last_failure: AtomicU64,
}

impl<C: Clock> std::fmt::Debug for Attempts<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempts")
            .field("sources", &self.store.len())
            .finish()
    }
}

impl Default for Attempts<SystemClock> {
    fn default() -> Self {
        Self::with_clock(SystemClock::new())
    }
}

/// The state key of a source.
fn key(source: IpAddr) -> String {
    match source {
        IpAddr::V4(v4) => format!("auth/{v4}"),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => format!("auth/{v4}"),
            None => {
                let s = v6.segments();
                format!("auth/{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

impl<C: Clock> Attempts<C> {
    /// The budget on `clock`.
    pub fn with_clock(clock: C) -> Self {
        let window = REFILL * BUDGET as u32;
        let quota = Quota::new(BUDGET, window).unwrap_or_else(|_| unreachable_quota());
        let limit =
            Limit::new(Algorithm::TokenBucket, quota).unwrap_or_else(|_| unreachable_limit());
        Self {
            store: MemoryStore::with_clock(clock).with_max_keys(MAX_SOURCES),
            limit,
            last_failure: AtomicU64::new(0),
        }
    }

    fn item<'a>(&'a self, key: &'a str, cost: u64) -> Item<'a> {
        Item {
            key,
            limit: &self.limit,
            cost,
            enforce: true,
        }
    }

    /// `Err(wait)` while `source` has no attempt left: how long until it has one.
    pub fn check(&self, source: IpAddr) -> Result<(), Duration> {
        let last = self.last_failure.load(Ordering::Relaxed);
        let refilled = REFILL.as_micros() as u64 * BUDGET;
        if last == 0 || self.store.clock().now().saturating_sub(last) > refilled {
            return Ok(());
        }
        let key = key(source);
        // A look (cost 0): `remaining` is the attempts left, `reset_after` when all are back.
        match self.store.decide_one_now(&self.item(&key, 0)) {
            Ok(d) if d.remaining == 0 => {
                let all_but_one = REFILL * (BUDGET as u32 - 1);
                Err(d
                    .reset_after
                    .saturating_sub(all_but_one)
                    .max(Duration::from_millis(1)))
            }
            _ => Ok(()),
        }
    }

    /// Counts a wrong token from `source`.
    pub fn failed(&self, source: IpAddr) {
        self.last_failure
            .store(self.store.clock().now().max(1), Ordering::Relaxed);
        let key = key(source);
        let _ = self.store.decide_one_now(&self.item(&key, 1));
    }
}

#[cold]
fn unreachable_quota() -> Quota {
    panic!("BUDGET and REFILL make a valid quota")
}

#[cold]
fn unreachable_limit() -> Limit {
    panic!("a token bucket of a valid quota is a valid limit")
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowgate::clock::ManualClock;

    #[test]
    fn a_source_out_of_attempts_waits_and_others_do_not() {
        let clock = ManualClock::new(1_000_000);
        let a = Attempts::with_clock(clock.clone());
        let guesser: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..BUDGET {
            assert!(a.check(guesser).is_ok());
            a.failed(guesser);
        }
        let wait = a.check(guesser).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= REFILL, "{wait:?}");
        assert!(a.check(other).is_ok());
        clock.advance(REFILL);
        assert!(a.check(guesser).is_ok(), "one attempt back after REFILL");
        a.failed(guesser);
        assert!(a.check(guesser).is_err());
        // Long after the last wrong token, every source has its attempts back.
        clock.advance(REFILL * BUDGET as u32 + Duration::from_micros(1));
        assert!(a.check(guesser).is_ok());
        a.failed(guesser);
        assert!(a.check(guesser).is_ok(), "one wrong token of a full budget");
    }

    #[test]
    fn an_ipv6_host_is_its_64_prefix() {
        let clock = ManualClock::new(1_000_000);
        let a = Attempts::with_clock(clock);
        for i in 0..BUDGET {
            let ip: IpAddr = format!("2001:db8:1:2::{i:x}").parse().unwrap();
            a.failed(ip);
        }
        assert!(a.check("2001:db8:1:2:ffff::1".parse().unwrap()).is_err());
        assert!(a.check("2001:db8:1:3::1".parse().unwrap()).is_ok());
        assert_eq!(key("::ffff:10.0.0.1".parse().unwrap()), "auth/10.0.0.1");
    }
}
