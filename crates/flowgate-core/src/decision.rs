//! The answer to one request against one limit.

use std::time::Duration;

/// What a limit decided for one request.
///
/// `remaining` is in units (not requests), `reset_after` is the time until the limit's state is
/// empty again if nothing else arrives, and `retry_after` is set only on a rejection that a later
/// identical request could pass: it is exact — the same request passes at `now + retry_after` if
/// nothing else arrives, and fails one microsecond before. A rejection with no `retry_after` can
/// never pass (its cost exceeds the limit or burst). In `delay` mode an admitted request carries
/// the `wait` before its reserved slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// The quota's limit (units per window; for `concurrency`, units in flight).
    pub limit: u64,
    /// Units still available now, after this request if it was admitted.
    pub remaining: u64,
    /// Time until the state is empty again.
    pub reset_after: Duration,
    /// On rejection: the earliest time after which the same request would pass. `None` when
    /// admitted, or when it can never pass.
    pub retry_after: Option<Duration>,
    /// In `delay` mode: how long the admitted caller must wait for its slot. Zero otherwise.
    pub wait: Duration,
    /// For `concurrency`: the lease the admitted request holds, to be released.
    pub lease: Option<u64>,
}

impl Decision {
    /// A decision for a rule with no limit: admitted, with `u64::MAX` remaining.
    pub const UNLIMITED: Decision = Decision {
        allowed: true,
        limit: u64::MAX,
        remaining: u64::MAX,
        reset_after: Duration::ZERO,
        retry_after: None,
        wait: Duration::ZERO,
        lease: None,
    };

    /// A rejection that can never pass (the cost is above what the limit can ever admit).
    pub fn is_impossible(&self) -> bool {
        !self.allowed && self.retry_after.is_none()
    }
}
