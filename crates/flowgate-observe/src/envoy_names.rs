//! envoyproxy/ratelimit's per-rule series, under its names (`--envoy-metric-names`), so that the
//! dashboards and alerts its users built work on Flowgate unchanged.
//!
//! What its users' Prometheus holds (its built-in Prometheus sink, `src/stats/prom/
//! default_mapper.yaml`, and its statsd_exporter example, `examples/prom-statsd-exporter/
//! conf.yaml`, map its statsd counters `ratelimit.service.rate_limit.<stat key>.<stat>` alike):
//!
//! | series | what |
//! |---|---|
//! | `ratelimit_service_rate_limit_total_hits` | hits of a rule: every descriptor a limit applied to, by its cost (`hits_addend`) |
//! | `ratelimit_service_rate_limit_within_limit` | hits admitted under the limit |
//! | `ratelimit_service_rate_limit_near_limit` | admitted hits past [`NEAR_LIMIT_RATIO`] of the limit |
//! | `ratelimit_service_rate_limit_over_limit` | hits over the limit (shadow rules' included) |
//! | `ratelimit_service_rate_limit_shadow_mode` | hits over the limit of a shadow rule, admitted |
//!
//! each labelled `domain` and `key1` (a one-entry descriptor) or `domain`, `key1` and `key2` (two
//! entries or more; the deeper entries are not labelled), as the mappings split the stat key
//! `<domain>.<entry>.<entry>...` at its dots. An entry is `key_value` for an exact value, `key`
//! alone for a key-only entry, `key_pattern` for a wildcard, and `key_value` with the runtime value
//! under `detailed_metric` or `value_to_metric` (as envoyproxy/ratelimit's `GetLimit` builds its
//! keys); `:` and `|` become `_`, and so do the dots of an IPv4 address
//! (its `SanitizeStatName`). Unlimited rules and descriptors no rule matched have no series, as
//! there. The series are counters (they only grow) exposed under these exact names; OpenMetrics
//! names a counter's sample `<family>_total`, so the families are declared `unknown`, whose
//! sample carries the family's name: PromQL (`rate`, `increase`) reads them as it reads the
//! counters of envoyproxy/ratelimit's exporter.
//!
//! One difference of substance: envoyproxy/ratelimit adds a request's hits to its counter even
//! when they cross the limit, and splits them (those under the limit near, the rest over), while
//! Flowgate admits or rejects a request whole and consumes nothing on rejection: all the hits
//! of a rejected request count `over_limit`. With one hit a request (Envoy's default) the counts
//! agree exactly.
//!
//! Cost: with the flag off, nothing is recorded (one branch per descriptor). With it, a
//! descriptor of a rule without `detailed_metric` or `value_to_metric` takes a read lock on a map
//! by the rule's address and a few relaxed increments; a rule with either builds its stat key per
//! decision, as its `descriptor` label does already. Series are bounded by [`MAX_SERIES`]:
//! beyond, new keys count under `key1="_other"` of their domain.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flowgate::decision::Decision;
use flowgate::rule::ValueMatch;
use flowgate::{Descriptor, Rule};
use parking_lot::RwLock;

/// The share of a limit past which admitted hits count `near_limit` (envoyproxy/ratelimit's
/// `NEAR_LIMIT_RATIO` default, applied as it does: `floor(limit × ratio)` in `f32`).
pub(crate) const NEAR_LIMIT_RATIO: f32 = 0.8;

/// The most distinct label sets; beyond, new stat keys count under `key1="_other"`.
pub(crate) const MAX_SERIES: usize = 10_000;

/// The most rules whose series are cached by address.
const MAX_CACHED_RULES: usize = 65_536;

