//! Where Redis's primaries are, as this node's connection sees them: the address(es) it writes
//! to, how many times a primary changed under it (a failover followed), and how many times a
//! connection was made again. Shared by every clone of a [`crate::RedisConnection`]; read by
//! the server's `/metrics`, `/v1/store`, the dashboard and the logs.
//!
//! The connection layer records (single server, Sentinel, Cluster); nothing here talks to Redis.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// How the primaries are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopologyKind {
    /// One server, at its URL's address.
    Single,
    /// The primary the sentinels name, followed across promotions.
    Sentinel,
    /// A Redis Cluster's primaries, one per slot range.
    Cluster,
}

impl TopologyKind {
    /// Its name in metrics and JSON: `single`, `sentinel`, `cluster`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Sentinel => "sentinel",
            Self::Cluster => "cluster",
        }
    }
}

/// What a connection knows of Redis's primaries now (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopologyView {
    /// How the primaries are found.
    pub kind: TopologyKind,
    /// The primaries' `host:port`, sorted; empty until one is known.
    pub primaries: Vec<String>,
    /// Times a primary changed under this node (a promotion followed) since start.
    pub failovers: u64,
    /// Times a connection to Redis was made again (after a failure) since start.
    pub reconnects: u64,
}

impl TopologyView {
    /// Nothing known yet, of `kind`: no primary, nothing followed.
    pub fn unknown(kind: TopologyKind) -> Self {
        Self {
            kind,
            primaries: Vec::new(),
            failovers: 0,
            reconnects: 0,
        }
    }
}

/// What this node knows of Redis's primaries; see the module's documentation.
#[derive(Debug)]
pub(crate) struct Topology {
    kind: TopologyKind,
    primaries: Mutex<Vec<String>>,
    failovers: AtomicU64,
    reconnects: AtomicU64,
}

impl Topology {
    /// Nothing known yet, of `kind`.
    pub(crate) fn new(kind: TopologyKind) -> Self {
        Self {
            kind,
            primaries: Mutex::new(Vec::new()),
            failovers: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
        }
    }

    /// The primaries are now `primaries` (`host:port` each). A change from a known, different
    /// set is a failover followed: counted and logged at `warn` with both sets.
    pub(crate) fn primaries_are(&self, mut primaries: Vec<String>) {
        primaries.sort();
        primaries.dedup();
        let mut known = self.primaries.lock();
        if *known == primaries {
            return;
        }
        if !known.is_empty() && !primaries.is_empty() {
            self.failovers.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                target: "flowgate_redis",
                from = %known.join(","),
                to = %primaries.join(","),
                topology = self.kind.as_str(),
                "Redis primary changed: following it"
            );
        } else if known.is_empty() && !primaries.is_empty() {
            tracing::info!(
                target: "flowgate_redis",
                primaries = %primaries.join(","),
                topology = self.kind.as_str(),
                "Redis primary found"
            );
        }
        *known = primaries;
    }

    /// A connection was made again after a failure.
    pub(crate) fn reconnected(&self) {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// What is known now.
    pub(crate) fn view(&self) -> TopologyView {
        TopologyView {
            kind: self.kind,
            primaries: self.primaries.lock().clone(),
            failovers: self.failovers.load(Ordering::Relaxed),
            reconnects: self.reconnects.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_primary_is_a_failover_the_first_is_not() {
        let t = Topology::new(TopologyKind::Sentinel);
        t.primaries_are(vec!["10.0.0.1:6379".into()]);
        assert_eq!(t.view().failovers, 0);
        t.primaries_are(vec!["10.0.0.1:6379".into()]);
        assert_eq!(t.view().failovers, 0);
        t.primaries_are(vec!["10.0.0.2:6379".into()]);
        let v = t.view();
        assert_eq!(v.failovers, 1);
        assert_eq!(v.primaries, vec!["10.0.0.2:6379".to_owned()]);
        t.reconnected();
        assert_eq!(t.view().reconnects, 1);
    }

    #[test]
    fn order_does_not_make_a_change() {
        let t = Topology::new(TopologyKind::Cluster);
        t.primaries_are(vec!["b:1".into(), "a:1".into()]);
        t.primaries_are(vec!["a:1".into(), "b:1".into()]);
        assert_eq!(t.view().failovers, 0);
    }
}
