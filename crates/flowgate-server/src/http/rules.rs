//! The rules in force (`GET /v1/rules`) and replacing them (`PUT /v1/rules`); the helpers the
//! versions' routes share ([`super::versions`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::doc::{CredentialErrors, Unavailable};
use super::error::ErrorBody;
use super::extract::{Admin, Caller, Holds, JsonBody, Reader, RequestBody};
use super::{ApiError, ErrorCode};
use crate::rules::Changed;
use crate::rules::RulesOrigin;
use crate::rules::doc::RulesDoc;
use crate::rules::follow::Follower;
use crate::rules::shared::SharedError;
use crate::rules::{self, ChangeError};
use crate::state::AppState;
use flowgate_config::schema::{AlertDoc, BreakerDoc, FileDoc, FileView, QueueDoc, RuleView};
use flowgate_config::{Config, ConfigError, Format};

type Shared = State<Arc<AppState>>;

/// The largest rules body (the configuration's bound).
pub(super) const MAX_RULES_BYTES: usize = flowgate_config::MAX_FILE_BYTES as usize;

pub(super) fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}

/// The rules in force, as `GET /v1/rules` answers them: the document `PUT /v1/rules` takes back
/// unchanged (less the fields it ignores, [`RulesAnswer::READ_ONLY`]), each rule with the limit
/// in force now, and where the rules come from.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RulesAnswer {
    /// The rules in force (following Redis, the whole shared document: rules, queues, alerts,
    /// breakers).
    #[serde(flatten)]
    config: FileView,
    /// Following files: incremented on every change; following Redis: the shared version.
    version: u64,
    /// Where the rules in force came from: `file`, `api` or `redis`.
    source: &'static str,
    /// What the node follows: `files` or `redis`.
    follows: &'static str,
    /// The files read (empty when set through the API or Redis).
    files: Vec<String>,
    /// Following Redis: the version's author.
    #[serde(skip_serializing_if = "Option::is_none")]
    author: Option<String>,
    /// Following Redis: when the version was stored (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    changed_at: Option<String>,
    /// Following Redis: whether the node is on the version in force.
    #[serde(skip_serializing_if = "Option::is_none")]
    in_sync: Option<bool>,
    /// Following Redis: why the node may be behind.
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

impl RulesAnswer {
    /// The fields the answer adds to its document, which `PUT` ignores.
    pub(super) const READ_ONLY: [&str; 8] = [
        "version",
        "source",
        "follows",
        "files",
        "author",
        "changed_at",
        "in_sync",
        "problem",
    ];
}

/// The configuration in force as one document that `PUT /v1/rules` takes back unchanged
/// (following Redis, the whole shared document: rules, queues, alerts, breakers), with what the
/// node follows. Without the admin token its URLs show their scheme and host alone
/// ([`FileDoc::redact_urls`]): a webhook's path may be its secret. An admin sees them whole, so
/// that an admin's round trip loses nothing.
#[utoipa::path(get, path = "/v1/rules", tag = "rules", security(("reader" = [])), responses(CredentialErrors,
    (status = 200, description = "The rules in force.", body = RulesAnswer),
))]
pub(super) async fn get_rules(
    State(state): Shared,
    _: Caller<Reader>,
    Holds(admin, _): Holds<Admin>,
) -> Result<Json<RulesAnswer>, ApiError> {
    let info = state.rules.info();
    let rules = state.limiter.rules();
    // The limit in force now, by the store's clock (Redis's, on Redis).
    let now = flowgate::store::Store::now(state.limiter.store());
    let shared = matches!(info.origin, RulesOrigin::Redis { .. });
    let mut doc = FileDoc {
        // The breakers change with the rules, wherever they come from.
        breaker: state
            .limiter
            .breakers()
            .defs()
            .iter()
            .map(BreakerDoc::of)
            .collect::<Result<_, _>>()
            .map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::Internal,
                    e.to_string(),
                )
            })?,
        ..FileDoc::default()
    };
    if shared {
        // The shared document holds the queues and the alerts too.
        doc.queue = state
            .queue
            .specs()
            .specs()
            .iter()
            .map(|q| QueueDoc::of(q))
            .collect();
        doc.alert = state
            .alerts
            .alerts()
            .alerts()
            .iter()
            .map(AlertDoc::of)
            .collect();
    }
    if !admin {
        doc.redact_urls();
    }
    let mut answer = RulesAnswer {
        config: FileView {
            rule: rules.rules().iter().map(|r| RuleView::of(r, now)).collect(),
            queue: doc.queue,
            alert: doc.alert,
            breaker: doc.breaker,
        },
        version: info.version,
        source: info.source(),
        follows: info.follows(),
        files: info.files.iter().map(|f| f.display().to_string()).collect(),
        author: None,
        changed_at: None,
        in_sync: None,
        problem: None,
    };
    if let RulesOrigin::Redis {
        author,
        at_ms,
        problem,
        ..
    } = &info.origin
    {
        answer.author = Some(author.clone());
        answer.changed_at = Some(rfc3339(*at_ms));
        answer.in_sync = Some(problem.is_none());
        answer.problem = problem.clone();
    }
    Ok(Json(answer))
}

