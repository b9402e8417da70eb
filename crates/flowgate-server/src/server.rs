//! The server: both front ends over one limiter, started in-process and stopped gracefully.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use flowgate::Limiter;
use flowgate::clock::{ManualClock, SystemClock};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::auth::Credentials;
use crate::backend::{Backend, QueueBackend, ServerClock};
use crate::grpc::RlsService;
use crate::listen::{HttpConns, listen, serve_grpc, serve_http, signal};
use crate::rules::doc::RulesDoc;
use crate::rules::follow::Follower;
use crate::rules::shared::SharedRules;
use crate::rules::{RulesInfo, RulesOrigin, RulesSource};
use crate::state::AppState;
use flowgate_config::{ConfigError, Loaded};
use flowgate_observe::view::StoreKind;

/// The default HTTP address (loopback).
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8080";
/// The default gRPC address (loopback).
pub const DEFAULT_GRPC_ADDR: &str = "127.0.0.1:8081";

/// How the server runs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The configuration file or directory.
    pub config: PathBuf,
    /// The HTTP/JSON API's address.
    pub http_addr: SocketAddr,
    /// The Envoy gRPC API's address.
    pub grpc_addr: SocketAddr,
    /// A Redis URL (`redis://...`, `redis+cluster://host:port,host:port` for a cluster,
    /// `redis+sentinel://host:port,host:port/<master-name>` for the primary Redis Sentinel
    /// names; `rediss://`, `rediss+cluster://` and `rediss+sentinel://` over TLS); `None` runs on
    /// the embedded memory store.
    pub redis_url: Option<String>,
    /// The certificates of a `rediss://` Redis (a private CA, a client certificate), for the
    /// store and the shared rules alike; `None` trusts the system's roots.
    pub redis_tls: Option<flowgate_redis::RedisTls>,
    /// The sentinels' own credentials, for a `redis+sentinel://` URL (the data nodes' are the
    /// URL's).
    pub redis_sentinel: flowgate_redis::SentinelAuth,
    /// TLS on the HTTP and gRPC ports; `None` serves them in clear text.
    pub tls: Option<crate::tls::TlsFiles>,
    /// How long a decision may wait for Redis before the rules' failure policies decide.
    pub redis_deadline: Duration,
    /// Consecutive failed calls after which Redis is known down (decisions then go straight to
    /// the failure policies while a probe retries it); 0 never.
    pub redis_down_after: u32,
    /// How often the probe of a Redis known down sends `PING`.
    pub redis_probe_every: Duration,
    /// The credentials given at start (flags and environment), each with its scopes: a scope
    /// no credential names is open, except `admin`, which is then off (see [`crate::auth`]).
    pub credentials: crate::auth::Credentials,
    /// A file of credentials (`name:scopes:secret` lines) beside [`ServerConfig::credentials`],
    /// read again on `SIGHUP` and every 5 s.
    pub credentials_file: Option<PathBuf>,
    /// What the node's rules follow: its files, or the rules shared through Redis.
    pub rules_source: crate::rules::RulesSource,
    /// How often a node following Redis checks the version in force.
    pub rules_check: Duration,
    /// Watch the configuration and reload it on change.
    pub watch: bool,
    /// How often the configuration is polled, in case a file event is lost.
    pub poll_interval: Duration,
    /// A manual clock for the embedded store (tests); `None` uses the real clock.
    pub clock: Option<ManualClock>,
    /// How long a graceful shutdown waits for requests in flight (see `shutdown.rs` for the
    /// whole bound).
    pub shutdown_grace: Duration,
    /// How long a shutdown keeps serving, with `/readyz` answering 503, before the ports close.
    pub drain_delay: Duration,
    /// Where the embedded store keeps queued jobs, and a node following the rules in Redis its
    /// disk cache of the version in force.
    pub data_dir: PathBuf,
    /// Global shadow mode: over the limit, requests are still admitted (envoyproxy/ratelimit's
    /// `SHADOW_MODE`).
    pub shadow_mode: bool,
    /// Global quota mode: every rule in quota mode (envoyproxy/ratelimit's `QUOTA_MODE`).
    pub quota_mode: bool,
    /// gRPC answers carry `RateLimit-*` headers for Envoy to add (envoyproxy/ratelimit's
    /// `LIMIT_RESPONSE_HEADERS_ENABLED`).
    pub response_headers: bool,
    /// Domains whose rules take a gRPC request's cost as a charge, as if each declared
    /// `charge = "report"` (for envoyproxy/ratelimit YAML rules, which cannot say it).
    pub charge_domains: Vec<String>,
    /// Start on a Redis whose eviction policy may evict queued jobs and the shared rules, with a
    /// warning, instead of refusing it.
    pub redis_allow_eviction: bool,
    /// The most HTTP connections at once.
    pub http_max_connections: usize,
    /// The most gRPC connections at once.
    pub grpc_max_connections: usize,
    /// How long an HTTP client may take to send a request's header (also the idle time allowed
    /// between two requests of a kept-alive connection).
    pub http_header_timeout: Duration,
    /// The embedded store's cap on keys; at the cap, a new key evicts the sampled key closest to
    /// empty (see [`flowgate::MemoryStore`]).
    pub max_keys: usize,
    /// This node's name on the dashboard and in the cluster's figures; `None`: the host's name
    /// and the HTTP port.
    pub node_id: Option<String>,
    /// Count the dashboard's figures (per-rule counts, heavy keys, latency).
    pub stats: bool,
    /// The address people reach this server's dashboard at, for the links of alert messages
    /// (`externalURL`, `generatorURL`); `None`: `http://<the HTTP address>`.
    pub external_url: Option<String>,
    /// Alertmanagers (`http://am:9093`) every alert is sent to through their API, beside the
    /// alerts' own `alertmanagers`.
    pub alertmanagers: Vec<String>,
    /// With Redis: queue submits, acks and nacks and rules changes answer only once this many
    /// replicas acknowledged them (`WAIT`); 0 answers once the primary holds them.
    pub redis_wait_replicas: u32,
    /// How long such a write waits for its replicas before it is answered as an error.
    pub redis_wait_timeout: Duration,
    /// `/metrics` also exports envoyproxy/ratelimit's per-rule series under its names
    /// (`ratelimit_service_rate_limit_total_hits` and its siblings).
    pub envoy_metric_names: bool,
    /// The clamps of reservations (`--reserve-max-share`, `--reserve-max-ttl`).
    pub reserve: crate::reserve::ReserveConfig,
    /// HTTP decision answers (`/v1/check`, `/v1/acquire`, `/v1/reserve`) also carry OpenAI's
    /// `x-ratelimit-limit-tokens`, `-remaining-tokens` and `-reset-tokens` (`--openai-headers`).
    pub openai_headers: bool,
}

