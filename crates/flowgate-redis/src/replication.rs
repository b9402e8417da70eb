//! Writes that must survive a failover: answered only once enough replicas hold them.
//!
//! Redis replicates asynchronously, so a write acknowledged by the primary can be lost if the
//! primary fails before a replica received it. [`Replicated`] makes such writes (a queue's
//! submit, ack and nack; a rules change) wait with `WAIT` until `replicas` replicas acknowledged
//! them, or fail after `timeout`. `WAIT` blocks the connection that sends it, so these writes go
//! through a connection of their own and the limiter's decisions never wait behind one.
//!
//! What it guarantees is what `WAIT` does: the write is in the memory of that many replicas, so
//! a failover that promotes one of them keeps it. It does not make Redis strongly consistent (a
//! replica that acknowledged may still lose the write if it fails too), and a write whose
//! `WAIT` timed out *is* on the primary: the caller is told it may have been stored.

use std::time::Duration;

use flowgate_core::StoreError;

use crate::conn::RedisConnection;
use crate::options::ConnectionOptions;

/// The default time a replicated write waits for its replicas.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(1);

/// A connection for writes that must reach `replicas` replicas before they are answered.
#[derive(Clone)]
pub struct Replicated {
    conn: RedisConnection,
    replicas: u32,
    timeout: Duration,
}

impl Replicated {
    /// A connection of its own to `url` (as [`RedisConnection::connect_lazy`]) whose writes
    /// wait for `replicas` replicas, at most `timeout`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] for an invalid URL.
    pub fn connect_lazy(
        url: &str,
        options: ConnectionOptions,
        replicas: u32,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let longest = options.timeout + timeout;
        let options = options.timeout(longest);
        Ok(Self {
            conn: RedisConnection::connect_lazy(url, options)?,
            replicas,
            timeout,
        })
    }

    /// The connection the writes go through.
    pub fn conn(&self) -> &RedisConnection {
        &self.conn
    }

    /// Waits until the replicas hold every write made through [`Replicated::conn`] so far, on
    /// the primary of `key`'s slot.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when fewer replicas acknowledged within the timeout (the
    /// write is on the primary, and may be lost by a failover), or when Redis cannot be reached.
    pub async fn confirm(&self, key: &str) -> Result<(), StoreError> {
        let acked = self
            .conn
            .wait_replicas(key, self.replicas, self.timeout)
            .await?;
        if acked >= u64::from(self.replicas) {
            return Ok(());
        }
        Err(StoreError::NotReplicated {
            acked,
            required: self.replicas,
            timeout_ms: self.timeout.as_millis() as u64,
        })
    }
}
