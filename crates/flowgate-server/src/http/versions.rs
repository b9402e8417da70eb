//! The versions of the rules shared through Redis (admin): a new version from files, history,
//! one version, rollback. A node that follows its files keeps no versions (409 `follows_files`).

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ApiError;
use super::doc::{BadParameters, BodyErrors, CredentialErrors, Unavailable};
use super::error::ErrorBody;
use super::extract::{Admin, Caller, JsonBody, Params, RequestBody};
use super::rules::{MAX_RULES_BYTES, change_error, follower, log_change, refused, rfc3339};
use crate::rules::Changed;
use crate::rules::doc::{DocFile, RulesDoc};
use crate::rules::shared::Version;
use crate::rules::{self, ChangeError};
use crate::state::AppState;

type Shared = State<Arc<AppState>>;

/// A stored version of the shared rules.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct VersionInfo<'a> {
    /// Its number (1, 2, ...).
    version: u64,
    /// Who stored it: the admin token's name, or `seed` for a cluster's first version.
    author: &'a str,
    /// When (RFC 3339, by Redis's clock).
    at: String,
    /// `push`, `rollback to N` or `seed from <files>`.
    action: &'a str,
    /// What changed from the version before (`+3 -1 lines`).
    summary: &'a str,
}

impl<'a> VersionInfo<'a> {
    fn of(v: &'a Version) -> Self {
        VersionInfo {
            version: v.version,
            author: &v.author,
            at: rfc3339(v.at_ms),
            action: &v.action,
            summary: &v.summary,
        }
    }
}

/// A version with its files and its diff from the version before.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct VersionDetail<'a> {
    /// The version.
    #[serde(flatten)]
    version: VersionInfo<'a>,
    /// The unified diff from the version before.
    diff: &'a str,
    /// Its files.
    files: &'a [DocFile],
}

/// A change of the shared rules: the version now in force.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ChangedAnswer<'a> {
    /// The version.
    #[serde(flatten)]
    version: VersionInfo<'a>,
    /// The rules were those in force already: nothing was stored.
    unchanged: bool,
}

/// A change's answer: 201 and the new version, or 200 and the version in force when nothing
/// was stored (`unchanged: true`).
fn changed_response(changed: &Changed) -> Response {
    let status = if changed.stored {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = ChangedAnswer {
        version: VersionInfo::of(&changed.version),
        unchanged: !changed.stored,
    };
    (status, Json(body)).into_response()
}

/// A `POST /v1/rules/versions` body: the files of the new version.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PushBody {
    /// The files, each named with its format's extension (`pay.toml`, `envoy.yaml`).
    files: Vec<DocFile>,
    /// The version this change is based on: refused (409) if another came after it.
    #[serde(default)]
    base_version: Option<u64>,
}

impl RequestBody for PushBody {
    const MAX_BYTES: usize = MAX_RULES_BYTES;
}

/// The refusals of a change of the shared rules.
#[derive(utoipa::IntoResponses)]
#[allow(
    dead_code,
    reason = "a description for the document: the route answers an ApiError"
)]
pub(super) enum ChangeErrors {
    /// The node follows its files (`follows_files`), another version came after
    /// `base_version` (`version_conflict`), or nothing changed for another reason.
    #[response(status = 409)]
    Conflict(ErrorBody),
}

/// (Following Redis) Store files as a new version, in force on every node.
#[utoipa::path(post, path = "/v1/rules/versions", tag = "rules", security(("admin" = [])), request_body = PushBody,
    responses(CredentialErrors,
        (status = 201, description = "Stored, in force.", body = ChangedAnswer),
        (status = 200, description = "The files are those in force: nothing stored.", body = ChangedAnswer),
        BodyErrors,
        ChangeErrors,
        Unavailable,
    ),
)]
pub(super) async fn push(
    State(state): Shared,
    Caller(author, _): Caller<Admin>,
    JsonBody(b): JsonBody<PushBody>,
) -> Result<Response, ApiError> {
    let f = follower(&state)?;
    let doc = RulesDoc { files: b.files };
    let changed = rules::change(&state.rules, f, doc, b.base_version, author.name(), "push")
        .await
        .map_err(|e| refused(&state, e))?;
    log_change(&changed, author.name(), "rules pushed");
    Ok(changed_response(&changed))
}