/// The families, in the order they are exposed, with their help text.
const FAMILIES: [(&str, &str); 5] = [
    (
        "ratelimit_service_rate_limit_total_hits",
        "Hits of a rate limit (envoyproxy/ratelimit's name)",
    ),
    (
        "ratelimit_service_rate_limit_over_limit",
        "Hits over a rate limit, shadow rules' included (envoyproxy/ratelimit's name)",
    ),
    (
        "ratelimit_service_rate_limit_near_limit",
        "Admitted hits past the near-limit ratio (0.8) of a rate limit (envoyproxy/ratelimit's name)",
    ),
    (
        "ratelimit_service_rate_limit_within_limit",
        "Hits admitted under a rate limit (envoyproxy/ratelimit's name)",
    ),
    (
        "ratelimit_service_rate_limit_shadow_mode",
        "Hits over the limit of a shadow-mode rule, admitted (envoyproxy/ratelimit's name)",
    ),
];

/// The labels of one series: the stat key split at its dots as the exporter's mappings do.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Labels {
    domain: String,
    key1: String,
    /// The second entry; `None` for a one-entry stat key (the mapping then has no `key2`).
    key2: Option<String>,
}

impl Labels {
    /// The labels of the stat key `key` (`<domain>.<entry>...`).
    fn of(key: &str) -> Self {
        let mut parts = key.split('.');
        Self {
            domain: parts.next().unwrap_or_default().to_owned(),
            key1: parts.next().unwrap_or_default().to_owned(),
            key2: parts.next().map(str::to_owned),
        }
    }

    fn other(domain: &str) -> Self {
        Self {
            domain: domain.to_owned(),
            key1: "_other".to_owned(),
            key2: None,
        }
    }
}

/// One series' counters, by family (the order of [`FAMILIES`]).
#[derive(Default)]
struct Counts([AtomicU64; 5]);

const TOTAL: usize = 0;
const OVER: usize = 1;
const NEAR: usize = 2;
const WITHIN: usize = 3;
const SHADOW: usize = 4;

impl Counts {
    fn add(&self, t: &[u64; 5]) {
        for (c, n) in self.0.iter().zip(t) {
            if *n > 0 {
                c.fetch_add(*n, Ordering::Relaxed);
            }
        }
    }
}

/// What one decision adds to each family (the order of [`FAMILIES`]): `hits` units decided by
/// `decision` under a rule in shadow mode or not.
pub(crate) fn tally(decision: &Decision, hits: u64, shadow: bool) -> [u64; 5] {
    let mut t = [0; 5];
    t[TOTAL] = hits;
    if decision.allowed {
        t[WITHIN] = hits;
        let limit = decision.limit;
        let after = limit.saturating_sub(decision.remaining);
        let before = after.saturating_sub(hits);
        // As envoyproxy/ratelimit: `uint64(math.Floor(float64(float32(limit) * ratio)))`.
        let near = f64::from(limit as f32 * NEAR_LIMIT_RATIO).floor() as u64;
        if after > near {
            t[NEAR] = if before >= near { hits } else { after - near };
        }
    } else {
        t[OVER] = hits;
        if shadow {
            t[SHADOW] = hits;
        }
    }
    t
}

/// The stat key envoyproxy/ratelimit counts a decision of `rule` on `descriptor` under
/// (`<domain>.<entry>...`, sanitized).
pub(crate) fn stat_key(domain: &str, rule: &Rule, descriptor: &Descriptor) -> String {
    let detailed = rule.detailed_metric;
    let mut out = String::with_capacity(64);
    out.push_str(domain);
    for (e, m) in descriptor.entries.iter().zip(&rule.pattern) {
        out.push('.');
        out.push_str(&e.key);
        let value = match &m.value {
            ValueMatch::Wildcard(w) if m.share => Some(w.text()),
            _ if detailed || m.value_to_metric => Some(e.value.as_str()),
            ValueMatch::Exact(v) => Some(v.as_str()),
            ValueMatch::Wildcard(w) => Some(w.text()),
            ValueMatch::Any => None,
        };
        if let Some(v) = value.filter(|v| !v.is_empty() || detailed) {
            out.push('_');
            out.push_str(v);
        }
    }
    sanitize(&out)
}

