//! Flowgate's configuration: the rule schema ([`schema`], the serde types TOML files and JSON
//! bodies are read by and `GET /v1/rules` is written by), its conversion to the core's rules,
//! queues, alerts ([`alert`]) and circuit breakers, and the readers of Flowgate's TOML, of
//! envoyproxy/ratelimit's YAML and of the schema as JSON. What the server, the rules CLI and
//! other tools read configuration with, with no server.
//!
//! A path is a file or a directory, read non-recursively; files ending in `.toml` are Flowgate
//! TOML, files ending in `.yaml` or `.yml` are envoyproxy/ratelimit YAML (one domain per file, as
//! there); hidden files (starting with `.`, such as Kubernetes' `..data`) are skipped. Every error
//! names the file, the line and the field ([`ConfigError`]).
//!
//! Inside: `toml.rs` and `json.rs` parse a document and `located.rs` reads it section by
//! section (one loop for `[[rule]]`, `[[queue]]`, `[[alert]]` and `[[breaker]]`, each
//! declaration [`Located`]); `convert/` gives each field its meaning, one file per kind;
//! `envoy.rs` maps envoyproxy/ratelimit's YAML onto the schema; `config.rs` validates the whole.

pub mod alert;
mod config;
mod convert;
mod envoy;
mod error;
mod json;
mod located;
mod read;
pub mod schema;
mod toml;
mod urls;

pub use self::config::{Config, Loaded};
pub use self::convert::breaker::UnnamedStrategy;
pub use self::envoy::ENVOY_UNITS;
pub use self::error::ConfigError;
pub use self::located::Located;
pub use self::read::{
    Format, MAX_FILE_BYTES, files, load, load_texts, parse, parse_config, parse_json, read,
    read_texts,
};
pub use flowgate_core::redact::{REDACTED, Redacted, redact_to_origin, redact_url};

/// Checks an Alertmanager's URL as the configuration does (`http://host[:port][/prefix]`): the
/// URL, or why it is refused.
///
/// # Errors
/// The reason, for a URL that is not plain `http://` with a host.
pub fn check_alertmanager_url(url: &str) -> Result<String, String> {
    convert::webhook_of("alertmanager", url).map_err(|e| e.message)
}

/// The key of the `key = value` or `key: value` line containing `offset`, for errors whose
/// parser gives a position but not a field.
pub(crate) fn key_on_line(text: &str, offset: usize) -> String {
    let start = text
        .get(..offset.min(text.len()))
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("");
    let key = line
        .split(['=', ':'])
        .next()
        .unwrap_or("")
        .trim()
        .trim_start_matches("- ")
        .trim_matches(|c| c == '"' || c == '\'');
    if key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        key.to_owned()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests;
