//! Flowgate's TOML format: the document parsed with its spans, then read section by section
//! ([`crate::located`]); every error located at its line through the spans.
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

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use crate::error::{ConfigError, line_of};
use crate::key_on_line;
use crate::located::{self, Declared, SECTIONS, Tree, field_of};
use crate::schema::FileDoc;

/// Reads a Flowgate TOML file: what it declares, located.
///
/// # Errors
/// [`ConfigError`] naming the file, line and field of the first fault.
pub(crate) fn read(file: &str, text: &str) -> Result<Declared, ConfigError> {
    let root = DeTable::parse(text).map_err(|e| syntax_error(file, text, &e))?;
    located::read(&TomlTree { file, text, root })
}

/// A TOML syntax error: its line, and the field of the table and key it is in, found in what the
/// parser recovers of the document.
fn syntax_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let at = e.span().map(|s| s.start);
    let key = at
        .map(|offset| key_on_line(text, offset))
        .unwrap_or_default();
    let (recovered, _) = DeTable::parse_recoverable(text);
    let table = at.and_then(|offset| table_at(text, recovered.get_ref(), offset));
    let field = match (table, key.is_empty()) {
        (Some(t), false) => format!("{t}.{key}"),
        (Some(t), true) => t,
        (None, _) => key,
    };
    ConfigError::new(
        file,
        at.map(|offset| line_of(text, offset)),
        field,
        e.message().trim(),
    )
}

/// The path of the `[[table]]` (`rule[1]`, `rule[1].schedule[0]`) whose header is the last before
/// `offset`, if any.
fn table_at(text: &str, table: &DeTable<'_>, offset: usize) -> Option<String> {
    let mut best: Option<(usize, String, &DeTable<'_>)> = None;
    for (key, value) in table.iter() {
        let Some(array) = value.get_ref().as_array() else {
            continue;
        };
        for (i, element) in array.iter().enumerate() {
            let start = element.span().start;
            let header = text.get(start..).is_some_and(|t| t.starts_with("[["));
            if let (true, true, Some(t)) = (header, start <= offset, element.get_ref().as_table())
                && best.as_ref().is_none_or(|(s, _, _)| start > *s)
            {
                best = Some((start, format!("{}[{i}]", key.get_ref()), t));
            }
        }
    }
    let (_, path, inner) = best?;
    Some(match table_at(text, inner, offset) {
        Some(below) => format!("{path}.{below}"),
        None => path,
    })
}

/// A TOML document with its spans.
struct TomlTree<'t> {
    file: &'t str,
    text: &'t str,
    root: Spanned<DeTable<'t>>,
}

impl TomlTree<'_> {
    /// `value` deserialized as `T`, an error located at its field below `prefix`.
    fn deserialize<T: DeserializeOwned>(
        &self,
        prefix: Option<&str>,
        value: Spanned<DeValue<'_>>,
    ) -> Result<T, ConfigError> {
        serde_path_to_error::deserialize(ValueDeserializer::from(value)).map_err(|e| {
            let field = field_of(prefix, e.path());
            let e = e.into_inner();
            ConfigError::new(
                self.file,
                e.span().map(|s| line_of(self.text, s.start)),
                field,
                e.message().trim(),
            )
        })
    }

    fn section(&self, key: &str) -> Option<&Spanned<DeValue<'_>>> {
        self.root.get_ref().get(key)
    }
}

impl Tree for TomlTree<'_> {
    fn file(&self) -> &str {
        self.file
    }

    fn head(&self) -> Result<FileDoc, ConfigError> {
        let mut head = self.root.get_ref().clone();
        for key in SECTIONS {
            head.remove(key);
        }
        let head = Spanned::new(self.root.span(), DeValue::Table(head));
        self.deserialize(None, head)
    }

    fn count(&self, key: &str) -> Result<usize, ConfigError> {
        match self.section(key) {
            None => Ok(0),
            Some(v) => match v.get_ref().as_array() {
                Some(a) => Ok(a.len()),
                None => self
                    .deserialize::<Vec<serde::de::IgnoredAny>>(Some(key), v.clone())
                    .map(|v| v.len()),
            },
        }
    }

    fn element<T: DeserializeOwned>(&self, key: &str, index: usize) -> Result<T, ConfigError> {
        let value = self
            .section(key)
            .and_then(|v| v.get_ref().get(index))
            .cloned()
            .ok_or_else(|| {
                ConfigError::new(self.file, None, format!("{key}[{index}]"), "missing")
            })?;
        self.deserialize(Some(&format!("{key}[{index}]")), value)
    }

    fn line(&self, key: &str, index: usize, path: Option<&str>) -> Option<u64> {
        let mut at = self.section(key)?.get_ref().get(index)?;
        for part in path.into_iter().flat_map(|p| p.split(['.', '['])) {
            let next = match part.strip_suffix(']') {
                Some(n) => n.parse::<usize>().ok().and_then(|n| at.get_ref().get(n)),
                None => at.get_ref().as_table().and_then(|t| t.get(part)),
            };
            match next {
                Some(n) => at = n,
                None => break,
            }
        }
        Some(line_of(self.text, at.span().start))
    }

    fn root_line(&self, key: &str) -> Option<u64> {
        self.section(key)
            .map(|v| line_of(self.text, v.span().start))
    }
}
