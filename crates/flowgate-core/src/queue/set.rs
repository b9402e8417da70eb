//! The declared queues, and the matcher from a submitted descriptor to its queue instance.

use std::collections::HashMap;
use std::sync::Arc;

use super::spec::QueueSpec;
use crate::descriptor::Descriptor;
use crate::rule::Rule;
use crate::ruleset::{RuleSet, RuleSetError, state_key};

/// A validated set of queues. Matching is the rules' ([`RuleSet`]): entries level by level,
/// `key=value` before `key=prefix*` before `key`, exactly as many entries as the pattern.
#[derive(Debug, Default)]
pub struct QueueSet {
    specs: Vec<Arc<QueueSpec>>,
    matcher: RuleSet,
    by_name: HashMap<(String, String), usize>,
}

impl QueueSet {
    /// Validates `specs` (unique names and patterns per domain).
    ///
    /// # Errors
    /// [`RuleSetError`] naming the queues in conflict.
    pub fn new(specs: Vec<QueueSpec>) -> Result<Self, RuleSetError> {
        let rules = specs
            .iter()
            .map(|s| Rule::new(s.domain.clone(), s.name.clone(), s.pattern.clone(), None))
            .collect();
        let matcher = RuleSet::new(rules)?;
        let by_name = specs
            .iter()
            .enumerate()
            .map(|(i, s)| ((s.domain.clone(), s.name.clone()), i))
            .collect();
        Ok(Self {
            specs: specs.into_iter().map(Arc::new).collect(),
            matcher,
            by_name,
        })
    }

    /// The queues, in the order given.
    pub fn specs(&self) -> &[Arc<QueueSpec>] {
        &self.specs
    }

    /// The queue a descriptor goes to, and its instance key (`<domain>:<queue>:<k>=<v>,…`,
    /// escaped like a rule's state key).
    pub fn find(&self, domain: &str, descriptor: &Descriptor) -> Option<(&Arc<QueueSpec>, String)> {
        let rule = self.matcher.find(domain, descriptor)?;
        let spec = self.get(domain, &rule.name)?;
        Some((spec, state_key(domain, &rule.name, descriptor)))
    }

    /// A queue by domain and name.
    pub fn get(&self, domain: &str, name: &str) -> Option<&Arc<QueueSpec>> {
        let i = self.by_name.get(&(domain.to_owned(), name.to_owned()))?;
        self.specs.get(*i)
    }

    /// The queue of an instance key.
    pub fn of_instance(&self, instance: &str) -> Option<&Arc<QueueSpec>> {
        let (domain, name) = instance_names(instance)?;
        self.get(&domain, &name)
    }
}

/// The domain and queue name of an instance key.
pub fn instance_names(instance: &str) -> Option<(String, String)> {
    let mut parts = instance.splitn(3, ':');
    let domain = unescape(parts.next()?)?;
    let name = unescape(parts.next()?)?;
    parts.next()?;
    Some((domain, name))
}

/// The descriptor part of an instance key, as `k=v, k2=v2` text.
pub fn instance_descriptor(instance: &str) -> Option<Descriptor> {
    let text = instance.splitn(3, ':').nth(2)?;
    let mut entries = Vec::new();
    for pair in text.split(',') {
        let (k, v) = pair.split_once('=')?;
        entries.push((unescape(k)?, unescape(v)?));
    }
    Some(Descriptor::new(entries))
}

/// Undoes the percent-escaping of state keys.
fn unescape(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Matcher;

    fn spec(domain: &str, name: &str, pattern: &[&str]) -> QueueSpec {
        QueueSpec::new(
            domain,
            name,
            pattern.iter().map(|p| Matcher::parse(p)).collect(),
            "1/s".parse().unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn one_instance_per_matched_value_and_back() {
        let set = QueueSet::new(vec![spec("pay", "refunds", &["biz=REFUND", "channel"])]).unwrap();
        let d = Descriptor::new([("biz", "REFUND"), ("channel", "W:P,G")]);
        let (s, instance) = set.find("pay", &d).unwrap();
        assert_eq!(s.name, "refunds");
        assert_eq!(instance, "pay:refunds:biz=REFUND,channel=W%3AP%2CG");
        assert_eq!(set.of_instance(&instance).unwrap().name, "refunds");
        assert_eq!(instance_descriptor(&instance).unwrap(), d);
        assert!(
            set.find("pay", &Descriptor::new([("biz", "PAY"), ("channel", "x")]))
                .is_none()
        );
        assert!(set.find("other", &d).is_none());
    }

    #[test]
    fn duplicate_queues_are_refused() {
        let twice = QueueSet::new(vec![spec("d", "q", &["a"]), spec("d", "q", &["b"])]);
        assert!(matches!(twice, Err(RuleSetError::DuplicateName { .. })));
        let same = QueueSet::new(vec![spec("d", "q", &["a"]), spec("d", "r", &["a"])]);
        assert!(matches!(same, Err(RuleSetError::DuplicatePattern { .. })));
    }
}
