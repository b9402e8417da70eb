//! Rules: what a limit applies to (a descriptor pattern in a domain), and how it behaves.

use std::fmt;

use crate::limit::Limit;

/// How one descriptor entry of a rule matches a request's entry with the same key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ValueMatch {
    /// Any value; each distinct value gets its own counter (Envoy's key-only entry).
    Any,
    /// Exactly this value. More specific than [`ValueMatch::Prefix`] and [`ValueMatch::Any`].
    Exact(String),
    /// Values starting with this prefix (Envoy's `value: foo*`); each value gets its own counter.
    Prefix(String),
}

/// One entry of a rule's descriptor pattern.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Matcher {
    /// The entry's key.
    pub key: String,
    /// How its value matches.
    pub value: ValueMatch,
}

impl Matcher {
    /// Parses `key`, `key=value` or `key=prefix*`.
    pub fn parse(text: &str) -> Self {
        match text.split_once('=') {
            None => Matcher {
                key: text.trim().to_owned(),
                value: ValueMatch::Any,
            },
            Some((k, v)) => {
                let v = v.trim();
                Matcher {
                    key: k.trim().to_owned(),
                    value: match v.strip_suffix('*') {
                        Some("") => ValueMatch::Any,
                        Some(p) => ValueMatch::Prefix(p.to_owned()),
                        None => ValueMatch::Exact(v.to_owned()),
                    },
                }
            }
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            ValueMatch::Any => write!(f, "{}", self.key),
            ValueMatch::Exact(v) => write!(f, "{}={v}", self.key),
            ValueMatch::Prefix(p) => write!(f, "{}={p}*", self.key),
        }
    }
}

/// What a rule does when its store cannot answer in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FailurePolicy {
    /// Admit (Envoy's default: a limiter outage must not become an outage).
    #[default]
    Open,
    /// Reject.
    Closed,
    /// Decide on this node's memory store with the limit divided by `nodes`.
    Local {
        /// How many nodes share the limit.
        nodes: u32,
    },
}

/// A rule: a name, the descriptor pattern it matches in its domain, and its limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Name, unique in its domain; part of the state key.
    pub name: String,
    /// The domain it belongs to.
    pub domain: String,
    /// The pattern: a request descriptor matches when it has exactly these entries, in order.
    pub pattern: Vec<Matcher>,
    /// The limit; `None` means unlimited.
    pub limit: Option<Limit>,
    /// Evaluate and report, never block (Envoy's `shadow_mode`).
    pub shadow: bool,
    /// Behaviour when the store fails.
    pub failure: FailurePolicy,
    /// Names of rules that this one replaces when both match one request (Envoy's `replaces`).
    pub replaces: Vec<String>,
    /// Report metrics per descriptor value, not only per rule (Envoy's `detailed_metric`).
    pub detailed_metric: bool,
}

impl Rule {
    /// A rule with defaults (not shadow, fail open, replaces nothing).
    pub fn new(
        domain: impl Into<String>,
        name: impl Into<String>,
        pattern: Vec<Matcher>,
        limit: Option<Limit>,
    ) -> Self {
        Self {
            name: name.into(),
            domain: domain.into(),
            pattern,
            limit,
            shadow: false,
            failure: FailurePolicy::default(),
            replaces: Vec::new(),
            detailed_metric: false,
        }
    }

    /// The pattern as text: `biz=PAY, channel`.
    pub fn pattern_text(&self) -> String {
        let parts: Vec<String> = self.pattern.iter().map(|m| m.to_string()).collect();
        parts.join(", ")
    }
}
