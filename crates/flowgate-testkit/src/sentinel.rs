//! A real Redis Sentinel set-up for tests: one primary, one replica and three `redis-sentinel`
//! processes (quorum 2) on free loopback ports, each sentinel's configuration in a temporary
//! directory of its own (sentinels rewrite it). Everything it started is killed on drop.
//!
//! Optionally over TLS only ([`SentinelsConfig::tls`]: the data nodes, the replication and the
//! sentinels, which then talk TLS to the data nodes and to each other), and with the sentinels
//! requiring a named ACL user ([`SentinelsConfig::sentinel_user`]).
//!
//! Needs `redis-server`, `redis-sentinel` and `redis-cli` (7.x) on the `PATH` or in `/usr/bin`.

use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::redis::{RedisServer, ServerTls, free_port, raw_command};

/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "flowgate";

/// How long a condition is waited for at most (failovers included, on a busy machine).
const WAIT: Duration = Duration::from_secs(30);

/// How a [`RedisSentinels`] is set up.
#[derive(Clone, Debug)]
pub struct SentinelsConfig {
    /// `sentinel down-after-milliseconds`: how long a primary is unanswering before a sentinel
    /// holds it down. Default 1000.
    pub down_after_ms: u64,
    /// `sentinel failover-timeout`. Default 3000.
    pub failover_timeout_ms: u64,
    /// The data nodes' password (`requirepass`, `masterauth`, `sentinel auth-pass`).
    pub data_password: Option<String>,
    /// The sentinels' own password: their `requirepass`, or their ACL user's password.
    pub sentinel_password: Option<String>,
    /// The sentinels' ACL user: with it, the sentinels' `default` user is off, this user (with
    /// `sentinel_password`) may run every command, and the sentinels use it with each other
    /// (`sentinel sentinel-user`, `sentinel sentinel-pass`).
    pub sentinel_user: Option<String>,
    /// Every process serves TLS only with these files (the sentinels too, with
    /// `tls-replication yes` to reach the data nodes and each other over TLS).
    pub tls: Option<ServerTls>,
}

impl Default for SentinelsConfig {
    fn default() -> Self {
        Self {
            down_after_ms: 1000,
            failover_timeout_ms: 3000,
            data_password: None,
            sentinel_password: None,
            sentinel_user: None,
            tls: None,
        }
    }
}

/// One `redis-sentinel` process.
struct Sentinel {
    port: u16,
    dir: TempDir,
    tls: Option<ServerTls>,
    child: Option<Child>,
}

impl Sentinel {
    fn config(&self) -> std::path::PathBuf {
        self.dir.path().join("sentinel.conf")
    }

