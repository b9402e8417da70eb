//! Flowgate's TOML format.
//!
//! ```toml
//! domain = "payments"            # default domain of the rules below (optional)
//!
//! [[rule]]
//! name = "wpg-pay"               # unique in its domain; part of the state key
//! domain = "payments"            # optional when set at the top
//! match = ["biz=PAY", "channel=WPG"]   # or "biz=PAY, channel=WPG"; `key` alone = any value
//! limit = "20/s"                 # N/window, any window: "5/30s", "1000/1m"; or "unlimited" / -1
//! # or: limit = 20 and window = "1s"
//! algorithm = "token_bucket"     # default sliding_window
//! burst = 5                      # token/leaky bucket size
//! mode = "delay"                 # reject (default) | delay (token/leaky bucket)
//! max_wait = "500ms"             # delay mode: longest wait before rejecting
//! failure = "open"               # open (default) | closed | local (with nodes = N)
//! shadow = false                 # evaluate and report, never block
//! replaces = ["other-rule"]
//! detailed_metric = false        # metrics per descriptor value
//! ```

use std::ops::Range;
use std::time::Duration;

use flowgate_core::quota::parse_duration;
use flowgate_core::{Algorithm, FailurePolicy, Limit, Matcher, Mode, Quota, Rule};
use serde::Deserialize;
use toml::Spanned;

use super::error::line_of;
use super::{ConfigError, LocatedRule, key_on_line};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    domain: Option<Spanned<String>>,
    #[serde(default)]
    rule: Vec<Spanned<TomlRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlRule {
    #[serde(default)]
    domain: Option<Spanned<String>>,
    name: Spanned<String>,
    #[serde(rename = "match")]
    pattern: Spanned<Pattern>,
    #[serde(default)]
    limit: Option<Spanned<LimitField>>,
    #[serde(default)]
    window: Option<Spanned<String>>,
    #[serde(default)]
    unlimited: bool,
    #[serde(default)]
    algorithm: Option<Spanned<String>>,
    #[serde(default)]
    burst: Option<Spanned<u64>>,
    #[serde(default)]
    buckets: Option<Spanned<u32>>,
    #[serde(default)]
    mode: Option<Spanned<String>>,
    #[serde(default)]
    max_wait: Option<Spanned<String>>,
    #[serde(default)]
    failure: Option<Spanned<String>>,
    #[serde(default)]
    nodes: Option<Spanned<u32>>,
    #[serde(default)]
    shadow: bool,
    #[serde(default)]
    replaces: Vec<String>,
    #[serde(default)]
    detailed_metric: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Pattern {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum LimitField {
    Count(i64),
    Text(String),
}

/// The default algorithm of a TOML rule.
pub(crate) const DEFAULT_ALGORITHM: Algorithm = Algorithm::SlidingWindow;

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
    prefix: String,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(
            self.file,
            Some(line_of(self.text, span.start)),
            format!("{}{field}", self.prefix),
            message,
        )
    }
}

/// Parses a Flowgate TOML file.
pub(crate) fn parse(file: &str, text: &str) -> Result<Vec<LocatedRule>, ConfigError> {
    let parsed: File = ::toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let field = key_on_line(text, span.start);
        let nth = rule_index_at(text, span.start);
        let field = match (nth, field.is_empty()) {
            (Some(i), false) => format!("rule[{i}].{field}"),
            (Some(i), true) => format!("rule[{i}]"),
            (None, _) => field,
        };
        ConfigError::new(
            file,
            e.span().map(|s| line_of(text, s.start)),
            field,
            e.message().trim().to_owned(),
        )
    })?;
    let default_domain = parsed.domain;
    let mut out = Vec::with_capacity(parsed.rule.len());
    for (i, r) in parsed.rule.into_iter().enumerate() {
        let ctx = Ctx {
            file,
            text,
            prefix: format!("rule[{i}]."),
        };
        let span = r.span();
        let rule = convert(&ctx, r.into_inner(), default_domain.as_ref())?;
        out.push(LocatedRule {
            rule,
            file: file.to_owned(),
            line: Some(line_of(text, span.start)),
            field: format!("rule[{i}]"),
        });
    }
    Ok(out)
}

/// Which `[[rule]]` table (0-based) contains `offset`, if any.
fn rule_index_at(text: &str, offset: usize) -> Option<usize> {
    let before = text.get(..offset.min(text.len()))?;
    let n = before
        .lines()
        .filter(|l| l.trim_start().starts_with("[[rule]]"))
        .count();
    n.checked_sub(1)
}