/// The default cap on HTTP connections (and on gRPC connections) at once.
pub const DEFAULT_HTTP_MAX_CONNECTIONS: usize = 10_000;
/// The default time an HTTP client has to send a request's header.
pub const DEFAULT_HTTP_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The default data directory of the embedded store's queues, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "flowgate-data";

impl ServerConfig {
    /// Defaults: loopback addresses, the embedded store, watching the configuration.
    pub fn new(config: impl Into<PathBuf>) -> Self {
        Self {
            config: config.into(),
            http_addr: DEFAULT_HTTP_ADDR
                .parse()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8080))),
            grpc_addr: DEFAULT_GRPC_ADDR
                .parse()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8081))),
            redis_url: None,
            redis_tls: None,
            redis_sentinel: flowgate_redis::SentinelAuth::default(),
            tls: None,
            redis_deadline: flowgate_redis::DEFAULT_DEADLINE,
            redis_down_after: flowgate_redis::DEFAULT_DOWN_AFTER,
            redis_probe_every: flowgate_redis::DEFAULT_PROBE_EVERY,
            credentials: crate::auth::Credentials::new(),
            credentials_file: None,
            rules_source: crate::rules::RulesSource::Files,
            rules_check: crate::rules::follow::DEFAULT_CHECK,
            watch: true,
            poll_interval: Duration::from_secs(2),
            clock: None,
            shutdown_grace: crate::shutdown::DEFAULT_SHUTDOWN_GRACE,
            drain_delay: Duration::ZERO,
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            shadow_mode: false,
            quota_mode: false,
            response_headers: false,
            charge_domains: Vec::new(),
            redis_allow_eviction: false,
            http_max_connections: DEFAULT_HTTP_MAX_CONNECTIONS,
            grpc_max_connections: DEFAULT_HTTP_MAX_CONNECTIONS,
            http_header_timeout: DEFAULT_HTTP_HEADER_TIMEOUT,
            max_keys: flowgate::store::DEFAULT_MAX_KEYS,
            node_id: None,
            stats: true,
            external_url: None,
            alertmanagers: Vec::new(),
            redis_wait_replicas: 0,
            redis_wait_timeout: flowgate_redis::DEFAULT_WAIT_TIMEOUT,
            envoy_metric_names: false,
            reserve: crate::reserve::ReserveConfig::default(),
            openai_headers: false,
        }
    }

    /// Both APIs on `127.0.0.1:0` (ephemeral ports), for tests.
    pub fn ephemeral(mut self) -> Self {
        self.http_addr = SocketAddr::from(([127, 0, 0, 1], 0));
        self.grpc_addr = SocketAddr::from(([127, 0, 0, 1], 0));
        self
    }
}

