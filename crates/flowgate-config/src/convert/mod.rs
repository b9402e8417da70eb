//! The schema's documents to the core's rules, queues, alerts and breakers, and back: the one
//! place where a field gets its meaning, whichever format it came from (TOML, JSON,
//! envoyproxy/ratelimit YAML). One file per kind ([`rule`], [`queue`], [`alert`], [`breaker`]),
//! each with its way back (`RuleDoc::of`, ...), which converts to the same declaration.
//!
//! An error names the field at fault relative to its declaration (`limit`, `schedule[1].days`)
//! and the key whose line shows it; the reader of each format turns that into file, line and
//! field.

pub(crate) mod alert;
pub(crate) mod breaker;
mod charge;
pub(crate) mod queue;
pub(crate) mod rule;

use std::fmt;
use std::time::Duration;

use flowgate_core::quota::parse_duration;
use flowgate_core::{Algorithm, Matcher, ValueMatch};

use crate::schema::{AlgorithmDoc, EntryDoc, FlaggedEntry, Pattern};
use flowgate_core::redact::{REDACTED, redact_to_origin};

/// Where an error points: a key of the declaration, or the file's default `domain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum At {
    /// A path inside the declaration (`limit`, `schedule[0].days`).
    Here(String),
    /// The file's top-level `domain`.
    FileDomain,
}

/// A document that does not convert: the field at fault, where it shows, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SchemaError {
    /// The field, relative to its declaration.
    pub(crate) field: String,
    /// The key whose line shows the fault.
    pub(crate) at: At,
    /// What is wrong.
    pub(crate) message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "`{}`: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for SchemaError {}

/// An error in `field`, shown at its line.
pub(crate) fn err(field: &str, message: impl Into<String>) -> SchemaError {
    err_at(field, field, message)
}

/// An error in `field`, shown at the line of `at`.
pub(crate) fn err_at(field: &str, at: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        field: field.to_owned(),
        at: At::Here(at.to_owned()),
        message: message.into(),
    }
}

/// What a declaration takes from its file when it says nothing itself.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FileContext<'a> {
    /// The file's `domain`.
    pub(crate) domain: Option<&'a str>,
    /// The file's `alert_webhooks` (already checked).
    pub(crate) webhooks: &'a [String],
    /// The file's `alertmanagers` (already checked).
    pub(crate) alertmanagers: &'a [String],
}

/// The domain of a `what` (`rule`, `queue`, ...): its own, else the file's.
pub(crate) fn domain_of(
    own: Option<&str>,
    file: Option<&str>,
    what: &str,
) -> Result<String, SchemaError> {
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

/// A name that must not be blank.
pub(crate) fn name_of(what: &str, field: &str, name: &str) -> Result<(), SchemaError> {
    if name.trim().is_empty() {
        return Err(err(field, format!("the {what} name must not be empty")));
    }
    Ok(())
}

/// A `match` as matchers, each with its own flags (an entry written as a table) or the rule's
/// (`share` applies to the rule's wildcard entries; the caller checks that there is one).
pub(crate) fn pattern_of(
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

/// A queue's or breaker's pattern as the schema writes it: one entry per matcher, as text, or as
/// a table when it carries a flag (which [`pattern_of`] reads back).
pub(crate) fn pattern_doc(pattern: &[Matcher]) -> Pattern {
    Pattern::Entries(
        pattern
            .iter()
            .map(|m| {
                if m.share || m.value_to_metric {
                    EntryDoc::Flagged(FlaggedEntry {
                        entry: m.to_string(),
                        share_threshold: m.share,
                        value_to_metric: m.value_to_metric,
                    })
                } else {
                    EntryDoc::Text(m.to_string())
                }
            })
            .collect(),
    )
}

/// A duration field (`"30s"`).
pub(crate) fn duration_of(field: &str, text: &str) -> Result<Duration, SchemaError> {
    parse_duration(text).map_err(|e| err(field, e.to_string()))
}

impl From<AlgorithmDoc> for Algorithm {
    fn from(a: AlgorithmDoc) -> Self {
        match a {
            AlgorithmDoc::FixedWindow => Algorithm::FixedWindow,
            AlgorithmDoc::SlidingLog => Algorithm::SlidingLog,
            AlgorithmDoc::SlidingWindow => Algorithm::SlidingWindow,
            AlgorithmDoc::TokenBucket => Algorithm::TokenBucket,
            AlgorithmDoc::LeakyBucket => Algorithm::LeakyBucket,
            AlgorithmDoc::Concurrency => Algorithm::Concurrency,
        }
    }
}

impl From<Algorithm> for AlgorithmDoc {
    fn from(a: Algorithm) -> Self {
        match a {
            Algorithm::FixedWindow => AlgorithmDoc::FixedWindow,
            Algorithm::SlidingLog => AlgorithmDoc::SlidingLog,
            Algorithm::SlidingWindow => AlgorithmDoc::SlidingWindow,
            Algorithm::TokenBucket => AlgorithmDoc::TokenBucket,
            Algorithm::LeakyBucket => AlgorithmDoc::LeakyBucket,
            Algorithm::Concurrency => AlgorithmDoc::Concurrency,
        }
    }
}

/// A webhook's (or an Alertmanager's) URL: `http://host[:port]/path`. An error shows its scheme
/// and host alone ([`redact_to_origin`]): errors are logged, and reach a reader as the rules'
/// `problem` in `GET /v1/rules`.
pub(crate) fn webhook_of(field: &str, url: &str) -> Result<String, SchemaError> {
    if url.contains(REDACTED) {
        return Err(err(
            field,
            "this URL is shown redacted (`GET /v1/rules` without the admin token shows only its scheme and host): read the rules with the admin token and send the URL whole",
        ));
    }
    let shown = redact_to_origin(url);
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

/// Every URL of list field `field` (`alert_webhooks`), checked.
pub(crate) fn webhooks_of(field: &str, urls: &[String]) -> Result<Vec<String>, SchemaError> {
    urls.iter()
        .enumerate()
        .map(|(i, w)| webhook_of(&format!("{field}[{i}]"), w))
        .collect()
}

#[cfg(test)]
mod tests {
    use flowgate_core::Algorithm;

    use crate::schema::AlgorithmDoc;

    /// The schema's algorithm names are the core's.
    #[test]
    fn algorithm_names_are_the_cores() {
        for a in Algorithm::ALL {
            let doc = AlgorithmDoc::from(a);
            assert_eq!(serde_json::to_value(doc).unwrap(), a.name());
            assert_eq!(Algorithm::from(doc), a);
        }
    }
}
