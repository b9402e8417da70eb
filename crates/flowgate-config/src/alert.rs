//! What an alert watches: the declaration of `[[alert]]`, as the configuration converts and
//! validates it, and the text that names it.

use flowgate_core::quota::format_micros;

/// One declared alert.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertSpec {
    /// Unique among the alerts in force; Alertmanager's `alertname`.
    pub name: String,
    /// Its condition.
    pub kind: AlertKind,
    /// How long the condition must hold before it fires, in milliseconds.
    pub for_ms: u64,
    /// Where its notifications are POSTed as webhook messages.
    pub webhooks: Vec<String>,
    /// The Alertmanagers it is sent to, through their API (`POST /api/v2/alerts`), re-sent
    /// while it fires; the server's `--alertmanager-url` are added to these.
    pub alertmanagers: Vec<String>,
    /// The `severity` label.
    pub severity: Option<String>,
    /// The `summary` annotation (else [`AlertSpec::watches`]).
    pub summary: Option<String>,
    /// The `description` annotation.
    pub description: Option<String>,
}

/// An alert's condition.
#[derive(Clone, Debug, PartialEq)]
pub enum AlertKind {
    /// A rule's rejection ratio over the recent seconds is above `ratio`, at `min_rate`
    /// requests per second or more.
    Rule {
        /// The rule's domain.
        domain: String,
        /// The rule's name.
        rule: String,
        /// Fires while rejected ÷ (admitted + rejected) is strictly above it (0 ≤ ratio < 1).
        ratio: f64,
        /// Fires only while admitted + rejected per second is at least this.
        min_rate: f64,
    },
    /// A rule's debt (units charged past its limit, not yet paid back) is above `debt`.
    RuleDebt {
        /// The rule's domain.
        domain: String,
        /// The rule's name.
        rule: String,
        /// Fires while the debt is strictly above it.
        debt: u64,
    },
    /// A queue's oldest waiting job (the oldest of its instances) is older than `seconds`.
    QueueAge {
        /// The queue's domain.
        domain: String,
        /// The queue's name.
        queue: String,
        /// The age above which it fires, in seconds.
        seconds: f64,
    },
    /// A queue's depth (the deepest of its instances) is above `depth`.
    QueueDepth {
        /// The queue's domain.
        domain: String,
        /// The queue's name.
        queue: String,
        /// The depth above which it fires.
        depth: u64,
    },
    /// The limiter's store is degraded (its last request failed).
    StoreDegraded,
    /// A circuit breaker is open or half-open (any of its instances).
    Breaker {
        /// The breaker's domain.
        domain: String,
        /// The breaker's name.
        breaker: String,
    },
}

impl AlertSpec {
    /// What it watches, as text: `rule api/per-client rejection ratio > 0.5 at >= 2/s for 10s`.
    pub fn watches(&self) -> String {
        let what = match &self.kind {
            AlertKind::Rule {
                domain,
                rule,
                ratio,
                min_rate,
            } => format!("rule {domain}/{rule} rejection ratio > {ratio} at >= {min_rate}/s"),
            AlertKind::RuleDebt { domain, rule, debt } => {
                format!("rule {domain}/{rule} debt > {debt}")
            }
            AlertKind::QueueAge {
                domain,
                queue,
                seconds,
            } => format!(
                "queue {domain}/{queue} oldest age > {}",
                format_micros((seconds * 1e6) as u64)
            ),
            AlertKind::QueueDepth {
                domain,
                queue,
                depth,
            } => format!("queue {domain}/{queue} depth > {depth}"),
            AlertKind::StoreDegraded => "store degraded".to_owned(),
            AlertKind::Breaker { domain, breaker } => format!("breaker {domain}/{breaker} open"),
        };
        if self.for_ms == 0 {
            what
        } else {
            format!("{what} for {}", format_micros(self.for_ms * 1000))
        }
    }

    /// Its labels, as Alertmanager's receivers read them: `alertname`, and `domain` with `rule`
    /// or `queue`, or `store`, and `severity` when given; sorted by name.
    pub fn labels(&self) -> Vec<(String, String)> {
        let mut out = vec![("alertname".to_owned(), self.name.clone())];
        match &self.kind {
            AlertKind::Rule { domain, rule, .. } | AlertKind::RuleDebt { domain, rule, .. } => {
                out.push(("domain".into(), domain.clone()));
                out.push(("rule".into(), rule.clone()));
            }
            AlertKind::QueueAge { domain, queue, .. }
            | AlertKind::QueueDepth { domain, queue, .. } => {
                out.push(("domain".into(), domain.clone()));
                out.push(("queue".into(), queue.clone()));
            }
            AlertKind::StoreDegraded => out.push(("store".into(), "degraded".into())),
            AlertKind::Breaker { domain, breaker } => {
                out.push(("domain".into(), domain.clone()));
                out.push(("breaker".into(), breaker.clone()));
            }
        }
        if let Some(s) = &self.severity {
            out.push(("severity".into(), s.clone()));
        }
        out.sort();
        out
    }
}

/// The alerts in force, in declaration order, their names unique.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AlertSet {
    alerts: Vec<AlertSpec>,
}

impl AlertSet {
    /// The set of `alerts`, whose names the configuration checked unique.
    pub fn new(alerts: Vec<AlertSpec>) -> Self {
        Self { alerts }
    }

    /// The alerts, in declaration order.
    pub fn alerts(&self) -> &[AlertSpec] {
        &self.alerts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_and_labels() {
        let a = AlertSpec {
            name: "pc".into(),
            kind: AlertKind::Rule {
                domain: "api".into(),
                rule: "per-client".into(),
                ratio: 0.5,
                min_rate: 2.0,
            },
            for_ms: 10_000,
            webhooks: vec![],
            alertmanagers: vec![],
            severity: Some("page".into()),
            summary: None,
            description: None,
        };
        assert_eq!(
            a.watches(),
            "rule api/per-client rejection ratio > 0.5 at >= 2/s for 10s"
        );
        let labels = a.labels();
        let names: Vec<&str> = labels.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["alertname", "domain", "rule", "severity"]);
        let q = AlertSpec {
            kind: AlertKind::QueueAge {
                domain: "d".into(),
                queue: "q".into(),
                seconds: 300.0,
            },
            for_ms: 0,
            ..a
        };
        assert_eq!(q.watches(), "queue d/q oldest age > 5m");
    }
}
