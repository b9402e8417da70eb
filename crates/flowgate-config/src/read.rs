//! Reading configuration: files and directories, texts by name, and the documents sent to the
//! admin API.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use flowgate_core::Rule;
use serde_json::{Map, Value};

use crate::config::{Config, Loaded};
use crate::error::ConfigError;
use crate::located::Located;
use crate::schema::FileDoc;
use crate::{envoy, json, toml};

/// The largest configuration file read (16 MiB).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// A configuration format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Flowgate's TOML.
    Toml,
    /// envoyproxy/ratelimit's YAML.
    EnvoyYaml,
}

impl Format {
    /// The format of a file by its extension.
    pub fn of_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "toml" => Some(Format::Toml),
            "yaml" | "yml" => Some(Format::EnvoyYaml),
            _ => None,
        }
    }
}

const UNKNOWN_FORMAT: &str = "unknown configuration format: the file name must end in .toml (Flowgate) or .yaml/.yml (envoyproxy/ratelimit)";

/// Loads a file, or every configuration file of a directory, and validates it as a whole.
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
    read(path)?.validate()
}

/// The configuration files at `path`: itself, or the configuration files of the directory,
/// sorted.
///
/// # Errors
/// [`ConfigError`] when the path cannot be read or a file has an unknown extension.
pub fn files(path: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| ConfigError::new(&shown, None, "", format!("cannot read: {e}")))?;
    if meta.is_file() {
        if Format::of_path(path).is_none() {
            return Err(ConfigError::new(&shown, None, "", UNKNOWN_FORMAT));
        }
        return Ok(vec![path.to_owned()]);
    }
    let mut out = Vec::new();
    let dir = std::fs::read_dir(path)
        .map_err(|e| ConfigError::new(&shown, None, "", format!("cannot read directory: {e}")))?;
    for entry in dir {
        let entry = entry.map_err(|e| {
            ConfigError::new(&shown, None, "", format!("cannot read directory: {e}"))
        })?;
        let p = entry.path();
        let hidden = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_none_or(|n| n.starts_with('.'));
        // Follow symbolic links (Kubernetes ConfigMaps are links into `..data`).
        if hidden
            || Format::of_path(&p).is_none()
            || !std::fs::metadata(&p).is_ok_and(|m| m.is_file())
        {
            continue;
        }
        out.push(p);
    }
    out.sort();
    Ok(out)
}

/// Reads the configuration at `path` (file or directory) without validating it as a whole.
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn read(path: &Path) -> Result<Config, ConfigError> {
    let files = files(path)?;
    let mut texts = Vec::with_capacity(files.len());
    for f in &files {
        let shown = f.display().to_string();
        let len = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        if len > MAX_FILE_BYTES {
            return Err(ConfigError::new(
                &shown,
                None,
                "",
                format!("the file is {len} bytes, more than the maximum of {MAX_FILE_BYTES}"),
            ));
        }
        let text = std::fs::read_to_string(f)
            .map_err(|e| ConfigError::new(&shown, None, "", format!("cannot read: {e}")))?;
        texts.push((shown, text));
    }
    let mut config = read_texts(&texts)?;
    config.files = files;
    Ok(config)
}

/// Reads configuration files given as `(name, text)` pairs, their format by the name's
/// extension (`.toml`: Flowgate, `.yaml`/`.yml`: envoyproxy/ratelimit), without validating them
/// as a whole. `files` of the result holds the names.
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn read_texts(texts: &[(String, String)]) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    let mut domains: HashMap<String, String> = HashMap::new();
    for (name, text) in texts {
        match Format::of_path(Path::new(name)) {
            Some(Format::EnvoyYaml) => {
                let ((domain, line), rules) = envoy::parse(name, text)?;
                if let Some(prev) = domains.insert(domain.clone(), name.clone()) {
                    return Err(ConfigError::new(
                        name,
                        Some(line),
                        "domain",
                        format!("duplicate domain `{domain}`: already configured in {prev}"),
                    ));
                }
                config.rules.extend(rules);
            }
            Some(Format::Toml) => config.extend(toml::read(name, text)?),
            None => return Err(ConfigError::new(name, None, "", UNKNOWN_FORMAT)),
        }
        config.files.push(PathBuf::from(name));
    }
    Ok(config)
}

/// [`read_texts`], then validates the configuration as a whole.
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn load_texts(texts: &[(String, String)]) -> Result<Loaded, ConfigError> {
    read_texts(texts)?.validate()
}

/// Parses one file's text (rules only: queues and alerts are declared in the configuration
/// files, and a `[[queue]]` or `[[alert]]` here is refused; so is a `[[breaker]]`, which
/// [`parse_config`] reads).
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn parse(file: &str, format: Format, text: &str) -> Result<Vec<Located<Rule>>, ConfigError> {
    let config = parse_config(file, format, text)?;
    if let Some(b) = config.breakers.first() {
        return Err(ConfigError::new(
            file,
            b.line,
            &b.field,
            "circuit breakers are read with the rules by parse_config",
        ));
    }
    Ok(config.rules)
}

/// Parses one file's text sent to a node that follows its files: its rules and circuit
/// breakers ([`Config::rules_and_breakers`]).
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn parse_config(file: &str, format: Format, text: &str) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    match format {
        Format::Toml => config.extend(toml::read(file, text)?),
        Format::EnvoyYaml => config.rules = envoy::parse(file, text)?.1,
    }
    config.rules_and_breakers()
}

/// Reads a document of the schema given as a JSON object (a `PUT /v1/rules` body, less what
/// `GET` adds and `PUT` ignores): the document as read, and what it declares, located by field
/// (`file` names the body in errors, e.g. `the JSON body`). Not validated as a whole.
///
/// # Errors
/// [`ConfigError`] naming the field at fault.
pub fn parse_json(file: &str, body: &Map<String, Value>) -> Result<(FileDoc, Config), ConfigError> {
    let declared = json::read(file, body)?;
    let doc = declared.doc.clone();
    let mut config = Config::default();
    config.extend(declared);
    config.files.push(PathBuf::from(file));
    Ok((doc, config))
}

impl Config {
    /// The rules and circuit breakers of a document sent to a node that follows its files:
    /// queues and alerts are declared in those files, and one here is refused.
    ///
    /// # Errors
    /// [`ConfigError`] at the first queue or alert.
    pub fn rules_and_breakers(self) -> Result<Config, ConfigError> {
        if let Some(q) = self.queues.first() {
            return Err(ConfigError::new(
                &q.file,
                q.line,
                &q.field,
                "queues are declared in the configuration files, not through the admin API",
            ));
        }
        if let Some(a) = self.alerts.first() {
            return Err(ConfigError::new(
                &a.file,
                a.line,
                &a.field,
                "this node follows its configuration files: alerts are declared there (or, with --rules-source redis, in the shared rules)",
            ));
        }
        Ok(self)
    }
}
