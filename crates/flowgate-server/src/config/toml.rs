//! Flowgate's TOML format.
//!
//! ```toml
//! domain = "payments"            # default domain of the rules below (optional)
//!
//! [[rule]]
//! name = "wpg-pay"               # unique in its domain; part of the state key
//! domain = "payments"            # optional when set at the top
//! match = ["biz=PAY", "channel=WPG"]   # or "biz=PAY, channel=WPG"; `key` alone = any value
//! limit = "20/s"                 # N/window, any window: "5/30s", "1000/1m"; or "unlimited" / -1;
//!                                # calendar windows: "500/day", "100/week", "1000/month"
//! time_zone = "Asia/Shanghai"    # IANA zone of calendar windows and schedules (default UTC)
//! [[rule.schedule]]              # overrides of the limit; the first that applies wins
//! limit = "100/s"                # the quota in force then (or "unlimited"); the rule's
//! # algorithm = "..."; burst = N # algorithm and burst unless given here
//! dates = "2026-11-11..2026-11-11"   # inclusive local dates (optional)
//! days = ["sat", "sun"]          # days of the week (optional)
//! hours = "22:00-06:00"          # local times, start included, may wrap midnight (optional)
//! # or: limit = 20 and window = "1s" (or "day", "week", "month")
//! algorithm = "token_bucket"     # default sliding_window
//! burst = 5                      # token/leaky bucket size
//! mode = "delay"                 # reject (default) | delay (token/leaky bucket)
//! max_wait = "500ms"             # delay mode: longest wait before rejecting
//! failure = "open"               # open (default) | closed | local (with nodes = N)
//! shadow = false                 # evaluate and report, never block
//! replaces = ["other-rule"]
//! detailed_metric = false        # metrics per descriptor value
//! value_to_metric = false        # the descriptor's values in the metric label
//! share_threshold = false        # wildcard entries (`path=files/*`): all values share one counter
//! quota_mode = false             # over its limit alone, does not reject (Envoy's quota_mode)
//! metadata = { team = "pay" }    # kept and shown in GET /v1/rules
//!
//! [[queue]]                      # a shaped queue (see flowgate::queue)
//! name = "refunds"               # unique among the domain's queues; part of every instance key
//! match = ["biz=REFUND", "channel"]   # one queue instance per matched descriptor
//! rate = "1/s"                   # releases per window, across the cluster (GCRA spacing)
//! burst = 1                      # releases at once after idle (default 1)
//! max_depth = 100000             # jobs held, waiting and in flight (default 1,000,000)
//! lease = "30s"                  # a job not acked within it is delivered again (default 30s)
//! max_attempts = 5               # deliveries before the dead letters (default 5)
//! retry_backoff = "1s"           # first retry delay after a failure, doubling (default 1s)
//! max_payload = 65536            # bytes per job (default 64 KiB)
//! key_retention = "24h"          # idempotency keys kept after their job finished (default 24h)
//! ```

use std::ops::Range;
use std::time::Duration;

use flowgate_core::calendar::parse_zone;
use flowgate_core::queue::QueueSpec;
use flowgate_core::quota::parse_duration;
use flowgate_core::schedule::{Dates, Hours, Override, Schedule, parse_day};
use flowgate_core::{Algorithm, FailurePolicy, Limit, Matcher, Mode, Quota, Rule, Tz, ValueMatch};
use serde::Deserialize;
use toml::Spanned;

