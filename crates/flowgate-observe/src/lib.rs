//! Observability: what the server tells about its decisions. [`metrics`] are the Prometheus
//! families (`/metrics`); [`Recorder`] records each decision into them and logs rejections, at
//! the cost of a few counter increments on the request path. The dashboard and the alerts read
//! what is recorded here.

pub mod alerts;
pub mod breakers;
pub mod charges;
mod envoy_names;
pub mod metrics;
mod record;
pub mod reservations;
pub mod stats;
pub mod topology;
pub mod view;

pub use record::{Api, Recorder};
pub use stats::Stats;
