//! A Redis Cluster whose primaries each have a replica, for failover tests: real `redis-server`
//! processes on free loopback ports, a short `cluster-node-timeout` so that a killed primary's
//! replica is promoted within a few seconds, all killed on drop.
//!
//! Shard `i` is the slot range first given to primary `i`; its two nodes trade roles on a
//! failover, so the shard's primary is asked of the nodes (`ROLE`), never assumed.

use std::io;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::redis::{RedisServer, binary, raw_command};

/// The `cluster-node-timeout` of [`ReplicatedCluster`]'s nodes: a primary unreachable this long
/// is suspected, then failed over by its replica (about a second more).
pub const NODE_TIMEOUT: Duration = Duration::from_millis(1000);

/// How long forming the cluster, a promotion or a rejoin may take before it is an error.
const SETTLE: Duration = Duration::from_secs(30);
const PAUSE: Duration = Duration::from_millis(20);

/// Polls `ok` every [`PAUSE`] until it holds or `limit` passed.
fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> io::Result<()> {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(PAUSE);
    }
    Err(io::Error::other(format!("{what}: not within {limit:?}")))
}

/// A Redis Cluster of `shards` primaries, each with one replica, on 127.0.0.1.
#[derive(Debug)]
pub struct ReplicatedCluster {
    /// Node `2i` was shard `i`'s first primary, node `2i + 1` its first replica.
    nodes: Vec<RedisServer>,
}

impl ReplicatedCluster {
    /// Starts `shards` primaries and their replicas, waits until every replica is in sync and
    /// every node reports `cluster_state:ok`.
    ///
    /// # Panics
    /// When the cluster cannot be formed in time.
    pub fn start(shards: usize) -> Self {
        Self::try_start(shards)
            .unwrap_or_else(|e| panic!("cannot start a replicated redis cluster: {e}"))
    }

    /// As [`ReplicatedCluster::start`].
    ///
    /// # Errors
    /// When a node cannot start or the cluster does not form in time.
    pub fn try_start(shards: usize) -> io::Result<Self> {
        Self::try_start_with(shards, &[])
    }