/// Why the server could not start or stopped badly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The configuration is invalid (not a `source`: the message already holds it).
    #[error("invalid configuration: {0}")]
    Config(ConfigError),
    /// An address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The store cannot be set up.
    #[error("store: {0}")]
    Store(String),
    /// The ports' TLS cannot be set up (not a `source`: the message names the flag, the file
    /// and why).
    #[error("TLS: {0}")]
    Tls(crate::tls::TlsError),
    /// A front end failed while serving.
    #[error("{api} server failed: {detail}")]
    Serve {
        /// `http` or `grpc`.
        api: &'static str,
        /// What happened.
        detail: String,
    },
}

impl From<crate::tls::TlsError> for ServerError {
    fn from(e: crate::tls::TlsError) -> Self {
        ServerError::Tls(e)
    }
}

impl From<ConfigError> for ServerError {
    fn from(e: ConfigError) -> Self {
        ServerError::Config(e)
    }
}

/// A running server.
pub struct Server {
    http_addr: SocketAddr,
    grpc_addr: SocketAddr,
    /// What a shutdown stops, and in which order (`shutdown.rs`).
    pub(crate) stopping: crate::shutdown::Stopping,
}

fn clock(cfg: &ServerConfig) -> ServerClock {
    match &cfg.clock {
        Some(c) => ServerClock::Manual(c.clone()),
        None => ServerClock::System(SystemClock::new()),
    }
}

/// How the store and the shared rules talk to Redis.
fn redis_options(cfg: &ServerConfig) -> flowgate_redis::RedisOptions {
    let options = flowgate_redis::RedisOptions::default()
        .deadline(cfg.redis_deadline)
        .down_after(cfg.redis_down_after)
        .probe_every(cfg.redis_probe_every)
        .sentinel(cfg.redis_sentinel.clone());
    match &cfg.redis_tls {
        Some(tls) => options.tls(tls.clone()),
        None => options,
    }
}

/// This node's identifier: `--node-id`, else the host's name and the HTTP port.
fn node_id(cfg: &ServerConfig, http_addr: SocketAddr) -> String {
    cfg.node_id.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "flowgate".to_owned());
        format!("{host}:{}", http_addr.port())
    })
}

/// The figures of the node (shared with the cluster's on Redis).
fn stats(
    cfg: &ServerConfig,
    store: StoreKind,
    http_addr: SocketAddr,
) -> Result<flowgate_observe::Stats, ServerError> {
    let redis = match (&cfg.redis_url, store) {
        (Some(url), StoreKind::Redis) => Some(
            flowgate_redis::RedisConnection::connect_lazy(
                url,
                redis_options(cfg)
                    .connection()
                    .timeout(std::time::Duration::from_secs(1)),
            )
            .map_err(|e| ServerError::Store(e.to_string()))?,
        ),
        _ => None,
    };
    Ok(flowgate_observe::Stats::new(
        node_id(cfg, http_addr),
        store,
        redis,
        cfg.stats,
    ))
}

