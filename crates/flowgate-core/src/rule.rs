//! Rules: what a limit applies to (a descriptor pattern in a domain), and how it behaves.

use std::fmt;

use crate::clock::Micros;
use crate::limit::Limit;
use crate::schedule::Schedule;

/// How one descriptor entry of a rule matches a request's entry with the same key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ValueMatch {
    /// Any value; each distinct value gets its own counter (Envoy's key-only entry).
    Any,
    /// Exactly this value. More specific than [`ValueMatch::Wildcard`] and [`ValueMatch::Any`].
    Exact(String),
    /// Values matching a pattern with `*` anywhere (`foo*`, `bar*b`, `a*b*c`), each `*` standing
    /// for any run of characters (Envoy's wildcard values); each value gets its own counter
    /// unless the entry is shared ([`Matcher::share`]).
    Wildcard(Wildcard),
}

/// A value pattern with `*` wildcards, split once at load time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Wildcard {
    text: String,
    parts: Vec<String>,
}

impl Wildcard {
    /// The pattern `text` (which contains at least one `*`).
    pub fn new(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            parts: text.split('*').map(str::to_owned).collect(),
        }
    }

    /// The pattern as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether `value` matches: it starts with the part before the first `*`, ends with the part
    /// after the last, and holds the parts between them in order, without overlap.
    pub fn matches(&self, value: &str) -> bool {
        let [first, middle @ .., last] = self.parts.as_slice() else {
            return self.text == value;
        };
        if value.len() < first.len() + last.len() {
            return false;
        }
        let Some(rest) = value.strip_prefix(first.as_str()) else {
            return false;
        };
        let Some(mut rest) = rest.strip_suffix(last.as_str()) else {
            return false;
        };
        for part in middle {
            match rest.find(part.as_str()) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

/// One entry of a rule's descriptor pattern.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Matcher {
    /// The entry's key.
    pub key: String,
    /// How its value matches.
    pub value: ValueMatch,
    /// With a wildcard value: every matching value shares one counter (Envoy's
    /// `share_threshold`) instead of one counter per value.
    pub share: bool,
    /// The entry's runtime value appears in the rule's metric label (Envoy's `value_to_metric`).
    pub value_to_metric: bool,
}

impl Matcher {
    /// Parses `key`, `key=value` or a wildcard value `key=prefix*`, `key=a*b` (`key=*`: any value,
    /// but more specific than `key` alone, as in Envoy).
    pub fn parse(text: &str) -> Self {
        let (key, value) = match text.split_once('=') {
            None => (text.trim().to_owned(), ValueMatch::Any),
            Some((k, v)) => {
                let v = v.trim();
                let value = if v.contains('*') {
                    ValueMatch::Wildcard(Wildcard::new(v))
                } else {
                    ValueMatch::Exact(v.to_owned())
                };
                (k.trim().to_owned(), value)
            }
        };
        Matcher {
            key,
            value,
            share: false,
            value_to_metric: false,
        }
    }

    /// The value this entry is counted under: the pattern for a shared wildcard, else the
    /// request's value.
    pub fn counted_value<'a>(&'a self, value: &'a str) -> &'a str {
        match &self.value {
            ValueMatch::Wildcard(w) if self.share => w.text(),
            _ => value,
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            ValueMatch::Any => write!(f, "{}", self.key),
            ValueMatch::Exact(v) => write!(f, "{}={v}", self.key),
            ValueMatch::Wildcard(w) => write!(f, "{}={}", self.key, w.text()),
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

/// What Envoy's `hits_addend` (the cost of a `ShouldRateLimit`) means under a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ChargeMode {
    /// A cost checked all or nothing: over the limit, nothing is consumed (Envoy's default).
    #[default]
    Check,
    /// A cost reported after the work (Envoy's `apply_on_stream_done`, as Envoy AI Gateway
    /// sends an LLM answer's tokens): a cost above 0 is a charge, counted even past the limit up
    /// to the rule's `max_debt`; a cost of 0 is a check, refused only while the key is in debt.
    Report,
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
    /// Quota mode (Envoy's `quota_mode`): over its limit, this rule alone does not reject the
    /// request; a request is rejected when every quota-mode rule it matched is over its limit.
    pub quota_mode: bool,
    /// Opaque metadata (JSON text), kept and shown with the rule (Envoy's `metadata`).
    pub metadata: Option<String>,
    /// The time zone of its calendar window (which its limit's quota carries) and of its
    /// schedule; UTC by default.
    pub time_zone: crate::calendar::Tz,
    /// Overrides of `limit` by date, day of week and time of day (see [`Rule::limit_at`]).
    pub schedule: Option<Schedule>,
    /// A limit tried in shadow beside the one in force: decided on its own state for every
    /// request the rule limits, it never rejects; what it would reject is reported, so that a
    /// limit can be watched on live traffic before it is set.
    pub trial: Option<Limit>,
    /// A `concurrency` rule's adaptive limit: the count moves with reported latency (AIMD, see
    /// [`crate::adaptive`]) between its `min` and `max`, one per matched descriptor; the rule's
    /// `limit` gives the leases' time to live.
    pub adaptive: Option<crate::adaptive::AimdSpec>,
    /// What a gRPC request's cost means under it ([`ChargeMode`]).
    pub charge: ChargeMode,
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
            quota_mode: false,
            metadata: None,
            time_zone: crate::calendar::Tz::UTC,
            schedule: None,
            trial: None,
            adaptive: None,
            charge: ChargeMode::Check,
        }
    }

    /// The limit in force at `at`: the first override of its schedule that applies, else
    /// `limit`; `None` means unlimited.
    #[inline]
    pub fn limit_at(&self, at: Micros) -> Option<&Limit> {
        match &self.schedule {
            None => self.limit.as_ref(),
            Some(s) => match s.in_force(at) {
                Some(i) => s.overrides()[i].limit.as_ref(),
                None => self.limit.as_ref(),
            },
        }
    }

    /// The next instant after `at` at which another limit comes into force, and that limit
    /// (`None`: unlimited); `None` without a schedule or when nothing changes within
    /// [`crate::schedule::HORIZON_DAYS`].
    pub fn next_change(&self, at: Micros) -> Option<(Micros, Option<&Limit>)> {
        let s = self.schedule.as_ref()?;
        let (when, which) = s.next_change(at)?;
        let limit = match which {
            Some(i) => s.overrides()[i].limit.as_ref(),
            None => self.limit.as_ref(),
        };
        Some((when, limit))
    }

    /// Whether some entry's counter is shared by every value its wildcard matches.
    pub fn shares(&self) -> bool {
        self.pattern.iter().any(|m| m.share)
    }

    /// The pattern as text: `biz=PAY, channel`.
    pub fn pattern_text(&self) -> String {
        let parts: Vec<String> = self.pattern.iter().map(|m| m.to_string()).collect();
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_envoy_does() {
        let w = |p: &str, v: &str| Wildcard::new(p).matches(v);
        assert!(w("foo*", "foo") && w("foo*", "foobar") && !w("foo*", "fo"));
        assert!(w("bar*b", "barXb") && w("bar*b", "barb") && !w("bar*b", "bar"));
        assert!(w("foo*bar*baz", "foo1bar2baz") && w("foo*bar*baz", "foobarbaz"));
        assert!(!w("foo*bar*baz", "foobaz") && !w("foo*bar*baz", "foo1baz2bar"));
        assert!(w("*", "") && w("*", "anything") && w("*.pdf", "a.pdf"));
        // The parts may not overlap: "aba" has no room for "ab" then "ba".
        assert!(!w("ab*ba", "aba"));
    }

    #[test]
    fn parse_reads_wildcards_anywhere() {
        assert_eq!(Matcher::parse("user").value, ValueMatch::Any);
        assert_eq!(
            Matcher::parse("user=a").value,
            ValueMatch::Exact("a".into())
        );
        assert!(matches!(
            Matcher::parse("path=bar*b").value,
            ValueMatch::Wildcard(_)
        ));
        assert_eq!(Matcher::parse("path=bar*b").to_string(), "path=bar*b");
        let mut m = Matcher::parse("path=files/*");
        assert_eq!(m.counted_value("files/a.pdf"), "files/a.pdf");
        m.share = true;
        assert_eq!(m.counted_value("files/a.pdf"), "files/*");
    }
}
