//! `POST /v1/reserve` and `POST /v1/commit` ([`crate::reserve`]): reserve an estimated cost at
//! request time, commit the actual cost when the work ends.
//!
//! ```json
//! {"domain": "llm", "descriptors": ["api_key=k1"], "estimate": 1000, "ttl": "30s"}
//! {"id": "5f0c…", "cost": 734}
//! ```

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use flowgate::records::ReservationId;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::api::{request, verdict_head};
use super::body::DescriptorField;
use super::doc::{BodyErrors, DecideErrors, Unavailable};
use super::extract::{Caller, Decide, JsonBody, RequestBody};
use super::verdict::VerdictAnswer;
use super::{ApiError, ErrorCode};
use crate::reserve::{Applied, Committed, ReserveError};
use crate::rule_charge::{ChargeKind, ChargedUnder, RuleCharge};
use crate::state::{Api, AppState};

type Shared = State<Arc<AppState>>;

/// A reservation: the request, its estimated cost, how long it may stay uncommitted.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReserveBody {
    /// The domain of the rules.
    domain: String,
    /// The request's descriptors (without a `hits_addend` of their own: each takes `estimate`).
    descriptors: Vec<DescriptorField>,
    /// The units to reserve (an LLM call's `max_tokens`): at least 1, at most the server's
    /// share (`--reserve-max-share`) of each matched rule's limit.
    #[schema(value_type = u64, minimum = 1, maximum = 4_294_967_295_u64)]
    estimate: serde_json::Number,
    /// How long the reservation holds its units uncommitted (`"30s"`, `"500ms"`); at most, and
    /// by default, `--reserve-max-ttl`.
    #[serde(default)]
    ttl: Option<String>,
}

impl RequestBody for ReserveBody {}

/// The answer to a reservation: a check's, with the reservation.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ReserveAnswer<'a> {
    /// The decision, as a check's answer.
    #[serde(flatten)]
    verdict: VerdictAnswer<'a>,
    /// The reservation's id, for `POST /v1/commit`; `null` when refused, or when the store
    /// failed and a failure policy admitted the request (nothing reserved: commit the cost with
    /// `domain` and `descriptors`).
    id: Option<String>,
    /// When it stops counting if not committed: Unix time in milliseconds (the store's clock).
    expires_at: Option<u64>,
    /// The units reserved under each matched rule.
    estimate: u64,
}

fn ttl(text: Option<&str>) -> Result<Option<Duration>, ApiError> {
    text.map(|t| {
        flowgate::rule::parse_duration(t)
            .map_err(|e| ApiError::bad_request(format!("ttl: {e} (for example \"30s\")")))
    })
    .transpose()
}

/// A body's field of units, checked: a whole number from 0 to [`crate::limits::MAX_COST`].
fn units(field: &str, n: &serde_json::Number) -> Result<u64, ApiError> {
    crate::charges::whole_units(n)
        .map_err(|e| ApiError::bad_request(format!("field `{field}`: {e}")))
}

fn reserve_error(route: &str, e: ReserveError) -> ApiError {
    match e {
        ReserveError::Bad(detail) => ApiError::bad_request(detail),
        ReserveError::Unknown(_) => ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownReservation,
            e.to_string(),
        ),
        ReserveError::Committed(_) => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::AlreadyCommitted,
            e.to_string(),
        ),
        ReserveError::Store(s) => ApiError::store_error(route, &s),
    }
}

/// Reserve an estimated cost: 200 with the reservation's `id` when admitted (the units count
/// against every node's decisions until the commit or the TTL), 429 when refused, as a check.
#[utoipa::path(
    post,
    path = "/v1/reserve",
    tag = "decisions",
    security(("decide" = [])), request_body = ReserveBody,
    responses(DecideErrors,
        (status = 200, description = "Reserved (or admitted by a failure policy: `id` null).", body = ReserveAnswer, headers(
            ("RateLimit-Limit" = Option<u64>, description = "The binding limit's units."),
            ("RateLimit-Remaining" = Option<u64>, description = "Its units left."),
            ("RateLimit-Reset" = Option<u64>, description = "Seconds until it resets, rounded up."),
        )),
        (status = 429, description = "Refused: nothing reserved.", body = ReserveAnswer, headers(
            ("Retry-After" = u64, description = "Seconds, rounded up, at least 1."),
        )),
        BodyErrors,
        Unavailable,
    )
)]
pub(super) async fn reserve(
    State(state): Shared,
    _: Caller<Decide>,
    body: Result<JsonBody<ReserveBody>, ApiError>,
) -> Result<Response, ApiError> {
    let parsed = body.and_then(|JsonBody(b)| {
        let estimate = units("estimate", &b.estimate)?;
        let ttl = ttl(b.ttl.as_deref())?;
        Ok((request(b.domain, b.descriptors, None, Some(estimate))?, ttl))
    });
    let (req, ttl) = parsed.inspect_err(|_| state.invalid(Api::Http))?;
    let admitted = state
        .reserve
        .reserve(&state, &req, ttl)
        .await
        .map_err(|e| reserve_error("POST /v1/reserve", e))?;
    let v = &admitted.verdict;
    let (status, headers) = verdict_head(v, state.openai_headers);
    let r = admitted.reservation.as_ref();
    let answer = ReserveAnswer {
        verdict: VerdictAnswer::of(v),
        id: r.map(|r| r.id.to_string()),
        expires_at: r.map(|r| r.expires / 1000),
        estimate: req.cost,
    };
    Ok((status, headers, Json(answer)).into_response())
}

