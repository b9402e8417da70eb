//! Flowgate's TOML format: a [`FileDoc`] read by `toml`, each rule and queue converted by
//! [`super::convert`], errors located at their line through the document's spans.
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
//!
//! alert_webhooks = ["http://chat-bridge.internal:8000/flowgate"]   # this file's alerts' default webhooks
//! alertmanagers = ["http://alertmanager.internal:9093"]          # ... and Alertmanagers
//! [[alert]]                      # see docs/alerts.md
//! name = "per-client-rejecting"  # unique among the alerts; Alertmanager's alertname
//! rule = "per-client"            # a rule's rejection ratio (or queue = "..." / store = "degraded")
//! rejection_ratio = 0.5          # fires while more than this share is rejected...
//! for = "10s"                    # ...for this long (default 0s)...
//! min_rate = 2                   # ...at this many requests per second or more (default 1)
//!
//! [[breaker]]                    # a circuit breaker (see docs/breakers.md)
//! name = "wpg"                   # unique among the domain's breakers; part of every instance key
//! match = ["channel=WPG"]        # as rules: one breaker instance per matched descriptor
//! strategy = "error_ratio"       # or "slow_call_ratio" (with slow_call = "800ms"), "error_count"
//! threshold = 0.5                # opens at a bad share (or, error_count, a bad count) at least this
//! window = "10s"                 # a sliding window of 10 buckets
//! min_calls = 10                 # fewer calls in the window never open it
//! open_for = "30s"               # refuses for this long, then half-open
//! probes = 1                     # calls admitted while half-open (default 1)
//! probe_timeout = "30s"          # a probe's lease; expired, its place is free (default open_for)
//! # min_nodes = 2                # the cluster-wide breaker's (ignored per process)
//! ```

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::convert::{At, SchemaError, webhook_of};
use super::error::line_of;
use super::schema::FileDoc;
use super::{ConfigError, LocatedAlert, LocatedBreaker, LocatedQueue, LocatedRule, key_on_line};

/// What one Flowgate TOML file declares.
#[derive(Debug)]
pub(crate) struct Parsed {
    /// Its rules.
    pub(crate) rules: Vec<LocatedRule>,
    /// Its queues.
    pub(crate) queues: Vec<LocatedQueue>,
    /// Its alerts.
    pub(crate) alerts: Vec<LocatedAlert>,
    /// Its circuit breakers.
    pub(crate) breakers: Vec<LocatedBreaker>,
}