async fn backend(cfg: &ServerConfig) -> Result<Backend, ServerError> {
    match &cfg.redis_url {
        None => Ok(Backend::memory(clock(cfg), cfg.max_keys)),
        Some(url) => Backend::redis_with(url, redis_options(cfg))
            .await
            .map_err(|e| {
                ServerError::Store(format!(
                    "cannot use Redis at {}: {e}",
                    flowgate_config::Redacted(url)
                ))
            }),
    }
}

/// The connection of the writes that wait for replicas, when `--redis-wait-replicas` asks for it.
fn replicated(cfg: &ServerConfig) -> Result<Option<flowgate_redis::Replicated>, ServerError> {
    if cfg.redis_wait_replicas == 0 {
        return Ok(None);
    }
    let Some(url) = cfg.redis_url.as_deref() else {
        return Err(ServerError::Config(ConfigError::new(
            "--redis-wait-replicas",
            None,
            "",
            "waiting for Redis replicas needs --redis-url",
        )));
    };
    flowgate_redis::Replicated::connect_lazy(
        url,
        redis_options(cfg).connection(),
        cfg.redis_wait_replicas,
        cfg.redis_wait_timeout,
    )
    .map(Some)
    .map_err(|e| {
        ServerError::Store(format!(
            "cannot use Redis at {}: {e}",
            flowgate_config::Redacted(url)
        ))
    })
}

/// The credentials in force at start: the flags' and the file's, and the file's follower.
async fn credentials(
    cfg: &ServerConfig,
) -> Result<(Credentials, Option<crate::auth::reload::Reloader>), ServerError> {
    let Some(path) = &cfg.credentials_file else {
        return Ok((cfg.credentials.clone(), None));
    };
    let invalid =
        |e: String| ServerError::Config(ConfigError::new("--credentials-file", None, "", e));
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| invalid(format!("cannot read {}: {e}", path.display())))?;
    let all = crate::auth::reload::combine(&cfg.credentials, path, &text).map_err(invalid)?;
    let reloader = crate::auth::reload::Reloader::new(cfg.credentials.clone(), path.clone(), text);
    Ok((all, Some(reloader)))
}

/// The configuration files, loaded, and their fingerprint (taken before loading: an edit in
/// between is reloaded once more, never missed).
async fn load_files(cfg: &ServerConfig) -> Result<(u64, Loaded), ServerError> {
    let path = cfg.config.clone();
    let (fingerprint, loaded) = tokio::task::spawn_blocking(move || {
        (
            crate::reload::fingerprint(&path),
            flowgate_config::load(&path),
        )
    })
    .await
    .map_err(|e| ServerError::Store(e.to_string()))?;
    Ok((fingerprint, loaded?))
}

/// The rules a node starts with: its files', or, following Redis, the shared version (or its
/// disk cache while Redis is unreachable), with the follower that keeps them in force.
async fn initial_rules(
    cfg: &ServerConfig,
    files: Loaded,
    replicated: Option<flowgate_redis::Replicated>,
) -> Result<(Loaded, RulesInfo, Option<Arc<Follower>>), ServerError> {
    let RulesSource::Redis = cfg.rules_source else {
        let info = RulesInfo {
            version: 1,
            origin: RulesOrigin::Files,
            files: files.config.files.clone(),
        };
        return Ok((files, info, None));
    };
    let url = cfg.redis_url.as_deref().ok_or_else(|| {
        ServerError::Config(ConfigError::new(
            "--rules-source",
            None,
            "",
            "rules shared through Redis need --redis-url",
        ))
    })?;
    let mut shared = SharedRules::connect_with(url, &redis_options(cfg))
        .await
        .map_err(|e| {
            ServerError::Store(format!(
                "rules in Redis at {}: {e}",
                flowgate_config::Redacted(url)
            ))
        })?;
    if let Some(r) = replicated {
        shared = shared.replicated(r);
    }
    let path = cfg.config.clone();
    let doc = tokio::task::spawn_blocking(move || RulesDoc::read(&path))
        .await
        .map_err(|e| ServerError::Store(e.to_string()))??;
    let follower = Follower {
        shared,
        cache: cfg.data_dir.join("rules.json"),
        check: cfg.rules_check,
        files: doc,
        seed_action: format!("seed from the files {}", cfg.config.display()),
    };
    let initial = follower.initial(files).await;
    let version = match &initial.origin {
        RulesOrigin::Redis { version, .. } => *version,
        _ => 0,
    };
    let info = RulesInfo {
        version,
        origin: initial.origin,
        files: Vec::new(),
    };
    Ok((initial.loaded, info, Some(Arc::new(follower))))
}

