//! `flowgate.v1.Decisions`' messages to and from the limiter's: a [`CheckRequest`] as the
//! [`Request`] `POST /v1/check` makes of its body (the same bounds, the same cost), and a
//! [`Verdict`] as the fields of `POST /v1/check`'s answer, one for one (the HTTP answer is
//! `http/verdict.rs`; `tests/grpc_decisions.rs` holds the two to the same fields).

use std::time::Duration;

use flowgate::decision::Status;
use flowgate::{Descriptor, Entry, Request, Verdict};

use super::generated::check_answer::Result as Answered;
use super::generated::{
    BreakerRef, CheckAnswer, CheckError, CheckRequest, CheckVerdict, Code, DescriptorStatus, Lease,
    Probe, Reason,
};
use crate::codes::ErrorCode;
use crate::limits;

/// A duration in milliseconds, to the microsecond (as the HTTP answer writes it).
fn ms(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// An index in a request (at most 64 descriptors) as the message's `uint32`.
fn index(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// The request of `req` (its `id` aside), validated as `POST /v1/check`'s body.
///
/// # Errors
/// The answer's error: `bad_request`, naming the field at fault.
pub(super) fn request(req: CheckRequest) -> Result<Request, CheckError> {
    let request = Request {
        domain: req.domain,
        descriptors: req
            .descriptors
            .into_iter()
            .map(|d| Descriptor {
                entries: d
                    .entries
                    .into_iter()
                    .map(|e| Entry {
                        key: e.key,
                        value: e.value,
                    })
                    .collect(),
                cost: d.hits_addend,
            })
            .collect(),
        cost: limits::check_cost(req.hits_addend, req.cost),
    };
    limits::validate(&request).map_err(|e| CheckError {
        error: ErrorCode::BadRequest.as_str().to_owned(),
        field: e.field(),
        detail: e.to_string(),
    })?;
    Ok(request)
}

fn code(over: bool) -> i32 {
    if over {
        Code::OverLimit as i32
    } else {
        Code::Ok as i32
    }
}

fn status(s: &Status) -> DescriptorStatus {
    let d = &s.decision;
    let limited = s.is_limited();
    let rule = s.rule.as_ref();
    DescriptorStatus {
        code: code(s.over_limit()),
        rule: rule.map(|r| r.name.clone()),
        shadow: rule.is_some_and(|r| r.shadow),
        quota_mode: s.quota,
        over_limit: !d.allowed,
        limit: limited.then_some(d.limit),
        quota: s.limit.as_ref().map(|l| l.quota().to_string()),
        remaining: limited.then_some(d.remaining),
        reset_after_ms: limited.then(|| ms(d.reset_after)),
        retry_after_ms: d.retry_after.map(ms),
        wait_ms: ms(d.wait),
        lease: d.lease,
        // Its kind only: the store's own message is not for callers.
        error: s
            .error
            .as_ref()
            .map(|e| flowgate::store::StoreError::summary(e).to_owned()),
        breaker: s.breaker.as_ref().map(|b| b.name.clone()),
        circuit_open: s.breaker.as_ref().is_some_and(|b| b.open),
    }
}

/// The verdict's message: the fields of the HTTP answer.
pub(super) fn verdict(v: &Verdict) -> CheckVerdict {
    let open = v.circuit_open();
    let reason = match (v.allowed, open) {
        (true, _) => Reason::Unspecified,
        (false, Some(_)) => Reason::CircuitOpen,
        (false, None) if v.refused_by_failure_policy() => Reason::StoreUnavailable,
        (false, None) => Reason::OverLimit,
    };
    let indexed = || v.statuses.iter().enumerate();
    CheckVerdict {
        allowed: v.allowed,
        code: code(!v.allowed),
        reason: reason as i32,
        wait_ms: ms(v.wait),
        retry_after_ms: v.retry_after().map(ms),
        leases: indexed()
            .filter_map(|(i, s)| {
                Some(Lease {
                    descriptor_index: index(i),
                    lease: s.decision.lease?,
                })
            })
            .collect(),
        statuses: v.statuses.iter().map(status).collect(),
        probes: indexed()
            .filter_map(|(i, s)| {
                let b = s.breaker.as_ref()?;
                Some(Probe {
                    descriptor_index: index(i),
                    breaker: b.name.clone(),
                    probe: b.probe?,
                })
            })
            .collect(),
        breaker: open.map(|b| BreakerRef {
            domain: b.domain.clone(),
            name: b.name.clone(),
            key: b.key.clone(),
        }),
    }
}

/// The answer of request `id`.
pub(super) fn answer(id: u64, result: Result<CheckVerdict, CheckError>) -> CheckAnswer {
    CheckAnswer {
        id,
        result: Some(match result {
            Ok(v) => Answered::Verdict(v),
            Err(e) => Answered::Error(e),
        }),
    }
}
