//! Redis failing over under two `flowgate serve` nodes, measured: the topology (a Redis with
//! replicas, killed and healed by [`Topology`]), the nodes and their steady load ([`load`]), and
//! the figures drawn from what the load saw ([`figures`]). Used by `tests/cluster_failover.rs`
//! (one failover, asserted) and `tests/failover_measure.rs` (run by hand through
//! `scripts/failover.sh`: the figures printed, a soak).
#![allow(dead_code, unreachable_pub)]

pub mod figures;
pub mod load;
pub mod sentinel;

use std::io;
use std::path::Path;

use flowgate_testkit::cluster::ReplicatedCluster;

use crate::common::{Proc, spawn_server};

/// A Redis topology with replicas that the measurement kills and heals.
pub trait Topology: Send {
    /// Its name in the figures (`cluster`, `sentinel`).
    fn name(&self) -> &'static str;
    /// Flowgate's `--redis-url` for it.
    fn url(&self) -> String;
    /// Whether Redis key `key` is on the primary [`Topology::kill_primary`] kills (with one
    /// primary, every key is).
    fn on_victim(&self, key: &str) -> bool;
    /// Kills (SIGKILL) the victim primary; what was killed, for the figures.
    fn kill_primary(&mut self) -> String;
    /// Kills a whole machine's worth: the victim primary and what shares its machine.
    fn kill_machine(&mut self) -> String;
    /// Waits until a replica was promoted in the killed primary's place and Redis serves.
    ///
    /// # Errors
    /// When it does not within the topology's bound.
    fn wait_promoted(&mut self) -> io::Result<()>;
    /// Starts again what was killed (it rejoins as replicas), and waits until it did.
    ///
    /// # Errors
    /// When it does not rejoin within the topology's bound.
    fn heal(&mut self) -> io::Result<()>;
}

/// The topology named `name` (`TOPOLOGY` of `scripts/failover.sh`).
///
/// # Panics
/// For an unknown name.
pub fn topology(name: &str) -> Box<dyn Topology> {
    match name {
        "cluster" => Box::new(Cluster::start_with(&[
            "--cluster-require-full-coverage",
            &std::env::var("FULL_COVERAGE").unwrap_or_else(|_| "yes".to_owned()),
        ])),
        "sentinel" => Box::new(sentinel::Sentinel::start()),
        other => panic!("unknown TOPOLOGY {other:?}: cluster or sentinel"),
    }
}

/// A Redis Cluster of 3 primaries, each with a replica; the victim is shard 0.
pub struct Cluster {
    cluster: ReplicatedCluster,
    killed: Vec<usize>,
}

impl Cluster {
    const VICTIM: usize = 0;

    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// With `more` options for every node.
    pub fn start_with(more: &[&str]) -> Self {
        Self {
            cluster: ReplicatedCluster::try_start_with(3, more)
                .unwrap_or_else(|e| panic!("cannot start a replicated redis cluster: {e}")),
            killed: Vec::new(),
        }
    }

    pub fn cluster(&self) -> &ReplicatedCluster {
        &self.cluster
    }
}

impl Topology for Cluster {
    fn name(&self) -> &'static str {
        "cluster"
    }

    fn url(&self) -> String {
        self.cluster.url()
    }

    fn on_victim(&self, key: &str) -> bool {
        self.cluster.shard_of(key) == Self::VICTIM
    }

    fn kill_primary(&mut self) -> String {
        let i = self.cluster.kill_primary(Self::VICTIM);
        self.killed.push(i);
        format!("shard {}'s primary (node {i})", Self::VICTIM)
    }

    fn kill_machine(&mut self) -> String {
        let primary = self.cluster.kill_primary(Self::VICTIM);
        // The replica of another shard, on the same machine.
        let other = (Self::VICTIM + 1) % self.cluster.shards();
        let replica = match self.cluster.primary_of(other) {
            Some(p) => ReplicatedCluster::partner(p),
            None => 2 * other + 1,
        };
        self.cluster.kill_node(replica);
        self.killed.extend([primary, replica]);
        format!(
            "shard {}'s primary (node {primary}) and shard {other}'s replica (node {replica})",
            Self::VICTIM
        )
    }

    fn wait_promoted(&mut self) -> io::Result<()> {
        self.cluster.wait_promoted(Self::VICTIM)
    }

    fn heal(&mut self) -> io::Result<()> {
        for i in std::mem::take(&mut self.killed) {
            self.cluster.restart_node(i)?;
        }
        Ok(())
    }
}

/// The admin token of the nodes (for the shared rules).
pub const TOKEN: &str = "failover-admin-token-0123456789abcdef0123456789";

/// A `flowgate serve` node on `url`: shared rules, queue writes waiting for one replica,
/// decisions within `deadline`.
pub fn node(config: &Path, url: &str, id: &str, deadline: &str) -> Proc {
    spawn_server(
        config,
        &[
            "--redis-url",
            url,
            "--node-id",
            id,
            "--redis-deadline",
            deadline,
            "--rules-source",
            "redis",
            "--admin-token",
            TOKEN,
            "--redis-wait-replicas",
            "1",
            "--redis-wait-timeout",
            "1s",
        ],
    )
}

/// Descriptor values whose keys live on the victim primary: each rule's, and the queue's.
pub fn targets(topology: &dyn Topology) -> load::Targets {
    let on_victim = |key: &dyn Fn(u32) -> String| {
        (0..2000)
            .find(|&v| topology.on_victim(&key(v)))
            .unwrap_or_else(|| panic!("no value on the victim"))
    };
    load::Targets {
        limits: [0, 1, 2].map(|r| on_victim(&|v| load::limit_key(r, v))),
        channel: on_victim(&|v| load::queue_instance(v).1),
    }
}