/// Drops the embedded store's idle keys every 10 s, until `shutdown`.
fn sweep_store(state: Arc<AppState>, shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let sweep = async {
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            loop {
                tick.tick().await;
                state.limiter.store().sweep();
            }
        };
        tokio::select! {
            () = signal(shutdown) => {}
            () = sweep => {}
        }
    })
}

impl Server {
    /// Loads the configuration, sets up the store, binds both addresses and starts serving.
    ///
    /// # Errors
    /// [`ServerError`] when the configuration is invalid (naming file, line and field), an
    /// address cannot be bound, or the store cannot be set up.
    pub async fn bind(cfg: ServerConfig) -> Result<Server, ServerError> {
        let (credentials, follow_credentials) = credentials(&cfg).await?;
        let tls = match &cfg.tls {
            Some(files) => Some(crate::tls::Tls::load(files).await?),
            None => None,
        };
        let (fingerprint, files) = load_files(&cfg).await?;
        let backend = backend(&cfg).await?;
        let store = backend.kind();
        // One connection for every write that waits for replicas (rules changes, queue writes).
        let replicated = replicated(&cfg)?;
        let (loaded, info, follower) = initial_rules(&cfg, files, replicated.clone()).await?;
        let queues = QueueBackend::for_backend(&backend, &cfg.data_dir, clock(&cfg), replicated)
            .map_err(|e| ServerError::Store(e.to_string()))?;
        // Where the jobs are: the start-up line names it, apart from the limiter's store.
        let (queues_in, queues_path) = match &queues {
            QueueBackend::Disk(d) => (
                "disk",
                Some(std::path::absolute(d.path()).unwrap_or_else(|_| d.path().to_owned())),
            ),
            QueueBackend::Redis(_) => ("redis", None),
        };
        // Jobs and shared rules have no expiry: a Redis that may evict them is refused (or,
        // allowed, warned about).
        let keeps = !loaded.queues.specs().is_empty()
            || matches!(cfg.rules_source, crate::rules::RulesSource::Redis);
        let eviction = match (&backend, keeps) {
            (Backend::Redis(r), true) => {
                let policy = crate::eviction::read(r).await;
                if let Some(w) = policy.warning() {
                    if matches!(policy, crate::eviction::Policy::Evicts(_))
                        && !cfg.redis_allow_eviction
                    {
                        return Err(ServerError::Store(format!(
                            "{w} (or start with --redis-allow-eviction to run anyway)"
                        )));
                    }
                    tracing::error!(warning = %w, "Redis eviction policy");
                }
                Some((r.clone(), policy))
            }
            _ => None,
        };
        let limiter = Limiter::new(loaded.rules, backend);
        limiter.breakers().set(loaded.breakers);
        limiter.set_global_shadow(cfg.shadow_mode);
        limiter.set_global_quota(cfg.quota_mode);
        let queue = flowgate::queue::Queue::new(loaded.queues, queues);
        let (http_listener, http_addr) = listen(cfg.http_addr).await?;
        let (grpc_listener, grpc_addr) = listen(cfg.grpc_addr).await?;
        // On Redis the breakers and adaptive limits are the cluster's; on the embedded store,
        // this process's.
        if let Backend::Redis(r) = limiter.store() {
            limiter.breakers().share(r, &node_id(&cfg, http_addr));
            limiter.adaptive().share(r);
        }
        let stats = stats(&cfg, store, http_addr)?;
        let mut state = AppState::new(limiter, queue, loaded.alerts, info, credentials, stats);
        state.response_headers = cfg.response_headers;
        state.charge_domains.clone_from(&cfg.charge_domains);
        state.reserve.config = cfg.reserve;
        state.openai_headers = cfg.openai_headers;
        if cfg.envoy_metric_names {
            state.metrics.enable_envoy_names();
        }
        state.follower = follower.clone();
        let state = Arc::new(state);

        let (tx, rx) = watch::channel(false);
        let http = serve_http(
            http_listener,
            crate::http::router(Arc::clone(&state)),
            HttpConns {
                peers: state.auth.any(),
                lifecycle: state.lifecycle.clone(),
            },
            rx.clone(),
            cfg.http_max_connections,
            cfg.http_header_timeout,
            tls.as_ref().map(|t| t.http.clone()),
        );
        let grpc_services =
            tonic::service::Routes::new(RlsService::new(Arc::clone(&state)).into_server())
                .add_service(crate::grpc_report::server(Arc::clone(&state)))
                .add_service(crate::grpc_decisions::server(
                    Arc::clone(&state),
                    rx.clone(),
                ));
        let grpc = serve_grpc(
            grpc_listener,
            grpc_services,
            rx.clone(),
            cfg.grpc_max_connections,
            cfg.http_header_timeout,
            tls.as_ref().map(|t| t.grpc.clone()),
        );
        let mut background = Vec::new();
        let tls_on = tls.is_some();
        if let Some(tls) = tls {
            background.push(tls.reloader.spawn(rx.clone()));
        }
        if let Some(r) = follow_credentials {
            background.push(r.spawn(Arc::clone(&state.auth), rx.clone()));
        }
        if let Some(f) = &follower {
            background.extend(Arc::clone(f).spawn(Arc::clone(&state.rules), rx.clone()));
        }
        if cfg.watch {
            background.push(crate::reload::spawn(
                Arc::clone(&state.rules),
                follower.is_some(),
                cfg.config.clone(),
                cfg.poll_interval,
                fingerprint,
                rx.clone(),
            ));
        }
        // On the sampler's views: on Redis, the cluster's figures.
        let redis_alerts = cfg.redis_url.as_deref().map(|u| (u, redis_options(&cfg)));
        background.push(
            flowgate_observe::alerts::spawn(
                Arc::clone(&state.alerts),
                state.stats.subscribe(),
                redis_alerts.as_ref().map(|(u, o)| (*u, o)),
                &node_id(&cfg, http_addr),
                flowgate_observe::alerts::Destinations {
                    external_url: cfg
                        .external_url
                        .clone()
                        .unwrap_or_else(|| format!("http://{http_addr}")),
                    alertmanagers: cfg.alertmanagers.clone(),
                },
                rx.clone(),
            )
            .map_err(|e| ServerError::Store(format!("alerts on Redis: {e}")))?,
        );
        background.push(sweep_store(Arc::clone(&state), rx.clone()));
        background.push(crate::reserve::sweep::spawn(Arc::clone(&state), rx.clone()));
        // Awaited at shutdown, not aborted: it may be publishing the figures.
        let figures = tokio::spawn(flowgate_observe::stats::run(
            Arc::clone(&state),
            Arc::clone(&state.stats),
            rx.clone(),
        ));
        background.push(tokio::spawn(crate::queue_watch::run(Arc::clone(&state))));
        background.push(tokio::spawn(crate::probes::watch_store(
            Arc::clone(&state),
            rx.clone(),
        )));
        if let Some((redis, policy)) = eviction {
            state.eviction.set(&policy);
            background.push(tokio::spawn(crate::eviction::watch(
                redis,
                Arc::clone(&state.eviction),
                policy,
            )));
        }

        state.lifecycle.set(crate::probes::Phase::Serving);
        let info = state.rules.info();
        tracing::info!(%http_addr, %grpc_addr, tls = tls_on, client_certs = cfg.tls.as_ref().is_some_and(|t| t.client_ca.is_some()), store = store.name(), queues = queues_in, queues_path = queues_path.as_ref().map(|p| tracing::field::display(p.display())), config = %cfg.config.display(), rules_follow = info.follows(), rules_version = info.version, "flowgate serving");
        Ok(Server {
            http_addr,
            grpc_addr,
            stopping: crate::shutdown::Stopping {
                signal: tx,
                http,
                grpc,
                figures,
                background,
                grace: cfg.shutdown_grace,
                drain_delay: cfg.drain_delay,
                state,
            },
        })
    }

    /// The HTTP API's address.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The gRPC API's address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }
}
