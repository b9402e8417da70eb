//! The configuration's tests, one file per kind.

mod alerts;
mod breakers;
mod charges;
mod envoy;
mod queues;
mod rules;

use std::path::Path;

pub(crate) use flowgate_core::{
    Algorithm, Descriptor, FailurePolicy, Mode, Request, Rule, RuleSet,
};

pub(crate) use crate::*;

pub(crate) fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

pub(crate) fn find<'a>(set: &'a RuleSet, domain: &str, d: &str) -> Option<&'a str> {
    let d: Descriptor = d.parse().unwrap();
    set.find(domain, &d).map(|r| r.name.as_str())
}

/// Reads one TOML file's text.
pub(crate) fn toml_read(file: &str, text: &str) -> Result<crate::located::Declared, ConfigError> {
    crate::toml::read(file, text)
}
