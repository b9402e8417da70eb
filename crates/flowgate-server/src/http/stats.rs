//! The figures for the dashboard and scripts: `GET /v1/stats` (one [`StatsView`]) and
//! `GET /v1/stats/stream` (Server-Sent Events: an event `stats` each second).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;
use utoipa::IntoParams;

use super::ApiError;
use super::doc::{BadParameters, CredentialErrors};
use super::extract::{Caller, Params, Reader};
use crate::state::AppState;
use flowgate_observe::view::{Scope, StatsView};

type Shared = State<Arc<AppState>>;

/// The query of both routes.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct StatsQuery {
    /// Seconds of series (1 to 900; default 900 for `/v1/stats`, 1 for the stream).
    #[param(minimum = 1, maximum = 900)]
    window: Option<usize>,
    /// `node` for this node's own figures; default: the cluster's on Redis.
    scope: Option<Scope>,
}

/// One event of the stream (the document's description of it: the stream writes [`Event`]s).
#[derive(utoipa::ToSchema)]
#[allow(dead_code, reason = "only its schema is used")]
pub(super) struct StatsEvent {
    /// Always `stats`.
    #[schema(pattern = "^stats$")]
    event: String,
    /// A `StatsView`, as JSON text.
    #[schema(content_media_type = "application/json")]
    data: String,
}

fn query(q: Result<Params<StatsQuery>, ApiError>) -> Result<StatsQuery, ApiError> {
    let Params(q) = q?;
    if let Some(w) = q.window
        && !(1..=900).contains(&w)
    {
        return Err(ApiError::bad_request(format!(
            "field `window`: {w} seconds: give 1 to 900"
        )));
    }
    Ok(q)
}

fn view(state: &AppState, window: usize, scope: Option<Scope>) -> StatsView {
    StatsView {
        alerts: state.alerts.views(),
        reservations: state.reserve.outstanding(),
        ..state.stats.view(state, window, scope)
    }
}

/// The dashboard's figures: per rule, admitted and rejected per second, rejection ratio,
/// heaviest keys; queues; the store; breakers; alerts.
#[utoipa::path(get, path = "/v1/stats", tag = "figures",
    security(("reader" = [])), params(StatsQuery),
    responses(CredentialErrors,
        (status = 200, description = "The figures.", body = StatsView),
        BadParameters,
    ),
)]
pub(super) async fn stats(
    State(state): Shared,
    _: Caller<Reader>,
    q: Result<Params<StatsQuery>, ApiError>,
) -> Result<Json<StatsView>, ApiError> {
    let q = query(q)?;
    Ok(Json(view(&state, q.window.unwrap_or(900), q.scope)))
}

/// The same figures as Server-Sent Events: an event `stats` each second, its data a
/// `StatsView` (`window` default 1: the newest second). The stream ends when the server stops.
#[utoipa::path(get, path = "/v1/stats/stream", tag = "figures",
    security(("reader" = [])), params(StatsQuery),
    responses(CredentialErrors,
        (status = 200, description = "`event: stats` with a `StatsView` as its `data`, each second.",
            content_type = "text/event-stream", body = StatsEvent),
        BadParameters,
    ),
)]
pub(super) async fn stream(
    State(state): Shared,
    _: Caller<Reader>,
    q: Result<Params<StatsQuery>, ApiError>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let q = query(q)?;
    let window = q.window.unwrap_or(1);
    let scope = q.scope;
    let rx = state.stats.subscribe();
    let closed = state.stats.closed();
    let events = futures::stream::unfold(
        (state, rx, closed),
        move |(state, mut rx, mut closed)| async move {
            // The stream ends when the server shuts down, so that it does not hold the shutdown.
            tokio::select! {
                r = rx.changed() => r.ok()?,
                _ = closed.wait_for(|c| *c) => return None,
            }
            let v = view(&state, window, scope);
            let event = Event::default()
                .event("stats")
                .json_data(&v)
                .unwrap_or_else(|_| Event::default().event("error"));
            Some((Ok(event), (state, rx, closed)))
        },
    );
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