/// A commit: the reservation and its actual cost.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CommitBody {
    /// The reservation's id (`/v1/reserve`'s `id`).
    #[serde(default)]
    id: Option<String>,
    /// The actual cost: a whole number of units, 0 when the work failed (the estimate is given
    /// back all the same).
    #[schema(value_type = u64, minimum = 0, maximum = 4_294_967_295_u64)]
    cost: serde_json::Number,
    /// With `descriptors`: where a commit of an unknown (or no) id charges its cost instead of
    /// being refused (a reservation the store could not record, or forgotten).
    #[serde(default)]
    domain: Option<String>,
    /// With `domain`: see it.
    #[serde(default)]
    descriptors: Option<Vec<DescriptorField>>,
}

impl RequestBody for CommitBody {}

/// The answer to a commit.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CommitAnswer {
    /// The reservation committed; `null` for a plain charge to `domain` and `descriptors`.
    #[schema(required = true)]
    id: Option<String>,
    /// Whether the reservation had expired (its cost is counted all the same).
    expired: bool,
    /// What was applied, per rule (a rule removed since the reservation is left out).
    rules: Vec<RuleCharge>,
}

/// What a commit did under one rule: the estimate given back and the cost charged.
fn rule_committed(a: Applied) -> RuleCharge {
    let at = ChargedUnder {
        domain: a.domain,
        rule: a.rule,
        key: a.key,
        descriptor: None,
    };
    RuleCharge::new(at, ChargeKind::Charge, a.released, &a.charged)
}

/// Commit a reservation's actual cost: applied whatever the limit (up to each rule's
/// `max_debt`), the estimate given back; once per reservation.
#[utoipa::path(
    post,
    path = "/v1/commit",
    tag = "decisions",
    security(("decide" = [])), request_body = CommitBody,
    responses(DecideErrors,
        (status = 200, description = "Committed (or charged).", body = CommitAnswer),
        BodyErrors,
        (status = 404, description = "No such reservation (`unknown_reservation`): nothing changed.", body = super::error::ErrorBody),
        (status = 409, description = "Committed already (`already_committed`): nothing changed.", body = super::error::ErrorBody),
        Unavailable,
    )
)]
pub(super) async fn commit(
    State(state): Shared,
    _: Caller<Decide>,
    JsonBody(b): JsonBody<CommitBody>,
) -> Result<Json<CommitAnswer>, ApiError> {
    let cost = units("cost", &b.cost)?;
    let id =
        b.id.as_deref()
            .map(|t| {
                t.parse::<ReservationId>()
                    .map_err(|e| ApiError::bad_request(format!("id: {e}")))
            })
            .transpose()?;
    let charge_to = match (b.domain, b.descriptors) {
        (Some(d), Some(ds)) => Some(request(d, ds, None, Some(cost))?),
        (None, None) => None,
        (Some(_), None) => {
            return Err(ApiError::bad_request(
                "descriptors: missing beside `domain`",
            ));
        }
        (None, Some(_)) => {
            return Err(ApiError::bad_request(
                "domain: missing beside `descriptors`",
            ));
        }
    };
    let Committed {
        expired,
        applied,
        reserved,
    } = state
        .reserve
        .commit(&state, id.as_ref(), cost, charge_to.as_ref())
        .await
        .map_err(|e| reserve_error("POST /v1/commit", e))?;
    Ok(Json(CommitAnswer {
        id: id.filter(|_| reserved).map(|i| i.to_string()),
        expired,
        rules: applied.into_iter().map(rule_committed).collect(),
    }))
}
