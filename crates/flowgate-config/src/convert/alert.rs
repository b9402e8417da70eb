//! An alert: its keys as written ([`AlertFields`]) to [`AlertDoc`], whose [`Watch`] says what it
//! watches, to [`AlertSpec`], and back.
//!
//! What an alert watches is written as keys beside its own (`rule = "per-client"`,
//! `rejection_ratio = 0.5`), as `docs/alerts.md` shows, so its kind is read from which keys are
//! present: one of `rule`, `queue`, `store` and `breaker`, each with the keys that belong to it.

use flowgate_core::quota::format_micros;
use serde::Deserialize;

use super::{FileContext, SchemaError, domain_of, duration_of, err, err_at, name_of, webhooks_of};
use crate::alert::{AlertKind, AlertSpec};
use crate::schema::{AlertDoc, StoreCondition, Watch};

/// An `[[alert]]` table as written: every key any kind of alert takes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AlertFields {
    name: String,
    #[serde(default)]
    domain: Option<String>,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    rejection_ratio: Option<f64>,
    #[serde(default)]
    min_rate: Option<f64>,
    #[serde(default)]
    debt: Option<u64>,
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    oldest_age: Option<String>,
    #[serde(default)]
    depth: Option<u64>,
    #[serde(default)]
    store: Option<StoreCondition>,
    #[serde(default)]
    breaker: Option<String>,
    #[serde(default, rename = "for")]
    for_: Option<String>,
    #[serde(default)]
    webhooks: Option<Vec<String>>,
    #[serde(default)]
    alertmanagers: Option<Vec<String>>,
    #[serde(default)]
    severity: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// The key that says what an alert watches, with its value.
#[derive(Clone, Debug, PartialEq)]
enum Named {
    Rule(String),
    Queue(String),
    Store(StoreCondition),
    Breaker(String),
}

impl Named {
    fn key(&self) -> &'static str {
        match self {
            Named::Rule(_) => "rule",
            Named::Queue(_) => "queue",
            Named::Store(_) => "store",
            Named::Breaker(_) => "breaker",
        }
    }
}

impl AlertFields {
    /// The one key present of `rule`, `queue`, `store` and `breaker`, taken out.
    fn named(&mut self) -> Result<Named, SchemaError> {
        let mut present = [
            self.rule.take().map(Named::Rule),
            self.queue.take().map(Named::Queue),
            self.store.take().map(Named::Store),
            self.breaker.take().map(Named::Breaker),
        ]
        .into_iter()
        .flatten();
        match (present.next(), present.next()) {
            (None, _) => Err(err_at(
                "rule",
                "name",
                "the alert watches nothing: set `rule` (with `rejection_ratio`), `queue` (with `oldest_age` or `depth`), `store = \"degraded\"` or `breaker`",
            )),
            (Some(one), None) => Ok(one),
            (Some(first), Some(second)) => Err(err(
                second.key(),
                format!(
                    "an alert watches one thing: `{}` and `{}` are both given; declare two alerts",
                    first.key(),
                    second.key()
                ),
            )),
        }
    }

