//! A configuration read from one or more files, and its validation as a whole: names and
//! patterns unique per domain, and each alert's rule, queue or breaker declared.

use std::collections::HashMap;
use std::path::PathBuf;

use flowgate::breakers::{BreakerDef, BreakerSet};
use flowgate_core::queue::{QueueSet, QueueSpec};
use flowgate_core::{Rule, RuleSet, RuleSetError};

use crate::alert::{AlertKind, AlertSet, AlertSpec};
use crate::error::ConfigError;
use crate::located::{Declared, Located};

/// Rules, queues, alerts and circuit breakers loaded from one or more files.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The rules, in file order.
    pub rules: Vec<Located<Rule>>,
    /// The queues, in file order.
    pub queues: Vec<Located<QueueSpec>>,
    /// The alerts, in file order.
    pub alerts: Vec<Located<AlertSpec>>,
    /// The circuit breakers, in file order.
    pub breakers: Vec<Located<BreakerDef>>,
    /// The files read.
    pub files: Vec<PathBuf>,
}

/// A loaded configuration, validated: its rules, its queues, its alerts and its breakers.
pub struct Loaded {
    /// What was read.
    pub config: Config,
    /// The rules.
    pub rules: RuleSet,
    /// The queues.
    pub queues: QueueSet,
    /// The alerts.
    pub alerts: AlertSet,
    /// The circuit breakers.
    pub breakers: BreakerSet,
}

/// A declaration that is unique per domain by name and pattern.
trait Named {
    /// What it is called in messages (`rule`).
    const NOUN: &'static str;
    fn domain(&self) -> &str;
    fn name(&self) -> &str;
}

impl Named for Rule {
    const NOUN: &'static str = "rule";
    fn domain(&self) -> &str {
        &self.domain
    }
    fn name(&self) -> &str {
        &self.name
    }
}

impl Named for QueueSpec {
    const NOUN: &'static str = "queue";
    fn domain(&self) -> &str {
        &self.domain
    }
    fn name(&self) -> &str {
        &self.name
    }
}

impl Named for BreakerDef {
    const NOUN: &'static str = "breaker";
    fn domain(&self) -> &str {
        &self.domain
    }
    fn name(&self) -> &str {
        &self.name
    }
}

impl Config {
    /// Adds what one document declares.
    pub(crate) fn extend(&mut self, d: Declared) {
        self.rules.extend(d.rules);
        self.queues.extend(d.queues);
        self.alerts.extend(d.alerts);
        self.breakers.extend(d.breakers);
    }

    /// Validates the rules as a whole (unique names and patterns per domain) and builds the
    /// matcher.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and rule in conflict.
    pub fn rule_set(&self) -> Result<RuleSet, ConfigError> {
        RuleSet::new(items(&self.rules)).map_err(|e| self.locate(&self.rules, &e))
    }

    /// Validates the queues as a whole (unique names and patterns per domain).
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and queue in conflict.
    pub fn queue_set(&self) -> Result<QueueSet, ConfigError> {
        QueueSet::new(items(&self.queues)).map_err(|e| self.locate(&self.queues, &e))
    }

    /// Validates the circuit breakers as a whole (unique names and patterns per domain).
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and breaker in conflict.
    pub fn breaker_set(&self) -> Result<BreakerSet, ConfigError> {
        BreakerSet::new(items(&self.breakers)).map_err(|e| self.locate(&self.breakers, &e))
    }

    /// Validates the rules, the queues, the alerts and the breakers as a whole.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and declaration in conflict.
    pub fn validate(self) -> Result<Loaded, ConfigError> {
        let rules = self.rule_set()?;
        let queues = self.queue_set()?;
        let alerts = self.alert_set(&rules, &queues)?;
        let breakers = self.breaker_set()?;
        Ok(Loaded {
            config: self,
            rules,
            queues,
            alerts,
            breakers,
        })
    }

