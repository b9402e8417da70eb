//! The Flowgate server: Envoy's rate-limit service (gRPC, v3) and an HTTP/JSON API over a
//! [`flowgate::Limiter`], with rules from Flowgate TOML or envoyproxy/ratelimit YAML files,
//! hot-reloaded, and Prometheus metrics.
//!
//! The `flowgate` binary (`src/bin/flowgate`: its command line, the rules CLI and the load
//! generator) is a thin layer over this library; integration tests start a [`Server`]
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
//!
//! # Bounds on input
//! Over a bound a request is refused with a message naming it, and the server goes on
//! answering: HTTP bodies and gRPC messages at most 64 KiB (413 / `OUT_OF_RANGE`); at most 64
//! descriptors per request, 32 entries per descriptor, 1024 bytes per domain, key or value, and a
//! cost of at most 2^32 - 1, the largest limit (400 / `INVALID_ARGUMENT`); configuration files at
//! most 16 MiB. Junk bytes on either port close that connection only. The memory store holds at
//! most 1,000,000 keys (a rule's failure policy decides beyond). See `limits.rs` and
//! `docs/operating.md`.
//!
//! # Configuration
//! `--config` names a Flowgate TOML file (the `flowgate-config` crate reads it), an envoyproxy/ratelimit
//! YAML file, or a directory of both. It is watched and polled every 2 s; see `reload.rs`.
//!
//! A node follows its files (`--rules-source files`, the default) or the versioned rules shared
//! by the cluster through Redis (`--rules-source redis`); see [`rules`]. **Following files, rules
//! set through the admin API (`PUT /v1/rules`) are replaced by the next file reload**: the file
//! and the API each replace the whole rule set, and the last writer wins. `GET /v1/rules` shows
//! the `source` of the rules in force and what the node `follows`.
//!
//! # Parts
//! The library's public surface is what the binary and the integration tests use: [`Server`]
//! and [`ServerConfig`], [`rules`] (the shared rules' store and documents) and [`auth`] (credentials and scopes); the
//! rule schema and its readers are the `flowgate-config` crate, the metrics, figures and alerts
//! the `flowgate-observe` crate. Inside, the server is made of named parts: `state.rs` composes
//! the limiter and the queues, the rules in force (`rules::RulesInForce`, which alone changes
//! them), the recording of decisions (`flowgate_observe::Recorder`) and who may do what (`auth/`:
//! credentials, scopes, failed attempts); `grpc.rs` and `http/` translate the protocols; `server.rs` starts the services, over TLS when configured (`tls.rs`: the
//! certificates, mutual TLS, their reload without a restart). See `ARCHITECTURE.md`.

pub mod auth;
mod backend;
mod charges;
mod codes;
mod eviction;
mod grpc;
mod grpc_charge;
mod grpc_conn;
pub mod grpc_decisions;
pub mod grpc_report;
mod http;
mod limits;
mod listen;
mod peer;
mod probes;
mod queue_watch;
mod reload;
mod reports;
mod reserve;
mod rule_charge;
pub mod rules;
mod server;
mod shutdown;
mod state;
mod store_errors;
mod tls;

pub use backend::{Backend, QueueBackend, ServerClock};
pub use codes::ErrorCode;
/// The figures the dashboard, the alerts and `GET /v1/stats` show.
pub use flowgate_observe::alerts;
pub use flowgate_observe::view as stats;
pub use reserve::{DEFAULT_MAX_SHARE, DEFAULT_MAX_TTL, ReserveConfig};
pub use server::{
    DEFAULT_DATA_DIR, DEFAULT_GRPC_ADDR, DEFAULT_HTTP_ADDR, DEFAULT_HTTP_HEADER_TIMEOUT,
    DEFAULT_HTTP_MAX_CONNECTIONS, Server, ServerConfig, ServerError,
};
pub use shutdown::{DEFAULT_SHUTDOWN_GRACE, FLUSH_BOUND};
pub use tls::{ClientAuth, DEFAULT_TLS_RELOAD, TlsError, TlsFiles};
