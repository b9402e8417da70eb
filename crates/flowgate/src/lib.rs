//! Flowgate: exact rate limiting (fixed window, sliding log, sliding window, token bucket,
//! concurrency) and shaping (leaky bucket with a bounded queue), in one process or across a
//! cluster of app servers through Redis.
//!
//! A [`Limiter`] holds a [`RuleSet`] (swappable at run time) and a [`Store`]. Each request
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

pub mod layer;
mod limiter;
mod permit;
pub mod queue;
mod verdict;

pub use flowgate_core::{
    Algorithm, Calendar, CalendarUnit, Clock, Decision, Descriptor, Entry, FailurePolicy, Item,
    Limit, LimitBuilder, ManualClock, Matcher, MemoryStore, Mode, Override, Quota, Request, Rule,
    RuleSet, RuleSetError, Schedule, Store, StoreError, SystemClock, Tz, ValueMatch, algorithm,
    store,
};
pub use layer::RateLimitLayer;
pub use limiter::Limiter;
pub use permit::Permit;
pub use queue::{DiskQueueStore, Queue, Worker};
pub use verdict::{Status, Verdict};

#[cfg(feature = "redis")]
pub use flowgate_redis::{RedisOptions, RedisStats, RedisStore};

/// The core crate, for what is not re-exported here.
pub use flowgate_core as core;
