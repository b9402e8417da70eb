//! `flowgate.v1.Decisions` on the gRPC port: `POST /v1/check` for callers that speak gRPC, one
//! call at a time (`Check`) or many over one long-lived stream (`CheckStream`), which spares a
//! busy client an HTTP/2 stream, its headers and its trailers per decision.
//!
//! The service and its messages are `proto/flowgate/v1/decisions.proto`; the Rust is generated
//! with `flowgate.v1.Reports`' ([`crate::grpc_report`]). This layer only translates
//! (`answer.rs`): the request is validated and decided as `POST /v1/check`'s
//! (`limits::validate`, `AppState::decide`, counted under `api="grpc"`), and the answer carries
//! the HTTP answer's fields. A bad request is answered with an error for its id alone; the
//! stream goes on. The stream is `stream.rs`'s.

mod answer;
mod stream;

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::watch;

use crate::auth::Scope;
use crate::limits;
use crate::state::{Api, AppState};

pub(crate) use crate::grpc_report::generated;

pub use self::generated::decisions_client::DecisionsClient;
pub use self::generated::{
    BreakerRef, CheckAnswer, CheckDescriptor, CheckError, CheckRequest, CheckVerdict, Code,
    DescriptorStatus, Entry, Lease, Probe, Reason, check_answer,
};

/// The service's name.
pub const SERVICE: &str = "flowgate.v1.Decisions";
/// `Check`'s path.
pub const CHECK_PATH: &str = "/flowgate.v1.Decisions/Check";
/// `CheckStream`'s path.
pub const CHECK_STREAM_PATH: &str = "/flowgate.v1.Decisions/CheckStream";

/// Decides `req`: its answer, a verdict or why it could not be decided (counted as invalid).
async fn decide(state: &AppState, req: CheckRequest) -> CheckAnswer {
    let id = req.id;
    let result = match answer::request(req) {
        Ok(request) => Ok(answer::verdict(&state.decide(Api::Grpc, &request).await)),
        Err(e) => {
            state.invalid(Api::Grpc);
            Err(e)
        }
    };
    answer::answer(id, result)
}

/// The `flowgate.v1.Decisions` service.
struct Decisions {
    state: Arc<AppState>,
    /// Turned on when the server stops accepting: the streams end.
    shutdown: watch::Receiver<bool>,
}

/// The stream of a `CheckStream`'s answers.
type Answers = Pin<Box<dyn Stream<Item = Result<CheckAnswer, tonic::Status>> + Send + 'static>>;

#[tonic::async_trait]
impl generated::decisions_server::Decisions for Decisions {
    async fn check(
        &self,
        request: tonic::Request<CheckRequest>,
    ) -> Result<tonic::Response<CheckAnswer>, tonic::Status> {
        crate::grpc::authorize(&self.state, Scope::Decide, &request, CHECK_PATH)?;
        Ok(tonic::Response::new(
            decide(&self.state, request.into_inner()).await,
        ))
    }

    type CheckStreamStream = Answers;

    async fn check_stream(
        &self,
        request: tonic::Request<tonic::Streaming<CheckRequest>>,
    ) -> Result<tonic::Response<Answers>, tonic::Status> {
        let caller = stream::Caller::authorize(&self.state, &request)?;
        let answers = stream::spawn(
            Arc::clone(&self.state),
            caller,
            request.into_inner(),
            self.shutdown.clone(),
        );
        Ok(tonic::Response::new(Box::pin(answers)))
    }
}

/// The `flowgate.v1.Decisions` service, beside Envoy's on the gRPC port: messages of at most
/// [`limits::MAX_BODY_BYTES`], as Envoy's; its streams end when `shutdown` turns on.
pub(crate) fn server(
    state: Arc<AppState>,
    shutdown: watch::Receiver<bool>,
) -> generated::decisions_server::DecisionsServer<impl generated::decisions_server::Decisions> {
    generated::decisions_server::DecisionsServer::new(Decisions { state, shutdown })
        .max_decoding_message_size(limits::MAX_BODY_BYTES)
        .max_encoding_message_size(4 * limits::MAX_BODY_BYTES)
}
