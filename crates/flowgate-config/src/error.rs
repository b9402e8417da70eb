//! Configuration errors that name the file, the line and the field at fault.

use std::fmt;

/// An invalid configuration: which file, which line (when known), which field, and what is wrong.
///
/// Displayed as ``path:line: field `rule[2].limit`: `x/s` is not a quota ...``.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or `<api>` for rules sent to the admin API).
    pub file: String,
    /// The 1-based line, when known.
    pub line: Option<u64>,
    /// The field at fault, as a path (`rule[2].limit`, `descriptors[0].rate_limit.unit`); empty
    /// when the whole file is at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error at `file:line` in `field`.
    pub fn new(
        file: impl Into<String>,
        line: Option<u64>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            file: file.into(),
            line,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": field `{}`", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// The 1-based line of a byte offset in `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> u64 {
    let end = offset.min(text.len());
    let upto = text.get(..end).unwrap_or(text);
    upto.bytes().filter(|&b| b == b'\n').count() as u64 + 1
}
