//! The protocol floor: a rate-limit service that answers OK to everything, for comparing the
//! real server with the cost of gRPC itself, measured by the same load generator.

use std::net::SocketAddr;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

/// `flowgate floor` (hidden): the constant-OK service.
#[derive(Debug, clap::Args)]
pub(crate) struct FloorArgs {
    /// Address to serve gRPC on.
    #[arg(long, default_value = "127.0.0.1:8091")]
    pub(crate) grpc_addr: SocketAddr,
    /// Threads that serve requests, as `serve`'s.
    #[arg(long, env = "FLOWGATE_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) worker_threads: Option<u16>,
}

/// Answers OK, with one OK status per descriptor.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ConstantOk;

#[tonic::async_trait]
impl RateLimitService for ConstantOk {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let n = request.get_ref().descriptors.len();
        Ok(Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses: vec![
                DescriptorStatus {
                    code: Code::Ok as i32,
                    ..Default::default()
                };
                n
            ],
            ..Default::default()
        }))
    }
}

/// Serves [`ConstantOk`] until SIGINT.
///
/// # Errors
/// When the address cannot be bound.
pub(crate) async fn floor(args: FloorArgs) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.grpc_addr).await?;
    eprintln!(
        "constant-OK rate-limit service on {}",
        listener.local_addr()?
    );
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(RateLimitServiceServer::new(ConstantOk))
        .serve_with_incoming_shutdown(incoming, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
