//! Rules from files: Flowgate's TOML format and envoyproxy/ratelimit's YAML format, one file or
//! a directory of them.
//!
//! A directory is read non-recursively; files ending in `.toml` are Flowgate TOML, files ending
//! in `.yaml` or `.yml` are envoyproxy/ratelimit YAML (one domain per file, as there); hidden
//! files (starting with `.`, such as Kubernetes' `..data`) are skipped. Every error names the
//! file, the line and the field.

pub mod alert;
mod convert;
mod envoy;
mod error;
pub mod schema;
mod toml;
mod urls;

pub use self::urls::{REDACTED, redact as redact_url};

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use flowgate_core::queue::{QueueSet, QueueSpec};
use flowgate_core::{Rule, RuleSet, RuleSetError};

use flowgate::breakers::{BreakerDef, BreakerSet};

use crate::alert::{AlertKind, AlertSet, AlertSpec};

pub use self::envoy::ENVOY_UNITS;
pub use self::error::ConfigError;

/// Checks an Alertmanager's URL as the configuration does (`http://host[:port][/prefix]`): the
/// URL, or why it is refused.
///
/// # Errors
/// The reason, for a URL that is not plain `http://` with a host.
pub fn check_alertmanager_url(url: &str) -> Result<String, String> {
    convert::webhook_of("alertmanager", url).map_err(|e| e.message)
}

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

/// A rule and where it was defined.
#[derive(Clone, Debug)]
pub struct LocatedRule {
    /// The rule.
    pub rule: Rule,
    /// The file it came from.
    pub file: String,
    /// The line of its definition.
    pub line: Option<u64>,
    /// The field path of its definition (`rule[1]`, `descriptors[0].descriptors[2]`).
    pub field: String,
}

/// A queue and where it was declared.
#[derive(Clone, Debug)]
pub struct LocatedQueue {
    /// The queue.
    pub spec: QueueSpec,
    /// The file it came from.
    pub file: String,
    /// The line of its declaration.
    pub line: Option<u64>,
    /// The field path of its declaration (`queue[0]`).
    pub field: String,
}

/// An alert and where it was declared.
#[derive(Clone, Debug)]
pub struct LocatedAlert {
    /// The alert.
    pub spec: AlertSpec,
    /// The file it came from.
    pub file: String,
    /// The line of its declaration.
    pub line: Option<u64>,
    /// The line of its `rule` or `queue` key.
    pub target_line: Option<u64>,
    /// The field path of its declaration (`alert[0]`).
    pub field: String,
}

/// A circuit breaker and where it was declared.
#[derive(Clone, Debug)]
pub struct LocatedBreaker {
    /// The breaker.
    pub def: BreakerDef,
    /// The file it came from.
    pub file: String,
    /// The line of its declaration.
    pub line: Option<u64>,
    /// The field path of its declaration (`breaker[0]`).
    pub field: String,
}

/// Rules, queues, alerts and circuit breakers loaded from one or more files.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The rules, in file order.
    pub rules: Vec<LocatedRule>,
    /// The queues, in file order.
    pub queues: Vec<LocatedQueue>,
    /// The alerts, in file order.
    pub alerts: Vec<LocatedAlert>,
    /// The circuit breakers, in file order.
    pub breakers: Vec<LocatedBreaker>,
    /// The files read.
    pub files: Vec<PathBuf>,
}

impl Config {
    /// Validates the rules as a whole (unique names and patterns per domain) and builds the
    /// matcher.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and rule in conflict.
    pub fn rule_set(&self) -> Result<RuleSet, ConfigError> {
        let rules: Vec<Rule> = self.rules.iter().map(|r| r.rule.clone()).collect();
        RuleSet::new(rules).map_err(|e| self.locate(&e))
    }

    /// Validates the rules, the queues and the alerts as a whole.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and rule, queue or alert in conflict.
    pub fn validate(self) -> Result<Loaded, ConfigError> {
        let rules = self.rule_set()?;
        let queues = self.queue_set()?;
        let alerts = self.alert_set(&rules, &queues)?;
        let breakers = self.breaker_set()?;
        Ok(Loaded {
            config: self,
            rules,
            queues,
            alerts,
            breakers,
        })
    }

