//! A rule: [`RuleDoc`] to the core's [`Rule`] (its limit, schedule, trial and adaptive limit) and
//! back.

use std::time::Duration;

use flowgate_core::adaptive::AimdSpec;
use flowgate_core::calendar::parse_zone;
use flowgate_core::quota::format_micros;
use flowgate_core::schedule::{Dates, Hours, Override, Schedule, day_name, parse_day};
use flowgate_core::{
    Algorithm, CalendarUnit, ChargeMode, FailurePolicy, Limit, LimitError, Mode, Quota, Rule, Tz,
    ValueMatch,
};

use super::{SchemaError, domain_of, duration_of, err, err_at, name_of, pattern_of};
use crate::schema::{
    AdaptiveDoc, ChargeDoc, EntryDoc, FailureDoc, FlaggedEntry, LimitDoc, LimitField, ModeDoc,
    NextChange, OverrideDoc, Pattern, RuleDoc, RuleView, TrialDoc,
};

/// The default algorithm of a rule that names none (a calendar window's is `fixed_window`).
pub(crate) const DEFAULT_ALGORITHM: Algorithm = Algorithm::SlidingWindow;

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
    max_debt: Option<u64>,
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
    ) -> Result<Limit, LimitError> {
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
        if let Some(d) = self.max_debt {
            b = b.max_debt(d);
        }
        b.build()
    }
}

/// A rule's `max_debt`: at least 1 (a debt bound of 0 would drop every unit charged past the
/// limit, the loss charges exist to prevent; a negative one means nothing).
fn max_debt_of(d: i64) -> Result<u64, SchemaError> {
    u64::try_from(d).ok().filter(|&d| d > 0).ok_or_else(|| {
        err(
            "max_debt",
            format!(
                "max_debt must be at least 1 unit, not {d}: it bounds how far charges may go past the limit (0 would drop every unit charged past it; a refund is a negative charge, not a negative bound)"
            ),
        )
    })
}

/// The warm-up field a limit error is about, if any.
fn warmup_field(e: &LimitError) -> Option<&'static str> {
    use LimitError as E;
    match e {
        E::WarmupNeedsTokenBucket { .. } | E::BadWarmup | E::WarmupTooLong { .. } => Some("warmup"),
        E::BadColdFactor | E::ColdFactorWithoutWarmup => Some("cold_factor"),
        E::MaxDebtTooLarge { .. } => Some("max_debt"),
        _ => None,
    }
}

