//! The schema's documents to the core's rules and queues: the one place where a rule's fields
//! get their meaning, whichever format they came from (TOML, JSON, envoyproxy/ratelimit YAML).
//!
//! An error names the field at fault relative to its rule or queue (`limit`,
//! `schedule[1].days`) and the key whose line shows it; the reader of each format turns that
//! into file, line and field.

use std::time::Duration;

use flowgate_core::calendar::parse_zone;
use flowgate_core::queue::{QueueSpec, QueueSpecError};
use flowgate_core::quota::parse_duration;
use flowgate_core::schedule::{Dates, Hours, Override, Schedule, parse_day};
use flowgate_core::{
    Algorithm, CalendarUnit, FailurePolicy, Limit, Matcher, Mode, Quota, Rule, Tz, ValueMatch,
};

use super::schema::{
    AdaptiveDoc, AlertDoc, BreakerDoc, EntryDoc, LimitField, OverrideDoc, Pattern, QueueDoc,
    RuleDoc, TrialDoc,
};
use crate::alert::{AlertKind, AlertSpec};

/// The default algorithm of a rule that names none (a calendar window's is `fixed_window`).
pub(crate) const DEFAULT_ALGORITHM: Algorithm = Algorithm::SlidingWindow;

/// Where an error points: a key of the rule or queue, or the file's default `domain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum At {
    /// A path inside the rule or queue (`limit`, `schedule[0].days`).
    Here(String),
    /// The file's top-level `domain`.
    FileDomain,
}

/// A document that does not convert: the field at fault, where it shows, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SchemaError {
    /// The field, relative to its rule or queue.
    pub(crate) field: String,
    /// The key whose line shows the fault.
    pub(crate) at: At,
    /// What is wrong.
    pub(crate) message: String,
}

fn err(field: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        field: field.to_owned(),
        at: At::Here(field.to_owned()),
        message: message.into(),
    }
}

fn err_at(field: &str, at: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        field: field.to_owned(),
        at: At::Here(at.to_owned()),
        message: message.into(),
    }
}

fn domain_of(own: Option<&str>, file: Option<&str>, what: &str) -> Result<String, SchemaError> {
    match (own, file) {
        (Some(""), _) => Err(err("domain", "the domain must not be empty")),
        (Some(d), _) => Ok(d.to_owned()),
        (None, Some("")) => Err(SchemaError {
            field: "domain".into(),
            at: At::FileDomain,
            message: "the domain must not be empty".into(),
        }),
        (None, Some(d)) => Ok(d.to_owned()),
        (None, None) => Err(err_at(
            "domain",
            "name",
            format!("no domain: set `domain` in the {what} or at the top of the file"),
        )),
    }
}

/// A `match` as matchers, each with its own flags (an entry written as a table) or the rule's
/// (`share` applies to the rule's wildcard entries; the caller checks that there is one).
fn pattern_of(
    p: &Pattern,
    share: bool,
    value_to_metric: bool,
) -> Result<Vec<Matcher>, SchemaError> {
    // (text, the entry's own share flag, value_to_metric)
    let entries: Vec<(&str, Option<bool>, bool)> = match p {
        Pattern::Text(s) => s.split(',').map(|e| (e, None, value_to_metric)).collect(),
        Pattern::Entries(v) => v
            .iter()
            .map(|e| match e {
                EntryDoc::Text(t) => (t.as_str(), None, value_to_metric),
                EntryDoc::Flagged(f) => {
                    (f.entry.as_str(), Some(f.share_threshold), f.value_to_metric)
                }
            })
            .collect(),
    };
    let mut out = Vec::with_capacity(entries.len());
    for (text, own_share, value_to_metric) in entries {
        let mut m = Matcher::parse(text);
        if m.key.is_empty() {
            return Err(err(
                "match",
                format!("`{text}` has an empty key: write `key`, `key=value` or `key=prefix*`"),
            ));
        }
        let wildcard = matches!(m.value, ValueMatch::Wildcard(_));
        if own_share == Some(true) && !wildcard {
            return Err(err(
                "match",
                format!("`{text}`: share_threshold needs a wildcard value (e.g. `path=files/*`)"),
            ));
        }
        m.share = own_share.unwrap_or(share && wildcard);
        m.value_to_metric = value_to_metric;
        out.push(m);
    }
    if out.is_empty() {
        return Err(err("match", "the pattern has no entry"));
    }
    Ok(out)
}

fn duration_of(field: &str, text: &str) -> Result<Duration, SchemaError> {
    parse_duration(text).map_err(|e| err(field, e.to_string()))
}

