//! Charges and refunds in Envoy's `ShouldRateLimit`, as Envoy AI Gateway sends them: a check
//! of cost 0 at request time, the answer's tokens charged when its stream ends
//! (`apply_on_stream_done` with `hits_addend`), and refunds (`is_negative_hits`).
//!
//! Each descriptor takes one part:
//! - **charge**: it matches a rule with `charge = "report"` (or a rule of a domain of
//!   `--charge-domains` whose algorithm takes charges) and its cost is above 0. Its cost is the
//!   descriptor's `hits_addend` when set, else the request's *as sent* (under such a rule a
//!   request's `hits_addend` of 0 is a check of cost 0, not Envoy's "0 means 1"). The units are
//!   counted even past the limit, up to the rule's `max_debt`; the status says whether the key
//!   is now over (`OVER_LIMIT` while in debt).
//! - **refund**: it carries `is_negative_hits`: its cost is given back to the rule it matches,
//!   whatever the rule's `charge`, floored at empty. A descriptor matching no rule is `OK`, as
//!   any; one matching a rule that takes no charges (`concurrency`) is `INVALID_ARGUMENT`
//!   naming the rule.
//! - **check**: any other, decided as ever (all or nothing among the checked descriptors; a
//!   report rule's cost-0 check is refused only while its key is in debt).
//!
//! Charges and refunds go to the store in one call of their own, never behind a decision; when
//! the store cannot take them the call is `UNAVAILABLE` and nothing is charged (counted in
//! `flowgate_charges_failed_total`). The overall code is `OVER_LIMIT` when the checked part is
//! refused or a charged key is over its limit.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use flowgate::algorithm::chargeable;
use flowgate::rule::ChargeMode;
use flowgate::{ChargeRefusal, ChargeTarget, Request, Rule};
use tonic::Status as GrpcStatus;

use crate::charges::{self, Applied};
use crate::grpc::{EnvoyRequest, pb_duration, to_response, unit_of};
use crate::state::{Api, AppState};

/// A descriptor's part of a request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Check,
    Charge,
    Refund,
}

/// Whether `req` may hold a charge or a refund: it has a refund, or some rule in force (or its
/// domain, by `--charge-domains`) takes costs as charges. Otherwise it is decided as ever, at
/// the cost of this look.
pub(crate) fn may_charge(state: &AppState, req: &EnvoyRequest) -> bool {
    req.negative != 0
        || state.limiter.any_report_rule()
        || state.charge_domains.contains(&req.request.domain)
}

/// Whether `rule` takes a request's cost as a charge.
fn takes_report(state: &AppState, rule: &Rule) -> bool {
    rule.charge == ChargeMode::Report
        || (state.charge_domains.contains(&rule.domain)
            && rule.limit.as_ref().is_some_and(|l| chargeable(l).is_ok()))
}

/// Each descriptor's part; a report rule's descriptors get their cost as sent.
fn parts(state: &AppState, req: &mut EnvoyRequest) -> Vec<Part> {
    let rules = state.limiter.rules();
    let request = &mut req.request;
    let mut out = Vec::with_capacity(request.descriptors.len());
    for (i, d) in request.descriptors.iter_mut().enumerate() {
        if req.negative >> i & 1 == 1 {
            out.push(Part::Refund);
            continue;
        }
        let report = rules
            .find(&request.domain, d)
            .is_some_and(|r| takes_report(state, r));
        if !report {
            out.push(Part::Check);
            continue;
        }
        let cost = *d.cost.get_or_insert(req.hits_addend);
        out.push(if cost > 0 { Part::Charge } else { Part::Check });
    }
    out
}

/// The descriptors of `request` whose part is `part`, as a request of their own, and their
/// indexes in `request`.
fn sub(request: &Request, parts: &[Part], part: Part) -> (Request, Vec<usize>) {
    let idx: Vec<usize> = (0..parts.len()).filter(|&i| parts[i] == part).collect();
    let descriptors = idx
        .iter()
        .map(|&i| request.descriptors[i].clone())
        .collect();
    let sub = Request {
        domain: request.domain.clone(),
        descriptors,
        cost: request.cost,
    };
    (sub, idx)
}

/// The targets of the charges or refunds of `sub`, their descriptors mapped back to the
/// request's (`idx`). A refund of descriptors matching no rule takes nothing.
fn targets(
    state: &AppState,
    sub: &Request,
    idx: &[usize],
    part: Part,
) -> Result<Vec<ChargeTarget>, GrpcStatus> {
    if sub.descriptors.is_empty() {
        return Ok(Vec::new());
    }
    let refund = part == Part::Refund;
    match charges::plan(state, sub, refund, |_| true) {
        Ok(mut ts) => {
            for t in &mut ts {
                t.descriptor = idx[t.descriptor];
            }
            Ok(ts)
        }
        Err(ChargeRefusal::NoRule { .. }) => Ok(Vec::new()),
        Err(e) => Err(GrpcStatus::invalid_argument(format!(
            "is_negative_hits (a refund): {e}"
        ))),
    }
}