    fn spawn(&mut self) -> io::Result<()> {
        let child = Command::new(crate::redis::binary("redis-sentinel"))
            .arg(self.config())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        wait_until("redis-sentinel", Duration::from_secs(5), || {
            // An answer at all (`-NOAUTH` with a password) says it listens.
            match &self.tls {
                None => raw_command(self.port, "PING")
                    .is_ok_and(|r| r.starts_with('+') || r.starts_with('-')),
                Some(tls) => crate::redis::cli(self.port, Some(tls), &["PING"])
                    .is_ok_and(|r| !r.trim().is_empty()),
            }
        })
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Polls `ok` every 20 ms until it holds, at most `limit`.
fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> io::Result<()> {
    let tries = (limit.as_millis() / 20).max(1);
    for _ in 0..tries {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(io::Error::other(format!("{what}: not so after {limit:?}")))
}

/// Runs `redis-cli` against `port` with `password`, returning its output (one line per reply
/// element).
///
/// # Errors
/// When `redis-cli` cannot be run.
pub fn cli(port: u16, password: Option<&str>, args: &[&str]) -> io::Result<String> {
    cli_as(port, None, None, password, args)
}

/// As [`cli`], over TLS with `tls`, as the ACL user `user`.
fn cli_as(
    port: u16,
    tls: Option<&ServerTls>,
    user: Option<&str>,
    password: Option<&str>,
    args: &[&str],
) -> io::Result<String> {
    let mut all: Vec<&str> = Vec::with_capacity(args.len() + 5);
    if let Some(u) = user {
        all.extend(["--user", u]);
    }
    if let Some(p) = password {
        all.extend(["--pass", p, "--no-auth-warning"]);
    }
    all.extend(args);
    crate::redis::cli(port, tls, &all)
}

/// A primary, a replica and three sentinels; see the module's documentation.
pub struct RedisSentinels {
    config: SentinelsConfig,
    /// The data nodes: the first primary, then its replica.
    nodes: Vec<RedisServer>,
    sentinels: Vec<Sentinel>,
}

impl RedisSentinels {
    /// Starts the set-up with the default configuration.
    ///
    /// # Panics
    /// When it cannot start (binaries missing, no free port, no quorum in time).
    pub fn start() -> Self {
        Self::start_with(SentinelsConfig::default())
    }

    /// Starts the set-up with `config`, and waits until every sentinel knows the replica and
    /// the other sentinels (`SENTINEL CKQUORUM` answers OK).
    ///
    /// # Panics
    /// As [`RedisSentinels::start`].
    pub fn start_with(config: SentinelsConfig) -> Self {
        let primary = match &config.tls {
            Some(tls) => RedisServer::start_tls(tls.clone()),
            None => RedisServer::start(),
        };
        // A replica's full sync starts at once, not after the 5 s Redis waits for more replicas.
        primary
            .cli(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"])
            .expect("repl-diskless-sync-delay");
        let replica = RedisServer::start_replica_of(&primary);
        replica
            .cli(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"])
            .expect("repl-diskless-sync-delay");
        let mut me = Self {
            config,
            nodes: vec![primary, replica],
            sentinels: Vec::new(),
        };
        if let Some(p) = me.config.data_password.clone() {
            // Both ask for it and replicate with it; the replica's link is made again with it.
            for n in &me.nodes {
                n.cli(&["CONFIG", "SET", "masterauth", &p])
                    .expect("masterauth");
            }
            for n in &me.nodes {
                n.cli(&["CONFIG", "SET", "requirepass", &p])
                    .expect("requirepass");
            }
        }
        for _ in 0..3 {
            let s = me
                .new_sentinel()
                .unwrap_or_else(|e| panic!("cannot start a sentinel: {e}"));
            me.sentinels.push(s);
        }
        me.wait_quorum();
        me
    }

    fn new_sentinel(&self) -> io::Result<Sentinel> {
        let c = &self.config;
        let dir = tempfile::Builder::new()
            .prefix("flowgate-sentinel-")
            .tempdir()?;
        let port = free_port(false)?;
        let mut text = format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile sentinel.log\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
             sentinel failover-timeout {MASTER_NAME} {failover}\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n",
            dir = dir.path().display(),
            primary = self.nodes[0].port(),
            down = c.down_after_ms,
            failover = c.failover_timeout_ms,
        );
        if let Some(p) = &c.data_password {
            text.push_str(&format!("sentinel auth-pass {MASTER_NAME} {p}\n"));
        }
        match (&c.sentinel_user, &c.sentinel_password) {
            (Some(u), p) => {
                let pass = p
                    .as_deref()
                    .map_or("nopass".to_owned(), |p| format!(">{p}"));
                text.push_str(&format!(
                    "user default off\nuser {u} on {pass} ~* &* +@all\n\
                     sentinel sentinel-user {u}\n"
                ));
                if let Some(p) = p {
                    text.push_str(&format!("sentinel sentinel-pass {p}\n"));
                }
            }
            (None, Some(p)) => text.push_str(&format!("requirepass {p}\n")),
            (None, None) => {}
        }
        if let Some(tls) = &c.tls {
            text = text.replacen(&format!("port {port}\n"), "port 0\n", 1);
            text.push_str(&format!(
                "tls-port {port}\ntls-cert-file {cert}\ntls-key-file {key}\n\
                 tls-ca-cert-file {ca}\ntls-auth-clients {auth}\ntls-replication yes\n",
                cert = tls.cert.display(),
                key = tls.key.display(),
                ca = tls.ca.display(),
                auth = if tls.client.is_some() { "yes" } else { "no" },
            ));
        }
        std::fs::write(dir.path().join("sentinel.conf"), text)?;
        let mut s = Sentinel {
            port,
            dir,
            tls: c.tls.clone(),
            child: None,
        };
        s.spawn()?;
        Ok(s)
    }

    fn sentinel_cli(&self, i: usize, args: &[&str]) -> io::Result<String> {
        cli_as(
            self.sentinels[i].port,
            self.config.tls.as_ref(),
            self.config.sentinel_user.as_deref(),
            self.config.sentinel_password.as_deref(),
            args,
        )
    }

    fn wait_quorum(&self) {
        for i in 0..self.sentinels.len() {
            wait_until("the sentinels' quorum", WAIT, || {
                self.sentinel_cli(i, &["SENTINEL", "CKQUORUM", MASTER_NAME])
                    .is_ok_and(|r| r.starts_with("OK 3 "))
                    && self
                        .sentinel_cli(i, &["SENTINEL", "REPLICAS", MASTER_NAME])
                        .is_ok_and(|r| r.contains("slave"))
            })
            .unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// The URL Flowgate is given: `redis+sentinel://[:password@]127.0.0.1:p1,…/flowgate`
    /// (`rediss+sentinel://` over TLS), with the data nodes' password.
    pub fn url(&self) -> String {
        let auth = self
            .config
            .data_password
            .as_ref()
            .map(|p| format!(":{p}@"))
            .unwrap_or_default();
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        let scheme = if self.config.tls.is_some() {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        format!("{scheme}://{auth}{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// The port of the primary a majority of the sentinels name now, if they agree.
    pub fn named_primary(&self) -> Option<u16> {
        let mut votes: Vec<u16> = (0..self.sentinels.len())
            .filter_map(|i| {
                let r = self
                    .sentinel_cli(i, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])
                    .ok()?;
                r.lines().nth(1)?.trim().parse().ok()
            })
            .collect();
        votes.sort_unstable();
        let first = *votes.first()?;
        (votes.iter().filter(|&&p| p == first).count() * 2 > self.sentinels.len())
            .then_some(first)
            .or_else(|| {
                let last = *votes.last()?;
                (votes.iter().filter(|&&p| p == last).count() * 2 > self.sentinels.len())
                    .then_some(last)
            })
    }

    /// The data node on `port`.
    ///
    /// # Panics
    /// When no node of this set-up listens there.
    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no data node on port {port}"))
    }

    /// The primary now: the node the sentinels name that says it is one (`ROLE`).
    ///
    /// # Panics
    /// When there is none within the wait bound.
    pub fn primary(&self) -> &RedisServer {
        let mut found = None;
        wait_until("a primary", WAIT, || {
            found = self
                .named_primary()
                .filter(|&p| self.role(p).as_deref() == Some("master"));
            found.is_some()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        self.node(found.unwrap_or_default())
    }

    /// The role (`master`, `slave`) of the data node on `port`, when it answers.
    pub fn role(&self, port: u16) -> Option<String> {
        let r = self.data_cli(port, &["ROLE"]).ok()?;
        r.lines()
            .next()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
    }

    /// Runs a command on the data node on `port`, with the data nodes' password.
    ///
    /// # Errors
    /// When `redis-cli` cannot be run.
    pub fn data_cli(&self, port: u16, args: &[&str]) -> io::Result<String> {
        cli_as(
            port,
            self.config.tls.as_ref(),
            None,
            self.config.data_password.as_deref(),
            args,
        )
    }

    /// Asks a sentinel for a failover while the primary is up (`SENTINEL FAILOVER`): the replica
    /// is promoted and the old primary, alive, made its replica.
    ///
    /// # Panics
    /// When the sentinel refuses.
    pub fn failover(&self) {
        let r = self
            .sentinel_cli(0, &["SENTINEL", "FAILOVER", MASTER_NAME])
            .unwrap_or_else(|e| panic!("SENTINEL FAILOVER: {e}"));
        assert!(r.starts_with("OK"), "SENTINEL FAILOVER: {r}");
    }

    /// Closes the connections of the clients of the data node on `port` other than the
    /// sentinels' and the replicas' (`CLIENT KILL ID` each), authenticating with `password`:
    /// they must connect again.
    ///
    /// # Panics
    /// When `redis-cli` cannot be run.
    pub fn kill_clients(&self, port: u16, password: Option<&str>) {
        let tls = self.config.tls.as_ref();
        let list = cli_as(port, tls, None, password, &["CLIENT", "LIST"])
            .unwrap_or_else(|e| panic!("CLIENT LIST: {e}"));
        let others = list
            .lines()
            .filter(|l| !l.contains("name=sentinel-") && !l.contains("flags=S"));
        for line in others {
            if let Some(id) = line.split_whitespace().find_map(|w| w.strip_prefix("id=")) {
                let _ = cli_as(port, tls, None, password, &["CLIENT", "KILL", "ID", id]);
            }
        }
    }

    /// Kills the primary (SIGKILL) and returns its port.
    pub fn kill_primary(&mut self) -> u16 {
        let port = self.primary().port();
        self.node_mut(port).stop();
        port
    }

    fn node_mut(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no data node on port {port}"))
    }

    /// Waits until the sentinels name a primary other than `old` that says it is one, and
    /// returns its port.
    ///
    /// # Panics
    /// When no promotion happens within the wait bound.
    pub fn wait_promoted(&self, old: u16) -> u16 {
        let mut found = None;
        wait_until("a promotion", WAIT, || {
            found = self
                .named_primary()
                .filter(|&p| p != old && self.role(p).as_deref() == Some("master"));
            found.is_some()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        found.unwrap_or_default()
    }

    /// Starts the (killed) node on `port` again, with its former arguments: an old primary
    /// comes back a primary of its own (empty: no persistence) until the sentinels make it a
    /// replica. The data password is set again at once, as its configuration file would.
    pub fn restart(&mut self, port: u16) {
        let password = self.config.data_password.clone();
        let node = self.node_mut(port);
        node.restart();
        if let Some(p) = password {
            let _ = node.cli(&["CONFIG", "SET", "masterauth", &p]);
            let _ = node.cli(&["CONFIG", "SET", "requirepass", &p]);
        }
    }

    /// Waits until the node on `port` is a replica whose link to its primary is up.
    ///
    /// # Panics
    /// When it is not within the wait bound.
    pub fn wait_replica(&self, port: u16) {
        wait_until("the replica's link", WAIT, || {
            self.data_cli(port, &["INFO", "replication"])
                .is_ok_and(|r| r.contains("role:slave") && r.contains("master_link_status:up"))
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Stops every sentinel (their configuration is kept for [`RedisSentinels::start_sentinels`]).
    pub fn stop_sentinels(&mut self) {
        self.sentinels.iter_mut().for_each(Sentinel::stop);
    }

    /// Stops sentinel `i` (SIGKILL), as a machine that dies with it;
    /// [`RedisSentinels::start_sentinels`] starts it again.
    pub fn stop_sentinel(&mut self, i: usize) {
        self.sentinels[i].stop();
    }

    /// Starts the stopped sentinels again, on their ports and rewritten configurations.
    ///
    /// # Panics
    /// When one cannot start.
    pub fn start_sentinels(&mut self) {
        for s in &mut self.sentinels {
            if s.child.is_none() {
                s.spawn()
                    .unwrap_or_else(|e| panic!("cannot start a sentinel again: {e}"));
            }
        }
    }

    /// The sentinels' log files, for a failing test's message.
    pub fn sentinel_logs(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| std::fs::read_to_string(s.dir.path().join("sentinel.log")).unwrap_or_default())
            .collect()
    }

    /// A sentinel's configuration directory.
    pub fn sentinel_dir(&self, i: usize) -> &Path {
        self.sentinels[i].dir.path()
    }
}

impl Drop for RedisSentinels {
    fn drop(&mut self) {
        self.stop_sentinels();
        // The data nodes stop with their own guards.
    }
}
