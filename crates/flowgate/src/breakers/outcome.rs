//! What a report says of a call, and what it reached.

/// A call's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded.
    Ok,
    /// It failed.
    Error,
}

/// What a report reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reported {
    /// Breaker instances that counted it.
    pub counted: usize,
    /// Breaker instances or adaptive limits that matched but could not be kept (a breaker at
    /// [`super::MAX_INSTANCES`], adaptive limits at [`crate::adaptive::MAX_KEYS`]).
    pub dropped: usize,
    /// Adaptive concurrency limits that counted it ([`crate::adaptive`]).
    pub adaptive: usize,
}
