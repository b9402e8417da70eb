//! Descriptors: ordered `key=value` entries that describe a request, as in Envoy's rate-limit API.

use std::fmt;
use std::str::FromStr;

/// One `key=value` entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The key, e.g. `channel`.
    pub key: String,
    /// The value, e.g. `WPG`.
    pub value: String,
}

/// An ordered list of entries (`[biz=PAY, channel=WPG]`), with an optional cost of its own
/// (Envoy's per-descriptor `hits_addend`).
///
/// # Examples
/// ```
/// use flowgate_core::Descriptor;
/// let d: Descriptor = "biz=PAY, channel=WPG".parse().unwrap();
/// assert_eq!(d.entries.len(), 2);
/// assert_eq!(d.to_string(), "biz=PAY, channel=WPG");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Descriptor {
    /// The entries, in order.
    pub entries: Vec<Entry>,
    /// Units this descriptor takes, overriding the request's cost.
    pub cost: Option<u64>,
}

impl Descriptor {
    /// A descriptor from `(key, value)` pairs.
    pub fn new<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self {
            entries: pairs
                .into_iter()
                .map(|(k, v)| Entry {
                    key: k.into(),
                    value: v.into(),
                })
                .collect(),
            cost: None,
        }
    }

    /// Sets this descriptor's own cost.
    pub fn with_cost(mut self, cost: u64) -> Self {
        self.cost = Some(cost);
        self
    }
}

/// Text that is not a descriptor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a descriptor: write key=value entries separated by commas, e.g. `biz=PAY, channel=WPG`"
)]
pub struct BadDescriptor(pub String);

impl FromStr for Descriptor {
    type Err = BadDescriptor;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut entries = Vec::new();
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| BadDescriptor(s.to_owned()))?;
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() {
                return Err(BadDescriptor(s.to_owned()));
            }
            entries.push(Entry {
                key: k.to_owned(),
                value: v.to_owned(),
            });
        }
        Ok(Self {
            entries,
            cost: None,
        })
    }
}

impl fmt::Display for Descriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}={}", e.key, e.value)?;
        }
        Ok(())
    }
}

/// A request: a domain, one or more descriptors, and a cost (units; 0 only looks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The domain whose rules apply (Envoy's `domain`).
    pub domain: String,
    /// The descriptors; each matches at most one rule.
    pub descriptors: Vec<Descriptor>,
    /// Units the request takes under each rule, unless a descriptor says otherwise.
    pub cost: u64,
}

impl Request {
    /// A request of cost 1.
    pub fn new(domain: impl Into<String>, descriptors: Vec<Descriptor>) -> Self {
        Self {
            domain: domain.into(),
            descriptors,
            cost: 1,
        }
    }

    /// Sets the cost.
    pub fn with_cost(mut self, cost: u64) -> Self {
        self.cost = cost;
        self
    }
}