fn algorithm_of(field: &str, text: Option<&String>) -> Result<Option<Algorithm>, SchemaError> {
    text.map(|a| {
        a.parse::<Algorithm>()
            .map_err(|e| err(field, e.to_string()))
    })
    .transpose()
}

/// A calendar window's algorithm is `fixed_window` unless another is named (which the limit
/// refuses).
fn default_algorithm(q: &Quota) -> Algorithm {
    if q.calendar().is_some() {
        Algorithm::FixedWindow
    } else {
        DEFAULT_ALGORITHM
    }
}

/// The quota of a `limit` field: `None` for unlimited (`"unlimited"`, `-1`); a bare count is
/// per `window` (a length or a calendar unit; a second without one).
fn quota_of(
    field: &str,
    l: &LimitField,
    window: Option<&str>,
) -> Result<Option<Quota>, SchemaError> {
    match l {
        LimitField::Count(-1) => Ok(None),
        LimitField::Count(n) if *n < 0 => Err(err(
            field,
            format!("{n} is not a limit: use -1 (or \"unlimited\") for no limit"),
        )),
        LimitField::Count(n) => {
            let n = n.unsigned_abs();
            let q = match window {
                None => Quota::new(n, Duration::from_secs(1)),
                Some(w) => match w.trim().parse::<CalendarUnit>() {
                    Ok(unit) => Quota::per_calendar(n, unit, Tz::UTC),
                    Err(_) => Quota::new(n, duration_of("window", w)?),
                },
            };
            q.map(Some).map_err(|e| err(field, e.to_string()))
        }
        LimitField::Text(t) if t.trim() == "unlimited" || t.trim() == "-1" => Ok(None),
        LimitField::Text(_) if window.is_some() => Err(err_at(
            "window",
            field,
            "`window` is given twice: in `limit` and in `window`",
        )),
        LimitField::Text(t) => t
            .parse::<Quota>()
            .map(Some)
            .map_err(|e| err(field, e.to_string())),
    }
}

/// A rule's limit parameters, which its schedule's overrides take unless they name their own.
struct Base {
    algorithm: Option<Algorithm>,
    mode: Mode,
    burst: Option<u64>,
    buckets: Option<u32>,
    max_wait: Option<Duration>,
    warmup: Option<Duration>,
    cold_factor: Option<f64>,
}

impl Base {
    /// The limit of `quota` in `zone` with these parameters (`burst` instead of the base's when
    /// given).
    fn build(
        &self,
        quota: Quota,
        zone: Tz,
        algorithm: Option<Algorithm>,
        burst: Option<u64>,
    ) -> Result<Limit, flowgate_core::LimitError> {
        let algorithm = algorithm
            .or(self.algorithm)
            .unwrap_or(default_algorithm(&quota));
        let mut b = Limit::builder(algorithm, quota.with_zone(zone)).mode(self.mode);
        if let Some(burst) = burst.or(self.burst) {
            b = b.burst(burst);
        }
        if let Some(buckets) = self.buckets {
            b = b.buckets(buckets);
        }
        if let Some(w) = self.max_wait {
            b = b.max_wait(w);
        }
        if let Some(w) = self.warmup {
            b = b.warmup(w);
        }
        if let Some(c) = self.cold_factor {
            b = b.cold_factor(c);
        }
        b.build()
    }
}

/// The warm-up field a limit error is about, if any.
fn warmup_field(e: &flowgate_core::LimitError) -> Option<&'static str> {
    use flowgate_core::LimitError as E;
    match e {
        E::WarmupNeedsTokenBucket { .. } | E::BadWarmup | E::WarmupTooLong { .. } => Some("warmup"),
        E::BadColdFactor | E::ColdFactorWithoutWarmup => Some("cold_factor"),
        _ => None,
    }
}

