//! A validated set of rules and the matcher that finds, for each descriptor of a request, the
//! rule that applies, with envoyproxy/ratelimit's semantics:
//!
//! - entries are matched in order, one level of the rule tree per entry;
//! - at each level an exact `key=value` rule entry beats a wildcard entry (`key=prefix*`,
//!   `key=a*b`; among wildcards the first declared that matches wins), which beats a key-only
//!   entry; there is no backtracking to a less specific entry;
//! - a descriptor matches a rule only when it has exactly as many entries as the rule's pattern;
//! - a descriptor with no matching rule, or whose rule has no limit, is unlimited;
//! - when a matched rule names others in `replaces`, those are dropped from the request.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::descriptor::{Descriptor, Request};
use crate::rule::{Rule, ValueMatch, Wildcard};

/// An invalid rule set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleSetError {
    /// Two rules with the same pattern in one domain.
    #[error(
        "rules `{first}` and `{second}` in domain `{domain}` have the same descriptor pattern `{pattern}`"
    )]
    DuplicatePattern {
        /// The domain.
        domain: String,
        /// The first rule's name.
        first: String,
        /// The second rule's name.
        second: String,
        /// The pattern.
        pattern: String,
    },
    /// Two rules with the same name in one domain.
    #[error("two rules in domain `{domain}` are named `{name}`")]
    DuplicateName {
        /// The domain.
        domain: String,
        /// The name.
        name: String,
    },
    /// A rule with an empty pattern.
    #[error("rule `{name}` in domain `{domain}` matches no descriptor entry")]
    EmptyPattern {
        /// The domain.
        domain: String,
        /// The name.
        name: String,
    },
    /// An empty domain or key.
    #[error("rule `{name}`: the domain and every descriptor key must be non-empty")]
    EmptyName {
        /// The rule's name.
        name: String,
    },
}

/// The matcher's maps: their keys come from the rules, so a fast hash suffices (a request's text
/// only looks up; it cannot fill a map to provoke collisions).
type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

#[derive(Debug, Default)]
struct Node {
    /// Children by entry key.
    keys: Map<KeyChildren>,
    rule: Option<usize>,
}

#[derive(Debug, Default)]
struct KeyChildren {
    exact: Map<Node>,
    /// In declaration order: the first that matches wins.
    wildcards: Vec<(Wildcard, Node)>,
    any: Option<Box<Node>>,
}

/// A rule that applies to one descriptor of a request.
#[derive(Clone, Debug)]
pub struct Matched<'a> {
    /// The rule.
    pub rule: &'a Arc<Rule>,
    /// Index of the descriptor in the request.
    pub descriptor: usize,
    /// The state key: `<domain>:<rule>:<k1>=<v1>,<k2>=<v2>`, escaped so that it holds no `{`, `}`
    /// or separator from a value.
    pub key: String,
    /// Units this descriptor takes.
    pub cost: u64,
}

/// A validated, immutable set of rules, cheap to share and swap whole.
#[derive(Debug, Default)]
pub struct RuleSet {
    rules: Vec<Arc<Rule>>,
    /// Each rule's state-key prefix, `<domain>:<rule>:` escaped, made once per rule set.
    prefixes: Vec<Box<str>>,
    domains: Map<Node>,
    /// Each rule's index by domain, then name.
    by_name: Map<Map<usize>>,
}

