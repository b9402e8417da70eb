//! Envoy's rate-limit service, v3: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`.
//!
//! - `hits_addend` 0 means 1; a descriptor's own `hits_addend` (when set, including 0, which only
//!   looks) overrides it.
//! - All-or-nothing: a request over the limit of one descriptor consumes nothing from the others.
//! - Per-descriptor statuses: `code`, `current_limit` (`requests_per_unit`, `unit`),
//!   `limit_remaining`, `duration_until_reset`. A descriptor with no rule, and every descriptor of
//!   a domain with no rules, is `OK` with no `current_limit`; an `unlimited` rule is `OK` with
//!   `limit_remaining` = `u32::MAX`; a shadow rule over its limit is `OK` (and counted in the
//!   metrics); a quota-mode rule over its limit is `OVER_LIMIT` while the overall code is `OK`
//!   unless every quota-mode rule matched is over. A window that Envoy's units cannot express is reported as
//!   [`envoy_unit`] says (`5/30s` is `10 per MINUTE`); `limit_remaining` stays in
//!   the rule's own units.
//! - A request refused by an open circuit breaker is `OVER_LIMIT`, its descriptor's
//!   `duration_until_reset` the time to half-open, and its `response_headers_to_add` always carry
//!   `x-flowgate-reason: circuit_open` and `retry-after` (with `--response-headers` or not).
//! - An empty domain, an empty descriptor list, or a request over the bounds of
//!   [`crate::limits`] is `INVALID_ARGUMENT`. A descriptor's `limit` override is not supported:
//!   it is ignored (the configured rule applies).
//! - Charges and refunds ([`crate::grpc_charge`]): under a rule with `charge = "report"` (or of
//!   a domain of `--charge-domains`) a cost above 0 is a charge, 0 a check; a descriptor with
//!   `is_negative_hits` is a refund of its cost on the rule it matches, floored at empty.

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use flowgate::decision::Status;
use flowgate::{Descriptor, Entry, Limit, Request, Verdict};
use flowgate_config::ENVOY_UNITS;
use tonic::{Response, Status as GrpcStatus};

use crate::auth::{Presented, Refusal, Scope};
use crate::codes::ErrorCode;
use crate::limits::{self, MAX_BODY_BYTES};
use crate::state::{Api, AppState};

/// The gRPC service.
#[derive(Clone)]
pub(crate) struct RlsService {
    state: Arc<AppState>,
}

impl RlsService {
    /// The service over `state`.
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }

    /// The tonic server for this service, with the message size bound.
    pub(crate) fn into_server(self) -> RateLimitServiceServer<Self> {
        RateLimitServiceServer::new(self)
            .max_decoding_message_size(MAX_BODY_BYTES)
            .max_encoding_message_size(4 * MAX_BODY_BYTES)
    }
}

/// Envoy's request as Flowgate's: the request, the request's own `hits_addend` as sent (0 is
/// then a check under a rule that takes charges), and which descriptors are refunds
/// (`is_negative_hits`).
pub(crate) struct EnvoyRequest {
    pub(crate) request: Request,
    pub(crate) hits_addend: u64,
    /// Bit `i`: descriptor `i` is a refund (a request holds at most 64 descriptors; no
    /// allocation on the request path).
    pub(crate) negative: u64,
}

/// Converts Envoy's request to Flowgate's.
///
/// # Errors
/// A message for `INVALID_ARGUMENT`.
pub(crate) fn to_request(req: RateLimitRequest) -> Result<EnvoyRequest, String> {
    // More than 64 descriptors are refused below; the bits of the first 64 are all they need.
    let negative = req
        .descriptors
        .iter()
        .take(64)
        .enumerate()
        .fold(0u64, |bits, (i, d)| {
            bits | (u64::from(d.is_negative_hits) << i)
        });
    let descriptors = req.descriptors.into_iter().map(to_descriptor).collect();
    let request = Request {
        domain: req.domain,
        descriptors,
        cost: limits::request_cost(Some(u64::from(req.hits_addend))),
    };
    limits::validate(&request).map_err(|e| e.to_string())?;
    Ok(EnvoyRequest {
        request,
        hits_addend: u64::from(req.hits_addend),
        negative,
    })
}