pub(super) fn follower(state: &AppState) -> Result<&Follower, ApiError> {
    state.follower.as_deref().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::FollowsFiles,
            "this node follows its configuration files, which keep no versions: change the files (and keep their history in version control), or run the cluster with --rules-source redis",
        )
    })
}

pub(super) fn change_error(e: ChangeError) -> ApiError {
    match e {
        ChangeError::Invalid(e) => ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRules,
            e.to_string(),
        ),
        ChangeError::Missing(_) => ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::VersionNotFound,
            e.to_string(),
        ),
        ChangeError::Shared(SharedError::Conflict { .. }) => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::VersionConflict,
            format!("{e}: nothing changed; read the rules again and retry"),
        ),
        ChangeError::Shared(e) => {
            let mut answer = ApiError::store("rules change", &e);
            answer.detail.push_str(" (nothing changed)");
            answer
        }
    }
}

/// The answer to `PUT /v1/rules`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PutAnswer<'a> {
    /// The version now in force.
    version: u64,
    /// The rules in force.
    rules: usize,
    /// Following Redis: what changed (`+3 -1 lines`).
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
    /// Following Redis: the rules were those in force already (nothing was stored).
    #[serde(skip_serializing_if = "Option::is_none")]
    unchanged: Option<bool>,
}

/// An error in the TOML stored for a JSON body names the JSON field, not a line of that TOML.
fn json_located(e: ConfigError) -> ConfigError {
    ConfigError::new(JSON_BODY, None, e.field, e.message)
}

/// How errors name a JSON body.
const JSON_BODY: &str = "the JSON body";

/// The JSON form of a `PUT /v1/rules` body: a [`FileDoc`], or what `GET /v1/rules` answered.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(super) struct RulesJson(Map<String, Value>);

impl RequestBody for RulesJson {
    const MAX_BYTES: usize = MAX_RULES_BYTES;
}

/// A `PUT /v1/rules` body, by its `Content-Type`: Flowgate TOML, envoyproxy/ratelimit YAML, or
/// the TOML schema as JSON (read as every JSON body is, [`JsonBody`]).
#[derive(Debug)]
pub(super) enum RulesBody {
    /// `application/toml`, `text/toml`.
    Toml(String),
    /// `application/yaml`, `application/x-yaml`, `text/yaml`, `text/x-yaml`.
    Yaml(String),
    /// `application/json`.
    Json(RulesJson),
}

impl<S: Send + Sync> FromRequest<S> for RulesBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let ctype = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let text = |bytes: axum::body::Bytes| {
            String::from_utf8(bytes.to_vec())
                .map_err(|_| ApiError::bad_request("the body is not UTF-8"))
        };
        match ctype.as_str() {
            "application/toml" | "text/toml" => Ok(RulesBody::Toml(text(
                super::extract::read(req, MAX_RULES_BYTES).await?,
            )?)),
            "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => Ok(
                RulesBody::Yaml(text(super::extract::read(req, MAX_RULES_BYTES).await?)?),
            ),
            "application/json" => {
                let JsonBody(json) = JsonBody::from_request(req, state).await?;
                Ok(RulesBody::Json(json))
            }
            _ => Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::UnsupportedMediaType,
                format!(
                    "Content-Type `{ctype}`: send application/toml (Flowgate), application/yaml (envoyproxy/ratelimit) or application/json"
                ),
            )),
        }
    }
}

/// A `PUT /v1/rules` body, read.
enum PutBody {
    /// A TOML or YAML file, read as a configuration file is.
    File(RulesDoc),
    /// The schema as JSON, less what `GET` adds to it.
    Json(Map<String, Value>),
}

impl From<RulesBody> for PutBody {
    fn from(body: RulesBody) -> Self {
        let RulesJson(mut m) = match body {
            RulesBody::Toml(text) => return PutBody::File(RulesDoc::single("rules.toml", &text)),
            RulesBody::Yaml(text) => return PutBody::File(RulesDoc::single("rules.yaml", &text)),
            RulesBody::Json(json) => json,
        };
        // What GET adds, read-only.
        for k in RulesAnswer::READ_ONLY {
            m.remove(k);
        }
        if let Some(Value::Array(rules)) = m.get_mut("rule") {
            for r in rules.iter_mut().filter_map(Value::as_object_mut) {
                for k in RuleView::READ_ONLY {
                    r.remove(k);
                }
            }
        }
        PutBody::Json(m)
    }
}

fn invalid(e: ConfigError) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidRules,
        e.to_string(),
    )
}

