//! The Flowgate server: Envoy's rate-limit service (gRPC, v3) and an HTTP/JSON API over a
//! [`flowgate::Limiter`], with rules from Flowgate TOML or envoyproxy/ratelimit YAML files,
//! hot-reloaded, and Prometheus metrics.

pub mod config;
