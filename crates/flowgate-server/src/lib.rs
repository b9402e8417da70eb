//! The Flowgate server: Envoy's rate-limit service (gRPC, v3) and an HTTP/JSON API over a
//! [`flowgate::Limiter`], with rules from Flowgate TOML or envoyproxy/ratelimit YAML files,
//! hot-reloaded, and Prometheus metrics.
//!
//! The `flowgate` binary is a thin layer over [`cli`]; integration tests start a [`Server`]
//! in-process on `127.0.0.1:0`:
//!
//! ```no_run
//! # async fn run() -> Result<(), flowgate_server::ServerError> {
//! use flowgate_server::{Server, ServerConfig};
//! let server = Server::bind(ServerConfig::new("examples/flowgate.toml").ephemeral()).await?;
//! println!("HTTP on {}, gRPC on {}", server.http_addr(), server.grpc_addr());
//! server.shutdown().await
//! # }
//! ```

pub mod backend;
pub mod config;
pub mod grpc;
pub mod http;
pub mod limits;
pub mod metrics;
pub mod reload;
mod server;
pub mod state;

pub use backend::{Backend, ServerClock};
pub use config::ConfigError;
pub use server::{DEFAULT_GRPC_ADDR, DEFAULT_HTTP_ADDR, Server, ServerConfig, ServerError};
pub use state::AppState;
pub mod bench;
pub mod cli;
