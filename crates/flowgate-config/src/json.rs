//! The TOML schema written as JSON (a `PUT /v1/rules` body): read section by section as a TOML
//! file is ([`crate::located`]); an error names its field (`rule[0].limit`), JSON having no
//! lines to show.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::located::{self, Declared, SECTIONS, Tree, field_of};
use crate::schema::FileDoc;

/// Reads a document of the schema given as a JSON object: what it declares, located (`file`
/// names the body in errors, e.g. `the JSON body`).
///
/// # Errors
/// [`ConfigError`] naming the field of the first fault.
pub(crate) fn read(file: &str, root: &Map<String, Value>) -> Result<Declared, ConfigError> {
    located::read(&JsonTree { file, root })
}

/// A JSON object read as a configuration document.
struct JsonTree<'v> {
    file: &'v str,
    root: &'v Map<String, Value>,
}

impl JsonTree<'_> {
    /// `value` deserialized as `T`, an error located at its field below `prefix`.
    fn deserialize<T: DeserializeOwned>(
        &self,
        prefix: Option<&str>,
        value: &Value,
    ) -> Result<T, ConfigError> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            let field = field_of(prefix, e.path());
            ConfigError::new(self.file, None, field, e.into_inner().to_string())
        })
    }
}

impl Tree for JsonTree<'_> {
    fn file(&self) -> &str {
        self.file
    }

    fn head(&self) -> Result<FileDoc, ConfigError> {
        let mut head = self.root.clone();
        for key in SECTIONS {
            head.remove(key);
        }
        self.deserialize(None, &Value::Object(head))
    }

    fn count(&self, key: &str) -> Result<usize, ConfigError> {
        match self.root.get(key) {
            None => Ok(0),
            Some(Value::Array(a)) => Ok(a.len()),
            Some(other) => self
                .deserialize::<Vec<serde::de::IgnoredAny>>(Some(key), other)
                .map(|v| v.len()),
        }
    }

    fn element<T: DeserializeOwned>(&self, key: &str, index: usize) -> Result<T, ConfigError> {
        let value = self.root.get(key).and_then(|v| v.get(index));
        self.deserialize(
            Some(&format!("{key}[{index}]")),
            value.unwrap_or(&Value::Null),
        )
    }

    fn line(&self, _key: &str, _index: usize, _path: Option<&str>) -> Option<u64> {
        None
    }

    fn root_line(&self, _key: &str) -> Option<u64> {
        None
    }
}