/// Whether a rule's stat key depends on the descriptor's values (else it is one per rule).
fn per_value(rule: &Rule) -> bool {
    rule.detailed_metric
        || rule
            .pattern
            .iter()
            .any(|m| m.value_to_metric && !matches!(m.value, ValueMatch::Exact(_)))
}

/// envoyproxy/ratelimit's `SanitizeStatName`: `:` and `|` become `_`, and the dots of each IPv4
/// address (`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`, leftmost first, not overlapping) too.
fn sanitize(key: &str) -> String {
    let mut b: Vec<u8> = key
        .bytes()
        .map(|c| if c == b':' || c == b'|' { b'_' } else { c })
        .collect();
    let mut i = 0;
    while i < b.len() {
        match ipv4_at(&b, i) {
            Some(end) => {
                for c in &mut b[i..end] {
                    if *c == b'.' {
                        *c = b'_';
                    }
                }
                i = end;
            }
            None => i += 1,
        }
    }
    // Only ASCII bytes were replaced by ASCII bytes: the text stays UTF-8.
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The end of an IPv4-shaped match starting at `i`, as Go's leftmost-first `\d{1,3}` (greedy,
/// backtracking) finds it.
fn ipv4_at(b: &[u8], i: usize) -> Option<usize> {
    fn group(b: &[u8], i: usize, left: usize) -> Option<usize> {
        // The longest run first, then shorter ones (backtracking).
        let run = b[i.min(b.len())..]
            .iter()
            .take(3)
            .take_while(|c| c.is_ascii_digit())
            .count();
        (1..=run).rev().find_map(|n| {
            let j = i + n;
            if left == 0 {
                return Some(j);
            }
            if b.get(j) == Some(&b'.') {
                group(b, j + 1, left - 1)
            } else {
                None
            }
        })
    }
    group(b, i, 3)
}

/// A rule cached by address, and its series.
type RuleSeries = (Arc<Rule>, Arc<Counts>);

/// envoyproxy/ratelimit's series, recorded from decisions and exposed under its names.
#[derive(Default)]
pub struct EnvoyNames {
    /// Every series, by labels (sorted for a stable exposition).
    series: RwLock<BTreeMap<Labels, Arc<Counts>>>,
    /// The series of rules whose stat key is one per rule, by the rule's address (the `Arc`
    /// keeps the address from being reused while cached).
    by_rule: RwLock<HashMap<usize, RuleSeries>>,
}

impl EnvoyNames {
    /// Records a decision of `rule` on `descriptor` for `hits` units.
    pub fn record(
        &self,
        domain: &str,
        rule: &Arc<Rule>,
        descriptor: &Descriptor,
        decision: &Decision,
        hits: u64,
    ) {
        let t = tally(decision, hits, rule.shadow);
        if per_value(rule) {
            self.series_of(domain, &stat_key(domain, rule, descriptor))
                .add(&t);
            return;
        }
        let addr = Arc::as_ptr(rule) as usize;
        if let Some((_, c)) = self.by_rule.read().get(&addr) {
            c.add(&t);
            return;
        }
        let counts = self.series_of(domain, &stat_key(domain, rule, descriptor));
        counts.add(&t);
        let mut cache = self.by_rule.write();
        if cache.len() < MAX_CACHED_RULES {
            cache.insert(addr, (Arc::clone(rule), counts));
        }
    }

    /// Forgets the rules cached by address (the series stay: counters never go back).
    pub fn rules_changed(&self) {
        self.by_rule.write().clear();
    }

    /// The series of stat key `key`, made when new (within [`MAX_SERIES`]).
    fn series_of(&self, domain: &str, key: &str) -> Arc<Counts> {
        let labels = Labels::of(key);
        if let Some(c) = self.series.read().get(&labels) {
            return Arc::clone(c);
        }
        let mut series = self.series.write();
        let labels = if series.len() < MAX_SERIES || series.contains_key(&labels) {
            labels
        } else {
            Labels::other(domain)
        };
        Arc::clone(series.entry(labels).or_default())
    }

    /// The families in OpenMetrics text, appended to `out`.
    pub fn encode(&self, out: &mut String) {
        let series = self.series.read();
        for (i, (name, help)) in FAMILIES.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {help}.");
            let _ = writeln!(out, "# TYPE {name} unknown");
            for (l, c) in series.iter() {
                let _ = write!(
                    out,
                    "{name}{{domain=\"{}\",key1=\"{}\"",
                    escape(&l.domain),
                    escape(&l.key1)
                );
                if let Some(k2) = &l.key2 {
                    let _ = write!(out, ",key2=\"{}\"", escape(k2));
                }
                let _ = writeln!(out, "}} {}", c.0[i].load(Ordering::Relaxed));
            }
        }
    }
}

