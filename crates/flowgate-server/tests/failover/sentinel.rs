//! The Sentinel topology of the failover measurement: a primary, its replica and three
//! sentinels (quorum 2, `down-after-milliseconds` 1000, `failover-timeout` 3000); every key is on
//! the primary, and a machine is the primary with one sentinel.

use std::io;

use flowgate_testkit::sentinel::RedisSentinels;

use super::Topology;

/// See the module's documentation.
pub struct Sentinel {
    set: RedisSentinels,
    /// The killed primary's port, and whether a sentinel died with it.
    killed: Option<(u16, bool)>,
}

impl Sentinel {
    pub fn start() -> Self {
        Self {
            set: RedisSentinels::start(),
            killed: None,
        }
    }
}

impl Topology for Sentinel {
    fn name(&self) -> &'static str {
        "sentinel"
    }

    fn url(&self) -> String {
        self.set.url()
    }

    fn on_victim(&self, _key: &str) -> bool {
        true
    }

    fn kill_primary(&mut self) -> String {
        let port = self.set.kill_primary();
        self.killed = Some((port, false));
        format!("the primary (port {port})")
    }

    fn kill_machine(&mut self) -> String {
        let port = self.set.kill_primary();
        self.set.stop_sentinel(0);
        self.killed = Some((port, true));
        format!("the primary (port {port}) and a sentinel")
    }

    fn wait_promoted(&mut self) -> io::Result<()> {
        let old = self.killed.map_or(0, |k| k.0);
        self.set.wait_promoted(old);
        Ok(())
    }

    fn heal(&mut self) -> io::Result<()> {
        if let Some((port, sentinel)) = self.killed.take() {
            if sentinel {
                self.set.start_sentinels();
            }
            self.set.restart(port);
            self.set.wait_replica(port);
        }
        Ok(())
    }
}