fn to_descriptor(d: RateLimitDescriptor) -> Descriptor {
    Descriptor {
        entries: d
            .entries
            .into_iter()
            .map(|e| Entry {
                key: e.key,
                value: e.value,
            })
            .collect(),
        cost: d.hits_addend.map(|h| h.value),
    }
}

pub(crate) fn pb_duration(d: std::time::Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// Envoy's units, in the order of the configuration's table of their names and lengths
/// ([`ENVOY_UNITS`], which the YAML reader reads them by).
const UNITS: [Unit; 7] = [
    Unit::Second,
    Unit::Minute,
    Unit::Hour,
    Unit::Day,
    Unit::Week,
    Unit::Month,
    Unit::Year,
];

/// Envoy's units by their length in µs: a window of exactly one is reported as is, without
/// [`envoy_unit`]'s search on a logarithmic scale.
const EXACT_UNITS: [(u64, Unit); 7] = {
    let mut out = [(0, Unit::Unknown); 7];
    let mut i = 0;
    while i < UNITS.len() {
        out[i] = (ENVOY_UNITS[i].1 * 1_000_000, UNITS[i]);
        i += 1;
    }
    out
};

/// How a limit of `limit` per `window` is reported in Envoy's `RateLimit { requests_per_unit,
/// unit }`.
///
/// A window of exactly one unit is reported as is. Any other window (say `5/30s`, which Envoy's
/// units cannot express) is reported in the unit nearest to it on a logarithmic scale, with the
/// count scaled to that unit and rounded down, but at least 1 unless the limit is 0: `5/30s` is
/// `10 per MINUTE`, `20/500ms` is `40 per SECOND`, `1000/90s` is `666 per MINUTE`. The count
/// saturates at `u32::MAX`.
pub(crate) fn envoy_unit(limit: u64, window: std::time::Duration) -> (Unit, u32) {
    let w = window.as_secs_f64().max(1e-9);
    let mut best = EXACT_UNITS[0];
    let mut best_dist = f64::INFINITY;
    for u in EXACT_UNITS {
        let dist = (w.ln() - (u.0 as f64 / 1e6).ln()).abs();
        if dist < best_dist {
            best = u;
            best_dist = dist;
        }
    }
    let window_us = window.as_micros().max(1);
    let scaled = u128::from(limit) * u128::from(best.0) / window_us;
    let scaled = if limit > 0 { scaled.max(1) } else { 0 };
    (best.1, u32::try_from(scaled).unwrap_or(u32::MAX))
}

/// The Envoy unit and count of `limit`, as [`envoy_unit`] reports it: a window of exactly one
/// unit (`100/s`, `5/m`, the common case) is looked up in a table of integer lengths, any other
/// is scaled by [`envoy_unit`].
pub(crate) fn unit_of(limit: &Limit) -> (Unit, u32) {
    let window = limit.window();
    match EXACT_UNITS.iter().find(|(len, _)| *len == window) {
        Some(&(_, unit)) => (unit, u32::try_from(limit.limit()).unwrap_or(u32::MAX)),
        None => envoy_unit(limit.limit(), limit.quota().window()),
    }
}

fn to_status(s: &Status) -> DescriptorStatus {
    if s.breaker.as_ref().is_some_and(|b| b.open) {
        // Refused by an open circuit breaker: no limit was asked; the time to half-open.
        return DescriptorStatus {
            code: Code::OverLimit as i32,
            duration_until_reset: s.decision.retry_after.map(pb_duration),
            ..Default::default()
        };
    }
    let Some(rule) = &s.rule else {
        return DescriptorStatus {
            code: Code::Ok as i32,
            ..Default::default()
        };
    };
    let Some(limit) = &s.limit else {
        return DescriptorStatus {
            code: Code::Ok as i32,
            limit_remaining: u32::MAX,
            ..Default::default()
        };
    };
    let (unit, per_unit) = unit_of(limit);
    let d = &s.decision;
    DescriptorStatus {
        code: if s.over_limit() {
            Code::OverLimit as i32
        } else {
            Code::Ok as i32
        },
        current_limit: Some(RateLimit {
            name: rule.name.clone(),
            requests_per_unit: per_unit,
            unit: unit as i32,
        }),
        limit_remaining: u32::try_from(d.remaining).unwrap_or(u32::MAX),
        duration_until_reset: Some(pb_duration(until_reset(d, s.over_limit()))),
        quota: None,
    }
}

/// A status's `duration_until_reset`: over its limit, until it admits again (the retry time,
/// when known: a bucket admits long before it is full, a key in debt once the debt is paid);
/// otherwise until its count resets.
pub(crate) fn until_reset(d: &flowgate::decision::Decision, over: bool) -> std::time::Duration {
    match d.retry_after {
        Some(retry) if over => retry,
        _ => d.reset_after,
    }
}

/// Converts a verdict to Envoy's response; with `headers`, the verdict's rate-limit headers for
/// Envoy to add ([`Verdict::headers`]: `ratelimit-limit`, `ratelimit-remaining` and
/// `ratelimit-reset` of the binding descriptor, the one over its limit, else the one with the
/// fewest units left, as envoyproxy/ratelimit picks it; `retry-after` when rejected with a known
/// retry time), the same headers as the HTTP API's.
pub(crate) fn to_response(v: &Verdict, headers: bool) -> RateLimitResponse {
    let statuses: Vec<DescriptorStatus> = v.statuses.iter().map(to_status).collect();
    let reason = if v.circuit_open().is_some() {
        Some(ErrorCode::CircuitOpen)
    } else if v.refused_by_failure_policy() {
        Some(ErrorCode::StoreUnavailable)
    } else {
        None
    };
    let response_headers_to_add = if headers || reason.is_some() {
        v.headers()
            .into_iter()
            // A refusal by a circuit breaker, or by failure policies, always says why, and when
            // to retry.
            .filter(|(key, _)| headers || *key == "retry-after")
            .chain(reason.map(|r| ("x-flowgate-reason", r.as_str().to_owned())))
            .map(|(key, value)| HeaderValue {
                key: key.to_owned(),
                value,
                ..Default::default()
            })
            .collect()
    } else {
        Vec::new()
    };
    RateLimitResponse {
        overall_code: if v.allowed {
            Code::Ok as i32
        } else {
            Code::OverLimit as i32
        },
        statuses,
        response_headers_to_add,
        ..Default::default()
    }
}

#[tonic::async_trait]
impl RateLimitService for RlsService {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, GrpcStatus> {
        authorize(&self.state, Scope::Decide, &request, SHOULD_RATE_LIMIT)?;
        let req = match to_request(request.into_inner()) {
            Ok(r) => r,
            Err(msg) => {
                self.state.invalid(Api::Grpc);
                return Err(GrpcStatus::invalid_argument(msg));
            }
        };
        if crate::grpc_charge::may_charge(&self.state, &req) {
            return crate::grpc_charge::answer(&self.state, req)
                .await
                .map(Response::new);
        }
        let verdict = self.state.decide(Api::Grpc, &req.request).await;
        Ok(Response::new(to_response(
            &verdict,
            self.state.response_headers,
        )))
    }
}

/// The method's path, for the log of a refused credential.
const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// Lets `request` call a method of `scope` ([`crate::auth::Auth::authorize`]: a bearer token in
/// the `authorization` metadata, or the connection's client certificate), or refuses it:
/// `UNAUTHENTICATED` when missing or wrong, `PERMISSION_DENIED` when the credential lacks the
/// scope, `RESOURCE_EXHAUSTED` while the source is slowed for its wrong tokens.
pub(crate) fn authorize<T>(
    state: &AppState,
    scope: Scope,
    request: &tonic::Request<T>,
    method: &str,
) -> Result<(), GrpcStatus> {
    if state.auth.is_open(scope) {
        return Ok(());
    }
    let peer = request.extensions().get::<crate::peer::Peer>();
    let bearer = request
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let presented = Presented {
        bearer,
        cert_names: peer.map_or(&[], |p| p.cert_names()),
        source: peer.and_then(|p| p.addr()).map(|a| a.ip()),
        route: method,
    };
    authorize_presented(state, scope, &presented)
}

/// As [`authorize`], for what a call presented.
pub(crate) fn authorize_presented(
    state: &AppState,
    scope: Scope,
    presented: &Presented<'_>,
) -> Result<(), GrpcStatus> {
    match state.auth.authorize(scope, presented) {
        Ok(_) => Ok(()),
        Err(r @ (Refusal::Missing | Refusal::Wrong)) => Err(GrpcStatus::unauthenticated(format!(
            "{}: this method needs a credential with the `{scope}` scope: send `authorization: Bearer <token>`",
            r.reason()
        ))),
        Err(Refusal::Forbidden(name)) => Err(GrpcStatus::permission_denied(format!(
            "the credential `{name}` does not have the `{scope}` scope"
        ))),
        Err(Refusal::AdminOff) => Err(GrpcStatus::permission_denied("no admin credential")),
        Err(Refusal::Slowed(wait)) => Err(GrpcStatus::resource_exhausted(format!(
            "too many wrong credentials from this address: try again in {} ms",
            wait.as_millis()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use flowgate::{Algorithm, Quota};

    use super::*;

    #[test]
    fn the_units_are_the_configurations_by_name() {
        for (unit, (name, _)) in UNITS.iter().zip(ENVOY_UNITS) {
            assert_eq!(unit.as_str_name(), name.to_ascii_uppercase());
        }
    }

    #[test]
    fn units_for_envoy() {
        let s = Duration::from_secs;
        assert_eq!(envoy_unit(20, s(1)), (Unit::Second, 20));
        assert_eq!(envoy_unit(5, s(60)), (Unit::Minute, 5));
        assert_eq!(envoy_unit(5, s(30)), (Unit::Minute, 10));
        assert_eq!(
            envoy_unit(20, Duration::from_millis(500)),
            (Unit::Second, 40)
        );
        assert_eq!(envoy_unit(1000, s(90)), (Unit::Minute, 666));
        assert_eq!(envoy_unit(1, s(3600)), (Unit::Hour, 1));
        assert_eq!(envoy_unit(1, s(2_592_000)), (Unit::Month, 1));
        assert_eq!(envoy_unit(0, s(30)), (Unit::Minute, 0));
        // Never rounds a non-zero limit down to zero.
        assert_eq!(envoy_unit(1, s(172_800)), (Unit::Day, 1));
        assert_eq!(envoy_unit(1, s(10)), (Unit::Minute, 6));
    }

    #[test]
    fn the_unit_table_reports_as_envoy_unit_does() {
        let windows = [
            "1us", "999ms", "1s", "2s", "30s", "59s", "1m", "61s", "90s", "1h", "2h", "1d", "7d",
            "8d", "30d", "31d", "365d", "400d",
        ];
        for limit in [0, 1, 5, 100, 4_294_967_295] {
            for w in windows {
                let quota: Quota = format!("{limit}/{w}").parse().unwrap();
                for extra in [0, 1] {
                    let micros = quota.window_micros() + extra;
                    let quota = Quota::new(limit, Duration::from_micros(micros)).unwrap();
                    let l = Limit::new(Algorithm::FixedWindow, quota).unwrap();
                    assert_eq!(
                        unit_of(&l),
                        envoy_unit(limit, l.quota().window()),
                        "{limit}/{micros}us"
                    );
                }
            }
        }
        let l = Limit::new(Algorithm::FixedWindow, "100/month".parse().unwrap()).unwrap();
        assert_eq!(unit_of(&l), envoy_unit(100, l.quota().window()));
        assert_eq!(unit_of(&l).0, Unit::Month);
    }
}
