//! `CheckStream`: the requests of one stream decided as they come, each answered when its
//! decision ends (a slow one holds no other), at most [`MAX_IN_FLIGHT`] at once.
//!
//! One task per stream reads the requests and drives their decisions (no task per decision):
//! while [`MAX_IN_FLIGHT`] are undecided it reads no more, so HTTP/2 flow control holds the
//! client back; while the client reads no answers, it neither reads nor decides.
//!
//! - **Credentials** are checked when the stream opens. The stream keeps what the caller
//!   presented; when the server's credentials are replaced (a reload), the next request is
//!   checked against the new ones (an atomic read per request otherwise), and a refusal ends the
//!   stream with its status once the answers in flight are sent: a revoked token decides
//!   nothing more, on any stream.
//! - **Shutdown**: when the server stops accepting, the stream reads no more, answers what is
//!   in flight, and ends `UNAVAILABLE`, so that the client opens a new one (elsewhere) and
//!   tonic's graceful shutdown is not held by a stream that never ends.

use std::net::IpAddr;
use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt as _};
use futures::{FutureExt as _, Stream};
use tokio::sync::{mpsc, watch};

use super::{CHECK_STREAM_PATH, CheckAnswer, CheckRequest, decide};
use crate::auth::{Credentials, Presented, Scope};
use crate::state::AppState;

/// The most decisions in flight on one stream.
pub(crate) const MAX_IN_FLIGHT: usize = 256;

/// Answers waiting for the client to read them, beyond which the stream stops deciding.
const QUEUED_ANSWERS: usize = 64;

/// What a stream's caller presented, kept to check it again after a reload.
pub(super) struct Caller {
    bearer: Option<String>,
    cert_names: Vec<String>,
    source: Option<IpAddr>,
    /// The credentials it was last let in by.
    seen: Arc<Credentials>,
}

impl Caller {
    /// Lets `request` open a stream of `decide` calls, or refuses it as
    /// [`crate::grpc::authorize`] does.
    pub(super) fn authorize<T>(
        state: &AppState,
        request: &tonic::Request<T>,
    ) -> Result<Self, tonic::Status> {
        // (read before the check: a reload during it is seen at the first request)
        let seen = state.auth.in_force();
        let peer = request.extensions().get::<crate::peer::Peer>();
        let caller = Caller {
            bearer: request
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned),
            cert_names: peer.map_or_else(Vec::new, |p| p.cert_names().to_vec()),
            source: peer.and_then(|p| p.addr()).map(|a| a.ip()),
            seen,
        };
        caller.check(state)?;
        Ok(caller)
    }

    fn check(&self, state: &AppState) -> Result<(), tonic::Status> {
        let presented = Presented {
            bearer: self.bearer.as_deref(),
            cert_names: &self.cert_names,
            source: self.source,
            route: CHECK_STREAM_PATH,
        };
        crate::grpc::authorize_presented(state, Scope::Decide, &presented)
    }

    /// Checks the caller again if the credentials were replaced since it was let in.
    fn recheck(&mut self, state: &AppState) -> Result<(), tonic::Status> {
        if !state.auth.replaced_since(&self.seen) {
            return Ok(());
        }
        let now = state.auth.in_force();
        self.check(state)?;
        self.seen = now;
        Ok(())
    }
}

/// Decides the requests of `incoming` on a task of their own; the answers, then, when the stream
/// ends otherwise than by the client closing it, the status it ends with.
pub(super) fn spawn(
    state: Arc<AppState>,
    caller: Caller,
    incoming: tonic::Streaming<CheckRequest>,
    shutdown: watch::Receiver<bool>,
) -> impl Stream<Item = Result<CheckAnswer, tonic::Status>> + Send + 'static {
    let (tx, mut rx) = mpsc::channel(QUEUED_ANSWERS);
    tokio::spawn(run(state, caller, incoming, tx, shutdown));
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

type Sender = mpsc::Sender<Result<CheckAnswer, tonic::Status>>;

/// The stream's loop: reads while it may, sends each answer when its decision ends.
async fn run(
    state: Arc<AppState>,
    mut caller: Caller,
    mut incoming: tonic::Streaming<CheckRequest>,
    tx: Sender,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut in_flight = FuturesUnordered::new();
    let mut reading = true;
    let mut end: Option<tonic::Status> = None;
    loop {
        tokio::select! {
            biased;
            Some(answer) = in_flight.next(), if !in_flight.is_empty() => {
                if tx.send(Ok(answer)).await.is_err() {
                    return; // the client is gone
                }
            }
            _ = shutdown.wait_for(|&stop| stop).map(|_| ()), if reading => {
                reading = false;
                end = Some(tonic::Status::unavailable(
                    "the server is shutting down: open a new stream",
                ));
            }
            message = incoming.message(), if reading && in_flight.len() < MAX_IN_FLIGHT => {
                match message {
                    Ok(Some(req)) => match caller.recheck(&state) {
                        Ok(()) => in_flight.push(decide(&state, req)),
                        Err(refused) => {
                            reading = false;
                            end = Some(refused);
                        }
                    },
                    // The client closed its side: answer what is in flight, then end.
                    Ok(None) => reading = false,
                    // A message over the bound, or a broken stream.
                    Err(status) => {
                        reading = false;
                        end = Some(status);
                    }
                }
            }
            else => break,
        }
    }
    if let Some(status) = end {
        let _ = tx.send(Err(status)).await;
    }
}
