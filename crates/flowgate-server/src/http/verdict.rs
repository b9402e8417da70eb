//! The answer of `POST /v1/check` and `/v1/acquire`: the verdict, written straight from the
//! limiter's [`Verdict`] by borrowing it (this is the request path: no intermediate JSON value).
//!
//! `code` is Envoy's (`OK`, `OVER_LIMIT`), the same as gRPC's `overall_code` for the same
//! request, so that envoyproxy/ratelimit's users read it unchanged; `reason` says why a request
//! was refused in Flowgate's own codes ([`ErrorCode`]: `over_limit`; `circuit_open` and
//! `store_unavailable`, a refusal by rules' `closed` failure policies, which gRPC carries as
//! `x-flowgate-reason`).

use std::fmt::Display;
use std::time::Duration;

use flowgate::Verdict;
use flowgate::decision::Status;
use serde::{Serialize, Serializer};
use utoipa::ToSchema;

use super::ErrorCode;

/// Envoy's code of a request or of one descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(super) enum EnvoyCode {
    /// Admitted.
    Ok,
    /// Over a limit (or refused by a circuit breaker).
    OverLimit,
}

/// A value written as its `Display` text, with no `String` in between.
#[derive(Debug)]
pub(super) struct Shown<T>(pub(super) T);

impl<T: Display> Serialize for Shown<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// A duration in milliseconds, to the microsecond.
fn ms(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// The answer to a check or an acquire.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct VerdictAnswer<'a> {
    /// Whether the request is admitted (200); refused, 429.
    allowed: bool,
    /// Envoy's code of the request, as gRPC's `overall_code`.
    code: EnvoyCode,
    /// Why it was refused: `over_limit`, `circuit_open`, or `store_unavailable` (refused by
    /// rules' `closed` failure policies: the store failed, no limit was asked); absent when
    /// admitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<ErrorCode>,
    /// In `delay` mode, how long to wait before proceeding (the slot reserved).
    wait_ms: f64,
    /// When refused, the earliest the same request could pass; `null` when unknown.
    retry_after_ms: Option<f64>,
    /// The concurrency leases taken, to give back with `POST /v1/release`.
    leases: Vec<LeaseRef>,
    /// One status per descriptor, in order.
    statuses: Vec<StatusAnswer<'a>>,
    /// Half-open breakers' probe leases, to send back with the call's report; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    probes: Vec<ProbeRef<'a>>,
    /// The breaker that refused the request; absent unless one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    breaker: Option<BreakerRef<'a>>,
}

/// A concurrency lease of one descriptor.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct LeaseRef {
    /// The descriptor's index in the request.
    descriptor: usize,
    /// The lease.
    lease: u64,
}

/// A half-open breaker's probe lease.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ProbeRef<'a> {
    /// The descriptor's index in the request.
    descriptor: usize,
    /// The breaker's name.
    breaker: &'a str,
    /// The lease, for `POST /v1/report`'s `probe`.
    probe: u64,
}

/// The breaker instance that refused a request.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct BreakerRef<'a> {
    /// Its domain.
    domain: &'a str,
    /// Its name.
    name: &'a str,
    /// The instance's key.
    key: &'a str,
}

/// What one descriptor got.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct StatusAnswer<'a> {
    /// Envoy's code of the descriptor (`OVER_LIMIT`: rejected by a rule not in shadow mode).
    code: EnvoyCode,
    /// The rule that applied; `null` when none matched.
    rule: Option<&'a str>,
    /// The rule is in shadow mode (it never rejects).
    shadow: bool,
    /// The rule is in quota mode.
    quota_mode: bool,
    /// The descriptor was refused (by its rule or a breaker), shadow rules' included.
    over_limit: bool,
    /// The limit's units; `null` when no limit applied.
    limit: Option<u64>,
    /// The limit in force (`"20/s"`); `null` when none applied.
    #[schema(value_type = Option<String>)]
    quota: Option<Shown<flowgate::Quota>>,
    /// Units left; `null` when no limit applied.
    remaining: Option<u64>,
    /// Until the count resets; `null` when no limit applied.
    reset_after_ms: Option<f64>,
    /// When refused, the earliest retry; `null` when unknown or admitted.
    retry_after_ms: Option<f64>,
    /// In `delay` mode, the wait before this descriptor's slot.
    wait_ms: f64,
    /// A concurrency lease taken.
    lease: Option<u64>,
    /// The store's failure the rule's failure policy decided; `null` when none.
    #[schema(value_type = Option<String>)]
    error: Option<&'static str>,
    /// The circuit breaker the descriptor matched; `null` when none.
    breaker: Option<&'a str>,
    /// That breaker refused the request.
    circuit_open: bool,
}

impl<'a> StatusAnswer<'a> {
    fn of(s: &'a Status) -> Self {
        let d = &s.decision;
        let limited = s.is_limited();
        let rule = s.rule.as_ref();
        StatusAnswer {
            code: if s.over_limit() {
                EnvoyCode::OverLimit
            } else {
                EnvoyCode::Ok
            },
            rule: rule.map(|r| r.name.as_str()),
            shadow: rule.is_some_and(|r| r.shadow),
            quota_mode: s.quota,
            over_limit: !d.allowed,
            limit: limited.then_some(d.limit),
            quota: s.limit.as_ref().map(|l| Shown(l.quota())),
            remaining: limited.then_some(d.remaining),
            reset_after_ms: limited.then(|| ms(d.reset_after)),
            retry_after_ms: d.retry_after.map(ms),
            wait_ms: ms(d.wait),
            lease: d.lease,
            // Its kind only: the store's own message is not for callers.
            error: s.error.as_ref().map(flowgate::store::StoreError::summary),
            breaker: s.breaker.as_ref().map(|b| b.name.as_str()),
            circuit_open: s.breaker.as_ref().is_some_and(|b| b.open),
        }
    }
}

impl<'a> VerdictAnswer<'a> {
    /// The answer to `v`.
    pub(super) fn of(v: &'a Verdict) -> Self {
        let open = v.circuit_open();
        let (code, reason) = match (v.allowed, open) {
            (true, _) => (EnvoyCode::Ok, None),
            (false, Some(_)) => (EnvoyCode::OverLimit, Some(ErrorCode::CircuitOpen)),
            (false, None) if v.refused_by_failure_policy() => {
                (EnvoyCode::OverLimit, Some(ErrorCode::StoreUnavailable))
            }
            (false, None) => (EnvoyCode::OverLimit, Some(ErrorCode::OverLimit)),
        };
        let indexed = || v.statuses.iter().enumerate();
        VerdictAnswer {
            allowed: v.allowed,
            code,
            reason,
            wait_ms: ms(v.wait),
            retry_after_ms: v.retry_after().map(ms),
            leases: indexed()
                .filter_map(|(i, s)| {
                    let lease = s.decision.lease?;
                    Some(LeaseRef {
                        descriptor: i,
                        lease,
                    })
                })
                .collect(),
            statuses: v.statuses.iter().map(StatusAnswer::of).collect(),
            probes: indexed()
                .filter_map(|(i, s)| {
                    let b = s.breaker.as_ref()?;
                    Some(ProbeRef {
                        descriptor: i,
                        breaker: &b.name,
                        probe: b.probe?,
                    })
                })
                .collect(),
            breaker: open.map(|b| BreakerRef {
                domain: &b.domain,
                name: &b.name,
                key: &b.key,
            }),
        }
    }
}