    /// Refuses a key that belongs to another kind than the one `named`.
    fn misplaced(&self, named: &Named) -> Result<(), SchemaError> {
        let keys: [(&str, bool, &[&str]); 6] = [
            ("debt", self.debt.is_some(), &["rule"]),
            ("rejection_ratio", self.rejection_ratio.is_some(), &["rule"]),
            ("min_rate", self.min_rate.is_some(), &["rule"]),
            ("oldest_age", self.oldest_age.is_some(), &["queue"]),
            ("depth", self.depth.is_some(), &["queue"]),
            (
                "domain",
                self.domain.is_some(),
                &["rule", "queue", "breaker"],
            ),
        ];
        for (key, present, of) in keys {
            if present && !of.contains(&named.key()) {
                return Err(err(
                    key,
                    format!(
                        "`{key}` is for `{}` alerts, and this one watches `{}`",
                        of.join("` or `"),
                        named.key()
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl TryFrom<AlertFields> for AlertDoc {
    type Error = SchemaError;

    /// What the alert watches, from the keys present: exactly one kind, with the keys it needs
    /// and none of another's.
    fn try_from(mut f: AlertFields) -> Result<Self, SchemaError> {
        let named = f.named()?;
        f.misplaced(&named)?;
        let domain = f.domain;
        let watch = match named {
            Named::Rule(rule) => match (f.rejection_ratio, f.debt) {
                (Some(_), Some(_)) => {
                    return Err(err(
                        "debt",
                        "an alert watches one thing: `rejection_ratio` and `debt` are both given; declare two alerts",
                    ));
                }
                (None, Some(debt)) => {
                    if f.min_rate.is_some() {
                        return Err(err(
                            "min_rate",
                            "`min_rate` is for `rejection_ratio` alerts, and this one watches `debt`",
                        ));
                    }
                    Watch::RuleDebt { domain, rule, debt }
                }
                (rejection_ratio, None) => Watch::Rule {
                    domain,
                    rule,
                    rejection_ratio: rejection_ratio.ok_or_else(|| {
                        err_at(
                            "rejection_ratio",
                            "rule",
                            "a rule alert needs `rejection_ratio` (it fires while more than this share of the rule's requests is rejected, e.g. 0.5) or `debt` (while more than these units are charged past its limit)",
                        )
                    })?,
                    min_rate: f.min_rate,
                },
            },
            Named::Queue(queue) => match (f.oldest_age, f.depth) {
                (Some(_), Some(_)) => {
                    return Err(err(
                        "depth",
                        "an alert watches one thing: `oldest_age` and `depth` are both given; declare two alerts",
                    ));
                }
                (Some(oldest_age), None) => Watch::QueueAge {
                    domain,
                    queue,
                    oldest_age,
                },
                (None, Some(depth)) => Watch::QueueDepth {
                    domain,
                    queue,
                    depth,
                },
                (None, None) => {
                    return Err(err_at(
                        "oldest_age",
                        "queue",
                        "a queue alert needs `oldest_age` (e.g. \"5m\") or `depth` (e.g. 1000)",
                    ));
                }
            },
            Named::Store(store) => Watch::Store { store },
            Named::Breaker(breaker) => Watch::Breaker { domain, breaker },
        };
        Ok(AlertDoc {
            name: f.name,
            watch,
            for_: f.for_,
            webhooks: f.webhooks,
            alertmanagers: f.alertmanagers,
            severity: f.severity,
            summary: f.summary,
            description: f.description,
        })
    }
}

impl Watch {
    /// The condition, its domain the file's unless it names its own.
    fn to_kind(&self, file_domain: Option<&str>) -> Result<AlertKind, SchemaError> {
        let named = |what: &str, domain: &Option<String>, name: &str| {
            let domain = domain_of(domain.as_deref(), file_domain, "alert")?;
            name_of(what, what, name)?;
            Ok::<_, SchemaError>((domain, name.to_owned()))
        };
        Ok(match self {
            Watch::Rule {
                domain,
                rule,
                rejection_ratio,
                min_rate,
            } => {
                let (domain, rule) = named("rule", domain, rule)?;
                let ratio = *rejection_ratio;
                if !(0.0..1.0).contains(&ratio) {
                    return Err(err(
                        "rejection_ratio",
                        format!(
                            "{ratio} is not a ratio from 0 up to (not including) 1: the alert fires while the share rejected is strictly above it, so 1 could never fire"
                        ),
                    ));
                }
                let min_rate = min_rate.unwrap_or(1.0);
                if !min_rate.is_finite() || min_rate < 0.0 {
                    return Err(err(
                        "min_rate",
                        format!("{min_rate} is not a rate: requests per second, 0 or more"),
                    ));
                }
                AlertKind::Rule {
                    domain,
                    rule,
                    ratio,
                    min_rate,
                }
            }
            Watch::RuleDebt { domain, rule, debt } => {
                let (domain, rule) = named("rule", domain, rule)?;
                AlertKind::RuleDebt {
                    domain,
                    rule,
                    debt: *debt,
                }
            }
            Watch::QueueAge {
                domain,
                queue,
                oldest_age,
            } => {
                let (domain, queue) = named("queue", domain, queue)?;
                AlertKind::QueueAge {
                    domain,
                    queue,
                    seconds: duration_of("oldest_age", oldest_age)?.as_secs_f64(),
                }
            }
            Watch::QueueDepth {
                domain,
                queue,
                depth,
            } => {
                let (domain, queue) = named("queue", domain, queue)?;
                AlertKind::QueueDepth {
                    domain,
                    queue,
                    depth: *depth,
                }
            }
            Watch::Store {
                store: StoreCondition::Degraded,
            } => AlertKind::StoreDegraded,
            Watch::Breaker { domain, breaker } => {
                let (domain, breaker) = named("breaker", domain, breaker)?;
                AlertKind::Breaker { domain, breaker }
            }
        })
    }

    /// What an alert of `kind` watches, its domain named.
    fn of(kind: &AlertKind) -> Self {
        match kind {
            AlertKind::Rule {
                domain,
                rule,
                ratio,
                min_rate,
            } => Watch::Rule {
                domain: Some(domain.clone()),
                rule: rule.clone(),
                rejection_ratio: *ratio,
                min_rate: Some(*min_rate),
            },
            AlertKind::RuleDebt { domain, rule, debt } => Watch::RuleDebt {
                domain: Some(domain.clone()),
                rule: rule.clone(),
                debt: *debt,
            },
            AlertKind::QueueAge {
                domain,
                queue,
                seconds,
            } => Watch::QueueAge {
                domain: Some(domain.clone()),
                queue: queue.clone(),
                oldest_age: format_micros((seconds * 1e6).round() as u64),
            },
            AlertKind::QueueDepth {
                domain,
                queue,
                depth,
            } => Watch::QueueDepth {
                domain: Some(domain.clone()),
                queue: queue.clone(),
                depth: *depth,
            },
            AlertKind::StoreDegraded => Watch::Store {
                store: StoreCondition::Degraded,
            },
            AlertKind::Breaker { domain, breaker } => Watch::Breaker {
                domain: Some(domain.clone()),
                breaker: breaker.clone(),
            },
        }
    }
}

impl AlertDoc {
    /// The alert, its domain the file's unless it names its own, its webhooks and Alertmanagers
    /// the file's (already checked) unless it names its own.
    ///
    /// # Errors
    /// [`SchemaError`] naming the field at fault.
    pub(crate) fn to_spec(&self, file: &FileContext<'_>) -> Result<AlertSpec, SchemaError> {
        name_of("alert", "name", &self.name)?;
        let kind = self.watch.to_kind(file.domain)?;
        let for_ms = match &self.for_ {
            Some(f) => u64::try_from(duration_of("for", f)?.as_millis()).unwrap_or(u64::MAX),
            None => 0,
        };
        let own = |field: &str, urls: &Option<Vec<String>>, file: &[String]| match urls {
            Some(own) => webhooks_of(field, own),
            None => Ok(file.to_vec()),
        };
        let webhooks = own("webhooks", &self.webhooks, file.webhooks)?;
        let alertmanagers = own("alertmanagers", &self.alertmanagers, file.alertmanagers)?;
        if self
            .severity
            .as_deref()
            .is_some_and(|s| s.trim().is_empty())
        {
            return Err(err(
                "severity",
                "the severity must not be empty (or leave it out)",
            ));
        }
        Ok(AlertSpec {
            name: self.name.clone(),
            kind,
            for_ms,
            webhooks,
            alertmanagers,
            severity: self.severity.clone(),
            summary: self.summary.clone(),
            description: self.description.clone(),
        })
    }

    /// The key naming what the alert watches (`rule`, `queue`, `breaker`), whose line an error
    /// about it is shown at; none for a store alert.
    pub(crate) fn target(&self) -> Option<&'static str> {
        match self.watch {
            Watch::Rule { .. } | Watch::RuleDebt { .. } => Some("rule"),
            Watch::QueueAge { .. } | Watch::QueueDepth { .. } => Some("queue"),
            Watch::Breaker { .. } => Some("breaker"),
            Watch::Store { .. } => None,
        }
    }

    /// The document of an alert: converting it back gives the same alert (its webhooks and
    /// Alertmanagers written out, its domain named).
    pub fn of(a: &AlertSpec) -> Self {
        AlertDoc {
            name: a.name.clone(),
            watch: Watch::of(&a.kind),
            for_: (a.for_ms > 0).then(|| format_micros(a.for_ms.saturating_mul(1000))),
            webhooks: Some(a.webhooks.clone()),
            alertmanagers: Some(a.alertmanagers.clone()),
            severity: a.severity.clone(),
            summary: a.summary.clone(),
            description: a.description.clone(),
        }
    }
}
