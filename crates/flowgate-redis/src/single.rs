//! One Redis server's connection, made again whole after a failure its own reconnection does not
//! cure.
//!
//! redis's `ConnectionManager` reconnects after an I/O error, but a reconnection refused at its
//! handshake (the server's password changed: `AUTH` answers `WRONGPASS`) stays the manager's
//! outcome: every later call fails with it, even once the password is right again, until the
//! process restarts. So a call that fails on authentication (`WRONGPASS`, `NOAUTH`, a refused
//! `AUTH`) replaces the manager with a new one, made on first use, at most once per
//! [`REMAKE_EVERY`]: the next call connects afresh, with the URL's password.
//!
//! Either way, the first answer after a connection was lost (refused, reset, dropped) counts
//! one reconnection in the [`Topology`]: the manager's own are not announced otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use redis::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::time::Instant;

use crate::topology::Topology;

/// The shortest time between two remade connections.
pub(crate) const REMAKE_EVERY: Duration = Duration::from_millis(100);

/// A single server's connection, remade after an authentication failure.
pub(crate) struct Single {
    client: Client,
    config: ConnectionManagerConfig,
    current: ArcSwap<ConnectionManager>,
    remade: std::sync::Mutex<Option<Instant>>,
    /// The connection was lost since the last answer: the next answer is on a new one.
    lost: AtomicBool,
    topology: Arc<Topology>,
}

impl Single {
    /// Over `manager`, made from `client` with `config`.
    pub(crate) fn new(
        client: Client,
        config: ConnectionManagerConfig,
        manager: ConnectionManager,
        topology: Arc<Topology>,
    ) -> Self {
        Self {
            client,
            config,
            current: ArcSwap::from_pointee(manager),
            remade: std::sync::Mutex::new(None),
            lost: AtomicBool::new(false),
            topology,
        }
    }

    /// The connection in force (a clone shares it).
    pub(crate) fn get(&self) -> ConnectionManager {
        ConnectionManager::clone(&self.current.load())
    }

    /// A call's `reply`, its failure noted first ([`Single::failed`]); an answer after the
    /// connection was lost counts a reconnection.
    pub(crate) fn answered<T>(&self, reply: redis::RedisResult<T>) -> redis::RedisResult<T> {
        match &reply {
            Err(e) => self.failed(e),
            Ok(_) => {
                if self.lost.load(Ordering::Relaxed) && self.lost.swap(false, Ordering::Relaxed) {
                    self.topology.reconnected();
                }
            }
        }
        reply
    }

    /// Notes a call's failure: a lost connection is remembered (the manager connects again by
    /// itself); one on authentication makes the connection again.
    pub(crate) fn failed(&self, e: &redis::RedisError) {
        if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
            self.lost.store(true, Ordering::Relaxed);
        }
        if !is_authentication(e) {
            return;
        }
        let Ok(mut remade) = self.remade.lock() else {
            return;
        };
        let now = Instant::now();
        if remade.is_some_and(|at| now.duration_since(at) < REMAKE_EVERY) {
            return;
        }
        *remade = Some(now);
        match ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone()) {
            Ok(m) => {
                self.current.store(Arc::new(m));
                self.topology.reconnected();
                tracing::debug!("Redis refused the connection's authentication: connecting again");
            }
            Err(e) => tracing::debug!(error = %e, "cannot make the Redis connection again"),
        }
    }
}

/// Whether `e` is Redis refusing the connection's credentials.
fn is_authentication(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
}
