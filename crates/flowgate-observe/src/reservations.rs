//! Outstanding reservations (`POST /v1/reserve` not yet committed nor expired) per rule: their
//! series in `/metrics` and their entry in the figures (`GET /v1/stats`, the dashboard).
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `flowgate_reservations_outstanding` | `domain`, `rule` | open reservations holding units (on Redis, the cluster's) |
//! | `flowgate_reservation_units_outstanding` | `domain`, `rule` | the units they hold |

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};

/// The outstanding reservations of one rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReservationsView {
    /// The rule's domain.
    pub domain: String,
    /// The rule's name.
    pub rule: String,
    /// Open reservations holding units under it (on Redis, the cluster's).
    pub count: u64,
    /// The units they hold.
    pub units: u64,
}

/// Labels of the reservations' series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleLabels {
    domain: String,
    rule: String,
}

/// The reservations' series.
#[derive(Debug, Default)]
pub struct ReservationMetrics {
    count: Family<RuleLabels, Gauge>,
    units: Family<RuleLabels, Gauge>,
}

impl ReservationMetrics {
    /// The series, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "flowgate_reservations_outstanding",
            "Open reservations holding units, per rule",
            m.count.clone(),
        );
        registry.register(
            "flowgate_reservation_units_outstanding",
            "Units held by open reservations, per rule",
            m.units.clone(),
        );
        m
    }

    /// Sets the series to `now` (a rule without outstanding reservations shows 0).
    pub fn set(&self, now: &[ReservationsView]) {
        self.count.clear();
        self.units.clear();
        for r in now {
            let labels = RuleLabels {
                domain: r.domain.clone(),
                rule: r.rule.clone(),
            };
            let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            self.count.get_or_create(&labels).set(clamp(r.count));
            self.units.get_or_create(&labels).set(clamp(r.units));
        }
    }
}