    /// As [`ReplicatedCluster::start`], with `more` options for every node (e.g.
    /// `["--cluster-require-full-coverage", "no"]`).
    ///
    /// # Errors
    /// When a node cannot start or the cluster does not form in time.
    pub fn try_start_with(shards: usize, more: &[&str]) -> io::Result<Self> {
        let timeout = NODE_TIMEOUT.as_millis().to_string();
        // (a replica's first sync at once, not after the default 5 s wait for more replicas)
        let mut args = vec![
            "--cluster-node-timeout",
            &timeout,
            "--repl-diskless-sync-delay",
            "0",
        ];
        args.extend_from_slice(more);
        let nodes = (0..shards * 2)
            .map(|_| RedisServer::start_with_args(true, None, &args))
            .collect::<io::Result<Vec<_>>>()?;
        let primaries = nodes.iter().step_by(2);
        let out = Command::new(binary("redis-cli"))
            .args(["--cluster", "create"])
            .args(primaries.map(|n| format!("127.0.0.1:{}", n.port())))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            )));
        }
        let cluster = Self { nodes };
        for shard in 0..shards {
            cluster.attach_replica(shard)?;
        }
        cluster.wait_ok()?;
        Ok(cluster)
    }

    /// Makes node `2 * shard + 1` meet the cluster and replicate node `2 * shard`, and waits
    /// until the primary reports it in sync.
    fn attach_replica(&self, shard: usize) -> io::Result<()> {
        let (primary, replica) = (&self.nodes[2 * shard], &self.nodes[2 * shard + 1]);
        let id = raw_command(primary.port(), "CLUSTER MYID")?;
        let id = id.lines().nth(1).unwrap_or_default().trim().to_owned();
        raw_command(
            replica.port(),
            &format!("CLUSTER MEET 127.0.0.1 {}", primary.port()),
        )?;
        wait_for("the replica meeting the cluster", SETTLE, || {
            raw_command(replica.port(), "CLUSTER NODES").is_ok_and(|n| n.contains(&id))
        })?;
        wait_for("CLUSTER REPLICATE", SETTLE, || {
            raw_command(replica.port(), &format!("CLUSTER REPLICATE {id}"))
                .is_ok_and(|r| r.starts_with("+OK"))
        })?;
        wait_for("the replica's sync", SETTLE, || {
            raw_command(primary.port(), "INFO replication")
                .is_ok_and(|r| r.contains(&format!("port={},state=online", replica.port())))
        })
    }

    /// Waits until every running node reports `cluster_state:ok` and every shard has one
    /// running primary.
    ///
    /// # Errors
    /// When it does not within the settling bound (30 s).
    pub fn wait_ok(&self) -> io::Result<()> {
        wait_for("cluster_state:ok on every node", SETTLE, || {
            self.nodes
                .iter()
                .filter(|n| n.is_running())
                .all(RedisServer::cluster_ok)
                && (0..self.shards()).all(|s| self.primary_of(s).is_some())
        })
    }

    /// Whether every running node reports `cluster_state:fail` (every slot refused: a failed
    /// primary not yet replaced, with the default `cluster-require-full-coverage yes`).
    pub fn failed_everywhere(&self) -> bool {
        let mut running = self.nodes.iter().filter(|n| n.is_running()).peekable();
        running.peek().is_some()
            && running.all(|n| {
                raw_command(n.port(), "CLUSTER INFO")
                    .is_ok_and(|r| r.contains("cluster_state:fail"))
            })
    }

    /// How many shards (primaries) the cluster has.
    pub fn shards(&self) -> usize {
        self.nodes.len() / 2
    }

    /// The index of `shard`'s running primary now, if it has one (a running node whose `ROLE`
    /// is `master`).
    pub fn primary_of(&self, shard: usize) -> Option<usize> {
        [2 * shard, 2 * shard + 1].into_iter().find(|&i| {
            let n = &self.nodes[i];
            n.is_running() && raw_command(n.port(), "ROLE").is_ok_and(|r| r.contains("master"))
        })
    }

    /// The index of `shard`'s other node: its replica while the primary is `primary_of`.
    pub fn partner(node: usize) -> usize {
        node ^ 1
    }

    /// Kills `shard`'s primary (SIGKILL, as a crash); the index of the node killed.
    ///
    /// # Panics
    /// When the shard has no running primary.
    pub fn kill_primary(&mut self, shard: usize) -> usize {
        let i = self
            .primary_of(shard)
            .unwrap_or_else(|| panic!("shard {shard} has no running primary"));
        self.nodes[i].stop();
        i
    }

    /// Holds (`true`) or lets go (`false`) the failover of `shard`: its replica will not, or
    /// may again, take over a failed primary (`cluster-replica-no-failover`). Held, a killed
    /// primary leaves the cluster refusing every slot for as long as a test needs.
    ///
    /// # Panics
    /// When the setting cannot be made.
    pub fn hold_failover(&self, shard: usize, hold: bool) {
        let value = if hold { "yes" } else { "no" };
        for i in [2 * shard, 2 * shard + 1] {
            let n = &self.nodes[i];
            if n.is_running() {
                let r = raw_command(
                    n.port(),
                    &format!("CONFIG SET cluster-replica-no-failover {value}"),
                );
                assert!(
                    r.as_ref().is_ok_and(|r| r.starts_with("+OK")),
                    "cluster-replica-no-failover {value} on node {i}: {r:?}"
                );
            }
        }
    }

    /// Kills every node (SIGKILL); each keeps its cluster configuration for
    /// [`ReplicatedCluster::restart_all`].
    pub fn kill_all(&mut self) {
        self.nodes.iter_mut().for_each(RedisServer::stop);
    }

    /// Starts every node again on its port and waits until the cluster is ok (the data is lost:
    /// persistence is off).
    ///
    /// # Errors
    /// When it is not ok within the settling bound.
    pub fn restart_all(&mut self) -> io::Result<()> {
        self.nodes.iter_mut().for_each(RedisServer::restart);
        self.wait_ok()
    }

    /// Kills node `i` (SIGKILL), whatever its role.
    pub fn kill_node(&mut self, i: usize) {
        self.nodes[i].stop();
    }

    /// Waits until `shard`'s replica was promoted (the running node of the shard is its primary)
    /// and every running node reports `cluster_state:ok`.
    ///
    /// # Errors
    /// When it is not within the settling bound.
    pub fn wait_promoted(&self, shard: usize) -> io::Result<()> {
        wait_for("the replica's promotion", SETTLE, || {
            self.primary_of(shard).is_some()
        })?;
        self.wait_ok()
    }

    /// Starts node `i` again on its port with its cluster configuration: it rejoins, as a
    /// replica of the node promoted meanwhile. Waits until it is in sync and the cluster is ok.
    ///
    /// # Errors
    /// When it does not rejoin within the settling bound.
    pub fn restart_node(&mut self, i: usize) -> io::Result<()> {
        self.nodes[i].restart();
        let port = self.nodes[i].port();
        wait_for("the restarted node's rejoin as a replica", SETTLE, || {
            raw_command(port, "ROLE").is_ok_and(|r| r.contains("slave") && r.contains("connected"))
        })?;
        self.wait_ok()
    }

    /// The cluster's URL for Flowgate, every node listed: `redis+cluster://127.0.0.1:P,...`.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }

    /// The nodes' URLs (`redis://127.0.0.1:P/` each).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes (node `2i` and `2i + 1` serve shard `i`).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The shard whose slots hold `key` (its primary answers for it instead of `MOVED`).
    ///
    /// # Panics
    /// When no shard has a running primary that answers for it.
    pub fn shard_of(&self, key: &str) -> usize {
        (0..self.shards())
            .find(|&s| {
                self.primary_of(s).is_some_and(|i| {
                    raw_command(self.nodes[i].port(), &format!("EXISTS {key}"))
                        .is_ok_and(|r| r.starts_with(':'))
                })
            })
            .unwrap_or_else(|| panic!("no running primary answers for {key}"))
    }
}
