//! Asking Redis Sentinel where the primary is: the URL `redis+sentinel://[user:pass@]h1:p1,h2:p2/<master-name>`
//! (`rediss+sentinel://` over TLS, to the sentinels and the data nodes alike), the sentinels'
//! answer, and a connection to the primary they name whose `ROLE` says it is one.
//!
//! The sentinels are asked at once, `SENTINEL MASTER <name>` each, and the answers of a majority
//! of them (or of every one that answers, when fewer do) are weighed: the address with the
//! highest `config-epoch` wins. A sentinel that missed a promotion (cut off, or restarted) still
//! names the old primary, with the epoch before the promotion, so it is outvoted; a primary the
//! sentinels agree is down (`o_down`) is not taken. The connection that then carries the writes is
//! the one `ROLE` was asked on: a node that is no longer the primary is refused before anything
//! is written to it.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt as _;
use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, Client, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo,
    RedisError, RedisResult,
};

use crate::options::ConnectionOptions;

/// The schemes of a sentinel URL, each with whether it is over TLS.
const SCHEMES: [(&str, bool); 2] = [("redis+sentinel://", false), ("rediss+sentinel://", true)];

/// Sentinel's default port.
const SENTINEL_PORT: u16 = 26379;

/// Whether `url` names its primary through Redis Sentinel (`redis+sentinel://…`,
/// `rediss+sentinel://…`).
///
/// # Examples
/// ```
/// use flowgate_redis::is_sentinel_url;
/// assert!(is_sentinel_url("redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster"));
/// assert!(!is_sentinel_url("redis://10.0.0.1:6379/"));
/// ```
pub fn is_sentinel_url(url: &str) -> bool {
    SCHEMES.iter().any(|(s, _)| url.trim_start().starts_with(s))
}

/// An invalid sentinel URL's error.
fn invalid(what: &'static str, detail: String) -> RedisError {
    RedisError::from((redis::ErrorKind::InvalidClientConfig, what, detail))
}

/// What a sentinel URL says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SentinelUrl {
    /// Over TLS (`rediss+sentinel://`).
    pub(crate) tls: bool,
    /// The sentinels' `host:port`.
    pub(crate) sentinels: Vec<(String, u16)>,
    /// The name the sentinels monitor the primary under.
    pub(crate) master: String,
    /// The URL's user information (`user:pass`, still percent-encoded): the data nodes'.
    pub(crate) userinfo: Option<String>,
}

/// `host:port` (`[v6]:port`) as a pair, the port Sentinel's default when absent.
fn host_port(text: &str) -> Result<(String, u16), String> {
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && (!h.contains(':') || h.ends_with(']')) => {
            let port = p
                .parse::<u16>()
                .map_err(|_| format!("`{p}` is not a port"))?;
            (h, port)
        }
        _ => (text, SENTINEL_PORT),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("`{text}` names no host"));
    }
    Ok((host.to_owned(), port))
}

impl SentinelUrl {
    /// Parses `redis+sentinel://[user:pass@]h1:p1,h2:p2/<master-name>`.
    pub(crate) fn parse(url: &str) -> RedisResult<Self> {
        let url = url.trim();
        let Some((rest, tls)) = SCHEMES
            .iter()
            .find_map(|(s, tls)| url.strip_prefix(s).map(|r| (r, *tls)))
        else {
            return Err(invalid(
                "not a Redis Sentinel URL",
                "it starts with redis+sentinel:// or rediss+sentinel://".into(),
            ));
        };
        let (userinfo, rest) = match rest.rsplit_once('@') {
            Some((u, r)) => (Some(u.to_owned()), r),
            None => (None, rest),
        };
        let (hosts, master) = rest.split_once('/').unwrap_or((rest, ""));
        let master = master.trim_end_matches('/');
        if master.is_empty() || master.contains(['/', '?', '#']) {
            return Err(invalid(
                "a Redis Sentinel URL names its master after the hosts",
                "as in redis+sentinel://h1:26379,h2:26379/mymaster".into(),
            ));
        }
        let sentinels = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(host_port)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid("a Redis Sentinel URL's host is invalid", e))?;
        if sentinels.is_empty() {
            return Err(invalid(
                "a Redis Sentinel URL names no sentinel",
                "as in redis+sentinel://h1:26379,h2:26379/mymaster".into(),
            ));
        }
        Ok(Self {
            tls,
            sentinels,
            master: master.to_owned(),
            userinfo,
        })
    }
}

/// A node's `host:port` as a URL's authority.
fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The failure of asking every sentinel of `master`, whose text names each sentinel with its
/// error (a refused password, an unknown certificate issuer, a refused connection), so that the
/// log says which address to look at. An I/O error: an outage, a timeout when every sentinel
/// timed out.
fn unanswered(master: &str, failures: &[(&str, RedisError)]) -> RedisError {
    let kind = if failures.iter().all(|(_, e)| e.is_timeout()) {
        std::io::ErrorKind::TimedOut
    } else {
        std::io::ErrorKind::Other
    };
    let each: Vec<String> = failures
        .iter()
        .map(|(at, e)| format!("{at}: {e}"))
        .collect();
    RedisError::from(std::io::Error::new(
        kind,
        format!(
            "no sentinel of master `{master}` answered ({})",
            each.join("; ")
        ),
    ))
}