    /// Validates the circuit breakers as a whole (unique names and patterns per domain).
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and breaker in conflict.
    pub fn breaker_set(&self) -> Result<BreakerSet, ConfigError> {
        let defs = self.breakers.iter().map(|b| b.def.clone()).collect();
        BreakerSet::new(defs).map_err(|e| {
            let (domain, name, nth) = match &e {
                RuleSetError::DuplicatePattern { domain, second, .. } => (domain, second, 0),
                RuleSetError::DuplicateName { domain, name } => (domain, name, 1),
                RuleSetError::EmptyPattern { domain, name } => (domain, name, 0),
                RuleSetError::EmptyName { name } => (name, name, 0),
                _ => return ConfigError::new("", None, "", e.to_string()),
            };
            let at = self
                .breakers
                .iter()
                .filter(|b| {
                    &b.def.name == name
                        && (matches!(e, RuleSetError::EmptyName { .. }) || &b.def.domain == domain)
                })
                .nth(nth);
            let message = e
                .to_string()
                .replacen("rules `", "breakers `", 1)
                .replacen("two rules", "two breakers", 1)
                .replacen("rule `", "breaker `", 1);
            match at {
                Some(b) => ConfigError::new(&b.file, b.line, &b.field, message),
                None => ConfigError::new("", None, "", message),
            }
        })
    }

    /// Validates the alerts against `rules` and `queues`: unique names, and each rule or queue
    /// named declared in its domain.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and field of the alert at fault.
    pub fn alert_set(&self, rules: &RuleSet, queues: &QueueSet) -> Result<AlertSet, ConfigError> {
        let mut seen: HashMap<&str, &LocatedAlert> = HashMap::new();
        for a in &self.alerts {
            if let Some(first) = seen.insert(&a.spec.name, a) {
                return Err(ConfigError::new(
                    &a.file,
                    a.line,
                    format!("{}.name", a.field),
                    format!(
                        "duplicate alert name `{}`: already declared in {}{}",
                        a.spec.name,
                        first.file,
                        first.line.map(|l| format!(":{l}")).unwrap_or_default()
                    ),
                ));
            }
            let missing = match &a.spec.kind {
                AlertKind::Rule { domain, rule, .. }
                    if !rules
                        .rules()
                        .iter()
                        .any(|r| &r.domain == domain && &r.name == rule) =>
                {
                    Some(("rule", format!("no rule `{rule}` in domain `{domain}`")))
                }
                AlertKind::QueueAge { domain, queue, .. }
                | AlertKind::QueueDepth { domain, queue, .. }
                    if !queues
                        .specs()
                        .iter()
                        .any(|q| &q.domain == domain && &q.name == queue) =>
                {
                    Some(("queue", format!("no queue `{queue}` in domain `{domain}`")))
                }
                AlertKind::Breaker { domain, breaker }
                    if !self
                        .breakers
                        .iter()
                        .any(|b| &b.def.domain == domain && &b.def.name == breaker) =>
                {
                    Some((
                        "breaker",
                        format!("no breaker `{breaker}` in domain `{domain}`"),
                    ))
                }
                _ => None,
            };
            if let Some((key, message)) = missing {
                return Err(ConfigError::new(
                    &a.file,
                    a.target_line.or(a.line),
                    format!("{}.{key}", a.field),
                    message,
                ));
            }
        }
        Ok(AlertSet::new(
            self.alerts.iter().map(|a| a.spec.clone()).collect(),
        ))
    }

    /// Validates the queues as a whole (unique names and patterns per domain).
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and queue in conflict.
    pub fn queue_set(&self) -> Result<QueueSet, ConfigError> {
        let specs = self.queues.iter().map(|q| q.spec.clone()).collect();
        QueueSet::new(specs).map_err(|e| {
            let (domain, name) = match &e {
                RuleSetError::DuplicatePattern { domain, second, .. } => (domain, second),
                RuleSetError::DuplicateName { domain, name } => (domain, name),
                RuleSetError::EmptyPattern { domain, name } => (domain, name),
                RuleSetError::EmptyName { name } => (name, name),
                _ => return ConfigError::new("", None, "", e.to_string()),
            };
            let nth = usize::from(matches!(e, RuleSetError::DuplicateName { .. }));
            let at = self
                .queues
                .iter()
                .filter(|q| &q.spec.domain == domain && &q.spec.name == name)
                .nth(nth);
            let message = e
                .to_string()
                .replacen("rule", "queue", 1)
                .replace("rules `", "queues `");
            match at {
                Some(q) => ConfigError::new(&q.file, q.line, &q.field, message),
                None => ConfigError::new("", None, "", message),
            }
        })
    }