    /// Validates the alerts against `rules` and `queues` (and the breakers): unique names, and
    /// each rule, queue or breaker named declared in its domain.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and field of the alert at fault.
    pub fn alert_set(&self, rules: &RuleSet, queues: &QueueSet) -> Result<AlertSet, ConfigError> {
        let mut seen: HashMap<&str, &Located<AlertSpec>> = HashMap::new();
        for a in &self.alerts {
            if let Some(first) = seen.insert(&a.item.name, a) {
                return Err(ConfigError::new(
                    &a.file,
                    a.line,
                    format!("{}.name", a.field),
                    format!(
                        "duplicate alert name `{}`: already declared in {}{}",
                        a.item.name,
                        first.file,
                        first.line.map(|l| format!(":{l}")).unwrap_or_default()
                    ),
                ));
            }
            let declared = |list: &[(&str, &str)], domain: &str, name: &str| {
                list.iter().any(|&(d, n)| d == domain && n == name)
            };
            let missing = match &a.item.kind {
                AlertKind::Rule { domain, rule, .. } | AlertKind::RuleDebt { domain, rule, .. } => {
                    let all: Vec<_> = rules
                        .rules()
                        .iter()
                        .map(|r| (&*r.domain, &*r.name))
                        .collect();
                    (!declared(&all, domain, rule))
                        .then(|| ("rule", format!("no rule `{rule}` in domain `{domain}`")))
                }
                AlertKind::QueueAge { domain, queue, .. }
                | AlertKind::QueueDepth { domain, queue, .. } => {
                    let all: Vec<_> = queues
                        .specs()
                        .iter()
                        .map(|q| (&*q.domain, &*q.name))
                        .collect();
                    (!declared(&all, domain, queue))
                        .then(|| ("queue", format!("no queue `{queue}` in domain `{domain}`")))
                }
                AlertKind::Breaker { domain, breaker } => {
                    let all: Vec<_> = self
                        .breakers
                        .iter()
                        .map(|b| (&*b.item.domain, &*b.item.name))
                        .collect();
                    (!declared(&all, domain, breaker)).then(|| {
                        (
                            "breaker",
                            format!("no breaker `{breaker}` in domain `{domain}`"),
                        )
                    })
                }
                AlertKind::StoreDegraded => None,
            };
            if let Some((key, message)) = missing {
                return Err(ConfigError::new(
                    &a.file,
                    a.target_line.or(a.line),
                    format!("{}.{key}", a.field),
                    message,
                ));
            }
        }
        Ok(AlertSet::new(items(&self.alerts)))
    }

    /// A set's error, at the declaration in conflict (the second of two).
    fn locate<T: Named>(&self, all: &[Located<T>], e: &RuleSetError) -> ConfigError {
        let noun = T::NOUN;
        let find = |domain: Option<&str>, name: &str, nth: usize| {
            all.iter()
                .filter(|l| l.item.name() == name && domain.is_none_or(|d| l.item.domain() == d))
                .nth(nth)
        };
        let (at, message) = match e {
            RuleSetError::DuplicatePattern {
                domain,
                first,
                second,
                pattern,
            } => (
                find(Some(domain), second, 0),
                format!(
                    "{noun}s `{first}` and `{second}` in domain `{domain}` have the same descriptor pattern `{pattern}`"
                ),
            ),
            RuleSetError::DuplicateName { domain, name } => (
                find(Some(domain), name, 1),
                format!("two {noun}s in domain `{domain}` are named `{name}`"),
            ),
            RuleSetError::EmptyPattern { domain, name } => (
                find(Some(domain), name, 0),
                format!("{noun} `{name}` in domain `{domain}` matches no descriptor entry"),
            ),
            RuleSetError::EmptyName { name } => (
                find(None, name, 0),
                format!("{noun} `{name}`: the domain and every descriptor key must be non-empty"),
            ),
            other => (None, other.to_string()),
        };
        match at {
            Some(l) => ConfigError::new(&l.file, l.line, &l.field, message),
            None => ConfigError::new(
                self.files
                    .first()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                None,
                "",
                message,
            ),
        }
    }
}

/// The declarations, without where they were made.
fn items<T: Clone>(all: &[Located<T>]) -> Vec<T> {
    all.iter().map(|l| l.item.clone()).collect()
}

#[cfg(test)]
mod tests {
    use flowgate_core::RuleSetError;

    /// The messages written for rules are the core's own.
    #[test]
    fn a_rule_sets_messages_are_the_cores() {
        let config = super::Config::default();
        for e in [
            RuleSetError::DuplicatePattern {
                domain: "d".into(),
                first: "a".into(),
                second: "b".into(),
                pattern: "user".into(),
            },
            RuleSetError::DuplicateName {
                domain: "d".into(),
                name: "a".into(),
            },
            RuleSetError::EmptyPattern {
                domain: "d".into(),
                name: "a".into(),
            },
            RuleSetError::EmptyName { name: "a".into() },
        ] {
            let located = config.locate::<flowgate_core::Rule>(&[], &e);
            assert_eq!(located.message, e.to_string());
        }
    }
}
