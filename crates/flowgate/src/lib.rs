//! Flowgate: exact rate limiting (fixed window, sliding log, sliding window, token bucket,
//! concurrency) and shaping (leaky bucket with a bounded queue), in one process or across a
//! cluster of app servers through Redis.
//!
//! A [`Limiter`] holds a [`RuleSet`] (swappable at run time) and a store ([`MemoryStore`], or
//! [`RedisStore`] with the `redis` feature). Each request
//! carries descriptors; each descriptor matches at most one rule; the request is admitted only if
//! every matching rule admits it, and a rejected request consumes nothing from any rule.
//!
//! # Examples
//! ```
//! use flowgate::{Algorithm, Descriptor, Limit, Limiter, Matcher, MemoryStore, Quota, Request, Rule, RuleSet};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let per_user = Limit::new(Algorithm::SlidingLog, "2/s".parse::<Quota>().unwrap()).unwrap();
//! let rules = RuleSet::new(vec![Rule::new("api", "per-user", vec![Matcher::parse("user")], Some(per_user))]).unwrap();
//! let limiter = Limiter::new(rules, MemoryStore::new());
//! let req = Request::new("api", vec![Descriptor::new([("user", "42")])]);
//! assert!(limiter.check(&req).await.allowed);
//! assert!(limiter.check(&req).await.allowed);
//! let third = limiter.check(&req).await;
//! assert!(!third.allowed);
//! assert!(third.retry_after().is_some());
//! # }
//! ```

//! # Where things are
//! The root names what a user of the limiter names. Beside it: [`layer`] (the tower layer for
//! axum and tonic services), [`rule`] (the parts of a rule in detail: schedules, calendar
//! windows, wildcards), [`decision`] (a verdict's parts), [`clock`], [`algorithm`] (the
//! algorithms as pure transitions, for a caller that keeps its own state), [`store`] (for
//! authors of a store), [`breakers`] (circuit breakers consulted before the store, fed by
//! [`Limiter::report`], [`Permit::report`] and the tower layer, reached through
//! [`Limiter::breakers`]), [`adaptive`] (`concurrency` limits that move with the same reports,
//! reached through [`Limiter::adaptive`]), and behind features [`queue`] (`queue`: durable queues released at a
//! rate) and [`redis`] (`redis`, on by default: the Redis store's details).

pub mod adaptive;
pub mod breakers;
pub mod layer;
mod limiter;
mod link;
mod openai;
mod permit;
#[cfg(feature = "queue")]
pub mod queue;
mod reservation;
mod verdict;

pub use flowgate_core::{
    Algorithm, Descriptor, Entry, FailurePolicy, Limit, Matcher, MemoryStore, Mode, Quota, Request,
    Rule, RuleSet,
};
pub use limiter::{
    BadShare, ChargeRefusal, ChargeTarget, DEFAULT_RESERVE_SHARE, Limiter, PendingRecord,
    ReserveError,
};
pub use permit::Permit;
pub use reservation::{Committed, Reservation, RuleCommit};
pub use verdict::Verdict;

#[cfg(feature = "redis")]
pub use flowgate_redis::{RedisOptions, RedisStore};

/// The parts of a rule in detail: how an entry's value matches, schedules and calendar windows,
/// the bounds and text of quotas and durations, and the errors of building one.
pub mod rule {
    pub use flowgate_core::adaptive::AimdSpec;
    pub use flowgate_core::calendar::{Calendar, CalendarUnit};
    pub use flowgate_core::quota::{MAX_LIMIT, parse_duration};
    pub use flowgate_core::schedule::{Dates, Hours, Override, Schedule};
    pub use flowgate_core::{
        ChargeMode, LimitBuilder, LimitError, QuotaError, RuleSetError, ValueMatch, Wildcard,
    };
}

/// A verdict's parts: each descriptor's status, and the decision of its rule.
pub mod decision {
    pub use crate::openai::openai_duration;
    pub use crate::verdict::Status;
    pub use flowgate_core::Decision;
}

/// Time: the clock a store reads, a real one, and one that tests move by hand.
pub mod clock {
    pub use flowgate_core::clock::{Clock, ManualClock, Micros, SystemClock, micros, system_now};
}

/// For a server that takes reservations from remote callers (`POST /v1/reserve`): the records
/// of what each reservation took, claimed exactly once by its commit or its expiry. In process,
/// [`Limiter::reserve`] needs none of it.
pub mod records {
    pub use flowgate_core::reservation::*;
}

/// The algorithms as pure transitions `(state, now, cost) -> (state', decision)`, for a caller
/// that keeps the state itself, and a single in-process bucket.
pub mod algorithm {
    pub use flowgate_core::DirectBucket;
    pub use flowgate_core::algorithm::{
        Amount, ChargeError, Charged, ConcurrencyState, FixedWindowState, GcraState, Lease,
        SlidingLogState, SlidingWindowState, State, apply, charge, chargeable, check, is_idle,
        release, transition,
    };
}

/// For authors of a store: the interface the limiter calls, and what it passes.
pub mod store {
    pub use flowgate_core::memory::DEFAULT_MAX_KEYS;
    pub use flowgate_core::ruleset::state_key;
    pub use flowgate_core::store::{
        ChargeItem, Charges, Decisions, Item, Store, StoreError, admitted,
    };
    pub use flowgate_core::{MemoryStats, StateTag};
}

/// The Redis store's details: its statistics, defaults and, with `queue`, its queue store.
#[cfg(feature = "redis")]
pub mod redis {
    #[cfg(feature = "queue")]
    pub use flowgate_redis::RedisQueueStore;
    pub use flowgate_redis::{DEFAULT_DEADLINE, RedisConnection, RedisStats};
}
