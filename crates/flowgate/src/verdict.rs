//! The answer to a whole request: one status per descriptor, and the overall outcome.

use std::sync::Arc;
use std::time::Duration;

use flowgate_core::{Decision, Limit, Rule, StoreError};

use crate::breakers::BreakerStatus;

/// What one descriptor of a request got.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Status {
    /// The rule that applied; `None` when no rule matched (the descriptor is unlimited).
    pub rule: Option<Arc<Rule>>,
    /// The rule's decision; [`Decision::UNLIMITED`] when there is no rule or no limit.
    pub decision: Decision,
    /// The state key the rule counted under (empty when no limit applied).
    pub key: String,
    /// The rule's limit in force that decided (its schedule's at the decision's instant);
    /// `None` when no limit applied.
    pub limit: Option<Limit>,
    /// Set when the store could not decide and the rule's failure policy did.
    pub error: Option<StoreError>,
    /// The rule is in quota mode (its own `quota_mode`, or the limiter's global quota mode):
    /// over its limit it rejects the request only with every other quota-mode rule matched.
    pub quota: bool,
    /// The rule's trial limit ([`Rule::trial`]) would have rejected this descriptor.
    pub trial_rejected: bool,
    /// The circuit breaker this descriptor matched, if any: whether it refused the request
    /// (then `decision` is a rejection whose `retry_after` is the time to half-open, and no
    /// rule was asked), or the probe lease it was admitted with.
    pub breaker: Option<BreakerStatus>,
}

impl Status {
    pub(crate) fn unlimited(rule: Option<Arc<Rule>>) -> Self {
        Self {
            rule,
            decision: Decision::UNLIMITED,
            key: String::new(),
            limit: None,
            error: None,
            quota: false,
            trial_rejected: false,
            breaker: None,
        }
    }

    /// A descriptor refused by an open circuit breaker, to retry after `retry_after`.
    pub(crate) fn circuit_open(breaker: BreakerStatus, retry_after: Duration) -> Self {
        let mut s = Self::unlimited(None);
        s.decision = Decision {
            allowed: false,
            limit: 0,
            remaining: 0,
            reset_after: retry_after,
            retry_after: Some(retry_after),
            wait: Duration::ZERO,
            lease: None,
        };
        s.breaker = Some(breaker);
        s
    }

    /// Whether this descriptor is over its rule's limit (Envoy's per-descriptor `OVER_LIMIT`):
    /// rejected by a rule not in shadow mode.
    pub fn over_limit(&self) -> bool {
        !self.decision.allowed && !self.rule.as_ref().is_some_and(|r| r.shadow)
    }

    /// Whether this status alone rejects the request: over the limit, and not in quota mode.
    pub fn blocks(&self) -> bool {
        self.over_limit() && !self.quota
    }

    /// Whether a limit applied (a rule with a limit in force matched).
    pub fn is_limited(&self) -> bool {
        self.limit.is_some()
    }
}

/// The answer to a request.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Verdict {
    /// Whether the request is admitted: no enforced rule rejected it.
    pub allowed: bool,
    /// One status per descriptor of the request, in order.
    pub statuses: Vec<Status>,
    /// In `delay` mode: how long to wait before proceeding (the longest of the rules' waits).
    pub wait: Duration,
    /// Over the limit, but admitted by the limiter's global shadow mode.
    pub shadowed: bool,
}

impl Verdict {
    /// When rejected: the earliest time the same request could pass, i.e. the latest `retry_after`
    /// among the rules that rejected it. `None` when admitted, or when some rule can never admit
    /// it (or failed closed).
    pub fn retry_after(&self) -> Option<Duration> {
        if self.allowed {
            return None;
        }
        let mut latest = Duration::ZERO;
        for s in self.statuses.iter().filter(|s| s.blocks()) {
            latest = latest.max(s.decision.retry_after?);
        }
        // Rejected by its quota-mode rules, all over: the first of them to free up suffices.
        let quota = self.statuses.iter().filter(|s| s.quota && s.is_limited());
        if quota.clone().count() > 0 && quota.clone().all(Status::over_limit) {
            latest = latest.max(quota.filter_map(|s| s.decision.retry_after).min()?);
        }
        Some(latest)
    }

    /// The breaker that refused the request (`circuit_open`), if one did.
    pub fn circuit_open(&self) -> Option<&BreakerStatus> {
        if self.allowed {
            return None;
        }
        self.statuses
            .iter()
            .filter_map(|s| s.breaker.as_ref())
            .find(|b| b.open)
    }

    /// Whether the request was refused only by failure policies: every status that blocks it
    /// is a rule's `closed` policy deciding for a store that failed (no limit was asked, no
    /// breaker is open; a `local` policy's refusal is its local limit's). `false` when admitted.
    pub fn refused_by_failure_policy(&self) -> bool {
        let mut blocking = self.statuses.iter().filter(|s| s.blocks()).peekable();
        !self.allowed
            && self.circuit_open().is_none()
            && blocking.peek().is_some()
            && blocking.all(|s| {
                s.error.is_some()
                    && s.rule
                        .as_ref()
                        .is_some_and(|r| r.failure == crate::FailurePolicy::Closed)
            })
    }

    /// The status that binds the request: the first blocking one when rejected, otherwise the
    /// limited one with the fewest units remaining. `None` when no limit applied.
    pub fn binding(&self) -> Option<&Status> {
        if let Some(s) = self.statuses.iter().find(|s| s.blocks()) {
            return Some(s);
        }
        self.statuses
            .iter()
            .filter(|s| s.is_limited())
            .min_by_key(|s| s.decision.remaining)
    }

    /// The standard rate-limit headers for this verdict: `RateLimit-Limit`,
    /// `RateLimit-Remaining`, `RateLimit-Reset` (seconds, rounded up) from the binding status
    /// when a limit binds (not when an open circuit breaker refused the request), and
    /// `Retry-After` (seconds, rounded up) when rejected with a known retry time.
    ///
    /// Names are lowercase, as HTTP/2 and `http::HeaderName` write them. This is the one place
    /// they are built: the tower layer, the server's HTTP API and its Envoy gRPC answer
    /// (`response_headers_to_add`) all send these.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut h = Vec::with_capacity(4);
        if let Some(s) = self.binding().filter(|s| s.is_limited()) {
            let d = &s.decision;
            h.push(("ratelimit-limit", d.limit.to_string()));
            h.push(("ratelimit-remaining", d.remaining.to_string()));
            h.push(("ratelimit-reset", ceil_secs(d.reset_after).to_string()));
        }
        if let Some(r) = self.retry_after() {
            h.push(("retry-after", ceil_secs(r).to_string()));
        }
        h
    }
}

/// Whole seconds, rounded up.
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_micros().div_ceil(1_000_000) as u64
}
