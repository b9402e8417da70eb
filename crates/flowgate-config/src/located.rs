//! Reading a configuration document, section by section: the one way every array of tables of
//! a file (`[[rule]]`, `[[queue]]`, `[[alert]]`, `[[breaker]]`) is read, whatever its format. A
//! [`Tree`] is a parsed document (TOML with its spans, or a JSON body); a [`Section`] is one
//! array of tables and what its elements convert to; [`read`] reads each element of each
//! section, converts it, and locates every error at the file, line and field of its table.

use flowgate::breakers::BreakerDef;
use flowgate_core::Rule;
use flowgate_core::queue::QueueSpec;
use serde::de::DeserializeOwned;

use crate::alert::AlertSpec;
use crate::convert::alert::AlertFields;
use crate::convert::{At, FileContext, SchemaError, webhooks_of};
use crate::error::ConfigError;
use crate::schema::{AlertDoc, BreakerDoc, FileDoc, QueueDoc, RuleDoc};

/// A declaration and where it was made.
#[derive(Clone, Debug)]
pub struct Located<T> {
    /// The declaration.
    pub item: T,
    /// The file it came from.
    pub file: String,
    /// The line of its table.
    pub line: Option<u64>,
    /// The line of the key naming what it refers to (an alert's `rule`, `queue` or `breaker`),
    /// when it has one.
    pub target_line: Option<u64>,
    /// Its field path (`rule[1]`, `descriptors[0].descriptors[2]`).
    pub field: String,
}

/// A parsed configuration document, and what it can tell of where each part of it is.
pub(crate) trait Tree {
    /// The file, as errors name it.
    fn file(&self) -> &str;
    /// The document's top-level keys, its sections left out (read as empty).
    ///
    /// # Errors
    /// A key that is unknown or of the wrong type.
    fn head(&self) -> Result<FileDoc, ConfigError>;
    /// How many elements section `key` has (none when absent).
    ///
    /// # Errors
    /// A section that is not an array of tables.
    fn count(&self, key: &str) -> Result<usize, ConfigError>;
    /// Element `index` of section `key`, deserialized.
    ///
    /// # Errors
    /// The element does not deserialize as `T`: the error located at its field.
    fn element<T: DeserializeOwned>(&self, key: &str, index: usize) -> Result<T, ConfigError>;
    /// The line of `path` (`limit`, `schedule[0].days`) in element `index` of section `key`,
    /// or of the deepest part of it that exists (the element itself without a path).
    fn line(&self, key: &str, index: usize, path: Option<&str>) -> Option<u64>;
    /// The line of a top-level key.
    fn root_line(&self, key: &str) -> Option<u64>;
}

/// One array of tables of a configuration document: each element read as `Wire`, checked into
/// the document type, converted into `Item`.
pub(crate) trait Section: Sized {
    /// Its key (`rule`).
    const KEY: &'static str;
    /// An element as serde reads it.
    type Wire: DeserializeOwned;
    /// What an element converts to.
    type Item;
    /// The document of an element as read.
    ///
    /// # Errors
    /// [`SchemaError`] for an element whose keys do not make one.
    fn check(wire: Self::Wire) -> Result<Self, SchemaError>;
    /// What the document declares, with what it takes from its file.
    ///
    /// # Errors
    /// [`SchemaError`] naming the field at fault.
    fn convert(&self, file: &FileContext<'_>) -> Result<Self::Item, SchemaError>;
    /// The key naming what it refers to, if any (an alert's `rule`).
    fn target(&self) -> Option<&'static str> {
        None
    }
}

impl Section for RuleDoc {
    const KEY: &'static str = "rule";
    type Wire = RuleDoc;
    type Item = Rule;
    fn check(wire: RuleDoc) -> Result<Self, SchemaError> {
        Ok(wire)
    }
    fn convert(&self, file: &FileContext<'_>) -> Result<Rule, SchemaError> {
        self.to_rule(file.domain)
    }
}

impl Section for QueueDoc {
    const KEY: &'static str = "queue";
    type Wire = QueueDoc;
    type Item = QueueSpec;
    fn check(wire: QueueDoc) -> Result<Self, SchemaError> {
        Ok(wire)
    }
    fn convert(&self, file: &FileContext<'_>) -> Result<QueueSpec, SchemaError> {
        self.to_spec(file.domain)
    }
}

impl Section for AlertDoc {
    const KEY: &'static str = "alert";
    type Wire = AlertFields;
    type Item = AlertSpec;
    fn check(wire: AlertFields) -> Result<Self, SchemaError> {
        AlertDoc::try_from(wire)
    }
    fn convert(&self, file: &FileContext<'_>) -> Result<AlertSpec, SchemaError> {
        self.to_spec(file)
    }
    fn target(&self) -> Option<&'static str> {
        AlertDoc::target(self)
    }
}