/// A failure to connect to the primary at `addr` the sentinels name, its text naming it (a
/// timeout stays one).
fn unreachable_primary(addr: &str, e: &RedisError) -> RedisError {
    let kind = if e.is_timeout() {
        std::io::ErrorKind::TimedOut
    } else {
        std::io::ErrorKind::Other
    };
    RedisError::from(std::io::Error::new(
        kind,
        format!("the primary the sentinels name, {addr}, cannot be reached: {e}"),
    ))
}

/// The primary the sentinels name, connected: its `host:port` and the connection its `ROLE` was
/// asked on.
pub(crate) struct Primary {
    pub(crate) addr: String,
    pub(crate) conn: MultiplexedConnection,
}

/// One sentinel's answer about the master.
#[derive(Debug)]
struct Named {
    addr: (String, u16),
    epoch: u64,
    down: bool,
}

/// The sentinels of one master, and how to reach the data nodes they name.
pub(crate) struct Sentinels {
    /// Each sentinel's `host:port` and client (with the sentinels' credentials).
    sentinels: Vec<(String, Client)>,
    master: String,
    tls: bool,
    /// The data nodes' credentials (the URL's).
    node: RedisConnectionInfo,
    certs: Option<redis::TlsCertificates>,
    config: AsyncConnectionConfig,
    /// How long asking one sentinel may take.
    ask_timeout: Duration,
}