/// Parses a Flowgate TOML file: its rules, its queues, its alerts and its breakers.
pub(crate) fn parse(file: &str, text: &str) -> Result<Parsed, ConfigError> {
    let doc: FileDoc = ::toml::from_str(text).map_err(|e| {
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
    let spans = Spans::parse(text);
    let domain = doc.domain.as_deref();
    let mut queues = Vec::with_capacity(doc.queue.len());
    for (i, q) in doc.queue.iter().enumerate() {
        let spec = q
            .to_spec(domain)
            .map_err(|e| spans.error(file, "queue", i, e))?;
        queues.push(LocatedQueue {
            spec,
            file: file.to_owned(),
            line: spans.line("queue", i, None),
            field: format!("queue[{i}]"),
        });
    }
    let mut rules = Vec::with_capacity(doc.rule.len());
    for (i, r) in doc.rule.iter().enumerate() {
        let rule = r
            .to_rule(domain)
            .map_err(|e| spans.error(file, "rule", i, e))?;
        rules.push(LocatedRule {
            rule,
            file: file.to_owned(),
            line: spans.line("rule", i, None),
            field: format!("rule[{i}]"),
        });
    }
    let root_line = |key_name: &str| {
        spans
            .root
            .as_ref()
            .and_then(|r| key(r.get_ref(), key_name))
            .map(|d| line_of(text, d.span().start))
    };
    for (key_name, urls) in [
        ("alert_webhooks", &doc.alert_webhooks),
        ("alertmanagers", &doc.alertmanagers),
    ] {
        for (i, w) in urls.iter().enumerate() {
            webhook_of(&format!("{key_name}[{i}]"), w)
                .map_err(|e| ConfigError::new(file, root_line(key_name), e.field, e.message))?;
        }
    }
    let destinations = super::convert::FileDestinations {
        webhooks: &doc.alert_webhooks,
        alertmanagers: &doc.alertmanagers,
    };
    let mut alerts = Vec::with_capacity(doc.alert.len());
    for (i, a) in doc.alert.iter().enumerate() {
        let spec = a
            .to_spec(domain, &destinations)
            .map_err(|e| spans.error(file, "alert", i, e))?;
        let target = if a.rule.is_some() {
            "rule"
        } else if a.breaker.is_some() {
            "breaker"
        } else {
            "queue"
        };
        alerts.push(LocatedAlert {
            spec,
            file: file.to_owned(),
            line: spans.line("alert", i, None),
            target_line: spans.line("alert", i, Some(target)),
            field: format!("alert[{i}]"),
        });
    }
    let mut breakers = Vec::with_capacity(doc.breaker.len());
    for (i, b) in doc.breaker.iter().enumerate() {
        let def = b
            .to_def(domain)
            .map_err(|e| spans.error(file, "breaker", i, e))?;
        breakers.push(LocatedBreaker {
            def,
            file: file.to_owned(),
            line: spans.line("breaker", i, None),
            field: format!("breaker[{i}]"),
        });
    }
    Ok(Parsed {
        rules,
        queues,
        alerts,
        breakers,
    })
}

/// A parsed file's spans: the line of each table and key.
struct Spans<'t> {
    text: &'t str,
    root: Option<Spanned<DeTable<'t>>>,
}

fn key<'a, 't>(table: &'a DeTable<'t>, name: &str) -> Option<&'a Spanned<DeValue<'t>>> {
    table
        .iter()
        .find(|(k, _)| k.get_ref().as_ref() == name)
        .map(|(_, v)| v)
}

impl<'t> Spans<'t> {
    fn parse(text: &'t str) -> Self {
        Self {
            text,
            root: DeTable::parse(text).ok(),
        }
    }

    /// The line of `path` (`limit`, `schedule[0].days`) in the `index`-th `[[table]]`, or of the
    /// deepest part of it that exists (the table itself without a path).
    fn line(&self, table: &str, index: usize, path: Option<&str>) -> Option<u64> {
        let root = self.root.as_ref()?;
        let mut at = key(root.get_ref(), table)?.get_ref().get(index)?;
        for part in path.into_iter().flat_map(|p| p.split(['.', '['])) {
            let next = match part.strip_suffix(']') {
                Some(n) => n.parse::<usize>().ok().and_then(|n| at.get_ref().get(n)),
                None => at.get_ref().as_table().and_then(|t| key(t, part)),
            };
            match next {
                Some(n) => at = n,
                None => break,
            }
        }
        Some(line_of(self.text, at.span().start))
    }

    /// A conversion error of the `index`-th `[[table]]` as a configuration error.
    fn error(&self, file: &str, table: &str, index: usize, e: SchemaError) -> ConfigError {
        let line = match &e.at {
            At::Here(path) => self.line(table, index, Some(path)),
            At::FileDomain => self
                .root
                .as_ref()
                .and_then(|r| key(r.get_ref(), "domain"))
                .map(|d| line_of(self.text, d.span().start)),
        };
        ConfigError::new(
            file,
            line,
            format!("{table}[{index}].{}", e.field),
            e.message,
        )
    }
}

/// Which `[[rule]]`, `[[rule.schedule]]`, `[[queue]]`, `[[alert]]` or `[[breaker]]` table
/// contains `offset`, if any, as a field path (`rule[1]`, `rule[1].schedule[0]`, `queue[0]`,
/// `alert[2]`, `breaker[0]`), for
/// errors of the TOML reader, which gives a position but not a path.
fn table_index_at(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset.min(text.len()))?;
    let (mut rules, mut schedules, mut queues, mut alerts, mut last) = (0, 0, 0, 0, None);
    let mut breakers = 0;
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
        } else if l.starts_with("[[alert]]") {
            alerts += 1;
            last = Some("alert");
        } else if l.starts_with("[[breaker]]") {
            breakers += 1;
            last = Some("breaker");
        }
    }
    match last? {
        "rule" => Some(format!("rule[{}]", rules - 1)),
        "schedule" if rules > 0 => Some(format!("rule[{}].schedule[{}]", rules - 1, schedules - 1)),
        "schedule" => None,
        "alert" => Some(format!("alert[{}]", alerts - 1)),
        "breaker" => Some(format!("breaker[{}]", breakers - 1)),
        _ => Some(format!("queue[{}]", queues - 1)),
    }
}
