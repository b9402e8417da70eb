//! Test support for Flowgate (not published): real `redis-server` processes and a Redis Cluster
//! on free loopback ports, and a real Alertmanager, owned by guards that kill them on drop; the
//! store and queue conformance suites; proptest strategies.

pub mod alertmanager;
pub mod cluster;
pub mod conformance;
pub mod fuzz;
pub mod pki;
pub mod queue_conformance;
pub mod redis;
pub mod sentinel;