impl RuleDoc {
    /// The rule, its domain the file's (`file_domain`) unless it names its own.
    ///
    /// # Errors
    /// [`SchemaError`] naming the field at fault.
    pub(crate) fn to_rule(&self, file_domain: Option<&str>) -> Result<Rule, SchemaError> {
        if self.name.trim().is_empty() {
            return Err(err("name", "the rule name must not be empty"));
        }
        let domain = domain_of(self.domain.as_deref(), file_domain, "rule")?;
        let pattern = pattern_of(&self.pattern, self.share_threshold, self.value_to_metric)?;
        if self.share_threshold
            && !pattern
                .iter()
                .any(|m| matches!(m.value, ValueMatch::Wildcard(_)))
        {
            return Err(err(
                "share_threshold",
                "share_threshold needs a wildcard value in `match` (e.g. `path=files/*`)",
            ));
        }
        let time_zone = match &self.time_zone {
            Some(z) => parse_zone(z).map_err(|e| err("time_zone", e))?,
            None => Tz::UTC,
        };
        let mode = match self.mode.as_deref() {
            None | Some("reject") => Mode::Reject,
            Some("delay") => Mode::Delay,
            Some(other) => {
                return Err(err(
                    "mode",
                    format!("unknown mode `{other}`: expected reject or delay"),
                ));
            }
        };
        let base = Base {
            algorithm: algorithm_of("algorithm", self.algorithm.as_ref())?,
            mode,
            burst: self.burst,
            buckets: self.buckets,
            max_wait: self
                .max_wait
                .as_deref()
                .map(|w| duration_of("max_wait", w))
                .transpose()?,
            warmup: self
                .warmup
                .as_deref()
                .map(|w| duration_of("warmup", w))
                .transpose()?,
            cold_factor: self.cold_factor,
        };
        let quota = match (&self.limit, self.unlimited) {
            (_, true) => None,
            (None, false) => {
                return Err(err_at(
                    "limit",
                    "name",
                    "missing `limit`: write e.g. limit = \"20/s\", or unlimited = true",
                ));
            }
            (Some(l), false) => quota_of("limit", l, self.window.as_deref())?,
        };
        let limit = match quota {
            None => None,
            Some(q) => {
                if mode == Mode::Delay && self.max_wait.is_none() {
                    return Err(err_at(
                        "max_wait",
                        "name",
                        "mode = \"delay\" needs max_wait, the longest a caller may wait (e.g. \"500ms\")",
                    ));
                }
                let algorithm = base.algorithm.unwrap_or(default_algorithm(&q));
                let field =
                    if self.mode.is_some() && mode == Mode::Delay && !algorithm.supports_delay() {
                        "mode"
                    } else if q.calendar().is_some() && algorithm != Algorithm::FixedWindow {
                        "algorithm"
                    } else if self.burst.is_some() {
                        "burst"
                    } else if self.buckets.is_some() {
                        "buckets"
                    } else {
                        "limit"
                    };
                let at = match field {
                    "algorithm" if self.algorithm.is_some() => "algorithm",
                    _ if self.limit.is_some() => "limit",
                    _ => "name",
                };
                Some(base.build(q, time_zone, None, None).map_err(|e| {
                    // (the warm-up's fields are named by their own errors, and are present)
                    let own = warmup_field(&e);
                    err_at(own.unwrap_or(field), own.unwrap_or(at), e.to_string())
                })?)
            }
        };
        let schedule = if self.schedule.is_empty() {
            None
        } else {
            let overrides = self
                .schedule
                .iter()
                .enumerate()
                .map(|(j, o)| o.to_override(j, &base, time_zone))
                .collect::<Result<Vec<_>, _>>()?;
            Some(Schedule::new(time_zone, overrides))
        };
        let trial = match (&self.trial, &limit) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(err(
                    "trial",
                    "a trial limit needs a rule with a limit to try it beside",
                ));
            }
            (Some(t), Some(_)) => Some(t.to_limit(&base, time_zone)?),
        };
        let failure = match self.failure.as_deref() {
            None | Some("open") => FailurePolicy::Open,
            Some("closed") => FailurePolicy::Closed,
            Some("local") => FailurePolicy::Local {
                nodes: self.nodes.unwrap_or(1).max(1),
            },
            Some(other) => {
                return Err(err(
                    "failure",
                    format!("unknown failure policy `{other}`: expected open, closed or local"),
                ));
            }
        };
        let mut rule = Rule::new(domain, self.name.clone(), pattern, limit);
        rule.shadow = self.shadow;
        rule.failure = failure;
        rule.replaces = self.replaces.clone();
        rule.detailed_metric = self.detailed_metric;
        rule.quota_mode = self.quota_mode;
        rule.metadata = self
            .metadata
            .as_ref()
            .filter(|m| !m.is_null())
            .map(ToString::to_string);
        rule.time_zone = time_zone;
        rule.schedule = schedule;
        rule.trial = trial;
        rule.adaptive = match &self.adaptive {
            None => None,
            Some(a) => {
                if self.schedule.is_empty() {
                    Some(a.to_spec(rule.limit.as_ref())?)
                } else {
                    return Err(err_at(
                        "adaptive",
                        "adaptive",
                        "an adaptive limit does not take a schedule: the limit moves with latency",
                    ));
                }
            }
        };
        Ok(rule)
    }
}

