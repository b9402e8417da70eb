//! What a breaker is: its definition, and the validated set of them with the matcher that finds
//! each descriptor's breaker.

use std::collections::HashMap;
use std::sync::Arc;

use flowgate_core::breaker::BreakerSpec;
use flowgate_core::{Descriptor, Matcher, Rule, RuleSet, RuleSetError};

/// A declared breaker.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BreakerDef {
    /// Its domain.
    pub domain: String,
    /// Unique among the domain's breakers; part of every instance's key.
    pub name: String,
    /// The descriptor pattern, matched as a rule's is.
    pub pattern: Vec<Matcher>,
    /// Its state machine's parameters.
    pub spec: BreakerSpec,
    /// For the breaker shared by a cluster: the fewest nodes whose bad calls in the window may
    /// open it (`None`: one). Per process it has no effect.
    pub min_nodes: Option<u32>,
}

impl BreakerDef {
    /// A breaker `name` in `domain` over `pattern`.
    pub fn new(
        domain: impl Into<String>,
        name: impl Into<String>,
        pattern: Vec<Matcher>,
        spec: BreakerSpec,
    ) -> Self {
        Self {
            domain: domain.into(),
            name: name.into(),
            pattern,
            spec,
            min_nodes: None,
        }
    }

    /// The pattern as written (`key=value, key`).
    pub fn pattern_text(&self) -> String {
        self.pattern
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A validated set of breakers and the matcher that finds each descriptor's.
#[derive(Debug, Default)]
pub struct BreakerSet {
    defs: Vec<BreakerDef>,
    matcher: RuleSet,
    /// A matched pattern's definition, by the address of the matcher's rule.
    by_rule: HashMap<usize, usize>,
    /// A definition by domain and name.
    by_name: HashMap<(String, String), usize>,
}

impl BreakerSet {
    /// Validates `defs`: in each domain, unique names and unique patterns.
    ///
    /// # Errors
    /// [`RuleSetError`] naming the breakers in conflict (its text says "rules": a caller that
    /// shows it says "breakers").
    pub fn new(defs: Vec<BreakerDef>) -> Result<Self, RuleSetError> {
        let rules: Vec<Rule> = defs
            .iter()
            .map(|d| Rule::new(d.domain.clone(), d.name.clone(), d.pattern.clone(), None))
            .collect();
        let matcher = RuleSet::new(rules)?;
        let by_rule = matcher
            .rules()
            .iter()
            .enumerate()
            .map(|(i, r)| (Arc::as_ptr(r) as usize, i))
            .collect();
        let by_name = defs
            .iter()
            .enumerate()
            .map(|(i, d)| ((d.domain.clone(), d.name.clone()), i))
            .collect();
        Ok(Self {
            defs,
            matcher,
            by_rule,
            by_name,
        })
    }

    /// The breakers, in the order given.
    pub fn defs(&self) -> &[BreakerDef] {
        &self.defs
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// The place of breaker `name` of `domain` among [`BreakerSet::defs`].
    pub(super) fn index_of(&self, domain: &str, name: &str) -> Option<usize> {
        self.by_name
            .get(&(domain.to_owned(), name.to_owned()))
            .copied()
    }

    /// The breaker matching `descriptor` in `domain`, and the instance's key.
    pub(super) fn find(&self, domain: &str, descriptor: &Descriptor) -> Option<(usize, String)> {
        let rule = self.matcher.find(domain, descriptor)?;
        let i = *self.by_rule.get(&(Arc::as_ptr(rule) as usize))?;
        Some((
            i,
            flowgate_core::ruleset::rule_state_key(domain, rule, descriptor),
        ))
    }
}
