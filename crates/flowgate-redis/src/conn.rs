//! [`RedisConnection`]: the one connection layer of everything that talks to Redis (the store's
//! decisions, the queues, the server's shared rules).
//!
//! One multiplexed, self-reconnecting connection to a single server, or a cluster connection
//! (MOVED/ASK handled by the client crate), made now or on first use. Every call is bounded in
//! time, and every client error becomes a [`StoreError`] by one mapping ([`crate::error`]).
//!
//! TLS: `rediss://host:port` for one server, `rediss+cluster://host:port,host:port` for a
//! cluster, with the certificates of [`ConnectionOptions::tls`] (a private CA, a client
//! certificate for mutual TLS). rustls on the `ring` provider does the TLS.

use std::sync::Arc;
use std::time::Duration;

use flowgate_core::StoreError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::{Client, Cmd, FromRedisValue, Pipeline, Value};

use crate::cluster_conn::Cluster;
use crate::error::store_error;
use crate::options::{ConnectionOptions, RedisTls};
use crate::sentinel::{SentinelLink, is_sentinel_url};
use crate::single::Single;
use crate::topology::{Topology, TopologyKind, TopologyView};

/// The URL schemes of a Redis Cluster given by its nodes, `redis+cluster://host:port,host:port`
/// (`rediss+cluster://` over TLS), and the scheme of each node's URL.
const CLUSTER_SCHEMES: [(&str, &str); 2] = [
    ("redis+cluster://", "redis://"),
    ("rediss+cluster://", "rediss://"),
];

/// The server URLs of `url`: `None` for one server (`redis://…`, `rediss://…`), the nodes of
/// `redis+cluster://a,b` as `redis://a`, `redis://b` (of `rediss+cluster://a,b` as
/// `rediss://a`, `rediss://b`).
///
/// # Examples
/// ```
/// use flowgate_redis::cluster_nodes;
/// assert_eq!(cluster_nodes("redis://127.0.0.1:6379/"), None);
/// assert_eq!(
///     cluster_nodes("redis+cluster://10.0.0.1:7000, 10.0.0.2:7000/"),
///     Some(vec!["redis://10.0.0.1:7000".to_owned(), "redis://10.0.0.2:7000".to_owned()])
/// );
/// assert_eq!(
///     cluster_nodes("rediss+cluster://10.0.0.1:7000"),
///     Some(vec!["rediss://10.0.0.1:7000".to_owned()])
/// );
/// ```
pub fn cluster_nodes(url: &str) -> Option<Vec<String>> {
    CLUSTER_SCHEMES.iter().find_map(|(cluster, node)| {
        url.strip_prefix(cluster).map(|nodes| {
            nodes
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(|n| format!("{node}{}", n.trim_end_matches('/')))
                .collect()
        })
    })
}

/// Whether `url` is a TLS URL (`rediss://…`).
pub(crate) fn is_tls(url: &str) -> bool {
    url.trim_start().starts_with("rediss://")
}

/// Makes `ring` rustls's provider for the process, unless one is already (the client crate
/// takes the process's provider; picking one here means it never has to guess).
fn tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The certificates of `tls` for `url`, refused for a URL without TLS (the certificates would
/// be ignored, and the connection in clear text).
pub(crate) fn certificates(
    url: &str,
    tls: Option<&RedisTls>,
) -> redis::RedisResult<Option<redis::TlsCertificates>> {
    if is_tls(url) {
        tls_provider();
        return Ok(tls.map(RedisTls::certificates));
    }
    match tls {
        Some(_) => Err(redis::RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "TLS certificates are given for a Redis URL without TLS",
            "use rediss:// (or rediss+cluster://, rediss+sentinel://)".to_owned(),
        ))),
        None => Ok(None),
    }
}

/// A client of the single server at `url` (`redis://…` or `rediss://…`) with `tls`'s
/// certificates: the one way a single server's client is made here (the shared rules'
/// subscriber uses it too).
///
/// # Errors
/// For an invalid URL, unreadable certificates, or certificates given for a `redis://` URL.
pub fn client(url: &str, tls: Option<&RedisTls>) -> redis::RedisResult<Client> {
    match certificates(url, tls)? {
        Some(certs) => Client::build_with_tls(url, certs),
        None => Client::open(url),
    }
}

fn manager_config(options: &ConnectionOptions) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(options.connect_timeout))
        .set_response_timeout(Some(options.timeout))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(200))
}