impl AdaptiveDoc {
    /// The AIMD parameters of a rule whose limit is `limit` (a `concurrency` one; its count is
    /// the start unless `initial` is given).
    fn to_spec(
        &self,
        limit: Option<&Limit>,
    ) -> Result<flowgate_core::adaptive::AimdSpec, SchemaError> {
        let field = |name: &str, message: String| {
            err_at(
                &format!("adaptive.{name}"),
                &format!("adaptive.{name}"),
                message,
            )
        };
        let Some(limit) = limit.filter(|l| l.algorithm() == Algorithm::Concurrency) else {
            return Err(err_at(
                "adaptive",
                "adaptive",
                format!(
                    "an adaptive limit needs algorithm = \"concurrency\" and a limit, not {}",
                    limit.map_or("unlimited", |l| l.algorithm().name())
                ),
            ));
        };
        let min = self.min.unwrap_or(1);
        if min == 0 {
            return Err(field("min", "min must be at least 1".into()));
        }
        if min > self.max {
            return Err(field("max", format!("max {} is below min {min}", self.max)));
        }
        let max_latency = duration_of("adaptive.max_latency", &self.max_latency)?;
        if max_latency.is_zero() {
            return Err(field(
                "max_latency",
                "max_latency must be longer than 0 (e.g. \"250ms\")".into(),
            ));
        }
        let backoff = self.backoff.unwrap_or(0.9);
        if !(backoff > 0.0 && backoff < 1.0) {
            return Err(field(
                "backoff",
                format!("backoff {backoff} must be between 0 and 1, both excluded (default 0.9)"),
            ));
        }
        let (initial, name) = match self.initial {
            Some(i) => (i, "initial"),
            None => (limit.limit(), "limit"),
        };
        if !(min..=self.max).contains(&initial) {
            let message = format!(
                "the adaptive limit starts at {initial}, outside min..=max ({min}..={})",
                self.max
            );
            return Err(if name == "limit" {
                err(
                    "limit",
                    message + ": set `adaptive.initial` or change `limit`",
                )
            } else {
                field("initial", message)
            });
        }
        Ok(flowgate_core::adaptive::AimdSpec {
            initial,
            min,
            max: self.max,
            max_latency: max_latency.as_secs_f64() * 1e6,
            backoff,
        })
    }
}

impl TrialDoc {
    /// The trial limit of a rule whose parameters are `base`: decided in reject mode whatever
    /// the rule's mode (a trial never makes a caller wait).
    fn to_limit(&self, base: &Base, zone: Tz) -> Result<Limit, SchemaError> {
        let quota = quota_of("trial.limit", &self.limit, self.window.as_deref())?
            .ok_or_else(|| err("trial.limit", "a trial limit cannot be unlimited"))?;
        let algorithm = algorithm_of("trial.algorithm", self.algorithm.as_ref())?;
        let base = Base {
            mode: Mode::Reject,
            max_wait: None,
            ..*base
        };
        let name = match (&self.algorithm, &self.burst) {
            (Some(_), _) => "trial.algorithm",
            (None, Some(_)) => "trial.burst",
            (None, None) => "trial.limit",
        };
        base.build(quota, zone, algorithm, self.burst)
            .map_err(|e| err(name, e.to_string()))
    }
}