use super::error::line_of;
use super::{ConfigError, LocatedQueue, LocatedRule, key_on_line};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    domain: Option<Spanned<String>>,
    #[serde(default)]
    rule: Vec<Spanned<TomlRule>>,
    #[serde(default)]
    queue: Vec<Spanned<TomlQueue>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlQueue {
    #[serde(default)]
    domain: Option<Spanned<String>>,
    name: Spanned<String>,
    #[serde(rename = "match")]
    pattern: Spanned<Pattern>,
    rate: Spanned<String>,
    #[serde(default)]
    burst: Option<Spanned<u64>>,
    #[serde(default)]
    max_depth: Option<Spanned<u64>>,
    #[serde(default)]
    lease: Option<Spanned<String>>,
    #[serde(default)]
    max_attempts: Option<Spanned<u32>>,
    #[serde(default)]
    retry_backoff: Option<Spanned<String>>,
    #[serde(default)]
    max_payload: Option<Spanned<usize>>,
    #[serde(default)]
    key_retention: Option<Spanned<String>>,
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
    #[serde(default)]
    value_to_metric: bool,
    #[serde(default)]
    share_threshold: Option<Spanned<bool>>,
    #[serde(default)]
    quota_mode: bool,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
    #[serde(default)]
    time_zone: Option<Spanned<String>>,
    #[serde(default)]
    schedule: Vec<Spanned<TomlOverride>>,
}

/// One `[[rule.schedule]]` entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlOverride {
    limit: Spanned<LimitField>,
    #[serde(default)]
    algorithm: Option<Spanned<String>>,
    #[serde(default)]
    burst: Option<Spanned<u64>>,
    #[serde(default)]
    dates: Option<Spanned<String>>,
    #[serde(default)]
    days: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    hours: Option<Spanned<String>>,
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

/// Parses a Flowgate TOML file: its rules and its queues.
pub(crate) fn parse(
    file: &str,
    text: &str,
) -> Result<(Vec<LocatedRule>, Vec<LocatedQueue>), ConfigError> {
    let parsed: File = ::toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let field = key_on_line(text, span.start);
        let nth = table_index_at(text, span.start);
        let field = match (nth, field.is_empty()) {
            (Some(table), false) => format!("{table}.{field}"),
            (Some(table), true) => table,
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
    let mut queues = Vec::with_capacity(parsed.queue.len());
    for (i, q) in parsed.queue.into_iter().enumerate() {
        let ctx = Ctx {
            file,
            text,
            prefix: format!("queue[{i}]."),
        };
        let span = q.span();
        let spec = convert_queue(&ctx, q.into_inner(), default_domain.as_ref())?;
        queues.push(LocatedQueue {
            spec,
            file: file.to_owned(),
            line: Some(line_of(text, span.start)),
            field: format!("queue[{i}]"),
        });
    }
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
    Ok((out, queues))
}

/// Which `[[rule]]`, `[[rule.schedule]]` or `[[queue]]` table contains `offset`, if any, as a
/// field path (`rule[1]`, `rule[1].schedule[0]`, `queue[0]`).
fn table_index_at(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset.min(text.len()))?;
    let (mut rules, mut schedules, mut queues, mut last) = (0, 0, 0, None);
    for l in before.lines().map(str::trim_start) {
        if l.starts_with("[[rule]]") {
            rules += 1;
            schedules = 0;
            last = Some("rule");
        } else if l.starts_with("[[rule.schedule]]") {
            schedules += 1;
            last = Some("schedule");
        } else if l.starts_with("[[queue]]") {
            queues += 1;
            last = Some("queue");
        }
    }
    match last? {
        "rule" => Some(format!("rule[{}]", rules - 1)),
        "schedule" if rules > 0 => Some(format!("rule[{}].schedule[{}]", rules - 1, schedules - 1)),
        "schedule" => None,
        _ => Some(format!("queue[{}]", queues - 1)),
    }
}

fn domain_of(
    ctx: &Ctx<'_>,
    own: Option<&Spanned<String>>,
    default_domain: Option<&Spanned<String>>,
    name_span: Range<usize>,
    what: &str,
) -> Result<String, ConfigError> {
    match own.or(default_domain) {
        Some(d) if d.get_ref().is_empty() => {
            Err(ctx.err(d.span(), "domain", "the domain must not be empty"))
        }
        Some(d) => Ok(d.get_ref().clone()),
        None => Err(ctx.err(
            name_span,
            "domain",
            format!("no domain: set `domain` in the {what} or at the top of the file"),
        )),
    }
}