impl Section for BreakerDoc {
    const KEY: &'static str = "breaker";
    type Wire = BreakerDoc;
    type Item = BreakerDef;
    fn check(wire: BreakerDoc) -> Result<Self, SchemaError> {
        Ok(wire)
    }
    fn convert(&self, file: &FileContext<'_>) -> Result<BreakerDef, SchemaError> {
        self.to_def(file.domain)
    }
}

/// What one document declares, each declaration located, and the document itself.
#[derive(Debug)]
pub(crate) struct Declared {
    /// The document as read.
    pub(crate) doc: FileDoc,
    /// Its rules.
    pub(crate) rules: Vec<Located<Rule>>,
    /// Its queues.
    pub(crate) queues: Vec<Located<QueueSpec>>,
    /// Its alerts.
    pub(crate) alerts: Vec<Located<AlertSpec>>,
    /// Its circuit breakers.
    pub(crate) breakers: Vec<Located<BreakerDef>>,
}

/// Reads a document: its top-level keys, then each section.
///
/// # Errors
/// [`ConfigError`] naming the file, line and field of the first fault.
pub(crate) fn read(tree: &impl Tree) -> Result<Declared, ConfigError> {
    let mut doc = tree.head()?;
    for (key, urls) in [
        ("alert_webhooks", &doc.alert_webhooks),
        ("alertmanagers", &doc.alertmanagers),
    ] {
        webhooks_of(key, urls)
            .map_err(|e| ConfigError::new(tree.file(), tree.root_line(key), e.field, e.message))?;
    }
    let (rule, rules, queue, queues, alert, alerts, breaker, breakers) = {
        let file = FileContext {
            domain: doc.domain.as_deref(),
            webhooks: &doc.alert_webhooks,
            alertmanagers: &doc.alertmanagers,
        };
        let (rule, rules) = section::<RuleDoc>(tree, &file)?;
        let (queue, queues) = section::<QueueDoc>(tree, &file)?;
        let (alert, alerts) = section::<AlertDoc>(tree, &file)?;
        let (breaker, breakers) = section::<BreakerDoc>(tree, &file)?;
        (rule, rules, queue, queues, alert, alerts, breaker, breakers)
    };
    doc.rule = rule;
    doc.queue = queue;
    doc.alert = alert;
    doc.breaker = breaker;
    Ok(Declared {
        doc,
        rules,
        queues,
        alerts,
        breakers,
    })
}

/// A section's documents and what they declare, located.
type SectionRead<S> = (Vec<S>, Vec<Located<<S as Section>::Item>>);

/// The documents of section `S` and what they declare, located.
fn section<S: Section>(
    tree: &impl Tree,
    file: &FileContext<'_>,
) -> Result<SectionRead<S>, ConfigError> {
    let n = tree.count(S::KEY)?;
    let (mut docs, mut items) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let located = |e: SchemaError| error(tree, S::KEY, i, e);
        let doc = S::check(tree.element(S::KEY, i)?).map_err(located)?;
        let item = doc.convert(file).map_err(located)?;
        items.push(Located {
            item,
            file: tree.file().to_owned(),
            line: tree.line(S::KEY, i, None),
            target_line: doc.target().and_then(|t| tree.line(S::KEY, i, Some(t))),
            field: format!("{}[{i}]", S::KEY),
        });
        docs.push(doc);
    }
    Ok((docs, items))
}

/// A conversion error of element `index` of section `key`, located.
fn error(tree: &impl Tree, key: &str, index: usize, e: SchemaError) -> ConfigError {
    let line = match &e.at {
        At::Here(path) => tree.line(key, index, Some(path)),
        At::FileDomain => tree.root_line("domain"),
    };
    let field = if e.field.is_empty() {
        format!("{key}[{index}]")
    } else {
        format!("{key}[{index}].{}", e.field)
    };
    ConfigError::new(tree.file(), line, field, e.message)
}

/// The sections of a document, by key.
pub(crate) const SECTIONS: [&str; 4] = [
    <RuleDoc as Section>::KEY,
    <QueueDoc as Section>::KEY,
    <AlertDoc as Section>::KEY,
    <BreakerDoc as Section>::KEY,
];

/// A serde error's path as a field, below `prefix` (`rule[0]`) when given.
pub(crate) fn field_of(prefix: Option<&str>, path: &serde_path_to_error::Path) -> String {
    let path = path.to_string();
    let path = if path == "." { String::new() } else { path };
    match (prefix, path.is_empty()) {
        (Some(p), true) => p.to_owned(),
        (Some(p), false) => format!("{p}.{path}"),
        (None, _) => path,
    }
}
