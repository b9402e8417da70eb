//! Real `redis-server` processes for tests: a single server or a Redis Cluster of masters, on free
//! loopback ports, each in its own temporary directory, with persistence off.
//!
//! Every process is owned by a guard whose `Drop` kills it (only the processes it started).
//! Start-up waits for readiness with bounded retries and fails with a readable error, never
//! waits forever. Needs `redis-server` and `redis-cli` (7.x) on the `PATH` or in `/usr/bin`.
//!
//! A server or cluster can serve TLS only ([`ServerTls`]: `--port 0 --tls-port P`, the cluster
//! bus over TLS too); its readiness is then probed with `redis-cli --tls`.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// How many times readiness is probed, and how long apart.
const READY_TRIES: u32 = 200;
const READY_PAUSE: Duration = Duration::from_millis(25);

pub(crate) fn binary(name: &str) -> PathBuf {
    let usr = Path::new("/usr/bin").join(name);
    if usr.exists() {
        usr
    } else {
        PathBuf::from(name)
    }
}

/// A port on 127.0.0.1 that is free now (and, for cluster nodes, whose bus port +10000 is too).
pub(crate) fn free_port(with_bus: bool) -> io::Result<u16> {
    for _ in 0..100 {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        if !with_bus {
            return Ok(port);
        }
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err(io::Error::other("no free port pair found"))
}

/// Sends one inline command and returns the raw reply (up to 64 KiB), with short timeouts.
pub fn raw_command(port: u16, command: &str) -> io::Result<String> {
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    s.set_write_timeout(Some(Duration::from_millis(500)))?;
    s.write_all(command.as_bytes())?;
    s.write_all(b"\r\n")?;
    let mut buf = vec![0u8; 65_536];
    let mut len = 0;
    // Read until the reply looks complete: a simple line, or a bulk string of announced length.
    loop {
        let n = s.read(&mut buf[len..])?;
        if n == 0 {
            break;
        }
        len += n;
        let text = String::from_utf8_lossy(&buf[..len]);
        if let Some(rest) = text.strip_prefix('$') {
            if let Some((n, body)) = rest.split_once("\r\n") {
                let want: usize = n.parse().unwrap_or(0);
                if body.len() >= want {
                    break;
                }
            }
        } else if text.ends_with("\r\n") {
            break;
        }
        if len == buf.len() {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&buf[..len]).into_owned())
}

pub(crate) fn wait_until(what: &str, mut ok: impl FnMut() -> bool) -> io::Result<()> {
    for _ in 0..READY_TRIES {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(READY_PAUSE);
    }
    Err(io::Error::other(format!(
        "{what} not ready after {:?}",
        READY_PAUSE * READY_TRIES
    )))
}

/// The TLS files of a TLS-only `redis-server` (PEM).
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The server's certificate (`--tls-cert-file`); its names must include 127.0.0.1.
    pub cert: PathBuf,
    /// Its key (`--tls-key-file`).
    pub key: PathBuf,
    /// The CA that signed it, and clients' certificates (`--tls-ca-cert-file`).
    pub ca: PathBuf,
    /// With a client certificate and key: the server requires client certificates
    /// (`--tls-auth-clients yes`), and readiness is probed with this one. Without:
    /// `--tls-auth-clients no`.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl ServerTls {
    /// `redis-cli`'s TLS options for this server.
    pub(crate) fn cli_args(&self) -> Vec<String> {
        let mut args = vec![
            "--tls".to_owned(),
            "--cacert".to_owned(),
            self.ca.display().to_string(),
        ];
        if let Some((cert, key)) = &self.client {
            args.extend([
                "--cert".to_owned(),
                cert.display().to_string(),
                "--key".to_owned(),
                key.display().to_string(),
            ]);
        }
        args
    }

    /// `redis-server`'s options for serving TLS only on `port`.
    fn server_args(&self, port: u16, cluster: bool) -> Vec<String> {
        let mut args: Vec<String> = vec!["--port".into(), "0".into()];
        args.extend([
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            self.cert.display().to_string(),
            "--tls-key-file".into(),
            self.key.display().to_string(),
            "--tls-ca-cert-file".into(),
            self.ca.display().to_string(),
            "--tls-auth-clients".into(),
            if self.client.is_some() { "yes" } else { "no" }.into(),
        ]);
        if cluster {
            args.extend(["--tls-cluster".into(), "yes".into()]);
        }
        args
    }
}

/// How long one `redis-cli` run may take before it is killed.
const CLI_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `redis-cli` against 127.0.0.1:`port` (over TLS with `tls`), killed after
/// [`CLI_TIMEOUT`]; its output.
pub(crate) fn cli(port: u16, tls: Option<&ServerTls>, args: &[&str]) -> io::Result<String> {
    let mut cmd = Command::new(binary("redis-cli"));
    if let Some(t) = tls {
        cmd.args(t.cli_args());
    }
    let mut child = cmd
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let pause = Duration::from_millis(5);
    let mut waited = Duration::ZERO;
    while child.try_wait()?.is_none() {
        waited += pause;
        if waited > CLI_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("redis-cli {args:?} did not finish in {CLI_TIMEOUT:?}"),
            ));
        }
        std::thread::sleep(pause);
    }
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout.read_to_string(&mut out)?;
    }
    Ok(out)
}

