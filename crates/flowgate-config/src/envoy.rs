//! envoyproxy/ratelimit's YAML format, loaded unchanged.
//!
//! ```yaml
//! domain: mongo_cps
//! descriptors:
//!   - key: database
//!     value: users
//!     rate_limit:
//!       unit: second          # second, minute, hour, day, week, month (30 days), year (365 days)
//!       requests_per_unit: 500
//!   - key: database           # key only: any value, one counter per value
//!     rate_limit: { unit: second, requests_per_unit: 50, name: per-db }
//!     descriptors:            # nested entries must match in depth
//!       - key: collection
//!         rate_limit: { unlimited: true }
//!         shadow_mode: true
//!         detailed_metric: true
//!   - key: path
//!     value: files/*          # a wildcard anywhere in the value: files/*, bar*b, a*b*c
//!     share_threshold: true   # every matching value shares one counter
//!     value_to_metric: true   # the value in the metric label
//!     quota_mode: true        # over the limit alone, does not reject (see below)
//!     metadata: { team: storage }   # kept, shown in GET /v1/rules
//!     rate_limit: { unit: minute, requests_per_unit: 100 }
//! ```
//!
//! Each descriptor with a `rate_limit` becomes a rule: a fixed window of one unit (aligned to the
//! Unix epoch, like envoyproxy/ratelimit), `requests_per_unit: 0` blocks everything, `unlimited`
//! has no limit. A rule without `name` is named after its path, `database_users.collection`
//! (ratelimit's own key, without the domain); the name is part of the counter's key.
//!
//! Every key of envoyproxy/ratelimit's schema is read, with its semantics: wildcards match as
//! there (the exact value first, then the wildcards in file order, then the key alone);
//! `share_threshold` (only on a wildcard value) makes the matching values of that entry, and of
//! every rule below it, count together; `quota_mode` rules reject a request only when every
//! quota-mode rule it matched is over its limit; `value_to_metric` and `detailed_metric` shape
//! the `descriptor` label of `flowgate_decisions_total` (see the server's metrics). Every error its
//! loader reports is reported here too, with file, line and field.

use std::collections::HashSet;

use flowgate_core::quota::format_micros;
use serde::Deserialize;
use serde_saphyr::Spanned;

use flowgate_core::Rule;

use crate::error::ConfigError;
use crate::located::Located;
use crate::schema::{AlgorithmDoc, EntryDoc, FlaggedEntry, LimitField, Pattern, RuleDoc};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Root {
    domain: Spanned<String>,
    #[serde(default)]
    descriptors: Option<Vec<Spanned<YamlDescriptor>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YamlDescriptor {
    key: Spanned<String>,
    #[serde(default)]
    value: Option<Spanned<String>>,
    #[serde(default)]
    rate_limit: Option<Spanned<YamlRateLimit>>,
    #[serde(default)]
    descriptors: Option<Vec<Spanned<YamlDescriptor>>>,
    #[serde(default)]
    shadow_mode: bool,
    #[serde(default)]
    detailed_metric: bool,
    #[serde(default)]
    quota_mode: bool,
    #[serde(default)]
    value_to_metric: bool,
    #[serde(default)]
    share_threshold: Option<Spanned<bool>>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YamlRateLimit {
    #[serde(default)]
    requests_per_unit: Option<u32>,
    #[serde(default)]
    unit: Option<Spanned<String>>,
    #[serde(default)]
    unlimited: bool,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    replaces: Option<Vec<Spanned<Replace>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Replace {
    #[serde(default)]
    name: Option<String>,
}

/// envoyproxy/ratelimit's units as its YAML names them, and their lengths in seconds (month = 30
/// days, year = 365 days, as there), in the order of Envoy's `RateLimit.Unit` from `SECOND`.
pub const ENVOY_UNITS: [(&str, u64); 7] = [
    ("second", 1),
    ("minute", 60),
    ("hour", 3_600),
    ("day", 86_400),
    ("week", 604_800),
    ("month", 2_592_000),
    ("year", 31_536_000),
];

struct Ctx<'a> {
    file: &'a str,
    domain: String,
    out: Vec<Located<Rule>>,
}

impl Ctx<'_> {
    fn err(&self, line: u64, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.file, Some(line), field, message)
    }
}

/// A YAML file's domain and the line it is on.
type DomainLine = (String, u64);

/// Parses an envoyproxy/ratelimit YAML file: its domain (and that line) and its rules.
pub(crate) fn parse(
    file: &str,
    text: &str,
) -> Result<(DomainLine, Vec<Located<Rule>>), ConfigError> {
    let root: Root = serde_saphyr::from_str(text).map_err(|e| {
        let loc = e.location();
        let line = loc.map(|l| l.line());
        let field = loc
            .and_then(|l| l.span().byte_offset())
            .map(|off| crate::key_on_line(text, off as usize))
            .unwrap_or_default();
        let message = first_line(&e.to_string());
        ConfigError::new(file, line, field, message)
    })?;
    let domain_line = root.domain.referenced.line();
    if root.domain.value.is_empty() {
        return Err(ConfigError::new(
            file,
            Some(domain_line),
            "domain",
            "config file cannot have empty domain",
        ));
    }
    let mut ctx = Ctx {
        file,
        domain: root.domain.value.clone(),
        out: Vec::new(),
    };
    load(
        &mut ctx,
        "descriptors",
        "",
        &[],
        root.descriptors.unwrap_or_default(),
    )?;
    Ok(((root.domain.value, domain_line), ctx.out))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_owned()
}

