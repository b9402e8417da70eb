//! The rules routes: the rules in force, changing them, and (when the node follows Redis) their
//! versions: history, one version, rollback.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::ApiError;
use super::api::{authorized, body_bytes, body_bytes_within};
use super::body;
use crate::rules::Changed;
use crate::rules::RulesOrigin;
use crate::rules::doc::{DocFile, RulesDoc};
use crate::rules::follow::Follower;
use crate::rules::shared::{SharedError, Version};
use crate::rules::{self, ChangeError};
use crate::state::AppState;
use flowgate_config::schema::{AlertDoc, BreakerDoc, FileDoc, FileView, QueueDoc, RuleView};
use flowgate_config::{Config, ConfigError, Format};

type Shared = State<Arc<AppState>>;

/// The largest rules body (the configuration's bound).
pub(super) const MAX_RULES_BYTES: usize = flowgate_config::MAX_FILE_BYTES as usize;

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}

/// `GET /v1/rules`'s answer: the configuration in force as one document that `PUT /v1/rules`
/// takes back unchanged (less the fields it ignores, [`RulesAnswer::READ_ONLY`]), and where it
/// comes from.
#[derive(Serialize)]
pub(super) struct RulesAnswer {
    /// The rules in force (following Redis, the whole shared document: rules, queues, alerts,
    /// breakers).
    #[serde(flatten)]
    config: FileView,
    /// The version in force.
    version: u64,
    /// Where the rules in force came from: `file`, `api` or `redis`.
    source: &'static str,
    /// What the node follows: `files` or `redis`.
    follows: &'static str,
    /// The files read (empty when set through the API or Redis).
    files: Vec<String>,
    /// Following Redis: who stored the version in force, when, and whether the node is on it.
    #[serde(flatten)]
    shared: Option<SharedVersion>,
}

/// The version of the shared rules in force.
#[derive(Serialize)]
struct SharedVersion {
    /// Who stored it.
    author: String,
    /// When (RFC 3339).
    changed_at: String,
    /// Whether the node is on it.
    in_sync: bool,
    /// Why it may not be.
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

/// `GET /v1/rules`: the configuration in force ([`RulesAnswer`]). Without the admin token, the
/// secrets of its URLs are hidden ([`FileDoc::redact_urls`]); an admin sees them whole, so that
/// an admin's round trip loses nothing.
pub(super) async fn get_rules(
    State(state): Shared,
    headers: HeaderMap,
) -> Result<Json<RulesAnswer>, ApiError> {
    let admin = authorized(&state, &headers).is_ok();
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
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
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
    let shared = match &info.origin {
        RulesOrigin::Redis {
            author,
            at_ms,
            problem,
            ..
        } => Some(SharedVersion {
            author: author.clone(),
            changed_at: rfc3339(*at_ms),
            in_sync: problem.is_none(),
            problem: problem.clone(),
        }),
        _ => None,
    };
    Ok(Json(RulesAnswer {
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
        shared,
    }))
}

fn follower(state: &AppState) -> Result<&Follower, ApiError> {
    state.follower.as_deref().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "follows_files",
            "this node follows its configuration files, which keep no versions: change the files (and keep their history in version control), or run the cluster with --rules-source redis",
        )
    })
}

fn change_error(e: ChangeError) -> ApiError {
    match e {
        ChangeError::Invalid(e) => {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_rules", e.to_string())
        }
        ChangeError::Missing(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "version_not_found", e.to_string())
        }
        ChangeError::Shared(SharedError::Conflict { .. }) => ApiError::new(
            StatusCode::CONFLICT,
            "version_conflict",
            format!("{e}: nothing changed; read the rules again and retry"),
        ),
        ChangeError::Shared(e) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("{e}: nothing changed"),
        ),
    }
}

fn version_json(v: &Version, with_doc: bool) -> Value {
    let mut out = json!({
        "version": v.version,
        "author": v.author,
        "at": rfc3339(v.at_ms),
        "action": v.action,
        "summary": v.summary,
    });
    if with_doc {
        out["diff"] = json!(v.diff);
        out["files"] = json!(v.doc.files);
    }
    out
}

/// An error in the TOML stored for a JSON body names the JSON field, not a line of that TOML.
fn json_located(e: ConfigError) -> ConfigError {
    ConfigError::new(JSON_BODY, None, e.field, e.message)
}

/// How errors name a JSON body.
const JSON_BODY: &str = "the JSON body";

/// A `PUT /v1/rules` body.
enum PutBody {
    /// A TOML or YAML file, read as a configuration file is.
    File(RulesDoc),
    /// The schema as JSON, less what `GET` adds to it.
    Json(Map<String, Value>),
}

/// The rules of a `PUT /v1/rules` body, by its content type.
fn put_body(headers: &HeaderMap, bytes: &[u8]) -> Result<PutBody, ApiError> {
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let text =
        std::str::from_utf8(bytes).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
    match ctype.as_str() {
        "application/toml" | "text/toml" => Ok(PutBody::File(RulesDoc::single("rules.toml", text))),
        "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => {
            Ok(PutBody::File(RulesDoc::single("rules.yaml", text)))
        }
        "application/json" => {
            let mut m: Map<String, Value> = body::parse(bytes)?;
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
            Ok(PutBody::Json(m))
        }
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "Content-Type `{ctype}`: send application/toml (Flowgate), application/yaml (envoyproxy/ratelimit) or application/json"
            ),
        )),
    }
}

