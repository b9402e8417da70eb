//! Where Redis's primaries are, as the server shows it: `flowgate_store_primary`,
//! `flowgate_store_failovers_total`, `flowgate_store_reconnects_total`, and the `topology` part
//! of `GET /v1/store` and of the figures' store (the dashboard's Store section).

use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};

use flowgate_redis::TopologyView;

/// Where the store's primaries are (Redis only).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StoreTopology {
    /// How they are found: `single` (the URL's server), `sentinel` (the primary the sentinels
    /// name, followed across promotions) or `cluster` (a Redis Cluster's primaries).
    pub kind: String,
    /// The primaries this node writes to, `host:port` each; empty until one is known.
    pub primaries: Vec<String>,
    /// Times a primary changed under this node (a failover followed) since it started.
    pub failovers: u64,
    /// Times this node made a connection to Redis again after a failure since it started.
    pub reconnects: u64,
}

impl From<&TopologyView> for StoreTopology {
    fn from(v: &TopologyView) -> Self {
        Self {
            kind: v.kind.as_str().to_owned(),
            primaries: v.primaries.clone(),
            failovers: v.failovers,
            reconnects: v.reconnects,
        }
    }
}

/// Labels of `flowgate_store_primary`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PrimaryLabels {
    /// `single`, `sentinel` or `cluster`.
    pub topology: String,
    /// The primary's `host:port`.
    pub address: String,
}

/// The topology's series.
#[derive(Clone, Debug, Default)]
pub struct TopologyMetrics {
    primary: Family<PrimaryLabels, Gauge>,
    failovers: Counter<u64, AtomicU64>,
    reconnects: Counter<u64, AtomicU64>,
    /// The primaries' labels set now, removed when they change.
    shown: std::sync::Arc<Mutex<Vec<PrimaryLabels>>>,
}

impl TopologyMetrics {
    /// Registers the series in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "flowgate_store_primary",
            "1 for each Redis primary this node writes to, by address (a failover changes it)",
            m.primary.clone(),
        );
        registry.register(
            "flowgate_store_failovers",
            "Times a Redis primary changed under this node (a promotion followed)",
            m.failovers.clone(),
        );
        registry.register(
            "flowgate_store_reconnects",
            "Times this node made a connection to Redis again after a failure",
            m.reconnects.clone(),
        );
        m
    }

    /// Brings the series in line with `view` (the connection's counters only grow).
    pub fn update(&self, view: &TopologyView) {
        let now: Vec<PrimaryLabels> = view
            .primaries
            .iter()
            .map(|a| PrimaryLabels {
                topology: view.kind.as_str().to_owned(),
                address: a.clone(),
            })
            .collect();
        {
            let mut shown = self.shown.lock();
            if *shown != now {
                for gone in shown.iter().filter(|l| !now.contains(l)) {
                    self.primary.remove(gone);
                }
                for l in &now {
                    self.primary.get_or_create(l).set(1);
                }
                *shown = now;
            }
        }
        catch_up(&self.failovers, view.failovers);
        catch_up(&self.reconnects, view.reconnects);
    }
}

/// Raises `counter` to `to` (a counter mirrors one that only grows).
fn catch_up(counter: &Counter<u64, AtomicU64>, to: u64) {
    let at = counter.get();
    if to > at {
        counter.inc_by(to - at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_follow_and_a_gone_primary_is_removed() {
        let mut registry = Registry::default();
        let m = TopologyMetrics::register(&mut registry);
        let mut v = TopologyView::unknown(flowgate_redis::TopologyKind::Sentinel);
        v.primaries = vec!["10.0.0.1:6379".into()];
        m.update(&v);
        v.primaries = vec!["10.0.0.2:6379".into()];
        v.failovers = 1;
        v.reconnects = 3;
        m.update(&v);
        m.update(&v);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                "flowgate_store_primary{topology=\"sentinel\",address=\"10.0.0.2:6379\"} 1"
            ),
            "{text}"
        );
        assert!(!text.contains("10.0.0.1:6379"), "{text}");
        assert!(text.contains("flowgate_store_failovers_total 1"), "{text}");
        assert!(text.contains("flowgate_store_reconnects_total 3"), "{text}");
    }
}
