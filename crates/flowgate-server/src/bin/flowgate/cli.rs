//! The command line: `flowgate serve`, `flowgate rules`, `flowgate bench`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use flowgate_server::{
    DEFAULT_DATA_DIR, DEFAULT_GRPC_ADDR, DEFAULT_HTTP_ADDR, Server, ServerConfig,
};

/// Flowgate: distributed rate limiting and shaping.
#[derive(Debug, Parser)]
#[command(name = "flowgate", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The command.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// A command.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve Envoy's rate-limit API (gRPC) and the HTTP/JSON API.
    Serve(Box<ServeArgs>),
    /// Change and inspect the rules shared by a cluster (`--rules-source redis`) through a
    /// server's admin API: push, history, show, rollback.
    Rules(crate::rules_cli::RulesArgs),
    /// Make a credential: a strong token, and the line of the credentials file that grants it
    /// its scopes.
    Tokens(crate::tokens_cli::TokensArgs),
    /// Load a running server over gRPC or HTTP and report throughput and latency.
    Bench(crate::bench::BenchArgs),
    /// Serve a rate-limit service that answers OK to everything (the protocol floor for benchmarks).
    #[command(hide = true)]
    Floor(crate::bench::FloorArgs),
}

/// `flowgate serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Rules: a Flowgate .toml file, an envoyproxy/ratelimit .yaml file, or a directory of them.
    #[arg(long, env = "FLOWGATE_CONFIG")]
    pub(crate) config: PathBuf,
    /// Address of the HTTP/JSON API.
    #[arg(long, env = "FLOWGATE_HTTP_ADDR", default_value = DEFAULT_HTTP_ADDR)]
    pub(crate) http_addr: SocketAddr,
    /// Address of Envoy's rate-limit gRPC API.
    #[arg(long, env = "FLOWGATE_GRPC_ADDR", default_value = DEFAULT_GRPC_ADDR)]
    pub(crate) grpc_addr: SocketAddr,
    /// Redis URL (`redis://host:port/`, `redis+cluster://host:port,host:port` for a cluster,
    /// `redis+sentinel://host:port,host:port/<master-name>` for the primary Redis Sentinel names;
    /// `rediss://`, `rediss+cluster://` and `rediss+sentinel://` over TLS); without it, the
    /// embedded store. The URL's `user:password@` are the data nodes' credentials.
    #[arg(long, env = "FLOWGATE_REDIS_URL", hide_env_values = true)]
    pub(crate) redis_url: Option<String>,
    /// The password of the sentinels themselves (their `requirepass`) for a `redis+sentinel://`
    /// URL; the data nodes' is the URL's. Give it through the variable or
    /// --redis-sentinel-password-file: a value on the command line is visible to every user of
    /// the machine (`ps`).
    #[arg(
        long,
        env = "FLOWGATE_REDIS_SENTINEL_PASSWORD",
        hide_env_values = true,
        conflicts_with = "redis_sentinel_password_file",
        requires = "redis_url"
    )]
    pub(crate) redis_sentinel_password: Option<String>,
    /// A file holding the sentinels' password (its first line).
    #[arg(
        long,
        env = "FLOWGATE_REDIS_SENTINEL_PASSWORD_FILE",
        requires = "redis_url"
    )]
    pub(crate) redis_sentinel_password_file: Option<PathBuf>,
    /// The sentinels' ACL user, with their password (`sentinel sentinel-user`); without it,
    /// `requirepass`.
    #[arg(long, env = "FLOWGATE_REDIS_SENTINEL_USERNAME", requires = "redis_url")]
    pub(crate) redis_sentinel_username: Option<String>,
    /// The CA certificate(s) (PEM) that a `rediss://` Redis's certificate must chain to, instead
    /// of the system's roots (a private CA).
    #[arg(long, env = "FLOWGATE_REDIS_CA_CERT", requires = "redis_url")]
    pub(crate) redis_ca_cert: Option<PathBuf>,
    /// A client certificate (PEM) presented to a `rediss://` Redis that requires one
    /// (`tls-auth-clients yes`); with --redis-client-key.
    #[arg(long, env = "FLOWGATE_REDIS_CLIENT_CERT", requires_all = ["redis_client_key", "redis_url"])]
    pub(crate) redis_client_cert: Option<PathBuf>,
    /// The private key (PEM) of --redis-client-cert.
    #[arg(
        long,
        env = "FLOWGATE_REDIS_CLIENT_KEY",
        requires = "redis_client_cert"
    )]
    pub(crate) redis_client_key: Option<PathBuf>,
    /// Serve the HTTP and gRPC ports over TLS with this certificate chain (PEM, the server's
    /// certificate first); with --tls-key. The files are read again every
    /// --tls-reload-interval and on SIGHUP: a changed pair is used for new connections, a
    /// broken one is logged and the one in force kept.
    #[arg(long, env = "FLOWGATE_TLS_CERT", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, env = "FLOWGATE_TLS_KEY", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Require a client certificate on both ports (mutual TLS), verified against these CA
    /// certificates (PEM); needs --tls-cert and --tls-key.
    #[arg(long, env = "FLOWGATE_TLS_CLIENT_CA", requires = "tls_cert")]
    pub(crate) tls_client_ca: Option<PathBuf>,
    /// With --tls-client-ca: whether every client must present a certificate (`required`) or
    /// may connect without one and use a bearer token (`optional`); a certificate presented is
    /// verified against --tls-client-ca in both modes.
    #[arg(
        long,
        env = "FLOWGATE_TLS_CLIENT_AUTH",
        requires = "tls_client_ca",
        value_enum,
        default_value = "required"
    )]
    pub(crate) tls_client_auth: flowgate_server::ClientAuth,
    /// How often the --tls-cert and --tls-key files are read again (e.g. `5s`, `1m`).
    #[arg(long, env = "FLOWGATE_TLS_RELOAD_INTERVAL", default_value = "5s", value_parser = parse_deadline)]
    pub(crate) tls_reload_interval: std::time::Duration,
    /// How long a decision may wait for Redis (e.g. `25ms`, `2s`); past it, each rule's failure
    /// policy (`open`, `closed`, `local`) decides.
    #[arg(long, env = "FLOWGATE_REDIS_DEADLINE", default_value = "25ms", value_parser = parse_deadline)]
    pub(crate) redis_deadline: std::time::Duration,
    /// Consecutive failed Redis calls (refused, lost, past the deadline) after which Redis is
    /// known down: decisions then go straight to the failure policies, without waiting for the
    /// deadline, while a probe retries Redis. 0: never (every decision waits for Redis).
    #[arg(long, env = "FLOWGATE_REDIS_DOWN_AFTER", default_value_t = flowgate_redis::DEFAULT_DOWN_AFTER)]
    pub(crate) redis_down_after: u32,
    /// How often the probe of a Redis known down sends `PING`; its first answer brings Redis
    /// back.
    #[arg(long, env = "FLOWGATE_REDIS_PROBE_EVERY", default_value = "100ms", value_parser = parse_deadline)]
    pub(crate) redis_probe_every: std::time::Duration,
    /// The credentials file: one `name:scopes:secret` per line (`#` starts a comment line), the
    /// scopes among admin, worker, reporter, reader and decide, the secret a token's
    /// `sha256:<hex>` digest (`flowgate tokens new` makes both), the token itself, or
    /// `subject:<name>` for a client certificate (mutual TLS). Read again on SIGHUP and every
    /// 5 s. A scope no credential names is open to anyone who reaches the port; the admin
    /// routes are off without an admin credential.
    #[arg(long, env = "FLOWGATE_CREDENTIALS_FILE")]
    pub(crate) credentials_file: Option<PathBuf>,
    /// An admin token (at least 32 characters), named `admin` in the rules' history. Give it
    /// through the variable: a value on the command line is visible to every user of the
    /// machine (`ps`).
    #[arg(long, env = "FLOWGATE_ADMIN_TOKEN", hide_env_values = true)]
    pub(crate) admin_token: Option<String>,
    /// A file of named admin tokens, one `name:token` per line (`#` starts a comment line); the
    /// name is the author of the changes made with the token. (The credentials file does this
    /// and more: `name:admin:<token>`.)
    #[arg(long, env = "FLOWGATE_ADMIN_TOKENS_FILE")]
    pub(crate) admin_tokens_file: Option<PathBuf>,
    /// Named admin tokens, `name:token,name:token` (as the tokens file).
    #[arg(long, env = "FLOWGATE_ADMIN_TOKENS", hide_env_values = true)]
    pub(crate) admin_tokens: Option<String>,
    /// A `reader` token named `dashboard`: the figures, `/metrics`, the queues' listings, the
    /// rules in force and dead letters then need it (or another reader or admin credential).
    #[arg(long, env = "FLOWGATE_DASHBOARD_TOKEN", hide_env_values = true)]
    pub(crate) dashboard_token: Option<String>,
    /// The secret flags given on the command line rather than through their variables (filled
    /// in by `main`, for the warning).
    #[arg(skip)]
    pub(crate) secrets_on_command_line: Vec<&'static str>,
    /// What the rules follow: `files` (the configuration, watched; `PUT /v1/rules` lasts until
    /// the files change) or `redis` (the versioned rules shared by every node through Redis;
    /// the files only seed the first version).
    #[arg(
        long,
        env = "FLOWGATE_RULES_SOURCE",
        value_enum,
        default_value = "files"
    )]
    pub(crate) rules_source: flowgate_server::rules::RulesSource,
    /// Following Redis: how often the version in force is checked (changes are also notified at
    /// once; the check catches a missed notification).
    #[arg(long, env = "FLOWGATE_RULES_CHECK", default_value = "1s", value_parser = parse_deadline)]
    pub(crate) rules_check: std::time::Duration,
    /// Do not watch the configuration for changes (rules then change only through the admin API).
    #[arg(long, env = "FLOWGATE_NO_WATCH")]
    pub(crate) no_watch: bool,
    /// Where the embedded store keeps queued jobs (a redb database, `queues.redb`; with Redis
    /// jobs live in Redis), and a node following the rules in Redis its copy of the version in
    /// force (`rules.json`); relative to the working directory.
    #[arg(long, env = "FLOWGATE_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub(crate) data_dir: PathBuf,
    /// Global shadow mode: every rule is evaluated and reported, and no request is rejected
    /// (envoyproxy/ratelimit's `SHADOW_MODE`).
    #[arg(long, env = "FLOWGATE_SHADOW_MODE")]
    pub(crate) shadow_mode: bool,
    /// Global quota mode: every rule is in quota mode, a request is rejected only when all the
    /// rules it matched are over their limits (envoyproxy/ratelimit's `QUOTA_MODE`).
    #[arg(long, env = "FLOWGATE_QUOTA_MODE")]
    pub(crate) quota_mode: bool,
    /// Add `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` to gRPC answers for
    /// Envoy to pass on (envoyproxy/ratelimit's `LIMIT_RESPONSE_HEADERS_ENABLED`).
    #[arg(long, env = "FLOWGATE_RESPONSE_HEADERS")]
    pub(crate) response_headers: bool,
    /// Domains whose rules take a gRPC request's cost (`hits_addend`) as a charge, as if each
    /// declared `charge = "report"`: above 0 counted even past the limit up to `max_debt`
    /// (Envoy's `apply_on_stream_done`, Envoy AI Gateway's tokens), 0 a check. For
    /// envoyproxy/ratelimit YAML rules (`--charge-domains ai-gateway,llm`).
    #[arg(long, env = "FLOWGATE_CHARGE_DOMAINS", value_delimiter = ',')]
    pub(crate) charge_domains: Vec<String>,
    /// HTTP decision answers (`/v1/check`, `/v1/acquire`, `/v1/reserve`) also carry OpenAI's
    /// `x-ratelimit-limit-tokens`, `x-ratelimit-remaining-tokens` and `x-ratelimit-reset-tokens`
    /// for the binding rule, which LLM clients read.
    #[arg(long, env = "FLOWGATE_OPENAI_HEADERS")]
    pub(crate) openai_headers: bool,
    /// The largest reservation (`POST /v1/reserve`'s `estimate`), as a share of each matched
    /// rule's limit (limitador's clamp: half).
    #[arg(long, env = "FLOWGATE_RESERVE_MAX_SHARE", default_value_t = flowgate_server::DEFAULT_MAX_SHARE, value_parser = parse_share)]
    pub(crate) reserve_max_share: f64,
    /// The longest a reservation holds its units uncommitted, and the TTL of one that names
    /// none.
    #[arg(long, env = "FLOWGATE_RESERVE_MAX_TTL", default_value = "60s", value_parser = parse_deadline)]
    pub(crate) reserve_max_ttl: std::time::Duration,
    /// `/metrics` also exports envoyproxy/ratelimit's per-rule series under its names
    /// (`ratelimit_service_rate_limit_total_hits`, `_over_limit`, `_near_limit`,
    /// `_within_limit`, `_shadow_mode`), for the dashboards and alerts built on them.
    #[arg(long, env = "FLOWGATE_ENVOY_METRIC_NAMES")]
    pub(crate) envoy_metric_names: bool,
    /// Run on a Redis whose `maxmemory-policy` may evict keys without expiry (`allkeys-*`), with
    /// a warning (log, `/readyz`, `flowgate_redis_eviction_risk`), instead of refusing to start:
    /// queued jobs and the shared rules could be lost under memory pressure.
    #[arg(long, env = "FLOWGATE_REDIS_ALLOW_EVICTION")]
    pub(crate) redis_allow_eviction: bool,
    /// The most HTTP connections at once; beyond, new ones wait in the listen backlog.
    #[arg(long, env = "FLOWGATE_HTTP_MAX_CONNECTIONS", default_value_t = flowgate_server::DEFAULT_HTTP_MAX_CONNECTIONS)]
    pub(crate) http_max_connections: usize,
    /// The most gRPC connections at once; beyond, new ones wait in the listen backlog.
    #[arg(long, env = "FLOWGATE_GRPC_MAX_CONNECTIONS", default_value_t = flowgate_server::DEFAULT_HTTP_MAX_CONNECTIONS)]
    pub(crate) grpc_max_connections: usize,
    /// How long an HTTP client may take to send a request's header, and stay idle between two
    /// requests of a kept-alive connection, before the connection is closed; also how long a
    /// gRPC client may take to send its first bytes.
    #[arg(long, env = "FLOWGATE_HTTP_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_deadline)]
    pub(crate) http_header_timeout: std::time::Duration,
    /// With Redis: queue submits, acks and nacks and rules changes are answered only once this
    /// many replicas acknowledged them (`WAIT`, on a connection of its own), so a failover
    /// keeps them. 0: once the primary holds them.
    #[arg(long, env = "FLOWGATE_REDIS_WAIT_REPLICAS", default_value_t = 0)]
    pub(crate) redis_wait_replicas: u32,
    /// How long such a write waits for its replicas; past it, it is answered 503 (it is on the
    /// primary, and may be lost by a failover).
    #[arg(long, env = "FLOWGATE_REDIS_WAIT_TIMEOUT", default_value = "1s", value_parser = parse_deadline)]
    pub(crate) redis_wait_timeout: std::time::Duration,
    /// The embedded store's cap on keys (limit states held in memory). At the cap a new key
    /// takes the place of the sampled key closest to empty; no request is refused for it.
    #[arg(long, env = "FLOWGATE_MAX_KEYS", default_value_t = flowgate::store::DEFAULT_MAX_KEYS, value_parser = parse_max_keys)]
    pub(crate) max_keys: usize,
    /// This node's name on the dashboard and in the cluster's figures (default: the host's name
    /// and the HTTP port). Unique per node of a cluster.
    #[arg(long, env = "FLOWGATE_NODE_ID")]
    pub(crate) node_id: Option<String>,
    /// Do not count the dashboard's figures (per-rule counts per second, heavy keys, decision
    /// latency): the dashboard, `GET /v1/stats` and the alerts on rules then see no traffic.
    /// Prometheus metrics are counted either way.
    #[arg(long, env = "FLOWGATE_NO_STATS")]
    pub(crate) no_stats: bool,
    /// The address people reach this server (its dashboard) at, for the links of alert
    /// messages (`externalURL`, `generatorURL`), e.g. `https://flowgate.example.com` (default:
    /// `http://` and the HTTP address).
    // Checked in `serve`, not by clap, whose error would show the URL whole.
    #[arg(long, env = "FLOWGATE_EXTERNAL_URL")]
    pub(crate) external_url: Option<String>,
    /// An Alertmanager (`http://alertmanager:9093`) every alert is sent to through its API
    /// (`POST /api/v2/alerts`), re-sent while firing; repeat the flag (or separate with commas
    /// in the variable) for several.
    // Checked in `serve`, not by clap, whose error would show the URL whole, password included.
    #[arg(
        long = "alertmanager-url",
        env = "FLOWGATE_ALERTMANAGER_URLS",
        value_delimiter = ','
    )]
    pub(crate) alertmanagers: Vec<String>,
    /// On SIGTERM or SIGINT, keep serving this long with `/readyz` answering 503 before the ports
    /// close (e.g. `5s`), so that load balancers and Kubernetes stop sending traffic first: set it
    /// longer than their readiness probe's period (`periodSeconds` × `failureThreshold`). Then
    /// the ports close, queue long-polls answer at once (their job goes back), requests in
    /// flight finish (`--shutdown-grace`), the reports and figures still buffered for Redis are
    /// sent (at most 2 s), and the process exits: within drain delay + shutdown grace + 2 s.
    /// Default `0s`: the ports close at once.
    #[arg(long, env = "FLOWGATE_DRAIN_DELAY", default_value = "0s", value_parser = parse_duration)]
    pub(crate) drain_delay: std::time::Duration,
    /// On SIGTERM or SIGINT, once the ports closed, how long requests in flight (a held
    /// `acquire` until its slot, a gRPC call) have to finish; past it they are cut and the
    /// process exits with an error: set it longer than the longest `max_wait` of a `delay`
    /// rule. A node exits within drain delay + shutdown grace + 2 s: Kubernetes'
    /// `terminationGracePeriodSeconds` should be at least that.
    #[arg(long, env = "FLOWGATE_SHUTDOWN_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub(crate) shutdown_grace: std::time::Duration,
    /// Threads that serve requests (default: one per CPU core). 1 runs the server on one
    /// thread, the cheapest per request where the cores are shared (with Envoy, say).
    #[arg(long, env = "FLOWGATE_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) worker_threads: Option<u16>,
}