impl OverrideDoc {
    /// The `j`-th override of a rule whose parameters are `base`.
    fn to_override(&self, j: usize, base: &Base, zone: Tz) -> Result<Override, SchemaError> {
        let field = |name: &str| format!("schedule[{j}].{name}");
        let quota = quota_of(&field("limit"), &self.limit, None)?;
        let algorithm = algorithm_of(&field("algorithm"), self.algorithm.as_ref())?;
        let limit = match quota {
            None => None,
            Some(q) => {
                let name = match (&self.algorithm, &self.burst) {
                    (Some(_), _) => "algorithm",
                    (None, Some(_)) => "burst",
                    (None, None) => "limit",
                };
                Some(
                    base.build(q, zone, algorithm, self.burst)
                        .map_err(|e| err(&field(name), e.to_string()))?,
                )
            }
        };
        let dates = self
            .dates
            .as_deref()
            .map(|d| Dates::parse(d).map_err(|e| err(&field("dates"), e)))
            .transpose()?;
        let mut days = Vec::new();
        if let Some(list) = &self.days {
            if list.is_empty() {
                return Err(err(
                    &field("days"),
                    "`days` is empty: name at least one day (mon ... sun), or leave it out",
                ));
            }
            for d in list {
                days.push(parse_day(d).map_err(|e| err(&field("days"), e))?);
            }
        }
        let hours = self
            .hours
            .as_deref()
            .map(|h| Hours::parse(h).map_err(|e| err(&field("hours"), e)))
            .transpose()?;
        if dates.is_none() && days.is_empty() && hours.is_none() {
            return Err(err(
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
}

impl QueueDoc {
    /// The queue, its domain the file's (`file_domain`) unless it names its own.
    ///
    /// # Errors
    /// [`SchemaError`] naming the field at fault.
    pub(crate) fn to_spec(&self, file_domain: Option<&str>) -> Result<QueueSpec, SchemaError> {
        if self.name.trim().is_empty() {
            return Err(err("name", "the queue name must not be empty"));
        }
        let domain = domain_of(self.domain.as_deref(), file_domain, "queue")?;
        let pattern = pattern_of(&self.pattern, false, false)?;
        let rate = self
            .rate
            .parse::<Quota>()
            .map_err(|e| err("rate", e.to_string()))?;
        let fail = |field: &'static str| move |e: QueueSpecError| err(field, e.to_string());
        let mut spec =
            QueueSpec::new(domain, self.name.clone(), pattern, rate).map_err(fail("rate"))?;
        if let Some(b) = self.burst {
            spec = spec.with_burst(b).map_err(fail("burst"))?;
        }
        if let Some(m) = self.max_depth {
            spec = spec.with_max_depth(m).map_err(fail("max_depth"))?;
        }
        if let Some(l) = &self.lease {
            spec = spec
                .with_lease(duration_of("lease", l)?)
                .map_err(fail("lease"))?;
        }
        if let Some(m) = self.max_attempts {
            spec = spec.with_max_attempts(m).map_err(fail("max_attempts"))?;
        }
        if let Some(b) = &self.retry_backoff {
            spec = spec
                .with_retry_backoff(duration_of("retry_backoff", b)?)
                .map_err(fail("retry_backoff"))?;
        }
        if let Some(m) = self.max_payload {
            spec = spec.with_max_payload(m).map_err(fail("max_payload"))?;
        }
        if let Some(r) = &self.key_retention {
            spec = spec
                .with_key_retention(duration_of("key_retention", r)?)
                .map_err(fail("key_retention"))?;
        }
        Ok(spec)
    }
}

/// The destinations of a file's alerts that name none of their own: its `alert_webhooks` and
/// `alertmanagers` (already checked).
pub(crate) struct FileDestinations<'a> {
    /// `alert_webhooks`.
    pub(crate) webhooks: &'a [String],
    /// `alertmanagers`.
    pub(crate) alertmanagers: &'a [String],
}

/// A webhook's (or an Alertmanager's) URL: `http://host[:port]/path`. An error shows it
/// redacted: errors are logged.
pub(crate) fn webhook_of(field: &str, url: &str) -> Result<String, SchemaError> {
    let shown = super::urls::redact(url);
    let uri: http::Uri = url
        .parse()
        .map_err(|e| err(field, format!("`{shown}` is not a URL: {e}")))?;
    match uri.scheme_str() {
        Some("http") if uri.authority().is_some() => Ok(url.to_owned()),
        Some("https") => Err(err(
            field,
            format!(
                "`{shown}`: webhooks are POSTed over plain http:// (no TLS client is built in); point it at an http:// receiver or a local relay"
            ),
        )),
        _ => Err(err(
            field,
            format!(
                "`{shown}` is not an http:// URL with a host (e.g. http://alerts.internal:9093/hook)"
            ),
        )),
    }
}

impl AlertDoc {
    /// The alert, its domain the file's (`file_domain`) unless it names its own, its webhooks
    /// and Alertmanagers the file's (`file`, already checked) unless it names its own.
    ///
    /// # Errors
    /// [`SchemaError`] naming the field at fault.
    pub(crate) fn to_spec(
        &self,
        file_domain: Option<&str>,
        file: &FileDestinations<'_>,
    ) -> Result<AlertSpec, SchemaError> {
        if self.name.trim().is_empty() {
            return Err(err("name", "the alert name must not be empty"));
        }
        let kinds: Vec<&str> = [
            ("rule", self.rule.is_some()),
            ("queue", self.queue.is_some()),
            ("store", self.store.is_some()),
            ("breaker", self.breaker.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, present)| present.then_some(k))
        .collect();
        let kind_key = match kinds.as_slice() {
            [] => {
                return Err(err_at(
                    "rule",
                    "name",
                    "the alert watches nothing: set `rule` (with `rejection_ratio`), `queue` (with `oldest_age` or `depth`), `store = \"degraded\"` or `breaker`",
                ));
            }
            [one] => *one,
            [first, second, ..] => {
                return Err(err(
                    second,
                    format!(
                        "an alert watches one thing: `{first}` and `{second}` are both given; declare two alerts"
                    ),
                ));
            }
        };
        // Keys that belong to another kind.
        let misplaced = [
            ("rejection_ratio", self.rejection_ratio.is_some(), "rule"),
            ("min_rate", self.min_rate.is_some(), "rule"),
            ("oldest_age", self.oldest_age.is_some(), "queue"),
            ("depth", self.depth.is_some(), "queue"),
            (
                "domain",
                self.domain.is_some(),
                "rule` or `queue` or `breaker",
            ),
        ];
        for (key, present, of) in misplaced {
            if present && !of.split("` or `").any(|k| k == kind_key) {
                return Err(err(
                    key,
                    format!("`{key}` is for `{of}` alerts, and this one watches `{kind_key}`"),
                ));
            }
        }
        let kind = match kind_key {
            "rule" => {
                let domain = domain_of(self.domain.as_deref(), file_domain, "alert")?;
                let rule = self.rule.clone().unwrap_or_default();
                if rule.trim().is_empty() {
                    return Err(err("rule", "the rule name must not be empty"));
                }
                let Some(ratio) = self.rejection_ratio else {
                    return Err(err_at(
                        "rejection_ratio",
                        "rule",
                        "a rule alert needs `rejection_ratio`: it fires while more than this share of the rule's requests is rejected (e.g. 0.5)",
                    ));
                };
                if !(0.0..1.0).contains(&ratio) {
                    return Err(err(
                        "rejection_ratio",
                        format!(
                            "{ratio} is not a ratio from 0 up to (not including) 1: the alert fires while the share rejected is strictly above it, so 1 could never fire"
                        ),
                    ));
                }
                let min_rate = self.min_rate.unwrap_or(1.0);
                if !min_rate.is_finite() || min_rate < 0.0 {
                    return Err(err(
                        "min_rate",
                        format!("{min_rate} is not a rate: requests per second, 0 or more"),
                    ));
                }
                AlertKind::Rule {
                    domain,
                    rule,
                    ratio,
                    min_rate,
                }
            }
            "queue" => {
                let domain = domain_of(self.domain.as_deref(), file_domain, "alert")?;
                let queue = self.queue.clone().unwrap_or_default();
                if queue.trim().is_empty() {
                    return Err(err("queue", "the queue name must not be empty"));
                }
                match (&self.oldest_age, self.depth) {
                    (Some(_), Some(_)) => {
                        return Err(err(
                            "depth",
                            "an alert watches one thing: `oldest_age` and `depth` are both given; declare two alerts",
                        ));
                    }
                    (Some(age), None) => AlertKind::QueueAge {
                        domain,
                        queue,
                        seconds: duration_of("oldest_age", age)?.as_secs_f64(),
                    },
                    (None, Some(depth)) => AlertKind::QueueDepth {
                        domain,
                        queue,
                        depth,
                    },
                    (None, None) => {
                        return Err(err_at(
                            "oldest_age",
                            "queue",
                            "a queue alert needs `oldest_age` (e.g. \"5m\") or `depth` (e.g. 1000)",
                        ));
                    }
                }
            }
            "breaker" => {
                let domain = domain_of(self.domain.as_deref(), file_domain, "alert")?;
                let breaker = self.breaker.clone().unwrap_or_default();
                if breaker.trim().is_empty() {
                    return Err(err("breaker", "the breaker name must not be empty"));
                }
                AlertKind::Breaker { domain, breaker }
            }
            _ => match self.store.as_deref() {
                Some("degraded") => AlertKind::StoreDegraded,
                other => {
                    return Err(err(
                        "store",
                        format!(
                            "unknown store condition `{}`: expected \"degraded\"",
                            other.unwrap_or_default()
                        ),
                    ));
                }
            },
        };
        let for_ms = match &self.for_ {
            Some(f) => u64::try_from(duration_of("for", f)?.as_millis()).unwrap_or(u64::MAX),
            None => 0,
        };
        let own = |field: &str, urls: &Option<Vec<String>>, file: &[String]| match urls {
            Some(own) => own
                .iter()
                .enumerate()
                .map(|(i, w)| webhook_of(&format!("{field}[{i}]"), w))
                .collect::<Result<Vec<_>, _>>(),
            None => Ok(file.to_vec()),
        };
        let webhooks = own("webhooks", &self.webhooks, file.webhooks)?;
        let alertmanagers = own("alertmanagers", &self.alertmanagers, file.alertmanagers)?;
        if self
            .severity
            .as_deref()
            .is_some_and(|s| s.trim().is_empty())
        {
            return Err(err(
                "severity",
                "the severity must not be empty (or leave it out)",
            ));
        }
        Ok(AlertSpec {
            name: self.name.clone(),
            kind,
            for_ms,
            webhooks,
            alertmanagers,
            severity: self.severity.clone(),
            summary: self.summary.clone(),
            description: self.description.clone(),
        })
    }
}

impl BreakerDoc {
    /// The breaker, its domain the file's (`file_domain`) unless it names its own.
    ///
    /// # Errors
    /// [`SchemaError`] naming the field at fault.
    pub(crate) fn to_def(
        &self,
        file_domain: Option<&str>,
    ) -> Result<flowgate::breakers::BreakerDef, SchemaError> {
        use flowgate::breakers::{BreakerDef, BreakerError, BreakerSpec, Strategy};
        use flowgate_core::clock::micros;
        if self.name.trim().is_empty() {
            return Err(err("name", "the breaker name must not be empty"));
        }
        let domain = domain_of(self.domain.as_deref(), file_domain, "breaker")?;
        let pattern = pattern_of(&self.pattern, false, false)?;
        let slow_call = self
            .slow_call
            .as_deref()
            .map(|t| duration_of("slow_call", t))
            .transpose()?;
        let strategy = match (self.strategy.as_str(), slow_call) {
            ("error_ratio" | "error_count", Some(_)) => {
                return Err(err(
                    "slow_call",
                    format!(
                        "`slow_call` is for the slow_call_ratio strategy, and this breaker's is {}",
                        self.strategy
                    ),
                ));
            }
            ("error_ratio", None) => Strategy::ErrorRatio,
            ("error_count", None) => Strategy::ErrorCount,
            ("slow_call_ratio", Some(s)) => Strategy::SlowCallRatio {
                slow_call: micros(s),
            },
            ("slow_call_ratio", None) => {
                return Err(err_at(
                    "slow_call",
                    "strategy",
                    "the slow_call_ratio strategy needs `slow_call`, the latency over which a call is slow (e.g. \"800ms\")",
                ));
            }
            (other, _) => {
                return Err(err(
                    "strategy",
                    format!(
                        "unknown strategy `{other}`: expected error_ratio, slow_call_ratio or error_count"
                    ),
                ));
            }
        };
        let window = duration_of("window", &self.window)?;
        let open_for = duration_of("open_for", &self.open_for)?;
        let probe_timeout = match &self.probe_timeout {
            Some(t) => duration_of("probe_timeout", t)?,
            None => open_for,
        };
        if self.min_nodes == Some(0) {
            return Err(err("min_nodes", "must be at least 1 (or left out)"));
        }
        let spec = BreakerSpec::new(
            strategy,
            self.threshold,
            micros(window),
            self.min_calls,
            micros(open_for),
            self.probes.unwrap_or(1),
            micros(probe_timeout),
        )
        .map_err(|e| match e {
            BreakerError::Invalid { field, message } => {
                // A probe timeout left out is open_for's.
                let field = if field == "probe_timeout" && self.probe_timeout.is_none() {
                    "open_for"
                } else {
                    field
                };
                err(field, message)
            }
            other => err("", other.to_string()),
        })?;
        let mut def = BreakerDef::new(domain, self.name.clone(), pattern, spec);
        def.min_nodes = self.min_nodes;
        Ok(def)
    }
}

#[cfg(test)]
mod warmup_tests {
    use super::super::{Format, parse};

    fn rule(extra: &str) -> String {
        format!(
            "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"100/s\"\n{extra}"
        )
    }

    #[test]
    fn warmup_fields_load_and_read_back() {
        let set = parse(
            "f.toml",
            Format::Toml,
            &rule("algorithm = \"token_bucket\"\nwarmup = \"30s\"\ncold_factor = 2.5\n"),
        )
        .unwrap();
        let r = &set[0].rule;
        let l = r.limit.as_ref().unwrap();
        let w = l.warmup().unwrap();
        assert_eq!(
            (w.period(), w.cold_milli(), l.burst()),
            (30_000_000, 2500, 1)
        );
        let doc = super::RuleDoc::of(r);
        assert_eq!(doc.warmup.as_deref(), Some("30s"));
        assert_eq!(doc.cold_factor, Some(2.5));
        assert_eq!(&doc.to_rule(None).unwrap(), r);
        // The default factor is not written.
        let set = parse(
            "f.toml",
            Format::Toml,
            &rule("algorithm = \"token_bucket\"\nwarmup = \"10s\"\n"),
        )
        .unwrap();
        assert_eq!(super::RuleDoc::of(&set[0].rule).cold_factor, None);
    }

    #[test]
    fn bad_warmup_fields_are_refused_with_file_line_and_field() {
        for (extra, line, field, says) in [
            (
                "algorithm = \"sliding_log\"\nwarmup = \"30s\"\n",
                7,
                "warmup",
                "token_bucket",
            ),
            ("warmup = \"30s\"\n", 6, "warmup", "token_bucket"),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"30s\"\ncold_factor = 1.0\n",
                8,
                "cold_factor",
                "more than 1",
            ),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"30s\"\ncold_factor = -3\n",
                8,
                "cold_factor",
                "more than 1",
            ),
            (
                "algorithm = \"token_bucket\"\ncold_factor = 2.0\n",
                7,
                "cold_factor",
                "needs a warmup",
            ),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"0s\"\n",
                7,
                "warmup",
                "at most 1h",
            ),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"30d\"\n",
                7,
                "warmup",
                "at most 1h",
            ),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"soon\"\n",
                7,
                "warmup",
                "",
            ),
        ] {
            let e = parse("f.toml", Format::Toml, &rule(extra)).unwrap_err();
            assert_eq!(
                (e.file.as_str(), e.line, e.field.as_str()),
                ("f.toml", Some(line), format!("rule[0].{field}").as_str()),
                "{extra}: {e}"
            );
            assert!(e.message.contains(says), "{extra}: {e}");
        }
    }
}