/// A label value escaped for the text format (`\`, `"` and line feeds).
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(allowed: bool, limit: u64, remaining: u64) -> Decision {
        Decision {
            allowed,
            limit,
            remaining,
            ..Decision::UNLIMITED
        }
    }

    #[test]
    fn near_limit_counts_admitted_hits_past_eighty_percent_as_envoyproxy_ratelimit() {
        // Limit 10: near from the 9th unit (floor(10 × 0.8) = 8).
        let near: Vec<u64> = (1..=10)
            .map(|used| tally(&decision(true, 10, 10 - used), 1, false)[NEAR])
            .collect();
        assert_eq!(near, [0, 0, 0, 0, 0, 0, 0, 0, 1, 1]);
        // Three hits taking the count from 6 to 9: one of them past 8.
        assert_eq!(tally(&decision(true, 10, 1), 3, false), [3, 0, 1, 3, 0]);
        // Three hits from 8 to 11 would cross the limit: rejected whole, all over.
        assert_eq!(tally(&decision(false, 10, 2), 3, false), [3, 3, 0, 0, 0]);
        // A shadow rule over its limit: over and shadow.
        assert_eq!(tally(&decision(false, 2, 0), 1, true), [1, 1, 0, 0, 1]);
        // Limit 5: floor(5 × 0.8f32) is 4 (f32 rounding does not make it 3).
        assert_eq!(tally(&decision(true, 5, 0), 1, false)[NEAR], 1);
        assert_eq!(tally(&decision(true, 5, 1), 1, false)[NEAR], 0);
    }

    #[test]
    fn stat_keys_follow_envoyproxy_ratelimit() {
        let rule = |pattern: &[&str], detailed: bool| {
            let mut r = Rule::new(
                "d",
                "r",
                pattern
                    .iter()
                    .map(|p| flowgate::Matcher::parse(p))
                    .collect(),
                None,
            );
            r.detailed_metric = detailed;
            r
        };
        let d = |text: &str| -> Descriptor { text.parse().unwrap() };
        assert_eq!(
            stat_key("d", &rule(&["client"], false), &d("client=a")),
            "d.client"
        );
        assert_eq!(
            stat_key("d", &rule(&["client"], true), &d("client=a")),
            "d.client_a"
        );
        assert_eq!(
            stat_key(
                "d",
                &rule(&["plan=gold", "path=/v1*"], false),
                &d("plan=gold, path=/v1/x")
            ),
            "d.plan_gold.path_/v1*"
        );
        assert_eq!(
            stat_key("d", &rule(&["ip"], true), &d("ip=10.0.0.1")),
            "d.ip_10_0_0_1"
        );
        assert_eq!(sanitize("a:b|c.1.2.3.4.5"), "a_b_c.1_2_3_4.5");
        assert_eq!(sanitize("x.1234.1.1.1"), "x.1234_1_1_1");
        assert_eq!(
            Labels::of("d.client_a"),
            Labels {
                domain: "d".into(),
                key1: "client_a".into(),
                key2: None
            }
        );
        assert_eq!(Labels::of("d.a.b.c").key2.as_deref(), Some("b"));
    }
}