fn parse_max_keys(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the cap must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_external_url(text: &str) -> Result<String, String> {
    match text.parse::<http::Uri>() {
        Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some() => {
            Ok(text.trim_end_matches('/').to_owned())
        }
        _ => Err(format!(
            "`{}` is not an http:// or https:// URL with a host",
            flowgate_config::Redacted(text)
        )),
    }
}

fn parse_alertmanager_url(text: &str) -> Result<String, String> {
    flowgate_config::check_alertmanager_url(text.trim())
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    flowgate::rule::parse_duration(text).map_err(|e| e.to_string())
}

fn parse_deadline(text: &str) -> Result<std::time::Duration, String> {
    match flowgate::rule::parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("must be longer than zero".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The credentials of the token flags: `--admin-token` named `admin`, the admin tokens file and
/// list, `--dashboard-token` as a reader named `dashboard`.
fn credentials(args: &ServeArgs) -> anyhow::Result<flowgate_server::auth::Credentials> {
    use flowgate_server::auth::Scope;
    let mut creds = flowgate_server::auth::Credentials::new();
    let msg = |flag: &'static str| move |e: String| anyhow::anyhow!("{flag}: {e}");
    if let Some(t) = args.admin_token.as_deref().filter(|t| !t.is_empty()) {
        creds
            .add_token("admin", Scope::Admin, t)
            .map_err(msg("--admin-token"))?;
    }
    if let Some(path) = &args.admin_tokens_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the admin tokens file {}", path.display()))?;
        creds
            .add_admin_lines(&path.display().to_string(), &text)
            .map_err(anyhow::Error::msg)?;
    }
    if let Some(list) = &args.admin_tokens {
        let lines = list.replace(',', "\n");
        creds
            .add_admin_lines("FLOWGATE_ADMIN_TOKENS", &lines)
            .map_err(anyhow::Error::msg)?;
    }
    if let Some(t) = args.dashboard_token.as_deref().filter(|t| !t.is_empty()) {
        creds
            .add_token("dashboard", Scope::Reader, t)
            .map_err(msg("--dashboard-token"))?;
    }
    Ok(creds)
}

/// Sets up logging from `FLOWGATE_LOG` (default `info`).
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLOWGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

/// SIGINT and SIGTERM, listened to from the moment this is made: from then on neither kills the
/// process by its default action; one that arrives before [`Stop::wait`] is awaited is kept, and
/// that call returns at once.
struct Stop {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Stop {
    /// Installs the handlers (within a Tokio runtime).
    ///
    /// # Errors
    /// When a handler cannot be installed.
    fn listen() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// Until SIGINT or SIGTERM has arrived since [`Stop::listen`].
    async fn wait(&mut self) {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => {}
                _ = self.terminate.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The sentinels' credentials: `--redis-sentinel-username` and the password of
/// `--redis-sentinel-password` or the first line of `--redis-sentinel-password-file`.
///
/// # Errors
/// When the file cannot be read, or is empty.
fn sentinel_auth(args: &ServeArgs) -> anyhow::Result<flowgate_redis::SentinelAuth> {
    let mut auth = flowgate_redis::SentinelAuth::default();
    if let Some(user) = &args.redis_sentinel_username {
        auth = auth.username(user);
    }
    if let Some(p) = &args.redis_sentinel_password {
        auth = auth.password(p);
    }
    if let Some(path) = &args.redis_sentinel_password_file {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "cannot read --redis-sentinel-password-file {}",
                path.display()
            )
        })?;
        let password = text.lines().next().unwrap_or_default().trim_end();
        if password.is_empty() {
            anyhow::bail!(
                "--redis-sentinel-password-file {} holds no password",
                path.display()
            );
        }
        auth = auth.password(password);
    }
    Ok(auth)
}

/// Runs `flowgate serve` until SIGINT or SIGTERM.
///
/// The signals are handled from its first instant, before any port opens: one that arrives while
/// the server starts stops it there (nothing was served yet), and the process exits with success.
///
/// # Errors
/// When the server cannot start (invalid configuration, address in use, store unreachable)
/// or fails.
pub(crate) async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut stop = Stop::listen().context("cannot handle SIGINT and SIGTERM")?;
    init_logging();
    let mut cfg = ServerConfig::new(args.config.clone());
    cfg.credentials = credentials(&args)?;
    cfg.credentials_file = args.credentials_file.clone();
    cfg.http_addr = args.http_addr;
    cfg.grpc_addr = args.grpc_addr;
    cfg.redis_sentinel = sentinel_auth(&args)?;
    cfg.redis_url = args.redis_url.filter(|u| !u.is_empty());
    if args.redis_ca_cert.is_some() || args.redis_client_cert.is_some() {
        let tls = flowgate_redis::RedisTls::from_files(
            args.redis_ca_cert.as_deref(),
            args.redis_client_cert.as_deref(),
            args.redis_client_key.as_deref(),
        )
        .map_err(anyhow::Error::msg)?;
        cfg.redis_tls = Some(tls);
    }
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        let mut files = flowgate_server::TlsFiles::new(cert, key);
        files.client_ca = args.tls_client_ca;
        files.client_auth = args.tls_client_auth;
        files.reload = args.tls_reload_interval;
        cfg.tls = Some(files);
    }
    cfg.redis_deadline = args.redis_deadline;
    cfg.redis_down_after = args.redis_down_after;
    cfg.redis_probe_every = args.redis_probe_every;
    cfg.redis_allow_eviction = args.redis_allow_eviction;
    cfg.http_max_connections = args.http_max_connections;
    cfg.grpc_max_connections = args.grpc_max_connections;
    cfg.http_header_timeout = args.http_header_timeout;
    cfg.max_keys = args.max_keys;
    cfg.node_id = args.node_id;
    cfg.stats = !args.no_stats;
    cfg.redis_wait_replicas = args.redis_wait_replicas;
    cfg.redis_wait_timeout = args.redis_wait_timeout;
    for flag in &args.secrets_on_command_line {
        tracing::warn!(
            flag,
            "a secret on the command line is visible to every user of the machine (ps): give it through its FLOWGATE_ variable or --credentials-file"
        );
    }
    cfg.rules_source = args.rules_source;
    cfg.rules_check = args.rules_check;
    cfg.watch = !args.no_watch;
    cfg.data_dir = args.data_dir;
    cfg.shadow_mode = args.shadow_mode;
    cfg.quota_mode = args.quota_mode;
    cfg.response_headers = args.response_headers;
    cfg.charge_domains = args.charge_domains;
    cfg.openai_headers = args.openai_headers;
    cfg.reserve = flowgate_server::ReserveConfig {
        max_share: args.reserve_max_share,
        max_ttl: args.reserve_max_ttl,
    };
    cfg.envoy_metric_names = args.envoy_metric_names;
    cfg.drain_delay = args.drain_delay;
    cfg.shutdown_grace = args.shutdown_grace;
    cfg.external_url = args
        .external_url
        .as_deref()
        .map(parse_external_url)
        .transpose()
        .map_err(|e| anyhow::anyhow!("invalid value for '--external-url': {e}"))?;
    cfg.alertmanagers = args
        .alertmanagers
        .iter()
        .map(|u| parse_alertmanager_url(u))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("invalid value for '--alertmanager-url': {e}"))?;
    let drain_ms = args.drain_delay.as_millis() as u64;
    let server = tokio::select! {
        bound = Server::bind(cfg) => bound?,
        () = stop.wait() => {
            tracing::info!("stopped while starting");
            return Ok(());
        }
    };
    stop.wait().await;
    let grace_ms = args.shutdown_grace.as_millis() as u64;
    let bound_ms = drain_ms + grace_ms + flowgate_server::FLUSH_BOUND.as_millis() as u64;
    tracing::info!(
        drain_delay_ms = drain_ms,
        shutdown_grace_ms = grace_ms,
        exit_within_ms = bound_ms,
        "shutting down: not ready, finishing requests in flight"
    );
    server.shutdown().await.context("shutdown")?;
    tracing::info!("stopped");
    Ok(())
}

/// Runs a command, logging as [`init_logging`] sets up.
///
/// # Errors
/// The command's error.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<()> {
    if !matches!(cli.command, Command::Serve(_)) {
        init_logging();
    }
    match cli.command {
        Command::Serve(a) => serve(*a).await,
        Command::Rules(a) => crate::rules_cli::run(a).await,
        Command::Tokens(a) => crate::tokens_cli::run(&a),
        Command::Bench(a) => crate::bench::run(a).await,
        Command::Floor(a) => crate::bench::floor(a).await,
    }
}

/// A share of a limit: a number above 0, at most 1.
fn parse_share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 1.0 => Ok(s),
        _ => Err(format!(
            "{text:?} is not a share: expected a number above 0 and at most 1, such as 0.5"
        )),
    }
}
