//! The Lua scripts, assembled from `scripts/*.lua`: `common.lua`, one file per algorithm, and a
//! driver (the limiter's `decide.lua`, `refund.lua`, `release.lua`, `charge.lua`, and the queues'
//! `queue.lua`, whose release schedule is `gcra.lua`'s `reserve`). The algorithm codes are
//! defined here, once, and given to Lua as named constants. The shared adaptive limits'
//! `aimd.lua` stands alone (it applies no rate algorithm), and so do the server's: the alerts'
//! evaluator lease and states ([`ALERTS_LEASE`], [`ALERTS_WRITE`]) and the shared rules'
//! versions ([`RULES_PUSH`]), public for it to run through
//! [`RedisConnection::query_script`](crate::RedisConnection::query_script).
//!
//! Each is a redis-rs [`Script`]: sent as `EVALSHA`, loaded again when Redis answers `NOSCRIPT`
//! (after a restart or `SCRIPT FLUSH`). Each file begins with its contract: its `KEYS`, its
//! `ARGV`, its answer.

use std::sync::LazyLock;

use flowgate_core::{Algorithm, Limit};
use redis::Script;

/// The algorithm files, in code order (see [`code`]).
const ALGORITHMS: [(&str, &str); 6] = [
    ("GCRA", include_str!("../scripts/gcra.lua")),
    ("FIXED_WINDOW", include_str!("../scripts/fixed_window.lua")),
    (
        "SLIDING_WINDOW",
        include_str!("../scripts/sliding_window.lua"),
    ),
    ("SLIDING_LOG", include_str!("../scripts/sliding_log.lua")),
    ("CONCURRENCY", include_str!("../scripts/concurrency.lua")),
    ("WARMUP", include_str!("../scripts/warmup.lua")),
];

/// A limit's code in the scripts (its algorithm's file's place in [`ALGORITHMS`], from 1; a
/// token bucket with warm-up has a file of its own).
pub(crate) fn code(l: &Limit) -> u8 {
    match l.algorithm() {
        Algorithm::TokenBucket if l.warmup().is_some() => 6,
        Algorithm::TokenBucket | Algorithm::LeakyBucket => 1,
        Algorithm::FixedWindow => 2,
        Algorithm::SlidingWindow => 3,
        Algorithm::SlidingLog => 4,
        Algorithm::Concurrency => 5,
    }
}

/// The codes as Lua constants, `common.lua`, the algorithm files (each the branch of `make(code)`
/// that makes its table, so that its local names are its own), then `driver`.
fn assemble(driver: &str) -> String {
    let mut s = String::new();
    for (i, (name, _)) in ALGORITHMS.iter().enumerate() {
        s.push_str(&format!("local {name} = {}\n", i + 1));
    }
    s.push_str(include_str!("../scripts/common.lua"));
    s.push_str("\nlocal function make(code)\n");
    for (i, (name, src)) in ALGORITHMS.iter().enumerate() {
        let branch = if i == 0 { "if" } else { "elseif" };
        s.push_str(&format!("{branch} code == {name} then\n{src}\n"));
    }
    s.push_str("end\nend\n");
    s.push_str(driver);
    s
}

/// Decides the requests of one call (`decide.lua`).
pub(crate) static DECIDE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&assemble(&with_records(include_str!(
        "../scripts/decide.lua"
    ))))
});
/// Gives back what a cluster slot took for a request another slot rejected (`refund.lua`).
pub(crate) static REFUND: LazyLock<Script> =
    LazyLock::new(|| Script::new(&assemble(include_str!("../scripts/refund.lua"))));
/// Applies charges and refunds (`charge.lua`).
pub(crate) static CHARGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&assemble(&with_charges(include_str!(
        "../scripts/charge.lua"
    ))))
});
/// Claims a reservation's record and applies its commit's charges in one call (`commit.lua`).
pub(crate) static COMMIT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&assemble(&with_charges(&with_records(include_str!(
        "../scripts/commit.lua"
    )))))
});

/// `driver` after `charges.lua` (the charges' body it calls).
fn with_charges(driver: &str) -> String {
    format!("{}\n{driver}", include_str!("../scripts/charges.lua"))
}
/// Releases a concurrency lease (`release.lua`).
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(&assemble(include_str!("../scripts/release.lua"))));
/// One shared circuit breaker's operations (`breaker.lua`, standalone: it decides no limit).
pub(crate) static BREAKER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/breaker.lua")));
/// One queue instance's operations (`queue.lua`).
pub(crate) static QUEUE: LazyLock<Script> =
    LazyLock::new(|| Script::new(&assemble(include_str!("../scripts/queue.lua"))));
/// Applies reports to the adaptive limits of one rule's keys (`aimd.lua`).
pub(crate) static AIMD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/aimd.lua")));
/// Takes or renews the alerts' evaluator lease (`alerts_lease.lua`).
pub static ALERTS_LEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/alerts_lease.lua")));
/// Replaces the alerts' states while the caller holds the lease (`alerts_write.lua`).
pub static ALERTS_WRITE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/alerts_write.lua")));
/// Stores a new version of the shared rules if the version in force is its base
/// (`rules_push.lua`).
pub static RULES_PUSH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/rules_push.lua")));

/// Reservation records: put, claim once, unclaim, expire (`reservations.lua`).
pub(crate) static RESERVATIONS: LazyLock<Script> =
    LazyLock::new(|| Script::new(&with_records(include_str!("../scripts/reservations.lua"))));

/// `driver` after `records.lua` (a reservation's record: its form, and its writing, which a
/// decision may do with its admission).
fn with_records(driver: &str) -> String {
    format!("{}\n{driver}", include_str!("../scripts/records.lua"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_files() {
        let l = |a| Limit::new(a, "5/s".parse().unwrap()).unwrap();
        let warm = Limit::builder(Algorithm::TokenBucket, "5/s".parse().unwrap())
            .warmup(std::time::Duration::from_secs(10))
            .build()
            .unwrap();
        for (limit, name) in [
            (l(Algorithm::TokenBucket), "GCRA"),
            (l(Algorithm::FixedWindow), "FIXED_WINDOW"),
            (l(Algorithm::SlidingWindow), "SLIDING_WINDOW"),
            (l(Algorithm::SlidingLog), "SLIDING_LOG"),
            (l(Algorithm::Concurrency), "CONCURRENCY"),
            (warm, "WARMUP"),
        ] {
            let (file_name, src) = ALGORITHMS[usize::from(code(&limit)) - 1];
            assert_eq!(file_name, name);
            assert!(src.contains("\nreturn { params = params, admit = admit,"));
        }
        // The queues' release schedule is the limiter's GCRA step.
        assert!(ALGORITHMS[0].1.contains("reserve = reserve }"));
    }
}
