//! The connection: one multiplexed, self-reconnecting connection to a single server, or a
//! cluster connection (MOVED/ASK handled by the client crate).

use std::sync::Arc;
use std::time::Duration;

use flowgate_core::StoreError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd, Value};

use crate::error::store_error;

/// How long a command may wait for its reply on the connection: a bound for calls that no
/// caller's deadline covers (a batching worker's, a queue operation's), so that a Redis that
/// stopped answering never holds them for ever. Decisions have their own, shorter deadline.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

fn manager_config(connect_timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(200))
}

/// A cheap-to-clone handle: concurrent callers' commands are pipelined on one connection.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(Arc<Cluster>),
}

/// A cluster connection made on first use: until one node answers, every call tries again.
/// (The client crate has no lazy cluster connection; once made, it follows the cluster by
/// itself.)
pub(crate) struct Cluster {
    client: ClusterClient,
    conn: tokio::sync::OnceCell<ClusterConnection>,
    connect_timeout: Duration,
}

impl Cluster {
    async fn get(&self) -> redis::RedisResult<ClusterConnection> {
        self.conn
            .get_or_try_init(|| async {
                tokio::time::timeout(self.connect_timeout * 4, self.client.get_async_connection())
                    .await
                    .unwrap_or_else(|_| {
                        Err(redis::RedisError::from(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "no node of the cluster answered",
                        )))
                    })
            })
            .await
            .cloned()
    }
}

fn unavailable(e: &redis::RedisError) -> StoreError {
    match store_error(e) {
        StoreError::Internal(m) => StoreError::Unavailable(m),
        other => other,
    }
}

async fn within<T>(
    limit: Duration,
    f: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r.map_err(|e| unavailable(&e)),
        Err(_) => Err(StoreError::Timeout),
    }
}

impl Conn {
    /// Connects to a single server. The connection reconnects by itself after failures.
    pub(crate) async fn single(url: &str, connect_timeout: Duration) -> Result<Self, StoreError> {
        let client = Client::open(url).map_err(|e| unavailable(&e))?;
        let manager = within(
            connect_timeout * 4,
            ConnectionManager::new_with_config(client, manager_config(connect_timeout)),
        )
        .await?;
        Ok(Conn::Single(manager))
    }

    /// A single server's connection made on first use (and remade after failures).
    pub(crate) fn single_lazy(url: &str, connect_timeout: Duration) -> Result<Self, StoreError> {
        let client = Client::open(url).map_err(|e| unavailable(&e))?;
        ConnectionManager::new_lazy_with_config(client, manager_config(connect_timeout))
            .map(Conn::Single)
            .map_err(|e| unavailable(&e))
    }

    /// Connects to a Redis Cluster through any of its nodes.
    pub(crate) async fn cluster(
        urls: &[String],
        connect_timeout: Duration,
    ) -> Result<Self, StoreError> {
        let conn = Self::cluster_lazy(urls, connect_timeout)?;
        if let Conn::Cluster(c) = &conn {
            c.get().await.map_err(|e| unavailable(&e))?;
        }
        Ok(conn)
    }

    /// A Redis Cluster's connection made on first use (through any of its nodes).
    pub(crate) fn cluster_lazy(
        urls: &[String],
        connect_timeout: Duration,
    ) -> Result<Self, StoreError> {
        let client = ClusterClientBuilder::new(urls.iter().map(String::as_str))
            .connection_timeout(connect_timeout)
            .response_timeout(RESPONSE_TIMEOUT)
            .retries(2)
            .build()
            .map_err(|e| unavailable(&e))?;
        Ok(Conn::Cluster(Arc::new(Cluster {
            client,
            conn: tokio::sync::OnceCell::new(),
            connect_timeout,
        })))
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Runs a script invocation (EVALSHA, loading the script on NOSCRIPT).
    pub(crate) async fn invoke(
        &self,
        inv: &redis::ScriptInvocation<'_>,
    ) -> redis::RedisResult<Value> {
        match self {
            Conn::Single(c) => inv.invoke_async(&mut c.clone()).await,
            Conn::Cluster(c) => inv.invoke_async(&mut c.get().await?).await,
        }
    }

    /// Runs a plain command.
    pub(crate) async fn query(&self, cmd: &Cmd) -> Result<Value, StoreError> {
        let r = match self {
            Conn::Single(c) => cmd.query_async(&mut c.clone()).await,
            Conn::Cluster(c) => match c.get().await {
                Ok(mut conn) => cmd.query_async(&mut conn).await,
                Err(e) => return Err(unavailable(&e)),
            },
        };
        r.map_err(|e| store_error(&e))
    }
}