impl Sentinels {
    /// The sentinels of `url` (`redis+sentinel://…`), reached with `options` (the sentinels'
    /// credentials, the TLS certificates, the timeouts).
    ///
    /// # Errors
    /// For an invalid URL, or certificates given for a URL without TLS.
    pub(crate) fn new(url: &str, options: &ConnectionOptions) -> RedisResult<Self> {
        let parsed = SentinelUrl::parse(url)?;
        let scheme = if parsed.tls { "rediss" } else { "redis" };
        let certs = crate::conn::certificates(&format!("{scheme}://"), options.tls.as_ref())?;
        // The URL's credentials, decoded by the client crate's own parser.
        let (host, port) = &parsed.sentinels[0];
        let template = match &parsed.userinfo {
            Some(u) => format!("{scheme}://{u}@{}/", authority(host, *port)),
            None => format!("{scheme}://{}/", authority(host, *port)),
        };
        let node = template.into_connection_info()?.redis_settings().clone();
        let mut sentinel_auth = RedisConnectionInfo::default();
        if let Some(u) = &options.sentinel.username {
            sentinel_auth = sentinel_auth.set_username(u);
        }
        if let Some(p) = &options.sentinel.password {
            sentinel_auth = sentinel_auth.set_password(p);
        }
        let mut sentinels = Vec::with_capacity(parsed.sentinels.len());
        for (host, port) in &parsed.sentinels {
            let info = Self::info(scheme, host, *port, &sentinel_auth)?;
            sentinels.push((authority(host, *port), Self::open(info, certs.clone())?));
        }
        Ok(Self {
            sentinels,
            master: parsed.master,
            tls: parsed.tls,
            node,
            certs,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(options.connect_timeout))
                .set_response_timeout(Some(options.timeout)),
            ask_timeout: options.connect_timeout * 2,
        })
    }

    fn info(
        scheme: &str,
        host: &str,
        port: u16,
        auth: &RedisConnectionInfo,
    ) -> RedisResult<ConnectionInfo> {
        Ok(format!("{scheme}://{}/", authority(host, port))
            .into_connection_info()?
            .set_redis_settings(auth.clone()))
    }

    fn open(info: ConnectionInfo, certs: Option<redis::TlsCertificates>) -> RedisResult<Client> {
        match certs {
            Some(c) => Client::build_with_tls(info, c),
            None => Client::open(info),
        }
    }

    /// The master's name.
    pub(crate) fn master(&self) -> &str {
        &self.master
    }

    /// Each sentinel's client (to follow its `+switch-master` announcements).
    pub(crate) fn clients(&self) -> impl Iterator<Item = &Client> {
        self.sentinels.iter().map(|(_, c)| c)
    }

    /// A client of the data node at `host:port`, with the URL's credentials and TLS.
    pub(crate) fn node_client(&self, host: &str, port: u16) -> RedisResult<Client> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        Self::open(
            Self::info(scheme, host, port, &self.node)?,
            self.certs.clone(),
        )
    }

    /// One sentinel's answer: `SENTINEL MASTER <name>`.
    async fn ask(&self, client: &Client) -> RedisResult<Named> {
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        let info: HashMap<String, String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.master)
            .query_async(&mut conn)
            .await?;
        let field = |k: &str| info.get(k).map(String::as_str).unwrap_or_default();
        let port = field("port").parse::<u16>().map_err(|_| {
            invalid(
                "a sentinel's answer has no port",
                format!("{:?}", field("port")),
            )
        })?;
        Ok(Named {
            addr: (field("ip").to_owned(), port),
            epoch: field("config-epoch").parse().unwrap_or(0),
            down: field("flags").split(',').any(|f| f == "o_down"),
        })
    }

    /// The primary the sentinels name: asked at once, the answers of a majority (or of all that
    /// answer) weighed by their `config-epoch` (see the module's documentation).
    ///
    /// # Errors
    /// When no sentinel answers, or those that do name no primary up.
    pub(crate) async fn named_primary(&self) -> RedisResult<(String, u16)> {
        let majority = self.sentinels.len() / 2 + 1;
        let mut asking: futures::stream::FuturesUnordered<_> = self
            .sentinels
            .iter()
            .map(|(at, client)| async move {
                let answer = tokio::time::timeout(self.ask_timeout, self.ask(client))
                    .await
                    .unwrap_or_else(|_| {
                        Err(RedisError::from(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "no answer",
                        )))
                    });
                (at, answer)
            })
            .collect();
        let mut answers = Vec::new();
        let mut failures = Vec::new();
        while let Some((at, answer)) = asking.next().await {
            match answer {
                Ok(named) => answers.push(named),
                Err(e) => {
                    tracing::debug!(sentinel = %at, error = %e, "a sentinel did not answer");
                    failures.push((at.as_str(), e));
                }
            }
            if answers.len() >= majority {
                break;
            }
        }
        let best = answers.iter().filter(|n| !n.down).max_by_key(|n| n.epoch);
        match best {
            Some(n) => Ok(n.addr.clone()),
            None if !answers.is_empty() => Err(RedisError::from((
                redis::ErrorKind::Server(redis::ServerErrorKind::MasterDown),
                "the sentinels agree the primary is down",
                self.master.clone(),
            ))),
            None if failures.is_empty() => Err(invalid("no sentinel to ask", String::new())),
            None => Err(unanswered(&self.master, &failures)),
        }
    }

    /// The primary the sentinels name, connected, its `ROLE` checked on that connection.
    ///
    /// # Errors
    /// When no sentinel answers, the node cannot be reached, or it is not a primary.
    pub(crate) async fn primary(&self) -> RedisResult<Primary> {
        let (host, port) = self.named_primary().await?;
        let mut conn = self
            .node_client(&host, port)?
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
            .map_err(|e| unreachable_primary(&authority(&host, port), &e))?;
        let role: redis::Role = redis::cmd("ROLE").query_async(&mut conn).await?;
        if !matches!(role, redis::Role::Primary { .. }) {
            return Err(RedisError::from((
                redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
                "the node the sentinels name is not a primary (yet)",
                authority(&host, port),
            )));
        }
        Ok(Primary {
            addr: authority(&host, port),
            conn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_master_and_credentials() {
        let u =
            SentinelUrl::parse("redis+sentinel://app:p%40ss@10.0.0.1:26379, 10.0.0.2/mymaster/")
                .unwrap();
        assert_eq!(
            u,
            SentinelUrl {
                tls: false,
                sentinels: vec![
                    ("10.0.0.1".into(), 26379),
                    ("10.0.0.2".into(), SENTINEL_PORT)
                ],
                master: "mymaster".into(),
                userinfo: Some("app:p%40ss".into()),
            }
        );
        let u = SentinelUrl::parse("rediss+sentinel://[::1]:5000/m").unwrap();
        assert!(u.tls);
        assert_eq!(u.sentinels, vec![("::1".to_owned(), 5000)]);
    }

    #[test]
    fn refuses_a_url_without_master_or_sentinel_or_with_a_bad_port() {
        for bad in [
            "redis+sentinel://10.0.0.1:26379",
            "redis+sentinel://10.0.0.1:26379/",
            "redis+sentinel:///mymaster",
            "redis+sentinel://10.0.0.1:x/mymaster",
            "redis+sentinel://10.0.0.1/m/0",
            "redis://10.0.0.1/m",
        ] {
            assert!(SentinelUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_data_nodes_get_the_urls_credentials_the_sentinels_their_own() {
        let options = ConnectionOptions::default()
            .sentinel(crate::SentinelAuth::default().password("sentinel-secret"));
        let s = Sentinels::new("redis+sentinel://:data%2Fsecret@127.0.0.1:1/m", &options).unwrap();
        let node = s.node_client("127.0.0.1", 2).unwrap();
        assert_eq!(
            node.get_connection_info().redis_settings().password(),
            Some("data/secret")
        );
        let sentinel = s.clients().next().unwrap();
        assert_eq!(
            sentinel.get_connection_info().redis_settings().password(),
            Some("sentinel-secret")
        );
    }
}