/// A `POST /v1/rules/rollback` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RollbackBody {
    /// The version whose rules to store again.
    version: u64,
}

impl RequestBody for RollbackBody {}

/// (Following Redis) Store version `version`'s rules as a new version.
#[utoipa::path(post, path = "/v1/rules/rollback", tag = "rules", security(("admin" = [])), request_body = RollbackBody,
    responses(CredentialErrors,
        (status = 201, description = "Stored, in force.", body = ChangedAnswer),
        (status = 200, description = "That version's rules are in force: nothing stored.", body = ChangedAnswer),
        (status = 404, description = "No such version (`version_not_found`).", body = ErrorBody),
        BodyErrors,
        ChangeErrors,
        Unavailable,
    ),
)]
pub(super) async fn rollback(
    State(state): Shared,
    Caller(author, _): Caller<Admin>,
    JsonBody(b): JsonBody<RollbackBody>,
) -> Result<Response, ApiError> {
    let f = follower(&state)?;
    let changed = rules::rollback(&state.rules, f, b.version, author.name())
        .await
        .map_err(|e| refused(&state, e))?;
    log_change(&changed, author.name(), "rules rolled back");
    Ok(changed_response(&changed))
}

/// `GET /v1/rules/history`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct HistoryQuery {
    /// How many versions, newest first (default 50).
    #[serde(default)]
    limit: Option<u64>,
}

/// The newest versions.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct History<'a> {
    /// The version in force.
    current: u64,
    /// The newest versions, newest first.
    versions: Vec<VersionInfo<'a>>,
}

/// (Following Redis) The newest versions, newest first.
#[utoipa::path(get, path = "/v1/rules/history", tag = "rules", security(("admin" = [])), params(HistoryQuery),
    responses(CredentialErrors,
        (status = 200, description = "The versions.", body = History),
        (status = 409, description = "The node follows its files (`follows_files`).", body = ErrorBody),
        BadParameters,
        Unavailable,
    ),
)]
pub(super) async fn history(
    State(state): Shared,
    _: Caller<Admin>,
    q: Result<Params<HistoryQuery>, ApiError>,
) -> Result<Response, ApiError> {
    let Params(q) = q?;
    let f = follower(&state)?;
    let (current, versions) = f
        .shared
        .history(q.limit.unwrap_or(50).max(1))
        .await
        .map_err(|e| change_error(ChangeError::Shared(e)))?;
    let versions = versions.iter().map(VersionInfo::of).collect();
    Ok(Json(History { current, versions }).into_response())
}

/// (Following Redis) One version: its files and its diff from the version before.
#[utoipa::path(get, path = "/v1/rules/versions/{n}", tag = "rules", security(("admin" = [])), params(("n" = u64, Path, description = "The version's number.")),
    responses(CredentialErrors,
        (status = 200, description = "The version.", body = VersionDetail),
        (status = 404, description = "No such version (`version_not_found`).", body = ErrorBody),
        (status = 409, description = "The node follows its files (`follows_files`).", body = ErrorBody),
        BadParameters,
        Unavailable,
    ),
)]
pub(super) async fn version(
    State(state): Shared,
    _: Caller<Admin>,
    n: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(n) = n.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let f = follower(&state)?;
    let n: u64 = n
        .parse()
        .map_err(|_| ApiError::bad_request(format!("`{n}` is not a version number")))?;
    match f.shared.get(n).await {
        Ok(Some(v)) => Ok(Json(VersionDetail {
            version: VersionInfo::of(&v),
            diff: &v.diff,
            files: &v.doc.files,
        })
        .into_response()),
        Ok(None) => Err(change_error(ChangeError::Missing(n))),
        Err(e) => Err(change_error(ChangeError::Shared(e))),
    }
}