fn invalid(e: ConfigError) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_rules", e.to_string())
}

/// `PUT /v1/rules`: replaces every rule, atomically. Following Redis, a new shared version;
/// following files, this node's rules until the files change.
pub(super) async fn put_rules(
    State(state): Shared,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let author = authorized(&state, &headers)?;
    let bytes = body_bytes_within(body, MAX_RULES_BYTES)?;
    let body = put_body(&headers, &bytes)?;
    match state.follower.as_deref() {
        Some(f) => put_shared(&state, f, body, &author).await,
        None => put_own(&state, body, &author).await,
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
            "queues_would_be_removed",
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
    Ok(Json(json!({
        "version": v.version,
        "rules": count,
        "summary": v.summary,
        "unchanged": !changed.stored,
    }))
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
            Ok(Json(json!({"version": version, "rules": count})).into_response())
        }
        Err(e) => {
            state.rules.refused("api");
            tracing::warn!(error = %e, "rules refused by the admin API");
            Err(invalid(e))
        }
    }
}

fn log_change(changed: &Changed, author: &str, what: &str) {
    let v = &changed.version;
    if changed.stored {
        tracing::info!(version = v.version, %author, action = %v.action, summary = %v.summary, "{what}");
    } else {
        tracing::info!(version = v.version, %author, "{what}: the rules were those in force; nothing stored");
    }
}

/// A change's answer: 201 and the new version, or 200 and the version in force when nothing
/// was stored (`unchanged: true`).
fn changed_response(changed: &Changed) -> Response {
    let mut body = version_json(&changed.version, false);
    body["unchanged"] = json!(!changed.stored);
    let status = if changed.stored {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, Json(body)).into_response()
}

fn refused(state: &AppState, e: ChangeError) -> ApiError {
    state.rules.refused("redis");
    tracing::warn!(error = %e, "rules change refused; nothing changed");
    change_error(e)
}

/// A `POST /v1/rules/versions` body: the files of the new version.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PushBody {
    files: Vec<DocFile>,
    /// The version this change is based on: refused (409) if another came after it.
    #[serde(default)]
    base_version: Option<u64>,
}

/// `POST /v1/rules/versions` (admin): stores the files as a new version, in force on every node.
pub(super) async fn push(
    State(state): Shared,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let author = authorized(&state, &headers)?;
    let f = follower(&state)?;
    let b: PushBody = body::parse(&body_bytes_within(body, MAX_RULES_BYTES)?)?;
    let doc = RulesDoc { files: b.files };
    let changed = rules::change(&state.rules, f, doc, b.base_version, &author, "push")
        .await
        .map_err(|e| refused(&state, e))?;
    log_change(&changed, &author, "rules pushed");
    Ok(changed_response(&changed))
}

/// A `POST /v1/rules/rollback` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RollbackBody {
    version: u64,
}

/// `POST /v1/rules/rollback` (admin): stores version `version`'s rules as a new version.
pub(super) async fn rollback(
    State(state): Shared,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let author = authorized(&state, &headers)?;
    let f = follower(&state)?;
    let b: RollbackBody = body::parse(&body_bytes(body)?)?;
    let changed = rules::rollback(&state.rules, f, b.version, &author)
        .await
        .map_err(|e| refused(&state, e))?;
    log_change(&changed, &author, "rules rolled back");
    Ok(changed_response(&changed))
}

/// `GET /v1/rules/history` query.
#[derive(Deserialize)]
pub(super) struct HistoryQuery {
    #[serde(default)]
    limit: Option<u64>,
}

/// `GET /v1/rules/history` (admin): the newest versions, newest first.
pub(super) async fn history(
    State(state): Shared,
    headers: HeaderMap,
    q: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    authorized(&state, &headers)?;
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let f = follower(&state)?;
    let (current, versions) = f
        .shared
        .history(q.limit.unwrap_or(50).max(1))
        .await
        .map_err(|e| change_error(ChangeError::Shared(e)))?;
    let list: Vec<Value> = versions.iter().map(|v| version_json(v, false)).collect();
    Ok(Json(json!({"current": current, "versions": list})).into_response())
}

/// `GET /v1/rules/versions/{n}` (admin): one version, with its files and its diff.
pub(super) async fn version(
    State(state): Shared,
    headers: HeaderMap,
    n: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    authorized(&state, &headers)?;
    let Path(n) = n.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let f = follower(&state)?;
    let n: u64 = n
        .parse()
        .map_err(|_| ApiError::bad_request(format!("`{n}` is not a version number")))?;
    match f.shared.get(n).await {
        Ok(Some(v)) => Ok(Json(version_json(&v, true)).into_response()),
        Ok(None) => Err(change_error(ChangeError::Missing(n))),
        Err(e) => Err(change_error(ChangeError::Shared(e))),
    }
}