impl RuleSet {
    /// Validates `rules` and builds the matcher.
    ///
    /// # Errors
    /// [`RuleSetError`] naming the rules in conflict.
    pub fn new(rules: Vec<Rule>) -> Result<Self, RuleSetError> {
        let mut set = RuleSet::default();
        let mut names: HashMap<(&str, &str), ()> = HashMap::new();
        for r in &rules {
            if r.domain.is_empty() || r.pattern.iter().any(|m| m.key.is_empty()) {
                return Err(RuleSetError::EmptyName {
                    name: r.name.clone(),
                });
            }
            if r.pattern.is_empty() {
                return Err(RuleSetError::EmptyPattern {
                    domain: r.domain.clone(),
                    name: r.name.clone(),
                });
            }
            if names.insert((&r.domain, &r.name), ()).is_some() {
                return Err(RuleSetError::DuplicateName {
                    domain: r.domain.clone(),
                    name: r.name.clone(),
                });
            }
        }
        for (i, r) in rules.iter().enumerate() {
            let mut node = set.domains.entry(r.domain.clone()).or_default();
            for m in &r.pattern {
                let kc = node.keys.entry(m.key.clone()).or_default();
                node = match &m.value {
                    ValueMatch::Exact(v) => kc.exact.entry(v.clone()).or_default(),
                    ValueMatch::Any => kc.any.get_or_insert_with(Box::default),
                    ValueMatch::Wildcard(w) => {
                        let at = match kc.wildcards.iter().position(|(q, _)| q == w) {
                            Some(at) => at,
                            None => {
                                kc.wildcards.push((w.clone(), Node::default()));
                                kc.wildcards.len() - 1
                            }
                        };
                        &mut kc.wildcards[at].1
                    }
                };
            }
            if let Some(prev) = node.rule {
                return Err(RuleSetError::DuplicatePattern {
                    domain: r.domain.clone(),
                    first: rules[prev].name.clone(),
                    second: r.name.clone(),
                    pattern: r.pattern_text(),
                });
            }
            node.rule = Some(i);
            set.by_name
                .entry(r.domain.clone())
                .or_default()
                .insert(r.name.clone(), i);
        }
        set.prefixes = rules
            .iter()
            .map(|r| key_prefix(&r.domain, &r.name).into_boxed_str())
            .collect();
        set.rules = rules.into_iter().map(Arc::new).collect();
        Ok(set)
    }

    /// The rules, in the order given.
    pub fn rules(&self) -> &[Arc<Rule>] {
        &self.rules
    }

    /// Rule `name` of `domain`, if there is one.
    pub fn named(&self, domain: &str, name: &str) -> Option<&Arc<Rule>> {
        let i = *self.by_name.get(domain)?.get(name)?;
        self.rules.get(i)
    }

    /// Whether a domain has any rule.
    pub fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// The rule that applies to one descriptor, if any.
    pub fn find(&self, domain: &str, descriptor: &Descriptor) -> Option<&Arc<Rule>> {
        self.find_index(domain, descriptor).map(|r| &self.rules[r])
    }

    /// The index of the rule that applies to one descriptor, if any.
    fn find_index(&self, domain: &str, descriptor: &Descriptor) -> Option<usize> {
        let mut node = self.domains.get(domain)?;
        let last = descriptor.entries.len().checked_sub(1)?;
        for (i, e) in descriptor.entries.iter().enumerate() {
            let kc = node.keys.get(e.key.as_str())?;
            let next = kc
                .exact
                .get(e.value.as_str())
                .or_else(|| {
                    kc.wildcards
                        .iter()
                        .find(|(w, _)| w.matches(&e.value))
                        .map(|(_, n)| n)
                })
                .or(kc.any.as_deref())?;
            if i == last {
                return next.rule;
            }
            node = next;
        }
        None
    }

    /// The rules that apply to a request, one per matching descriptor, with their state keys;
    /// replaced rules are dropped. Descriptors without a rule (unlimited) are absent. Held
    /// inline up to four (a request's usual size), so resolving allocates only the keys.
    pub fn resolve<'a>(&'a self, request: &Request) -> SmallVec<[Matched<'a>; 4]> {
        let mut out: SmallVec<[Matched<'a>; 4]> = SmallVec::new();
        for (i, d) in request.descriptors.iter().enumerate() {
            if let Some(r) = self.find_index(&request.domain, d) {
                let rule = &self.rules[r];
                out.push(Matched {
                    rule,
                    descriptor: i,
                    key: rule_key_after(&self.prefixes[r], rule, d),
                    cost: d.cost.unwrap_or(request.cost),
                });
            }
        }
        if out.iter().any(|m| !m.rule.replaces.is_empty()) {
            let replaced: Vec<&str> = out
                .iter()
                .flat_map(|m| m.rule.replaces.iter().map(String::as_str))
                .collect();
            out.retain(|m| !replaced.contains(&m.rule.name.as_str()));
        }
        out
    }
}

/// Appends `text` with `%`, `{`, `}`, `:`, `,`, `=` and control characters percent-escaped.
fn escape_into(out: &mut String, text: &str) {
    // Fast path: nothing to escape (0xC2 leads the C1 control characters U+0080..U+009F).
    if !text
        .bytes()
        .any(|b| matches!(b, b'%' | b'{' | b'}' | b':' | b',' | b'=' | 0x7f | 0xC2) || b < 0x20)
    {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        if matches!(c, '%' | '{' | '}' | ':' | ',' | '=') || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        } else {
            out.push(c);
        }
    }
}