fn pattern_of(ctx: &Ctx<'_>, pattern: Spanned<Pattern>) -> Result<Vec<Matcher>, ConfigError> {
    let span = pattern.span();
    let parts: Vec<String> = match pattern.into_inner() {
        Pattern::One(s) => s.split(',').map(str::to_owned).collect(),
        Pattern::Many(v) => v,
    };
    let mut out = Vec::with_capacity(parts.len());
    for p in &parts {
        let m = Matcher::parse(p);
        if m.key.is_empty() {
            return Err(ctx.err(
                span.clone(),
                "match",
                format!("`{p}` has an empty key: write `key`, `key=value` or `key=prefix*`"),
            ));
        }
        out.push(m);
    }
    if out.is_empty() {
        return Err(ctx.err(span, "match", "the pattern has no entry"));
    }
    Ok(out)
}

fn duration_of(ctx: &Ctx<'_>, field: &str, v: &Spanned<String>) -> Result<Duration, ConfigError> {
    parse_duration(v.get_ref()).map_err(|e| ctx.err(v.span(), field, e.to_string()))
}

fn convert_queue(
    ctx: &Ctx<'_>,
    q: TomlQueue,
    default_domain: Option<&Spanned<String>>,
) -> Result<QueueSpec, ConfigError> {
    let name_span = q.name.span();
    let name = q.name.into_inner();
    if name.trim().is_empty() {
        return Err(ctx.err(name_span, "name", "the queue name must not be empty"));
    }
    let domain = domain_of(ctx, q.domain.as_ref(), default_domain, name_span, "queue")?;
    let pattern = pattern_of(ctx, q.pattern)?;
    let rate = q
        .rate
        .get_ref()
        .parse::<Quota>()
        .map_err(|e| ctx.err(q.rate.span(), "rate", e.to_string()))?;
    let mut spec = QueueSpec::new(domain, name, pattern, rate)
        .map_err(|e| ctx.err(q.rate.span(), "rate", e.to_string()))?;
    let fail = |span: Range<usize>, field: &'static str| {
        move |e: flowgate_core::queue::QueueSpecError| ctx.err(span, field, e.to_string())
    };
    if let Some(b) = &q.burst {
        spec = spec
            .with_burst(*b.get_ref())
            .map_err(fail(b.span(), "burst"))?;
    }
    if let Some(m) = &q.max_depth {
        spec = spec
            .with_max_depth(*m.get_ref())
            .map_err(fail(m.span(), "max_depth"))?;
    }
    if let Some(l) = &q.lease {
        let d = duration_of(ctx, "lease", l)?;
        spec = spec.with_lease(d).map_err(fail(l.span(), "lease"))?;
    }
    if let Some(m) = &q.max_attempts {
        spec = spec
            .with_max_attempts(*m.get_ref())
            .map_err(fail(m.span(), "max_attempts"))?;
    }
    if let Some(b) = &q.retry_backoff {
        let d = duration_of(ctx, "retry_backoff", b)?;
        spec = spec
            .with_retry_backoff(d)
            .map_err(fail(b.span(), "retry_backoff"))?;
    }
    if let Some(m) = &q.max_payload {
        spec = spec
            .with_max_payload(*m.get_ref())
            .map_err(fail(m.span(), "max_payload"))?;
    }
    if let Some(r) = &q.key_retention {
        let d = duration_of(ctx, "key_retention", r)?;
        spec = spec
            .with_key_retention(d)
            .map_err(fail(r.span(), "key_retention"))?;
    }
    Ok(spec)
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
    let domain = domain_of(
        ctx,
        r.domain.as_ref(),
        default_domain,
        name_span.clone(),
        "rule",
    )?;
    let mut pattern = pattern_of(ctx, r.pattern)?;
    if let Some(share) = r.share_threshold.as_ref().filter(|s| *s.get_ref()) {
        let mut any = false;
        for m in pattern
            .iter_mut()
            .filter(|m| matches!(m.value, ValueMatch::Wildcard(_)))
        {
            m.share = true;
            any = true;
        }
        if !any {
            return Err(ctx.err(
                share.span(),
                "share_threshold",
                "share_threshold needs a wildcard value in `match` (e.g. `path=files/*`)",
            ));
        }
    }
    for m in &mut pattern {
        m.value_to_metric = r.value_to_metric;
    }

    let time_zone = match &r.time_zone {
        Some(z) => parse_zone(z.get_ref()).map_err(|e| ctx.err(z.span(), "time_zone", e))?,
        None => Tz::UTC,
    };
    let algorithm = match &r.algorithm {
        Some(a) => Some(
            a.get_ref()
                .parse::<Algorithm>()
                .map_err(|e| ctx.err(a.span(), "algorithm", e.to_string()))?,
        ),
        None => None,
    };
    // `window` with a bare count: a length, or a calendar unit (`day`, `week`, `month`).
    let calendar_unit = r.window.as_ref().and_then(|w| {
        w.get_ref()
            .trim()
            .parse::<flowgate_core::CalendarUnit>()
            .ok()
    });
    let window = match &r.window {
        Some(_) if calendar_unit.is_some() => None,
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
                    let q = match calendar_unit {
                        Some(unit) => Quota::per_calendar(n.unsigned_abs(), unit, Tz::UTC),
                        None => {
                            Quota::new(n.unsigned_abs(), window.unwrap_or(Duration::from_secs(1)))
                        }
                    };
                    Some(q.map_err(|e| ctx.err(span, "limit", e.to_string()))?)
                }
                LimitField::Text(t) if t.trim() == "unlimited" || t.trim() == "-1" => None,
                LimitField::Text(t) => {
                    if r.window.is_some() {
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
            // A calendar window counts per period: fixed_window unless another is named (which
            // the limit refuses).
            let algorithm = algorithm.unwrap_or(if q.calendar().is_some() {
                Algorithm::FixedWindow
            } else {
                DEFAULT_ALGORITHM
            });
            let q = q.with_zone(time_zone);
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
                _ if q.calendar().is_some() && algorithm != Algorithm::FixedWindow => "algorithm",
                (Some(_), _, _) => "burst",
                (_, Some(_), _) => "buckets",
                _ => "limit",
            };
            let at = match (field, &r.algorithm) {
                ("algorithm", Some(a)) => a.span(),
                _ => r.limit.as_ref().map_or(name_span.clone(), |l| l.span()),
            };
            Some(b.build().map_err(|e| ctx.err(at, field, e.to_string()))?)
        }
    };
    let base = Base {
        algorithm,
        mode,
        burst: r.burst.as_ref().map(|b| *b.get_ref()),
        buckets: r.buckets.as_ref().map(|b| *b.get_ref()),
        max_wait: r
            .max_wait
            .as_ref()
            .and_then(|w| parse_duration(w.get_ref()).ok()),
    };
    let schedule = if r.schedule.is_empty() {
        None
    } else {
        let mut overrides = Vec::with_capacity(r.schedule.len());
        for (j, o) in r.schedule.iter().enumerate() {
            overrides.push(convert_override(ctx, j, o.get_ref(), &base, time_zone)?);
        }
        Some(Schedule::new(time_zone, overrides))
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
    rule.quota_mode = r.quota_mode;
    rule.metadata = r.metadata.as_ref().map(ToString::to_string);
    rule.time_zone = time_zone;
    rule.schedule = schedule;
    Ok(rule)
}