#[cfg(test)]
mod adaptive_tests {
    use super::super::{Format, parse};

    fn rule(limit: &str, extra: &str) -> String {
        format!(
            "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"{limit}\"\n{extra}"
        )
    }

    #[test]
    fn adaptive_fields_load_and_read_back() {
        let set = parse(
            "f.toml",
            Format::Toml,
            &rule(
                "10/30s",
                "algorithm = \"concurrency\"\nadaptive = { min = 5, max = 200, max_latency = \"250ms\", backoff = 0.8, initial = 20 }\n",
            ),
        )
        .unwrap();
        let r = &set[0].rule;
        let a = r.adaptive.as_ref().unwrap();
        assert_eq!(
            (a.initial, a.min, a.max, a.max_latency, a.backoff),
            (20, 5, 200, 250_000.0, 0.8)
        );
        let doc = super::RuleDoc::of(r);
        assert_eq!(doc.adaptive.as_ref().unwrap().max_latency, "250ms");
        assert_eq!(&doc.to_rule(None).unwrap(), r);
        // Defaults: min 1, backoff 0.9, the rule's limit as the start.
        let set = parse(
            "f.toml",
            Format::Toml,
            &rule(
                "10/30s",
                "algorithm = \"concurrency\"\nadaptive = { max = 50, max_latency = \"1s\" }\n",
            ),
        )
        .unwrap();
        let a = set[0].rule.adaptive.as_ref().unwrap();
        assert_eq!((a.initial, a.min, a.backoff), (10, 1, 0.9));
    }