/// The state key of `rule` for a descriptor it matched: [`state_key`], except that an entry whose
/// wildcard is shared ([`crate::Matcher::share`]) is counted under its pattern, so every value it
/// matches shares one counter.
pub fn rule_state_key(domain: &str, rule: &Rule, descriptor: &Descriptor) -> String {
    let mut k = String::with_capacity(domain.len() + rule.name.len() + 2 + entries_len(descriptor));
    push_prefix(&mut k, domain, &rule.name);
    push_counted(&mut k, rule, descriptor);
    k
}

/// [`rule_state_key`] with the rule's prefix already made ([`key_prefix`]).
fn rule_key_after(prefix: &str, rule: &Rule, descriptor: &Descriptor) -> String {
    let mut k = String::with_capacity(prefix.len() + entries_len(descriptor));
    k.push_str(prefix);
    push_counted(&mut k, rule, descriptor);
    k
}

/// Appends the entries `rule` counts `descriptor` under: its own, or a shared wildcard's pattern.
fn push_counted(k: &mut String, rule: &Rule, descriptor: &Descriptor) {
    if !rule.shares() {
        push_entries(k, descriptor);
        return;
    }
    let counted = Descriptor {
        entries: descriptor
            .entries
            .iter()
            .zip(&rule.pattern)
            .map(|(e, m)| crate::descriptor::Entry {
                key: e.key.clone(),
                value: m.counted_value(&e.value).to_owned(),
            })
            .collect(),
        cost: descriptor.cost,
    };
    push_entries(k, &counted);
}

/// The state key of a rule for a descriptor: `<domain>:<rule>:<k1>=<v1>,<k2>=<v2>`, escaped.
pub fn state_key(domain: &str, rule: &str, descriptor: &Descriptor) -> String {
    let mut k = String::with_capacity(domain.len() + rule.len() + 2 + entries_len(descriptor));
    push_prefix(&mut k, domain, rule);
    push_entries(&mut k, descriptor);
    k
}

/// A rule's state-key prefix: `<domain>:<rule>:`, escaped.
fn key_prefix(domain: &str, rule: &str) -> String {
    let mut k = String::with_capacity(domain.len() + rule.len() + 2);
    push_prefix(&mut k, domain, rule);
    k
}

/// Appends `<domain>:<rule>:`, escaped.
fn push_prefix(k: &mut String, domain: &str, rule: &str) {
    escape_into(k, domain);
    k.push(':');
    escape_into(k, rule);
    k.push(':');
}

/// Appends `<k1>=<v1>,<k2>=<v2>`, escaped.
fn push_entries(k: &mut String, descriptor: &Descriptor) {
    for (i, e) in descriptor.entries.iter().enumerate() {
        if i > 0 {
            k.push(',');
        }
        escape_into(k, &e.key);
        k.push('=');
        escape_into(k, &e.value);
    }
}