fn load(
    ctx: &mut Ctx<'_>,
    field: &str,
    parent_name: &str,
    parent: &[EntryDoc],
    descriptors: Vec<Spanned<YamlDescriptor>>,
) -> Result<(), ConfigError> {
    let mut seen: HashSet<String> = HashSet::new();
    for (i, d) in descriptors.into_iter().enumerate() {
        let line = d.referenced.line();
        let d = d.value;
        let here = format!("{field}[{i}]");
        let key = d.key.value;
        if key.is_empty() {
            return Err(ctx.err(
                d.key.referenced.line(),
                &format!("{here}.key"),
                "descriptor has empty key",
            ));
        }
        let value = d.value.map(|v| v.value).unwrap_or_default();
        let part = if value.is_empty() {
            key.clone()
        } else {
            format!("{key}_{value}")
        };
        let name_path = if parent_name.is_empty() {
            part.clone()
        } else {
            format!("{parent_name}.{part}")
        };
        if !seen.insert(part.clone()) {
            return Err(ctx.err(
                line,
                &format!("{here}.key"),
                format!(
                    "duplicate descriptor composite key '{}.{name_path}'",
                    ctx.domain
                ),
            ));
        }
        let share = d.share_threshold.as_ref().is_some_and(|s| s.value);
        if share && !value.contains('*') {
            let at = d
                .share_threshold
                .as_ref()
                .map_or(line, |s| s.referenced.line());
            return Err(ctx.err(
                at,
                &format!("{here}.share_threshold"),
                format!(
                    "share_threshold can only be used with wildcard values (containing '*'), but found key '{part}'"
                ),
            ));
        }
        let entry = if value.is_empty() {
            key.clone()
        } else {
            format!("{key}={value}")
        };
        let entry = if share || d.value_to_metric {
            EntryDoc::Flagged(FlaggedEntry {
                entry,
                share_threshold: share,
                value_to_metric: d.value_to_metric,
            })
        } else {
            EntryDoc::Text(entry)
        };
        let mut pattern = parent.to_vec();
        pattern.push(entry);
        if let Some(rl) = d.rate_limit {
            let rl_line = rl.referenced.line();
            let rl = rl.value;
            let rl_field = format!("{here}.rate_limit");
            let unit = match &rl.unit {
                None => None,
                Some(u) => {
                    let found = ENVOY_UNITS
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(u.value.trim()));
                    match (found, rl.unlimited) {
                        (Some(_), true) => {
                            return Err(ctx.err(
                                u.referenced.line(),
                                &format!("{rl_field}.unit"),
                                "should not specify rate limit unit when unlimited",
                            ));
                        }
                        (None, false) => {
                            return Err(ctx.err(
                                u.referenced.line(),
                                &format!("{rl_field}.unit"),
                                format!(
                                    "invalid rate limit unit '{}': expected second, minute, hour, day, week, month or year",
                                    u.value
                                ),
                            ));
                        }
                        (found, _) => found.copied(),
                    }
                }
            };
            let limit = if rl.unlimited {
                None
            } else {
                let Some((_, secs)) = unit else {
                    return Err(ctx.err(
                        rl_line,
                        &format!("{rl_field}.unit"),
                        "missing rate limit unit: expected second, minute, hour, day, week, month or year",
                    ));
                };
                let per_unit = rl.requests_per_unit.unwrap_or(0);
                Some(LimitField::Text(format!(
                    "{per_unit}/{}",
                    format_micros(secs * 1_000_000)
                )))
            };
            let name = rl.name.clone().unwrap_or_else(|| name_path.clone());
            let mut replaces = Vec::new();
            for (j, r) in rl.replaces.unwrap_or_default().into_iter().enumerate() {
                let rf = format!("{rl_field}.replaces[{j}].name");
                let name = r.value.name.unwrap_or_default();
                if name.is_empty() {
                    return Err(ctx.err(
                        r.referenced.line(),
                        &rf,
                        "should not have an empty replaces entry",
                    ));
                }
                if Some(&name) == rl.name.as_ref() {
                    return Err(ctx.err(
                        r.referenced.line(),
                        &rf,
                        "replaces should not contain name of same descriptor",
                    ));
                }
                replaces.push(name);
            }
            let doc = RuleDoc {
                domain: Some(ctx.domain.clone()),
                name,
                pattern: Pattern::Entries(pattern.clone()),
                unlimited: limit.is_none(),
                limit,
                algorithm: Some(AlgorithmDoc::FixedWindow),
                shadow: d.shadow_mode,
                detailed_metric: d.detailed_metric,
                quota_mode: d.quota_mode,
                metadata: d.metadata.clone(),
                replaces,
                ..RuleDoc::default()
            };
            let rule = doc
                .to_rule(None)
                .map_err(|e| ctx.err(rl_line, &rl_field, e.message))?;
            ctx.out.push(Located {
                item: rule,
                file: ctx.file.to_owned(),
                line: Some(line),
                target_line: None,
                field: here.clone(),
            });
        }
        if let Some(children) = d.descriptors {
            load(
                ctx,
                &format!("{here}.descriptors"),
                &name_path,
                &pattern,
                children,
            )?;
        }
    }
    Ok(())
}