/// A charged descriptor's status: over its limit while in debt.
fn charged_status(c: &Applied) -> DescriptorStatus {
    let d = &c.charged.decision;
    let (unit, per_unit) = unit_of(&c.limit);
    let over = !d.allowed && !c.rule.shadow;
    DescriptorStatus {
        code: if over {
            Code::OverLimit as i32
        } else {
            Code::Ok as i32
        },
        current_limit: Some(RateLimit {
            name: c.rule.name.clone(),
            requests_per_unit: per_unit,
            unit: unit as i32,
        }),
        limit_remaining: u32::try_from(d.remaining).unwrap_or(u32::MAX),
        duration_until_reset: Some(pb_duration(crate::grpc::until_reset(d, over))),
        quota: None,
    }
}

/// Answers a `ShouldRateLimit` that may hold charges and refunds (see the module
/// documentation).
///
/// # Errors
/// `INVALID_ARGUMENT` for a refund to a rule that takes none; `UNAVAILABLE` when the store
/// cannot take the charges (nothing charged, nothing decided).
pub(crate) async fn answer(
    state: &AppState,
    mut req: EnvoyRequest,
) -> Result<RateLimitResponse, GrpcStatus> {
    let parts = parts(state, &mut req);
    let request = &req.request;
    if parts.iter().all(|p| *p == Part::Check) {
        let verdict = state.decide(Api::Grpc, request).await;
        return Ok(to_response(&verdict, state.response_headers));
    }
    let (charge, charge_idx) = sub(request, &parts, Part::Charge);
    let (refund, refund_idx) = sub(request, &parts, Part::Refund);
    let charge_targets = targets(state, &charge, &charge_idx, Part::Charge)?;
    let refund_targets = targets(state, &refund, &refund_idx, Part::Refund).inspect_err(|_| {
        state.invalid(Api::Grpc);
    })?;
    let applied = charges::apply(state, vec![charge_targets, refund_targets])
        .await
        .map_err(|e| {
            crate::store_errors::log("gRPC ShouldRateLimit (charges)", &e);
            GrpcStatus::unavailable(format!(
                "the store could not take the charges ({}): nothing was charged",
                charges::error_kind(&e)
            ))
        })?;
    let (check, check_idx) = sub(request, &parts, Part::Check);
    let mut check_binding = None;
    let mut response = if check.descriptors.is_empty() {
        RateLimitResponse {
            overall_code: Code::Ok as i32,
            ..Default::default()
        }
    } else {
        let verdict = state.decide(Api::Grpc, &check).await;
        check_binding = verdict.binding().filter(|s| s.is_limited()).map(|s| Head {
            over: s.over_limit(),
            decision: s.decision,
        });
        to_response(&verdict, state.response_headers)
    };
    let mut statuses: Vec<DescriptorStatus> = parts
        .iter()
        .map(|_| DescriptorStatus {
            code: Code::Ok as i32,
            ..Default::default()
        })
        .collect();
    for (s, &i) in response.statuses.drain(..).zip(&check_idx) {
        statuses[i] = s;
    }
    for c in applied.iter().flatten() {
        let s = charged_status(c);
        if s.code == Code::OverLimit as i32 {
            response.overall_code = Code::OverLimit as i32;
        }
        statuses[c.descriptor] = s;
    }
    if state.response_headers {
        binding_headers(
            &mut response,
            check_binding.as_ref(),
            applied.iter().flatten(),
        );
    }
    response.statuses = statuses;
    Ok(response)
}

/// What the rate-limit headers are made of: a decision, over its limit or not.
#[derive(Clone)]
struct Head {
    over: bool,
    decision: flowgate::decision::Decision,
}

/// With `--response-headers`: `RateLimit-*` of the binding decision among all of the request's,
/// charged ones included (one over its limit, else the one with the fewest units left, as for
/// a check, from `check`, the checked part's binding one, and `charged`), and `retry-after` when
/// it is over; in place of the checked part's.
fn binding_headers<'a>(
    response: &mut RateLimitResponse,
    check: Option<&Head>,
    charged: impl Iterator<Item = &'a Applied>,
) {
    let heads: Vec<Head> = check
        .cloned()
        .into_iter()
        .chain(charged.map(|c| Head {
            over: !c.charged.decision.allowed && !c.rule.shadow,
            decision: c.charged.decision,
        }))
        .collect();
    let binding = heads
        .iter()
        .find(|h| h.over)
        .or_else(|| heads.iter().min_by_key(|h| h.decision.remaining));
    let Some(b) = binding else {
        return;
    };
    let secs = |d: std::time::Duration| d.as_micros().div_ceil(1_000_000).to_string();
    let d = &b.decision;
    let mut headers = vec![
        ("ratelimit-limit", d.limit.to_string()),
        ("ratelimit-remaining", d.remaining.to_string()),
        ("ratelimit-reset", secs(d.reset_after)),
    ];
    if let Some(retry) = d.retry_after.filter(|_| b.over) {
        headers.push(("retry-after", secs(retry)));
    }
    let theirs = |k: &str| k.starts_with("ratelimit-") || k == "retry-after";
    response.response_headers_to_add.retain(|h| !theirs(&h.key));
    response
        .response_headers_to_add
        .extend(headers.into_iter().map(|(key, value)| HeaderValue {
            key: key.to_owned(),
            value,
            ..Default::default()
        }));
}