fn convert(
    ctx: &Ctx<'_>,
    r: TomlRule,
    default_domain: Option<&Spanned<String>>,
) -> Result<Rule, ConfigError> {
    let name_span = r.name.span();
    let name = r.name.into_inner();
    if name.trim().is_empty() {
        return Err(ctx.err(name_span, "name", "the rule name must not be empty"));
    }
    let domain = match (&r.domain, default_domain) {
        (Some(d), _) | (None, Some(d)) => {
            if d.get_ref().is_empty() {
                return Err(ctx.err(d.span(), "domain", "the domain must not be empty"));
            }
            d.get_ref().clone()
        }
        (None, None) => {
            return Err(ctx.err(
                name_span,
                "domain",
                "no domain: set `domain` in the rule or at the top of the file",
            ));
        }
    };
    let pattern_span = r.pattern.span();
    let parts: Vec<String> = match r.pattern.into_inner() {
        Pattern::One(s) => s.split(',').map(str::to_owned).collect(),
        Pattern::Many(v) => v,
    };
    let mut pattern = Vec::with_capacity(parts.len());
    for p in &parts {
        let m = Matcher::parse(p);
        if m.key.is_empty() {
            return Err(ctx.err(
                pattern_span.clone(),
                "match",
                format!("`{p}` has an empty key: write `key`, `key=value` or `key=prefix*`"),
            ));
        }
        pattern.push(m);
    }
    if pattern.is_empty() {
        return Err(ctx.err(pattern_span, "match", "the pattern has no entry"));
    }

    let algorithm = match &r.algorithm {
        Some(a) => a
            .get_ref()
            .parse::<Algorithm>()
            .map_err(|e| ctx.err(a.span(), "algorithm", e.to_string()))?,
        None => DEFAULT_ALGORITHM,
    };
    let window = match &r.window {
        Some(w) => Some(
            parse_duration(w.get_ref()).map_err(|e| ctx.err(w.span(), "window", e.to_string()))?,
        ),
        None => None,
    };
    let quota = match (&r.limit, r.unlimited) {
        (_, true) => None,
        (None, false) => {
            return Err(ctx.err(
                name_span,
                "limit",
                "missing `limit`: write e.g. limit = \"20/s\", or unlimited = true",
            ));
        }
        (Some(l), false) => {
            let span = l.span();
            match l.get_ref() {
                LimitField::Count(-1) => None,
                LimitField::Count(n) if *n < 0 => {
                    return Err(ctx.err(
                        span,
                        "limit",
                        format!("{n} is not a limit: use -1 (or \"unlimited\") for no limit"),
                    ));
                }
                LimitField::Count(n) => {
                    let w = window.unwrap_or(Duration::from_secs(1));
                    Some(
                        Quota::new(n.unsigned_abs(), w)
                            .map_err(|e| ctx.err(span, "limit", e.to_string()))?,
                    )
                }
                LimitField::Text(t) if t.trim() == "unlimited" || t.trim() == "-1" => None,
                LimitField::Text(t) => {
                    if window.is_some() {
                        return Err(ctx.err(
                            span,
                            "window",
                            "`window` is given twice: in `limit` and in `window`",
                        ));
                    }
                    Some(
                        t.parse::<Quota>()
                            .map_err(|e| ctx.err(span, "limit", e.to_string()))?,
                    )
                }
            }
        }
    };
    let mode = match &r.mode {
        None => Mode::Reject,
        Some(m) => match m.get_ref().as_str() {
            "reject" => Mode::Reject,
            "delay" => Mode::Delay,
            other => {
                return Err(ctx.err(
                    m.span(),
                    "mode",
                    format!("unknown mode `{other}`: expected reject or delay"),
                ));
            }
        },
    };
    let limit = match quota {
        None => None,
        Some(q) => {
            let mut b = Limit::builder(algorithm, q).mode(mode);
            if let Some(burst) = &r.burst {
                b = b.burst(*burst.get_ref());
            }
            if let Some(buckets) = &r.buckets {
                b = b.buckets(*buckets.get_ref());
            }
            if let Some(w) = &r.max_wait {
                let d = parse_duration(w.get_ref())
                    .map_err(|e| ctx.err(w.span(), "max_wait", e.to_string()))?;
                b = b.max_wait(d);
            }
            if mode == Mode::Delay && r.max_wait.is_none() {
                return Err(ctx.err(
                    name_span,
                    "max_wait",
                    "mode = \"delay\" needs max_wait, the longest a caller may wait (e.g. \"500ms\")",
                ));
            }
            let field = match (&r.burst, &r.buckets, &r.max_wait) {
                _ if r.mode.is_some() && !algorithm.supports_delay() && mode == Mode::Delay => {
                    "mode"
                }
                (Some(_), _, _) => "burst",
                (_, Some(_), _) => "buckets",
                _ => "limit",
            };
            let at = r.limit.as_ref().map_or(name_span.clone(), |l| l.span());
            Some(b.build().map_err(|e| ctx.err(at, field, e.to_string()))?)
        }
    };
    let failure = match &r.failure {
        None => FailurePolicy::Open,
        Some(f) => match f.get_ref().as_str() {
            "open" => FailurePolicy::Open,
            "closed" => FailurePolicy::Closed,
            "local" => FailurePolicy::Local {
                nodes: r.nodes.as_ref().map_or(1, |n| *n.get_ref()).max(1),
            },
            other => {
                return Err(ctx.err(
                    f.span(),
                    "failure",
                    format!("unknown failure policy `{other}`: expected open, closed or local"),
                ));
            }
        },
    };
    let mut rule = Rule::new(domain, name, pattern, limit);
    rule.shadow = r.shadow;
    rule.failure = failure;
    rule.replaces = r.replaces;
    rule.detailed_metric = r.detailed_metric;
    Ok(rule)
}