/// The quota of a `limit` field: `None` for unlimited (`"unlimited"`, `-1`); a bare count is per
/// second.
fn quota_of(
    ctx: &Ctx<'_>,
    field: &str,
    l: &Spanned<LimitField>,
) -> Result<Option<Quota>, ConfigError> {
    let span = l.span();
    match l.get_ref() {
        LimitField::Count(-1) => Ok(None),
        LimitField::Count(n) if *n < 0 => Err(ctx.err(
            span,
            field,
            format!("{n} is not a limit: use -1 (or \"unlimited\") for no limit"),
        )),
        LimitField::Count(n) => Quota::new(n.unsigned_abs(), Duration::from_secs(1))
            .map(Some)
            .map_err(|e| ctx.err(span, field, e.to_string())),
        LimitField::Text(t) if t.trim() == "unlimited" || t.trim() == "-1" => Ok(None),
        LimitField::Text(t) => t
            .parse::<Quota>()
            .map(Some)
            .map_err(|e| ctx.err(span, field, e.to_string())),
    }
}

/// A rule's limit parameters, which its overrides take unless they name their own.
struct Base {
    algorithm: Option<Algorithm>,
    mode: Mode,
    burst: Option<u64>,
    buckets: Option<u32>,
    max_wait: Option<Duration>,
}