    #[test]
    fn bad_adaptive_fields_are_refused_with_file_line_and_field() {
        let ok = "max = 50, max_latency = \"250ms\"";
        for (limit, extra, line, field, says) in [
            (
                "10/30s",
                format!("adaptive = {{ {ok} }}\n"),
                6,
                "adaptive",
                "needs algorithm = \"concurrency\"",
            ),
            (
                "10/s",
                format!("algorithm = \"token_bucket\"\nadaptive = {{ {ok} }}\n"),
                7,
                "adaptive",
                "not token_bucket",
            ),
            (
                "10/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ min = 0, {ok} }}\n"),
                7,
                "adaptive.min",
                "at least 1",
            ),
            (
                "10/30s",
                "algorithm = \"concurrency\"\nadaptive = { min = 60, max = 50, max_latency = \"1s\" }\n".to_owned(),
                7,
                "adaptive.max",
                "below min 60",
            ),
            (
                "10/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ {ok}, backoff = 1.0 }}\n"),
                7,
                "adaptive.backoff",
                "between 0 and 1",
            ),
            (
                "10/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ {ok}, backoff = 0 }}\n"),
                7,
                "adaptive.backoff",
                "between 0 and 1",
            ),
            (
                "10/30s",
                "algorithm = \"concurrency\"\nadaptive = { max = 50, max_latency = \"0s\" }\n"
                    .to_owned(),
                7,
                "adaptive.max_latency",
                "longer than 0",
            ),
            (
                "10/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ {ok}, initial = 51 }}\n"),
                7,
                "adaptive.initial",
                "outside min..=max",
            ),
            (
                "100/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ {ok} }}\n"),
                5,
                "limit",
                "adaptive.initial",
            ),
        ] {
            let e = parse("f.toml", Format::Toml, &rule(limit, &extra)).unwrap_err();
            assert_eq!(
                (e.file.as_str(), e.line, e.field.as_str()),
                ("f.toml", Some(line), format!("rule[0].{field}").as_str()),
                "{extra}: {e}"
            );
            assert!(e.message.contains(says), "{extra}: {e}");
        }
    }
}
