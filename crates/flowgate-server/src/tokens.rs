//! Admin tokens, each with a name: the name is the author of a rule change in the rules' history.
//!
//! Tokens are given as `name:token` pairs, one per line in a file (`--admin-tokens-file`; blank
//! lines and lines starting with `#` are skipped) or comma-separated in `FLOWGATE_ADMIN_TOKENS`;
//! `--admin-token` alone is the token named `admin`. A token is kept as its SHA-256 digest and a
//! presented token is compared with every digest in constant time, so neither the comparison's
//! duration nor the token's length tells an attacker how close a guess came.

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// The admin API's tokens; the API is off when there are none.
#[derive(Clone, Default)]
pub struct AdminTokens {
    entries: Vec<(String, [u8; 32])>,
}

impl std::fmt::Debug for AdminTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.names().collect();
        f.debug_struct("AdminTokens")
            .field("names", &names)
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl AdminTokens {
    /// No tokens: the admin API is off.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the token `token` named `name`.
    ///
    /// # Errors
    /// When the name or the token is empty, the name is not made of letters, digits, `-`, `_`,
    /// `.` and `@`, or the name is already used.
    pub fn add(&mut self, name: &str, token: &str) -> Result<(), String> {
        let name = name.trim();
        let token = token.trim();
        if name.is_empty() {
            return Err("a token needs a name: write `name:token`".into());
        }
        if !name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
        {
            return Err(format!(
                "token name `{name}`: use letters, digits, `-`, `_`, `.` and `@`"
            ));
        }
        if token.is_empty() {
            return Err(format!("the token named `{name}` is empty"));
        }
        if self.entries.iter().any(|(n, _)| n == name) {
            return Err(format!("the token name `{name}` is used twice"));
        }
        self.entries.push((name.to_owned(), digest(token)));
        Ok(())
    }

    /// Reads `name:token` lines (a tokens file); `source` names the file in errors.
    ///
    /// # Errors
    /// `source:line: what is wrong`.
    pub fn add_lines(&mut self, source: &str, text: &str) -> Result<(), String> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, token)) = line.split_once(':') else {
                return Err(format!("{source}:{}: expected `name:token`", i + 1));
            };
            self.add(name, token)
                .map_err(|e| format!("{source}:{}: {e}", i + 1))?;
        }
        Ok(())
    }

    /// Reads comma-separated `name:token` pairs (`FLOWGATE_ADMIN_TOKENS`).
    ///
    /// # Errors
    /// `FLOWGATE_ADMIN_TOKENS: what is wrong`.
    pub fn add_list(&mut self, list: &str) -> Result<(), String> {
        for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, token)) = pair.split_once(':') else {
                return Err("FLOWGATE_ADMIN_TOKENS: expected `name:token,name:token`".into());
            };
            self.add(name, token)
                .map_err(|e| format!("FLOWGATE_ADMIN_TOKENS: {e}"))?;
        }
        Ok(())
    }

    /// Whether there is no token (the admin API is off).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The tokens' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// The name of the token `given`, if it is one of them. Every token is compared, each in
    /// constant time.
    pub fn authenticate(&self, given: &str) -> Option<&str> {
        let d = digest(given);
        let mut found = None;
        for (name, known) in &self.entries {
            let same: bool = d.ct_eq(known).into();
            if same && found.is_none() {
                found = Some(name.as_str());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_token_presented() {
        let mut t = AdminTokens::new();
        t.add_lines("tokens", "# ops\nalice:a-secret\n\nci : c-secret \n")
            .unwrap();
        t.add_list("bob:b-secret").unwrap();
        assert_eq!(t.authenticate("a-secret"), Some("alice"));
        assert_eq!(t.authenticate("c-secret"), Some("ci"));
        assert_eq!(t.authenticate("b-secret"), Some("bob"));
        assert_eq!(t.authenticate("a-secre"), None);
        assert_eq!(t.authenticate(""), None);
        assert!(!t.is_empty());
    }

    #[test]
    fn bad_lines_are_located() {
        let mut t = AdminTokens::new();
        assert_eq!(
            t.add_lines("f", "alice:x\nno-colon\n").unwrap_err(),
            "f:2: expected `name:token`"
        );
        assert!(
            t.add_lines("f", "alice:y")
                .unwrap_err()
                .contains("used twice")
        );
        assert!(t.add_lines("f", ":y").unwrap_err().contains("needs a name"));
        assert!(t.add_lines("f", "bob:").unwrap_err().contains("is empty"));
        assert!(t.add_list("carol").is_err());
    }
}