/// The `j`-th `[[rule.schedule]]` entry of a rule: its limit takes the rule's parameters
/// (`base`: algorithm, burst, buckets, mode, max_wait) unless it names its own algorithm or
/// burst.
fn convert_override(
    ctx: &Ctx<'_>,
    j: usize,
    o: &TomlOverride,
    base: &Base,
    zone: Tz,
) -> Result<Override, ConfigError> {
    let field = |name: &str| format!("schedule[{j}].{name}");
    let quota = quota_of(ctx, &field("limit"), &o.limit)?;
    let algorithm = match &o.algorithm {
        Some(a) => Some(
            a.get_ref()
                .parse::<Algorithm>()
                .map_err(|e| ctx.err(a.span(), &field("algorithm"), e.to_string()))?,
        ),
        None => base.algorithm,
    };
    let limit = match quota {
        None => None,
        Some(q) => {
            let algorithm = algorithm.unwrap_or(if q.calendar().is_some() {
                Algorithm::FixedWindow
            } else {
                DEFAULT_ALGORITHM
            });
            let mut b = Limit::builder(algorithm, q.with_zone(zone)).mode(base.mode);
            if let Some(burst) = o.burst.as_ref().map(|b| *b.get_ref()).or(base.burst) {
                b = b.burst(burst);
            }
            if let Some(buckets) = base.buckets {
                b = b.buckets(buckets);
            }
            if let Some(w) = base.max_wait {
                b = b.max_wait(w);
            }
            let (at, name) = match (&o.algorithm, &o.burst) {
                (Some(a), _) => (a.span(), "algorithm"),
                (None, Some(burst)) => (burst.span(), "burst"),
                (None, None) => (o.limit.span(), "limit"),
            };
            Some(
                b.build()
                    .map_err(|e| ctx.err(at, &field(name), e.to_string()))?,
            )
        }
    };
    let dates = match &o.dates {
        Some(d) => {
            Some(Dates::parse(d.get_ref()).map_err(|e| ctx.err(d.span(), &field("dates"), e))?)
        }
        None => None,
    };
    let mut days = Vec::new();
    if let Some(list) = &o.days {
        if list.get_ref().is_empty() {
            return Err(ctx.err(
                list.span(),
                &field("days"),
                "`days` is empty: name at least one day (mon ... sun), or leave it out",
            ));
        }
        for d in list.get_ref() {
            days.push(parse_day(d).map_err(|e| ctx.err(list.span(), &field("days"), e))?);
        }
    }
    let hours = match &o.hours {
        Some(h) => {
            Some(Hours::parse(h.get_ref()).map_err(|e| ctx.err(h.span(), &field("hours"), e))?)
        }
        None => None,
    };
    if dates.is_none() && days.is_empty() && hours.is_none() {
        return Err(ctx.err(
            o.limit.span(),
            &field("limit"),
            "an override needs `dates`, `days` or `hours`: without any it always applies (set the rule's `limit` instead)",
        ));
    }
    Ok(Override {
        limit,
        dates,
        days,
        hours,
    })
}