/// A connection to a single Redis server or a Redis Cluster.
///
/// Cheap to clone: clones share the connection, and concurrent callers' commands are pipelined
/// on it. It reconnects by itself after failures. [`RedisConnection::query`] and
/// [`RedisConnection::query_pipe`] wait at most [`ConnectionOptions::timeout`]; a call that
/// fails answers [`StoreError::Timeout`], [`StoreError::Unavailable`] (refused or lost
/// connection, a loading or busy server, cluster trouble) or [`StoreError::Internal`] (a script
/// error, a reply of another type).
///
/// # Examples
/// ```no_run
/// # async fn demo() -> Result<(), flowgate_core::StoreError> {
/// use flowgate_redis::{ConnectionOptions, RedisConnection};
/// let conn = RedisConnection::connect_lazy("redis://127.0.0.1:6379/", ConnectionOptions::default())?;
/// let n: Option<u64> = conn.query(redis::cmd("GET").arg("counter")).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisConnection {
    link: Link,
    timeout: Duration,
    topology: Arc<Topology>,
}

#[derive(Clone)]
enum Link {
    Single(Arc<Single>),
    Sentinel(SentinelLink),
    Cluster(Arc<Cluster>),
}

/// A single server's topology: its primary is its URL's address.
fn single_topology(client: &Client) -> Arc<Topology> {
    let t = Topology::new(TopologyKind::Single);
    t.primaries_are(vec![client.get_connection_info().addr().to_string()]);
    Arc::new(t)
}

/// A failure to connect: unavailable, whatever the client's kind for it.
fn unavailable(e: &redis::RedisError) -> StoreError {
    match store_error(e) {
        StoreError::Internal(m) => StoreError::Unavailable(m),
        other => other,
    }
}

/// Connecting, within `limit`.
async fn connecting<T>(
    limit: Duration,
    f: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r.map_err(|e| unavailable(&e)),
        Err(_) => Err(StoreError::Timeout),
    }
}

impl RedisConnection {
    /// Connects to `url`: `redis://host:port/db` (or `rediss://`) for one server,
    /// `redis+cluster://host:port,host:port` for a cluster through any of its nodes,
    /// `redis+sentinel://host:port,host:port/<master-name>` for the primary Redis Sentinel names.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] or [`StoreError::Timeout`] when Redis cannot be reached or
    /// the URL is invalid.
    pub async fn connect(url: &str, options: ConnectionOptions) -> Result<Self, StoreError> {
        match cluster_nodes(url) {
            Some(nodes) => Self::cluster(&nodes, options).await,
            None if is_sentinel_url(url) => Self::sentinel(url, options).await,
            None => Self::single(url, options).await,
        }
    }

    /// A connection to `url` (as [`RedisConnection::connect`]) made on first use and remade
    /// after failures, so this succeeds while Redis is down; calls fail until it is back.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] for an invalid URL.
    pub fn connect_lazy(url: &str, options: ConnectionOptions) -> Result<Self, StoreError> {
        match cluster_nodes(url) {
            Some(nodes) => Self::cluster_lazy(&nodes, options),
            None if is_sentinel_url(url) => Self::sentinel_lazy(url, options),
            None => Self::single_lazy(url, options),
        }
    }

    /// Connects to the primary the sentinels of `url` name (`redis+sentinel://…`).
    pub(crate) async fn sentinel(
        url: &str,
        options: ConnectionOptions,
    ) -> Result<Self, StoreError> {
        let limit = options.connect_timeout * 4;
        let conn = Self::sentinel_lazy(url, options)?;
        if let Link::Sentinel(s) = &conn.link {
            connecting(limit, s.get()).await?;
        }
        Ok(conn)
    }

    /// The link to the primary the sentinels of `url` name, found on first use and again after
    /// every hint that it changed (see [`crate::sentinel`]).
    pub(crate) fn sentinel_lazy(url: &str, options: ConnectionOptions) -> Result<Self, StoreError> {
        let topology = Arc::new(Topology::new(TopologyKind::Sentinel));
        let link =
            SentinelLink::new(url, &options, Arc::clone(&topology)).map_err(|e| unavailable(&e))?;
        Ok(Self {
            link: Link::Sentinel(link),
            timeout: options.timeout,
            topology,
        })
    }

    /// Connects to a single server.
    pub(crate) async fn single(url: &str, options: ConnectionOptions) -> Result<Self, StoreError> {
        let client = client(url, options.tls.as_ref()).map_err(|e| unavailable(&e))?;
        let config = manager_config(&options);
        let manager = connecting(
            options.connect_timeout * 4,
            ConnectionManager::new_with_config(client.clone(), config.clone()),
        )
        .await?;
        let topology = single_topology(&client);
        Ok(Self {
            link: Link::Single(Arc::new(Single::new(
                client,
                config,
                manager,
                Arc::clone(&topology),
            ))),
            timeout: options.timeout,
            topology,
        })
    }