/// The unescaped length of a descriptor's entries in a key.
fn entries_len(descriptor: &Descriptor) -> usize {
    descriptor
        .entries
        .iter()
        .map(|e| e.key.len() + e.value.len() + 2)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Matcher;
    use crate::{Algorithm, Limit, Quota};

    fn rule(name: &str, pattern: &str, q: Option<&str>) -> Rule {
        Rule::new(
            "d",
            name,
            pattern.split(',').map(Matcher::parse).collect(),
            q.map(|q| Limit::new(Algorithm::FixedWindow, q.parse::<Quota>().unwrap()).unwrap()),
        )
    }

    fn find<'a>(set: &'a RuleSet, d: &str) -> Option<&'a str> {
        set.find("d", &d.parse().unwrap()).map(|r| r.name.as_str())
    }

    #[test]
    fn envoy_matching() {
        let set = RuleSet::new(vec![
            rule("any-user", "user", Some("10/s")),
            rule("vip", "user=vip", Some("100/s")),
            rule("test-users", "user=test*", Some("1/s")),
            rule("te-users", "user=te*", Some("1/s")),
            rule("mid", "user=a*z", Some("1/s")),
            rule("pay-channel", "biz=PAY,channel", Some("20/s")),
            rule("pay-wpg", "biz=PAY,channel=WPG", Some("5/s")),
            rule("biz-any", "biz", None),
        ])
        .unwrap();
        assert_eq!(find(&set, "user=vip"), Some("vip"));
        // Wildcards: the first declared that matches wins (as in envoyproxy/ratelimit).
        assert_eq!(find(&set, "user=testy"), Some("test-users"));
        assert_eq!(find(&set, "user=tex"), Some("te-users"));
        assert_eq!(find(&set, "user=abcz"), Some("mid"));
        assert_eq!(find(&set, "user=abc"), Some("any-user"));
        assert_eq!(find(&set, "user=bob"), Some("any-user"));
        assert_eq!(find(&set, "biz=PAY, channel=WPG"), Some("pay-wpg"));
        assert_eq!(find(&set, "biz=PAY, channel=ALI"), Some("pay-channel"));
        // Depth must match: a longer or shorter descriptor does not match.
        assert_eq!(find(&set, "biz=PAY"), None);
        assert_eq!(find(&set, "user=bob, x=1"), None);
        // Value-specific node is taken without backtracking to the key-only node.
        assert_eq!(find(&set, "biz=REFUND, channel=WPG"), None);
        assert_eq!(find(&set, "biz=REFUND"), Some("biz-any"));
        assert_eq!(find(&set, "unknown=1"), None);
        assert!(set.find("other", &"user=bob".parse().unwrap()).is_none());
    }

    #[test]
    fn replaces_drops_the_replaced_rule() {
        let mut special = rule("special", "user=vip", Some("100/s"));
        special.replaces = vec!["global".into()];
        let set = RuleSet::new(vec![rule("global", "global", Some("10/s")), special]).unwrap();
        let req = Request::new(
            "d",
            vec!["global=all".parse().unwrap(), "user=vip".parse().unwrap()],
        );
        let m = set.resolve(&req);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].rule.name, "special");
        assert_eq!(m[0].descriptor, 1);
    }

    #[test]
    fn conflicts_are_named() {
        let e = RuleSet::new(vec![rule("a", "user", None), rule("b", "user", None)]).unwrap_err();
        assert!(e.to_string().contains("`a` and `b`"), "{e}");
        let e = RuleSet::new(vec![rule("a", "user", None), rule("a", "x", None)]).unwrap_err();
        assert!(matches!(e, RuleSetError::DuplicateName { .. }));
    }

    #[test]
    fn a_shared_wildcard_counts_every_value_under_its_pattern() {
        let mut shared = rule("files", "path=files/*", Some("10/s"));
        shared.pattern[0].share = true;
        let plain = rule("docs", "path=docs/*", Some("10/s"));
        let set = RuleSet::new(vec![shared, plain]).unwrap();
        let key = |d: &str| {
            set.resolve(&Request::new("d", vec![d.parse().unwrap()]))[0]
                .key
                .clone()
        };
        assert_eq!(key("path=files/a.pdf"), key("path=files/b.csv"));
        assert_eq!(key("path=files/a.pdf"), "d:files:path=files/*");
        assert_ne!(key("path=docs/a"), key("path=docs/b"));
    }

    #[test]
    fn a_resolved_key_is_the_rules_state_key() {
        let mut a = rule("r{1}", "user", Some("10/s"));
        a.domain = "d:1".into();
        let mut b = rule("s", "user=x,path", Some("10/s"));
        b.domain = "d:1".into();
        let set = RuleSet::new(vec![a, b]).unwrap();
        let descriptors = [
            Descriptor::new([("user", "a,b")]),
            Descriptor::new([("user", "x"), ("path", "p%q")]),
        ];
        for d in descriptors {
            let request = Request::new("d:1", vec![d.clone()]);
            let m = &set.resolve(&request)[0];
            assert_eq!(m.key, rule_state_key("d:1", m.rule, &d));
            assert_eq!(m.key, state_key("d:1", &m.rule.name, &d));
        }
        let request = Request::new("d:1", vec![Descriptor::new([("user", "a,b")])]);
        assert_eq!(set.resolve(&request)[0].key, "d%3A1:r%7B1%7D:user=a%2Cb");
    }

    #[test]
    fn state_keys_escape_separators_and_hash_tags() {
        let d: Descriptor = Descriptor::new([("user", "a}b{c,d=e:f%")]);
        assert_eq!(
            state_key("dom", "r", &d),
            "dom:r:user=a%7Db%7Bc%2Cd%3De%3Af%25"
        );
    }
}
