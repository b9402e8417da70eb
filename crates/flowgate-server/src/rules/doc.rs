//! The rules document: the configuration files of a rule set, by name, as one value that can be
//! validated, stored as a version, compared and restored.

use std::path::Path;

use serde::{Deserialize, Serialize};

use flowgate_config::{ConfigError, Loaded, MAX_FILE_BYTES};

/// One configuration file: its name (whose extension gives the format: `.toml` Flowgate,
/// `.yaml`/`.yml` envoyproxy/ratelimit) and its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DocFile {
    /// The file's name, e.g. `pay.toml`.
    pub name: String,
    /// Its text.
    pub text: String,
}

/// A rule set as files (rules and queues).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RulesDoc {
    /// The files, in the order they are read.
    pub files: Vec<DocFile>,
}

impl RulesDoc {
    /// One file.
    pub fn single(name: &str, text: &str) -> Self {
        Self {
            files: vec![DocFile {
                name: name.to_owned(),
                text: text.to_owned(),
            }],
        }
    }

    /// The configuration at `path` (a file, or the configuration files of a directory), each
    /// file named by its file name.
    ///
    /// # Errors
    /// [`ConfigError`] when a file cannot be read.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let mut files = Vec::new();
        for f in flowgate_config::files(path)? {
            let shown = f.display().to_string();
            let text = std::fs::read_to_string(&f)
                .map_err(|e| ConfigError::new(&shown, None, "", format!("cannot read: {e}")))?;
            let name = f
                .file_name()
                .and_then(|n| n.to_str())
                .map_or(shown, str::to_owned);
            files.push(DocFile { name, text });
        }
        Ok(Self { files })
    }

    /// Validates the document: every file parsed, the rules and queues checked as a whole.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, line and field at fault.
    pub fn load(&self) -> Result<Loaded, ConfigError> {
        let total: usize = self.files.iter().map(|f| f.text.len()).sum();
        if total as u64 > MAX_FILE_BYTES {
            return Err(ConfigError::new(
                "",
                None,
                "",
                format!("the rules are {total} bytes, more than the maximum of {MAX_FILE_BYTES}"),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for f in &self.files {
            if f.name.is_empty() || f.name.contains(['/', '\\']) {
                return Err(ConfigError::new(
                    &f.name,
                    None,
                    "name",
                    "a file name must be a plain name such as `pay.toml`",
                ));
            }
            if !seen.insert(f.name.as_str()) {
                return Err(ConfigError::new(
                    &f.name,
                    None,
                    "name",
                    format!("the file `{}` is given twice", f.name),
                ));
            }
        }
        let texts: Vec<(String, String)> = self
            .files
            .iter()
            .map(|f| (f.name.clone(), f.text.clone()))
            .collect();
        flowgate_config::load_texts(&texts)
    }

    /// The change from `old` to `self`: a unified diff per file that differs (a file added or
    /// removed shows whole), and the counts of lines added and removed.
    pub fn diff(&self, old: &RulesDoc) -> Diff {
        let mut text = String::new();
        let (mut added, mut removed) = (0, 0);
        let find = |doc: &RulesDoc, name: &str| {
            doc.files
                .iter()
                .find(|f| f.name == name)
                .map(|f| f.text.clone())
        };
        let mut names: Vec<&str> = old.files.iter().map(|f| f.name.as_str()).collect();
        for f in &self.files {
            if !names.contains(&f.name.as_str()) {
                names.push(&f.name);
            }
        }
        for name in names {
            let before = find(old, name);
            let after = find(self, name);
            if before == after {
                continue;
            }
            let (a, b) = (
                before.clone().unwrap_or_default(),
                after.clone().unwrap_or_default(),
            );
            let d = similar::TextDiff::from_lines(&a, &b);
            for change in d.iter_all_changes() {
                match change.tag() {
                    similar::ChangeTag::Insert => added += 1,
                    similar::ChangeTag::Delete => removed += 1,
                    similar::ChangeTag::Equal => {}
                }
            }
            let old_name = if before.is_some() {
                format!("a/{name}")
            } else {
                "/dev/null".to_owned()
            };
            let new_name = if after.is_some() {
                format!("b/{name}")
            } else {
                "/dev/null".to_owned()
            };
            text.push_str(
                &d.unified_diff()
                    .context_radius(3)
                    .header(&old_name, &new_name)
                    .to_string(),
            );
        }
        Diff {
            text,
            added,
            removed,
        }
    }
}

/// What changed between two documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diff {
    /// A unified diff (`--- a/pay.toml`, `+++ b/pay.toml`, hunks).
    pub text: String,
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
}

impl Diff {
    /// `+3 -1 lines`.
    pub fn summary(&self) -> String {
        format!("+{} -{} lines", self.added, self.removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_shows_changed_added_and_removed_files() {
        let old = RulesDoc {
            files: vec![
                DocFile {
                    name: "a.toml".into(),
                    text: "x = 1\ny = 2\n".into(),
                },
                DocFile {
                    name: "gone.toml".into(),
                    text: "z = 3\n".into(),
                },
            ],
        };
        let new = RulesDoc {
            files: vec![
                DocFile {
                    name: "a.toml".into(),
                    text: "x = 1\ny = 5\n".into(),
                },
                DocFile {
                    name: "new.yaml".into(),
                    text: "domain: d\n".into(),
                },
            ],
        };
        let d = new.diff(&old);
        assert_eq!((d.added, d.removed), (2, 2), "{}", d.text);
        assert!(
            d.text.contains("--- a/a.toml\n+++ b/a.toml\n"),
            "{}",
            d.text
        );
        assert!(d.text.contains("-y = 2\n+y = 5\n"), "{}", d.text);
        assert!(
            d.text.contains("--- a/gone.toml\n+++ /dev/null\n"),
            "{}",
            d.text
        );
        assert!(
            d.text.contains("--- /dev/null\n+++ b/new.yaml\n"),
            "{}",
            d.text
        );
        assert_eq!(new.diff(&new).text, "");
    }

    #[test]
    fn invalid_documents_are_located() {
        let doc = RulesDoc::single(
            "pay.toml",
            "[[rule]]\ndomain = \"pay\"\nname = \"r\"\nmatch = [\"k\"]\nlimit = \"five per second\"\n",
        );
        let e = doc.load().err().expect("invalid");
        assert_eq!(e.file, "pay.toml");
        assert_eq!(e.line, Some(5));
        let twice = RulesDoc {
            files: vec![doc.files[0].clone(), doc.files[0].clone()],
        };
        assert!(
            twice
                .load()
                .err()
                .expect("invalid")
                .to_string()
                .contains("given twice")
        );
        assert!(RulesDoc::single("../x.toml", "").load().is_err());
        assert!(RulesDoc::single("x.txt", "").load().is_err());
    }
}