    /// A single server's connection made on first use (and remade after failures).
    pub(crate) fn single_lazy(url: &str, options: ConnectionOptions) -> Result<Self, StoreError> {
        let client = client(url, options.tls.as_ref()).map_err(|e| unavailable(&e))?;
        let config = manager_config(&options);
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), config.clone())
            .map_err(|e| unavailable(&e))?;
        let topology = single_topology(&client);
        Ok(Self {
            link: Link::Single(Arc::new(Single::new(
                client,
                config,
                manager,
                Arc::clone(&topology),
            ))),
            timeout: options.timeout,
            topology,
        })
    }

    /// Connects to a Redis Cluster through any of its nodes (`redis://host:port` each).
    pub(crate) async fn cluster(
        urls: &[String],
        options: ConnectionOptions,
    ) -> Result<Self, StoreError> {
        let conn = Self::cluster_lazy(urls, options)?;
        if let Link::Cluster(c) = &conn.link {
            c.get().await.map_err(|e| unavailable(&e))?;
        }
        Ok(conn)
    }

    /// A Redis Cluster's connection made on first use (through any of its nodes).
    pub(crate) fn cluster_lazy(
        urls: &[String],
        options: ConnectionOptions,
    ) -> Result<Self, StoreError> {
        let first = urls.first().map_or("", String::as_str);
        let mut builder = ClusterClientBuilder::new(urls.iter().map(String::as_str))
            .connection_timeout(options.connect_timeout)
            .response_timeout(options.timeout)
            .retries(2);
        if let Some(certs) =
            certificates(first, options.tls.as_ref()).map_err(|e| unavailable(&e))?
        {
            builder = builder.certs(certs);
        }
        let client = builder.build().map_err(|e| unavailable(&e))?;
        let topology = Arc::new(Topology::new(TopologyKind::Cluster));
        Ok(Self {
            link: Link::Cluster(Arc::new(Cluster::new(
                client,
                options.connect_timeout,
                Arc::clone(&topology),
            ))),
            timeout: options.timeout,
            topology,
        })
    }

    /// Where the primaries are, failovers followed and connections made again (see
    /// [`TopologyView`]).
    pub fn topology(&self) -> TopologyView {
        self.topology.view()
    }

    /// Whether this is a Redis Cluster's connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(_))
    }

    /// The longest a [`RedisConnection::query`] or [`RedisConnection::query_pipe`] waits.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs a command, its reply read as `T`, within [`RedisConnection::timeout`].
    ///
    /// # Errors
    /// [`StoreError::Timeout`], [`StoreError::Unavailable`], or [`StoreError::Internal`] for an
    /// error reply or a reply that is not a `T`.
    pub async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T, StoreError> {
        let run = async {
            match &self.link {
                Link::Single(c) => Ok(c.answered(cmd.query_async(&mut c.get()).await)),
                Link::Sentinel(s) => match s.get().await {
                    Ok(p) => Ok(s.answered(&p, cmd.query_async(&mut p.conn.clone()).await)),
                    Err(e) => Err(e),
                },
                Link::Cluster(c) => match c.get().await {
                    Ok(mut conn) => Ok(cmd.query_async(&mut conn).await),
                    Err(e) => Err(e),
                },
            }
        };
        self.settle(tokio::time::timeout(self.timeout, run).await)
    }

    /// Runs a pipeline (on a cluster, its keys in one slot), its replies read as `T`, within
    /// [`RedisConnection::timeout`].
    ///
    /// # Errors
    /// As [`RedisConnection::query`].
    pub async fn query_pipe<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, StoreError> {
        let run = async {
            match &self.link {
                Link::Single(c) => Ok(c.answered(pipe.query_async(&mut c.get()).await)),
                Link::Sentinel(s) => match s.get().await {
                    Ok(p) => Ok(s.answered(&p, pipe.query_async(&mut p.conn.clone()).await)),
                    Err(e) => Err(e),
                },
                Link::Cluster(c) => match c.get().await {
                    Ok(mut conn) => Ok(pipe.query_async(&mut conn).await),
                    Err(e) => Err(e),
                },
            }
        };
        self.settle(tokio::time::timeout(self.timeout, run).await)
    }

    /// Runs a script (`EVALSHA`, loaded again on `NOSCRIPT`: see [`redis::Script`]), its reply
    /// read as `T`, within [`RedisConnection::timeout`].
    ///
    /// # Errors
    /// As [`RedisConnection::query`].
    pub async fn query_script<T: FromRedisValue>(
        &self,
        inv: &redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let run = async {
            match &self.link {
                Link::Single(c) => Ok(c.answered(inv.invoke_async(&mut c.get()).await)),
                Link::Sentinel(s) => match s.get().await {
                    Ok(p) => Ok(s.answered(&p, inv.invoke_async(&mut p.conn.clone()).await)),
                    Err(e) => Err(e),
                },
                Link::Cluster(c) => match c.get().await {
                    Ok(mut conn) => Ok(inv.invoke_async(&mut conn).await),
                    Err(e) => Err(e),
                },
            }
        };
        self.settle(tokio::time::timeout(self.timeout, run).await)
    }

    /// A bounded call's outcome: the connection could not be had (unavailable), the command
    /// failed (classified), or no answer came in time; a cluster's connection notes it.
    fn settle<T>(
        &self,
        r: Result<Result<redis::RedisResult<T>, redis::RedisError>, tokio::time::error::Elapsed>,
    ) -> Result<T, StoreError> {
        let r = match r {
            Ok(Ok(reply)) => reply.map_err(|e| store_error(&e)),
            Ok(Err(e)) => Err(unavailable(&e)),
            Err(_) => Err(StoreError::Timeout),
        };
        if let Link::Cluster(c) = &self.link {
            c.outcome(&r);
        }
        r
    }

    /// Notes the outcome of a call made on this connection under a caller's own deadline (a
    /// call cut short by it is never seen here otherwise).
    pub(crate) fn note<T>(&self, r: &Result<T, StoreError>) {
        if let Link::Cluster(c) = &self.link {
            c.outcome(r);
        }
    }

    /// Whether Redis serves now, within [`RedisConnection::timeout`]: a single server (or the
    /// primary the sentinels name) answers `PING`; a cluster's node (any) answers `CLUSTER INFO`
    /// with `cluster_state:ok` (its nodes answer `PING` while the cluster refuses every slot,
    /// between a primary marked failed and its replica's promotion).
    ///
    /// # Errors
    /// As [`RedisConnection::query`]; [`StoreError::Unavailable`] while the cluster's state
    /// is `fail`.
    pub async fn serves(&self) -> Result<(), StoreError> {
        match &self.link {
            Link::Single(_) | Link::Sentinel(_) => {
                self.query::<Value>(&redis::cmd("PING")).await.map(|_| ())
            }
            Link::Cluster(c) => {
                let ok = self.settle(
                    tokio::time::timeout(self.timeout, async {
                        Ok::<_, redis::RedisError>(c.serves().await)
                    })
                    .await,
                )?;
                if ok {
                    Ok(())
                } else {
                    Err(StoreError::Unavailable(
                        "the cluster's state is fail (a primary is failed and not yet replaced)"
                            .into(),
                    ))
                }
            }
        }
    }

    /// `WAIT replicas timeout` on the primary that holds `key`'s slot (the only server of a
    /// single Redis): how many replicas acknowledged every write made through this connection
    /// before it. Redis blocks the connection meanwhile, so give it one of its own.
    ///
    /// # Errors
    /// As [`RedisConnection::query`].
    pub async fn wait_replicas(
        &self,
        key: &str,
        replicas: u32,
        timeout: Duration,
    ) -> Result<u64, StoreError> {
        use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
        let millis = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(millis);
        let run = async {
            match &self.link {
                Link::Single(c) => Ok(c.answered(cmd.query_async::<u64>(&mut c.get()).await)),
                Link::Sentinel(s) => match s.get().await {
                    Ok(p) => Ok(s.answered(&p, cmd.query_async::<u64>(&mut p.conn.clone()).await)),
                    Err(e) => Err(e),
                },
                Link::Cluster(c) => match c.get().await {
                    Ok(mut conn) => {
                        let primary =
                            Route::new(crate::keys::slot(key.as_bytes()), SlotAddr::Master);
                        let routing =
                            RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(primary));
                        Ok(conn
                            .route_command(cmd, routing)
                            .await
                            .and_then(|v| u64::from_redis_value(v).map_err(Into::into)))
                    }
                    Err(e) => Err(e),
                },
            }
        };
        self.settle(tokio::time::timeout(timeout + self.timeout, run).await)
    }

    /// Runs a script invocation (EVALSHA, loading the script on NOSCRIPT), bounded only by the
    /// connection's response timeout: its callers hold their own, shorter deadlines.
    pub(crate) async fn invoke(
        &self,
        inv: &redis::ScriptInvocation<'_>,
    ) -> redis::RedisResult<Value> {
        match &self.link {
            Link::Single(c) => c.answered(inv.invoke_async(&mut c.get()).await),
            Link::Sentinel(s) => {
                let p = s.get().await?;
                s.answered(&p, inv.invoke_async(&mut p.conn.clone()).await)
            }
            Link::Cluster(c) => {
                let r = match c.get().await {
                    Ok(mut conn) => inv.invoke_async(&mut conn).await,
                    Err(e) => Err(e),
                };
                c.outcome(&r.as_ref().map(|_| ()).map_err(store_error));
                r
            }
        }
    }
}