/// One `redis-server` process on 127.0.0.1, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: TempDir,
    extra: Vec<String>,
    tls: Option<ServerTls>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free port.
    ///
    /// # Panics
    /// When `redis-server` cannot be started (not installed, no free port): a test cannot run
    /// without it.
    pub fn start() -> Self {
        Self::try_start(false).unwrap_or_else(|e| panic!("cannot start redis-server: {e}"))
    }

    /// Starts a server; with `cluster`, as a cluster-enabled node.
    ///
    /// # Errors
    /// When the process cannot be spawned or does not answer `PING` in time.
    pub fn try_start(cluster: bool) -> io::Result<Self> {
        Self::try_start_with(cluster, None)
    }

    /// Starts a replica of `primary` on a free port, and waits until it is in sync.
    ///
    /// # Panics
    /// When it cannot start or does not sync within the readiness bound.
    /// A TLS primary's replica serves TLS with the same files and replicates over TLS
    /// (`tls-replication yes`).
    pub fn start_replica_of(primary: &RedisServer) -> Self {
        let port = primary.port.to_string();
        let mut args = vec!["--replicaof", "127.0.0.1", &port];
        if primary.tls.is_some() {
            args.extend(["--tls-replication", "yes"]);
        }
        let replica = Self::start_with_args(false, primary.tls.clone(), &args)
            .unwrap_or_else(|e| panic!("cannot start a replica: {e}"));
        wait_until("the replica's sync", || {
            primary
                .cli(&["INFO", "replication"])
                .is_ok_and(|r| r.contains(&format!("port={},state=online", replica.port)))
        })
        .unwrap_or_else(|e| panic!("{e}"));
        replica
    }

    /// Starts a server that serves TLS only, with `tls`'s files.
    ///
    /// # Panics
    /// When `redis-server` cannot be started (not installed, built without TLS, no free port).
    pub fn start_tls(tls: ServerTls) -> Self {
        Self::try_start_with(false, Some(tls))
            .unwrap_or_else(|e| panic!("cannot start redis-server with TLS: {e}"))
    }

    /// Starts a server; with `cluster`, as a cluster-enabled node; with `tls`, serving TLS only.
    ///
    /// # Errors
    /// When the process cannot be spawned or does not answer `PING` in time.
    pub fn try_start_with(cluster: bool, tls: Option<ServerTls>) -> io::Result<Self> {
        Self::start_with_args(cluster, tls, &[])
    }

    /// As [`RedisServer::try_start_with`], with `more` arguments for `redis-server` (a later
    /// option overrides an earlier one of the same name).
    pub(crate) fn start_with_args(
        cluster: bool,
        tls: Option<ServerTls>,
        more: &[&str],
    ) -> io::Result<Self> {
        let mut last = io::Error::other("not tried");
        for _ in 0..5 {
            let port = free_port(cluster)?;
            let mut extra: Vec<String> = if cluster {
                vec![
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-config-file".into(),
                    "nodes.conf".into(),
                    "--cluster-node-timeout".into(),
                    "2000".into(),
                ]
            } else {
                Vec::new()
            };
            extra.extend(more.iter().map(|s| (*s).to_owned()));
            let mut s = Self {
                port,
                dir: tempfile::Builder::new()
                    .prefix("flowgate-redis-")
                    .tempdir()?,
                extra,
                tls: tls.clone(),
                child: None,
            };
            match s.spawn() {
                Ok(()) => return Ok(s),
                Err(e) => last = e, // the port was taken meanwhile: try another
            }
        }
        Err(last)
    }

    fn spawn(&mut self) -> io::Result<()> {
        let mut cmd = Command::new(binary("redis-server"));
        match &self.tls {
            Some(tls) => cmd.args(tls.server_args(
                self.port,
                self.extra.iter().any(|a| a == "--cluster-enabled"),
            )),
            None => cmd.arg("--port").arg(self.port.to_string()),
        };
        cmd.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--daemonize", "no", "--logfile", "redis.log"])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn()?;
        let ready = wait_until("redis-server", || self.ping());
        if let Err(e) = ready {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        // Died at once (e.g. the port was taken by someone else answering PING)?
        if let Ok(Some(status)) = child.try_wait() {
            return Err(io::Error::other(format!("redis-server exited: {status}")));
        }
        self.child = Some(child);
        Ok(())
    }

    /// Whether the server answers `PING`.
    fn ping(&self) -> bool {
        match &self.tls {
            None => raw_command(self.port, "PING").is_ok_and(|r| r.starts_with("+PONG")),
            Some(tls) => cli(self.port, Some(tls), &["PING"]).is_ok_and(|r| r.starts_with("PONG")),
        }
    }

    /// Runs a command with `redis-cli` (over TLS for a TLS server) and returns its output.
    ///
    /// # Errors
    /// When `redis-cli` cannot be run.
    pub fn cli(&self, args: &[&str]) -> io::Result<String> {
        cli(self.port, self.tls.as_ref(), args)
    }

    /// The TLS files it serves with, for a TLS server.
    pub fn tls(&self) -> Option<&ServerTls> {
        self.tls.as_ref()
    }

    /// The server's port (its TLS port, for a TLS server).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/` (`rediss://` for a TLS server).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// Kills the server at once (SIGKILL), as a crash would. Data is lost (persistence is off).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Freezes the server (SIGSTOP): its connections stay open and nothing is answered, as a
    /// hung host or a network that drops packets would; [`RedisServer::resume`] thaws it, and
    /// it then answers what it was sent meanwhile.
    ///
    /// # Panics
    /// When the signal cannot be sent.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a server frozen by [`RedisServer::pause`] (SIGCONT).
    ///
    /// # Panics
    /// When the signal cannot be sent.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        if let Some(c) = &self.child {
            let pid = c.id().to_string();
            let sent = Command::new("kill")
                .args([signal, &pid])
                .status()
                .is_ok_and(|s| s.success());
            assert!(sent, "kill {signal} {pid} (redis-server) failed");
        }
    }

    /// Whether this node reports `cluster_state:ok`.
    pub(crate) fn cluster_ok(&self) -> bool {
        let info = match &self.tls {
            None => raw_command(self.port, "CLUSTER INFO"),
            Some(tls) => cli(self.port, Some(tls), &["CLUSTER", "INFO"]),
        };
        info.is_ok_and(|r| r.contains("cluster_state:ok"))
    }

    /// Whether the server process is running.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts the server again on the same port (stopping it first if needed).
    ///
    /// # Panics
    /// When it cannot start again within the readiness bound.
    pub fn restart(&mut self) {
        self.stop();
        let mut last = None;
        // The port may linger briefly after the kill: retry a few times.
        for _ in 0..20 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last = Some(e),
            }
            std::thread::sleep(READY_PAUSE);
        }
        panic!(
            "cannot restart redis-server on port {}: {last:?}",
            self.port
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Redis Cluster of masters (no replicas) on 127.0.0.1, all killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `masters` cluster nodes, joins them with `redis-cli --cluster create`, and waits
    /// until every node reports `cluster_state:ok`.
    ///
    /// # Panics
    /// When the cluster cannot be formed within the readiness bound.
    pub fn start(masters: usize) -> Self {
        Self::try_start(masters).unwrap_or_else(|e| panic!("cannot start a redis cluster: {e}"))
    }

    /// As [`RedisCluster::start`].
    ///
    /// # Errors
    /// When a node cannot start or the cluster does not become ready in time.
    pub fn try_start(masters: usize) -> io::Result<Self> {
        Self::try_start_with(masters, None)
    }

    /// A cluster as [`RedisCluster::start`] whose nodes serve TLS only, their bus too.
    ///
    /// # Panics
    /// When the cluster cannot be formed within the readiness bound.
    pub fn start_tls(masters: usize, tls: ServerTls) -> Self {
        Self::try_start_with(masters, Some(tls))
            .unwrap_or_else(|e| panic!("cannot start a redis cluster with TLS: {e}"))
    }

    /// As [`RedisCluster::start`], with `tls` serving TLS only.
    ///
    /// # Errors
    /// When a node cannot start or the cluster does not become ready in time.
    pub fn try_start_with(masters: usize, tls: Option<ServerTls>) -> io::Result<Self> {
        let nodes = (0..masters)
            .map(|_| RedisServer::try_start_with(true, tls.clone()))
            .collect::<io::Result<Vec<_>>>()?;
        let out = Command::new(binary("redis-cli"))
            .args(tls.as_ref().map(ServerTls::cli_args).unwrap_or_default())
            .arg("--cluster")
            .arg("create")
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            )));
        }
        for n in &nodes {
            wait_until("redis cluster", || n.cluster_ok())?;
        }
        Ok(Self { nodes })
    }

    /// The nodes' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The cluster's URL for Flowgate: `redis+cluster://127.0.0.1:P,...`
    /// (`rediss+cluster://` over TLS).
    pub fn url(&self) -> String {
        let scheme = if self.nodes.iter().any(|n| n.tls.is_some()) {
            "rediss+cluster"
        } else {
            "redis+cluster"
        };
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("{scheme}://{}", nodes.join(","))
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Kills every node at once (SIGKILL). Data is lost; each node keeps its cluster
    /// configuration for [`RedisCluster::restart`].
    pub fn stop(&mut self) {
        self.nodes.iter_mut().for_each(RedisServer::stop);
    }

    /// Starts every node again on its port and waits until the cluster is ready.
    ///
    /// # Panics
    /// When it is not ready within the readiness bound.
    pub fn restart(&mut self) {
        self.nodes.iter_mut().for_each(RedisServer::restart);
        for n in &self.nodes {
            wait_until("redis cluster", || n.cluster_ok()).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