/// Replace every rule, atomically. Following Redis, a new shared version; following files, this
/// node's rules until the files change. The body is Flowgate TOML, envoyproxy/ratelimit YAML, or
/// the TOML schema as JSON (what `GET /v1/rules` answers, which it takes back unchanged).
#[utoipa::path(put, path = "/v1/rules", tag = "rules", security(("admin" = [])), request_body(content(
        (FileDoc = "application/json"),
        (String = "application/toml"),
        (String = "application/yaml"),
    )),
    responses(CredentialErrors,
        (status = 200, description = "The rules in force.", body = PutAnswer),
        (status = 400, description = "The rules are invalid (`invalid_rules`, nothing changed) or the body malformed.", body = ErrorBody),
        (status = 409, description = "Following Redis: the body would remove every declared queue (`queues_would_be_removed`).", body = ErrorBody),
        (status = 413, description = "The body is over 16 MiB.", body = ErrorBody),
        (status = 415, description = "Another content type (`unsupported_media_type`).", body = ErrorBody),
        Unavailable,
    ),
)]
pub(super) async fn put_rules(
    State(state): Shared,
    Caller(author, _): Caller<Admin>,
    body: RulesBody,
) -> Result<Response, ApiError> {
    let body = PutBody::from(body);
    match state.follower.as_deref() {
        Some(f) => put_shared(&state, f, body, author.name()).await,
        None => put_own(&state, body, author.name()).await,
    }
}

/// A `PUT` on a node that follows Redis: the body stored as a new shared version (a JSON body
/// as one `rules.toml`, the form versions keep).
async fn put_shared(
    state: &AppState,
    f: &Follower,
    body: PutBody,
    author: &str,
) -> Result<Response, ApiError> {
    let (doc, loaded, json) = match body {
        PutBody::File(doc) => {
            let loaded = doc.load().ok();
            (doc, loaded, false)
        }
        PutBody::Json(m) => {
            let invalid = |e| refused(state, ChangeError::Invalid(e));
            let (file, config) = flowgate_config::parse_json(JSON_BODY, &m).map_err(invalid)?;
            let loaded = config.validate().map_err(invalid)?;
            let text = toml::to_string(&file)
                .map_err(|e| ApiError::bad_request(format!("the rules cannot be stored: {e}")))?;
            (RulesDoc::single("rules.toml", &text), Some(loaded), true)
        }
    };
    // One body replaces the whole shared configuration: refuse to drop its queues (and their
    // jobs' release) as a side effect of editing the rules.
    let declared = state.queue.specs().specs().len();
    if declared > 0 && loaded.is_some_and(|l| l.queues.specs().is_empty()) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::QueuesWouldBeRemoved,
            format!(
                "the version in force declares {declared} queues and this body none: push the whole configuration (`flowgate rules push`, POST /v1/rules/versions), queues included"
            ),
        ));
    }
    let changed = rules::change(&state.rules, f, doc, None, author, "push")
        .await
        .map_err(|e| match e {
            ChangeError::Invalid(c) if json => ChangeError::Invalid(json_located(c)),
            e => e,
        })
        .map_err(|e| refused(state, e))?;
    let v = &changed.version;
    log_change(&changed, author, "rules changed through the admin API");
    let count = state.limiter.rules().rules().len();
    Ok(Json(PutAnswer {
        version: v.version,
        rules: count,
        summary: Some(&v.summary),
        unchanged: Some(!changed.stored),
    })
    .into_response())
}

/// A `PUT` on a node that follows its files: its rules and breakers until the files change.
async fn put_own(state: &AppState, body: PutBody, author: &str) -> Result<Response, ApiError> {
    let config = match body {
        PutBody::File(doc) => {
            let file = &doc.files[0];
            let format = Format::of_path(std::path::Path::new(&file.name)).unwrap_or(Format::Toml);
            flowgate_config::parse_config("<api>", format, &file.text)
        }
        PutBody::Json(m) => flowgate_config::parse_json(JSON_BODY, &m)
            .and_then(|(_, config)| config.rules_and_breakers()),
    };
    let change = state.rules.change().await;
    let set = config.and_then(|c: Config| Ok((c.rule_set()?, c.breaker_set()?)));
    match set {
        Ok((set, breakers)) => {
            let count = set.rules().len();
            let version = change.apply(set, None, None, breakers, RulesOrigin::Api, Vec::new());
            tracing::info!(version, rules = count, %author, "rules replaced through the admin API");
            Ok(Json(PutAnswer {
                version,
                rules: count,
                summary: None,
                unchanged: None,
            })
            .into_response())
        }
        Err(e) => {
            state.rules.refused("api");
            tracing::warn!(error = %e, "rules refused by the admin API");
            Err(invalid(e))
        }
    }
}

pub(super) fn log_change(changed: &Changed, author: &str, what: &str) {
    let v = &changed.version;
    if changed.stored {
        tracing::info!(version = v.version, %author, action = %v.action, summary = %v.summary, "{what}");
    } else {
        tracing::info!(version = v.version, %author, "{what}: the rules were those in force; nothing stored");
    }
}

pub(super) fn refused(state: &AppState, e: ChangeError) -> ApiError {
    state.rules.refused("redis");
    tracing::warn!(error = %e, "rules change refused; nothing changed");
    change_error(e)
}
