//! A Redis Cluster's connection: made on first use, followed across failovers, and its primaries
//! read into the [`Topology`].
//!
//! **Following a failover.** The client crate follows the cluster by itself: a node that refuses
//! connections loses its connection, and the next request for its slots finds none and asks the
//! cluster for its slot map again (`CLUSTER SLOTS`), which names the promoted replica once the
//! cluster has promoted it; `MOVED` and `READONLY` replies do the same. So a killed primary's
//! slots fail (each call within its deadline) from the kill until the promotion, and are served
//! again a round of slot refresh after it; the other primaries' slots are not touched, except
//! while the cluster itself refuses every slot (`CLUSTERDOWN`, with the default
//! `cluster-require-full-coverage yes`, between the node being marked failed and its replica's
//! promotion).
//!
//! **Reconnecting.** The client crate reconnects to each node by itself, and asks the slot map
//! again when none of the nodes it knows answers: a cluster restarted whole (every node killed
//! and started again), or whose password was changed and restored, answers again on the next
//! call (`tests/cluster_failover.rs`). So the connection is made once, and the topology's
//! `reconnects` stays 0 for a cluster (its nodes' reconnections are the client's own).
//!
//! **Topology.** The primaries are read (`CLUSTER SLOTS` on any node) once connected, every
//! [`READ_EVERY`] from a call failed at the connection level until [`READS_AFTER`] reads after
//! the last such failure, and every [`READ_IDLE`] anyway.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use flowgate_core::StoreError;
use redis::Value;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use tokio::time::Instant;

use crate::topology::Topology;

/// How soon the primaries are read again after a connection-level failure.
pub(crate) const READ_EVERY: Duration = Duration::from_millis(500);

/// How many times the primaries are read again after the last connection-level failure.
const READS_AFTER: u32 = 4;

/// How often the primaries are read while everything answers.
pub(crate) const READ_IDLE: Duration = Duration::from_secs(10);

/// A Redis Cluster's connection; see the module's documentation.
pub(crate) struct Cluster {
    client: ClusterClient,
    conn: tokio::sync::OnceCell<ClusterConnection>,
    connect_timeout: Duration,
    topology: Arc<Topology>,
    /// A call failed at the connection level since the primaries were last read.
    dirty: AtomicBool,
    /// The task that reads the primaries is running.
    watching: AtomicBool,
}

impl Cluster {
    pub(crate) fn new(
        client: ClusterClient,
        connect_timeout: Duration,
        topology: Arc<Topology>,
    ) -> Self {
        Self {
            client,
            conn: tokio::sync::OnceCell::new(),
            connect_timeout,
            topology,
            dirty: AtomicBool::new(false),
            watching: AtomicBool::new(false),
        }
    }

    /// A new connection from the URL's nodes, within four connect timeouts.
    async fn connect(&self) -> redis::RedisResult<ClusterConnection> {
        tokio::time::timeout(self.connect_timeout * 4, self.client.get_async_connection())
            .await
            .unwrap_or_else(|_| {
                Err(redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no node of the cluster answered",
                )))
            })
    }

    /// The connection in force, made now if there is none yet (until one node answers, every
    /// call tries again).
    pub(crate) async fn get(self: &Arc<Self>) -> redis::RedisResult<ClusterConnection> {
        if let Some(c) = self.conn.get() {
            return Ok(c.clone());
        }
        let c = self.conn.get_or_try_init(|| self.connect()).await?.clone();
        self.watch();
        Ok(c)
    }

    /// A call's outcome: a connection-level failure has the primaries read again soon.
    pub(crate) fn outcome<T>(&self, r: &Result<T, StoreError>) {
        if matches!(r, Err(StoreError::Unavailable(_) | StoreError::Timeout))
            && !self.dirty.load(Ordering::Relaxed)
        {
            self.dirty.store(true, Ordering::Relaxed);
        }
    }

    /// Starts the task that reads the primaries (once).
    fn watch(self: &Arc<Self>) {
        if self.watching.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(read_primaries(Arc::downgrade(self)));
        }
    }

    /// Reads the primaries from any node into the topology.
    async fn read_primaries(&self) -> Result<(), StoreError> {
        let Some(mut conn) = self.conn.get().cloned() else {
            return Ok(());
        };
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let reply = tokio::time::timeout(
            self.connect_timeout * 2,
            conn.route_command(redis::cmd("CLUSTER").arg("SLOTS").clone(), routing),
        )
        .await
        .map_err(|_| StoreError::Timeout)?
        .map_err(|e| crate::error::store_error(&e))?;
        let primaries = primaries(&reply);
        if !primaries.is_empty() {
            self.topology.primaries_are(primaries);
        }
        Ok(())
    }

    /// Whether the cluster serves its slots: a node (any) reports `cluster_state:ok`.
    pub(crate) async fn serves(self: &Arc<Self>) -> redis::RedisResult<bool> {
        let mut conn = self.get().await?;
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let info = conn
            .route_command(redis::cmd("CLUSTER").arg("INFO").clone(), routing)
            .await?;
        let text: String = redis::FromRedisValue::from_redis_value(info)?;
        Ok(text.contains("cluster_state:ok"))
    }
}

/// Reads the primaries now, then every [`READ_EVERY`] after a connection-level failure and
/// every [`READ_IDLE`] anyway; ends with the connection.
async fn read_primaries(cluster: Weak<Cluster>) {
    let mut last = None::<Instant>;
    // (read a few times more after the failures stop: the nodes learn of a promotion by
    // gossip, the one asked maybe last)
    let mut again = 0u32;
    loop {
        let Some(c) = cluster.upgrade() else {
            return;
        };
        let failed = c.dirty.swap(false, Ordering::Relaxed);
        let due = last.is_none_or(|at| at.elapsed() >= READ_IDLE);
        if due || failed || again > 0 {
            again = if failed {
                READS_AFTER
            } else {
                again.saturating_sub(1)
            };
            if let Err(e) = c.read_primaries().await {
                c.dirty.store(true, Ordering::Relaxed);
                tracing::debug!(target: "flowgate_redis", error = %e, "cannot read the cluster's primaries");
            }
            last = Some(Instant::now());
        }
        drop(c);
        tokio::time::sleep(READ_EVERY).await;
    }
}

/// The primaries (`host:port`) of a `CLUSTER SLOTS` reply: each range's first node.
fn primaries(reply: &Value) -> Vec<String> {
    let Value::Array(ranges) = reply else {
        return Vec::new();
    };
    ranges
        .iter()
        .filter_map(|range| match range {
            Value::Array(r) => match r.get(2) {
                Some(Value::Array(node)) => address(node),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// `host:port` of a `CLUSTER SLOTS` node entry (`[host, port, id, …]`).
fn address(node: &[Value]) -> Option<String> {
    let host = match node.first()? {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    let port = match node.get(1)? {
        Value::Int(p) => *p,
        _ => return None,
    };
    Some(format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(host.as_bytes().to_vec()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    #[test]
    fn the_primaries_are_each_ranges_first_node() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
                node("10.0.0.4", 7000),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                node("10.0.0.2", 7000),
            ]),
        ]);
        assert_eq!(
            primaries(&reply),
            vec!["10.0.0.1:7000".to_owned(), "10.0.0.2:7000".to_owned()]
        );
        assert!(primaries(&Value::Nil).is_empty());
    }
}