impl RuleDoc {
    /// The rule, its domain the file's (`file_domain`) unless it names its own.
    ///
    /// # Errors
    /// [`SchemaError`] naming the field at fault.
    pub(crate) fn to_rule(&self, file_domain: Option<&str>) -> Result<Rule, SchemaError> {
        name_of("rule", "name", &self.name)?;
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
        let mode = match self.mode {
            None | Some(ModeDoc::Reject) => Mode::Reject,
            Some(ModeDoc::Delay) => Mode::Delay,
        };
        let base = Base {
            algorithm: self.algorithm.map(Algorithm::from),
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
            max_debt: self.max_debt.map(max_debt_of).transpose()?,
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
                let limit = base.build(q, time_zone, None, None).map_err(|e| {
                    // (the warm-up's fields are named by their own errors, and are present)
                    let own = warmup_field(&e);
                    err_at(own.unwrap_or(field), own.unwrap_or(at), e.to_string())
                })?;
                if base.max_debt.is_some() {
                    flowgate_core::algorithm::chargeable(&limit)
                        .map_err(|e| err("max_debt", format!("max_debt is for charges: {e}")))?;
                }
                Some(limit)
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
        let failure = match self.failure {
            None | Some(FailureDoc::Open) => FailurePolicy::Open,
            Some(FailureDoc::Closed) => FailurePolicy::Closed,
            Some(FailureDoc::Local) => FailurePolicy::Local {
                nodes: self.nodes.unwrap_or(1).max(1),
            },
        };
        let charge = self.charge_mode(limit.as_ref())?;
        let mut rule = Rule::new(domain, self.name.clone(), pattern, limit);
        rule.charge = charge;
        rule.shadow = self.shadow;
        rule.failure = failure;
        rule.replaces = self.replaces.clone();
        rule.detailed_metric = self.detailed_metric;
        rule.quota_mode = self.quota_mode;
        rule.metadata = self
            .metadata
            .clone()
            .and_then(without_nulls)
            .map(|m| m.to_string());
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
    fn to_spec(&self, limit: Option<&Limit>) -> Result<AimdSpec, SchemaError> {
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
        Ok(AimdSpec {
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
        let algorithm = self.algorithm.map(Algorithm::from);
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
        let algorithm = self.algorithm.map(Algorithm::from);
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

impl RuleDoc {
    /// The document of a rule: converting it back gives the same rule.
    pub fn of(r: &Rule) -> Self {
        let in_force = LimitDoc::of(r.limit.as_ref());
        let wildcard = |v: &ValueMatch| matches!(v, ValueMatch::Wildcard(_));
        let share_threshold = r.pattern.iter().any(|m| m.share)
            && r.pattern.iter().all(|m| m.share || !wildcard(&m.value));
        let value_to_metric = !r.pattern.is_empty() && r.pattern.iter().all(|m| m.value_to_metric);
        let entries = r
            .pattern
            .iter()
            .map(|m| {
                let implied_share = share_threshold && wildcard(&m.value);
                if m.share == implied_share && m.value_to_metric == value_to_metric {
                    EntryDoc::Text(m.to_string())
                } else {
                    EntryDoc::Flagged(FlaggedEntry {
                        entry: m.to_string(),
                        share_threshold: m.share,
                        value_to_metric: m.value_to_metric,
                    })
                }
            })
            .collect();
        let (failure, nodes) = match r.failure {
            FailurePolicy::Open => (None, None),
            FailurePolicy::Closed => (Some(FailureDoc::Closed), None),
            FailurePolicy::Local { nodes } => (Some(FailureDoc::Local), Some(nodes)),
        };
        // The rule's parameters (buckets, delay, warm-up) are every limit's it builds, its
        // schedule's included: read them from the first limit that shows each, so that an
        // unlimited rule's overrides keep theirs.
        let limits = || {
            r.limit.iter().chain(
                r.schedule
                    .iter()
                    .flat_map(|s| s.overrides().iter().filter_map(|o| o.limit.as_ref())),
            )
        };
        let delay = limits().find(|l| l.mode() == Mode::Delay);
        let warmup = limits().find_map(Limit::warmup);
        RuleDoc {
            domain: Some(r.domain.clone()),
            name: r.name.clone(),
            pattern: Pattern::Entries(entries),
            limit: Some(LimitField::Text(in_force.limit)),
            window: None,
            unlimited: false,
            algorithm: in_force.algorithm,
            burst: in_force.burst,
            // A sliding window's count, or one given to another algorithm (which ignores it, but
            // it was written: the document reads back as the same rule).
            buckets: limits()
                .find(|l| {
                    l.algorithm() == Algorithm::SlidingWindow
                        || l.buckets() != flowgate_core::limit::DEFAULT_BUCKETS
                })
                .map(Limit::buckets),
            mode: delay.map(|_| ModeDoc::Delay),
            max_wait: delay.map(|l| format_micros(l.max_wait())),
            warmup: warmup.map(|w| format_micros(w.period())),
            cold_factor: warmup
                .map(|w| w.cold_factor())
                .filter(|&c| c != flowgate_core::limit::DEFAULT_COLD_FACTOR),
            // Set when some limit's differs from its default (its own limit): the rule's one
            // value, given to every limit it builds.
            max_debt: limits()
                .find(|l| l.max_debt() != l.default_max_debt())
                .map(|l| l.max_debt() as i64),
            failure,
            nodes,
            shadow: r.shadow,
            replaces: r.replaces.clone(),
            detailed_metric: r.detailed_metric,
            value_to_metric,
            share_threshold,
            quota_mode: r.quota_mode,
            metadata: r.metadata.as_ref().map(|m| {
                serde_json::from_str(m).unwrap_or_else(|_| serde_json::Value::String(m.clone()))
            }),
            time_zone: (r.time_zone != Tz::UTC).then(|| r.time_zone.name().to_owned()),
            schedule: r
                .schedule
                .as_ref()
                .map(|s| s.overrides().iter().map(OverrideDoc::of).collect())
                .unwrap_or_default(),
            trial: r.trial.as_ref().map(TrialDoc::of),
            adaptive: r.adaptive.as_ref().map(AdaptiveDoc::of),
            charge: (r.charge == ChargeMode::Report).then_some(ChargeDoc::Report),
        }
    }
}

impl OverrideDoc {
    /// The document of a schedule's override.
    pub fn of(o: &Override) -> Self {
        let l = LimitDoc::of(o.limit.as_ref());
        OverrideDoc {
            limit: LimitField::Text(l.limit),
            algorithm: l.algorithm,
            burst: l.burst,
            dates: o.dates.as_ref().map(ToString::to_string),
            days: (!o.days.is_empty())
                .then(|| o.days.iter().map(|d| day_name(*d).to_owned()).collect()),
            hours: o.hours.as_ref().map(ToString::to_string),
        }
    }
}

impl TrialDoc {
    /// The document of a trial limit.
    pub fn of(l: &Limit) -> Self {
        let d = LimitDoc::of(Some(l));
        TrialDoc {
            limit: LimitField::Text(d.limit),
            window: None,
            algorithm: d.algorithm,
            burst: d.burst,
        }
    }
}

impl AdaptiveDoc {
    /// The document of an adaptive limit.
    pub fn of(a: &AimdSpec) -> Self {
        AdaptiveDoc {
            min: Some(a.min),
            max: a.max,
            max_latency: format_micros(a.max_latency.round() as u64),
            backoff: Some(a.backoff),
            initial: Some(a.initial),
        }
    }
}

impl LimitDoc {
    /// The document of `limit` (`None`: unlimited).
    pub fn of(limit: Option<&Limit>) -> Self {
        match limit {
            None => LimitDoc {
                limit: "unlimited".into(),
                algorithm: None,
                burst: None,
            },
            Some(l) => LimitDoc {
                limit: l.quota().to_string(),
                algorithm: Some(l.algorithm().into()),
                burst: matches!(
                    l.algorithm(),
                    Algorithm::TokenBucket | Algorithm::LeakyBucket
                )
                .then(|| l.burst()),
            },
        }
    }
}

impl RuleView {
    /// The fields a view adds to its document, which `PUT` ignores.
    pub const READ_ONLY: [&str; 2] = ["in_force", "next_change"];

    /// The view of `r` at `now` (µs since the Unix epoch, by the store's clock).
    pub fn of(r: &Rule, now: u64) -> Self {
        RuleView {
            doc: RuleDoc::of(r),
            in_force: LimitDoc::of(r.limit_at(now)),
            next_change: r.schedule.as_ref().map(|_| {
                r.next_change(now).map(|(at, l)| NextChange {
                    limit: LimitDoc::of(l),
                    at: flowgate_core::calendar::rfc3339(r.time_zone, at),
                })
            }),
        }
    }
}

/// A rule's metadata as TOML can hold it, with no null: a null member or list element is
/// dropped, as a key left out would be (Envoy's YAML writes `owner:` for one), so that every
/// rule can be written back as a TOML file; a null alone is no metadata.
fn without_nulls(v: serde_json::Value) -> Option<serde_json::Value> {
    use serde_json::Value;
    match v {
        Value::Null => None,
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(without_nulls).collect(),
        )),
        Value::Object(members) => Some(Value::Object(
            members
                .into_iter()
                .filter_map(|(k, v)| Some((k, without_nulls(v)?)))
                .collect(),
        )),
        v => Some(v),
    }
}
