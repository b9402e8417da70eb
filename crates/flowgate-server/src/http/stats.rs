//! The figures for the dashboard and scripts: `GET /v1/stats` (one [`StatsView`]) and
//! `GET /v1/stats/stream` (Server-Sent Events: an event `stats` each second).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;

use super::ApiError;
use crate::observe::view::{Scope, StatsView};
use crate::state::AppState;

type Shared = State<Arc<AppState>>;

/// The query of both routes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StatsQuery {
    /// Seconds of series (1 to 900; default 900 for `/v1/stats`, 1 for the stream).
    window: Option<usize>,
    /// `node` for this node's own figures; default: the cluster's on Redis.
    scope: Option<Scope>,
}

fn query(q: Result<Query<StatsQuery>, QueryRejection>) -> Result<StatsQuery, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
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
        ..state.stats.view(state, window, scope)
    }
}

/// `GET /v1/stats`.
pub(super) async fn stats(
    State(state): Shared,
    q: Result<Query<StatsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    Ok(Json(view(&state, q.window.unwrap_or(900), q.scope)).into_response())
}

/// `GET /v1/stats/stream`.
pub(super) async fn stream(
    State(state): Shared,
    q: Result<Query<StatsQuery>, QueryRejection>,
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