    fn locate(&self, e: &RuleSetError) -> ConfigError {
        let find = |domain: &str, name: &str, nth: usize| {
            self.rules
                .iter()
                .filter(|r| r.rule.domain == domain && r.rule.name == name)
                .nth(nth)
        };
        let at = match e {
            RuleSetError::DuplicatePattern { domain, second, .. } => find(domain, second, 0),
            RuleSetError::DuplicateName { domain, name } => find(domain, name, 1),
            RuleSetError::EmptyPattern { domain, name } => find(domain, name, 0),
            RuleSetError::EmptyName { name } => self.rules.iter().find(|r| &r.rule.name == name),
            _ => None,
        };
        match at {
            Some(r) => ConfigError::new(&r.file, r.line, &r.field, e.to_string()),
            None => ConfigError::new(
                self.files
                    .first()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                None,
                "",
                e.to_string(),
            ),
        }
    }
}

/// Parses one file's text (rules only: queues and alerts are declared in the configuration
/// files, and a `[[queue]]` or `[[alert]]` here is refused; so is a `[[breaker]]`, which
/// [`parse_config`] reads).
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn parse(file: &str, format: Format, text: &str) -> Result<Vec<LocatedRule>, ConfigError> {
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
/// breakers (queues and alerts are declared in the configuration files, and a `[[queue]]` or
/// `[[alert]]` here is refused).
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn parse_config(file: &str, format: Format, text: &str) -> Result<Config, ConfigError> {
    match format {
        Format::Toml => {
            let toml::Parsed {
                rules,
                queues,
                alerts,
                breakers,
            } = toml::parse(file, text)?;
            if let Some(q) = queues.first() {
                return Err(ConfigError::new(
                    file,
                    q.line,
                    &q.field,
                    "queues are declared in the configuration files, not through the admin API",
                ));
            }
            if let Some(a) = alerts.first() {
                return Err(ConfigError::new(
                    file,
                    a.line,
                    &a.field,
                    "this node follows its configuration files: alerts are declared there (or, with --rules-source redis, in the shared rules)",
                ));
            }
            Ok(Config {
                rules,
                breakers,
                ..Config::default()
            })
        }
        Format::EnvoyYaml => envoy::parse(file, text).map(|(_, rules)| Config {
            rules,
            ..Config::default()
        }),
    }
}

/// A loaded configuration, validated: its rules, its queues, its alerts and its breakers.
pub struct Loaded {
    /// What was read.
    pub config: Config,
    /// The rules.
    pub rules: RuleSet,
    /// The queues.
    pub queues: QueueSet,
    /// The alerts.
    pub alerts: AlertSet,
    /// The circuit breakers.
    pub breakers: BreakerSet,
}

/// Loads a file, or every configuration file of a directory, and validates the rules and queues.
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
    read(path)?.validate()
}

/// The configuration files at `path`: itself, or the configuration files of the directory, sorted.
///
/// # Errors
/// [`ConfigError`] when the path cannot be read or a file has an unknown extension.
pub fn files(path: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| ConfigError::new(&shown, None, "", format!("cannot read: {e}")))?;
    if meta.is_file() {
        if Format::of_path(path).is_none() {
            return Err(ConfigError::new(
                &shown,
                None,
                "",
                "unknown configuration format: the file name must end in .toml (Flowgate) or .yaml/.yml (envoyproxy/ratelimit)",
            ));
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
            Some(Format::Toml) => {
                let parsed = toml::parse(name, text)?;
                config.rules.extend(parsed.rules);
                config.queues.extend(parsed.queues);
                config.alerts.extend(parsed.alerts);
                config.breakers.extend(parsed.breakers);
            }
            None => {
                return Err(ConfigError::new(
                    name,
                    None,
                    "",
                    "unknown configuration format: the file name must end in .toml (Flowgate) or .yaml/.yml (envoyproxy/ratelimit)",
                ));
            }
        }
        config.files.push(PathBuf::from(name));
    }
    Ok(config)
}

/// [`read_texts`], then validates the rules and queues as a whole.
///
/// # Errors
/// [`ConfigError`] naming the file, line and field at fault.
pub fn load_texts(texts: &[(String, String)]) -> Result<Loaded, ConfigError> {
    read_texts(texts)?.validate()
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
