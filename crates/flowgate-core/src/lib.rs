//! Flowgate's core: exact rate-limiting and shaping algorithms as pure state transitions, the
//! rule model with Envoy-compatible descriptor matching, the [`Store`] interface, and the
//! embedded [`MemoryStore`].
//!
//! Nothing here does I/O or reads a clock on its own: algorithms take `now` as an argument, and
//! stores read an injected [`Clock`]. See the `flowgate` crate for the limiter that ties rules and
//! stores together.

pub mod adaptive;
pub mod algorithm;
pub mod breaker;
pub mod calendar;
pub mod clock;
pub mod decision;
pub mod descriptor;
pub mod direct;
pub mod error;
pub mod limit;
pub mod memory;
pub mod queue;
pub mod quota;
pub mod random;
pub mod redact;
pub mod reservation;
pub mod rule;
pub mod ruleset;
pub mod schedule;
pub mod store;

pub use algorithm::State;
pub use calendar::{Calendar, CalendarUnit, Tz};
pub use clock::{Clock, ManualClock, Micros, SystemClock};
pub use decision::Decision;
pub use descriptor::{Descriptor, Entry, Request};
pub use direct::DirectBucket;
pub use error::{LimitError, QuotaError};
pub use limit::{Algorithm, Limit, LimitBuilder, Mode, StateTag};
pub use memory::{MemoryStats, MemoryStore};
pub use quota::Quota;
pub use rule::{ChargeMode, FailurePolicy, Matcher, Rule, ValueMatch, Wildcard};
pub use ruleset::{Matched, RuleSet, RuleSetError};
pub use schedule::{Override, Schedule};
pub use store::{ChargeItem, Charges, Decisions, Item, Store, StoreError};
