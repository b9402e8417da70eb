//! The credentials a server knows: each a name, its scopes and its secret — a bearer token (kept
//! as its SHA-256 digest) or a client certificate's name (mutual TLS).
//!
//! A credentials file holds one `name:scopes:secret` per line (blank lines and lines starting
//! with `#` are skipped):
//!
//! ```text
//! # name        scopes        secret
//! ops:admin:sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//! refunds:worker:Qm9vdHN0cmFwLXRva2VuLWZvci1yZWZ1bmRzLXdvcmtlcg
//! envoy:decide:subject:spiffe://cluster.local/ns/edge/sa/envoy
//! ```
//!
//! - `sha256:<64 hex digits>`: the digest of the token (what `flowgate tokens` prints), so the
//!   file holds no usable secret;
//! - `subject:<name>`: a verified client certificate whose subject's Common Name, or one of whose
//!   DNS or URI subject alternative names, is `<name>`;
//! - anything else: the token itself, at least [`MIN_TOKEN_LEN`] printable characters.
//!
//! A presented token is compared with every digest in constant time, so neither the comparison's
//! duration nor the token's length tells an attacker how close a guess came.

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::scope::{Scope, Scopes};

/// The fewest characters of a token: 32 (`flowgate tokens` makes 43, 256 random bits).
pub const MIN_TOKEN_LEN: usize = 32;

/// What proves a credential.
#[derive(Clone)]
enum Secret {
    /// A bearer token's SHA-256 digest.
    Digest([u8; 32]),
    /// A client certificate's name.
    Subject(String),
}

#[derive(Clone)]
struct Entry {
    name: String,
    scopes: Scopes,
    secret: Secret,
}

/// A server's credentials.
#[derive(Clone, Default)]
pub struct Credentials {
    entries: Vec<Entry>,
    /// Every scope some credential names: those routes need a credential.
    named: Scopes,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{}:{}", e.name, e.scopes))
            .collect();
        f.debug_struct("Credentials")
            .field("names", &names)
            .finish()
    }
}

/// The SHA-256 digest of a token.
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The digest's line form: `sha256:` and 64 lowercase hex digits.
pub fn digest_hex(token: &str) -> String {
    let hex: String = digest(token).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A new token: 32 bytes from the operating system's random source (256 bits), in URL-safe
/// base64 without padding (43 characters).
///
/// # Errors
/// When the random source fails.
pub fn new_token() -> Result<String, String> {
    use base64::Engine as _;
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("the random source failed: {e}"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The digest of `hex` (64 hex digits).
fn parse_digest(hex: &str) -> Result<[u8; 32], String> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("`sha256:` takes the token's digest: 64 hex digits".into());
    }
    let mut out = [0_u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Checks a token's form: long enough, printable, no white space.
///
/// # Errors
/// What is wrong, never the token itself.
pub fn check_token(token: &str) -> Result<(), String> {
    if token.is_empty() {
        return Err("the token is empty".into());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a token is printable ASCII without spaces".into());
    }
    let n = token.chars().count();
    if n < MIN_TOKEN_LEN {
        return Err(format!(
            "the token is {n} characters long; a token needs at least {MIN_TOKEN_LEN} (make one with `flowgate tokens`)"
        ));
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a credential needs a name: write `name:scopes:secret`".into());
    }
    if !name
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
    {
        return Err(format!(
            "credential name `{name}`: use letters, digits, `-`, `_`, `.` and `@`"
        ));
    }
    Ok(())
}

impl Credentials {
    /// No credential: the admin API is off and every other route is open.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, name: &str, scopes: Scopes, secret: Secret) -> Result<(), String> {
        let name = name.trim();
        check_name(name)?;
        if scopes.is_empty() {
            return Err(format!("the credential `{name}` has no scope"));
        }
        if self.entries.iter().any(|e| e.name == name) {
            return Err(format!("the credential name `{name}` is used twice"));
        }
        if let Secret::Digest(d) = &secret
            && let Some(e) = self
                .entries
                .iter()
                .find(|e| matches!(&e.secret, Secret::Digest(k) if k == d))
        {
            return Err(format!(
                "the credentials `{}` and `{name}` have the same token",
                e.name
            ));
        }
        self.named = self.named.union(scopes);
        self.entries.push(Entry {
            name: name.to_owned(),
            scopes,
            secret,
        });
        Ok(())
    }

    /// Adds the token `token` named `name`, granting `scopes`.
    ///
    /// # Errors
    /// A bad name, a name used twice, a token used twice, or a token too short or not printable.
    pub fn add_token(
        &mut self,
        name: &str,
        scopes: impl Into<Scopes>,
        token: &str,
    ) -> Result<(), String> {
        let token = token.trim();
        check_token(token).map_err(|e| format!("`{}`: {e}", name.trim()))?;
        self.push(name, scopes.into(), Secret::Digest(digest(token)))
    }

    /// Adds the client certificate name `subject` as the credential `name`, granting `scopes`.
    ///
    /// # Errors
    /// A bad or repeated name, or an empty subject.
    pub fn add_subject(
        &mut self,
        name: &str,
        scopes: impl Into<Scopes>,
        subject: &str,
    ) -> Result<(), String> {
        let subject = subject.trim();
        if subject.is_empty() {
            return Err(format!("`{}`: `subject:` needs a name", name.trim()));
        }
        self.push(name, scopes.into(), Secret::Subject(subject.to_owned()))
    }

    /// Adds one `name:scopes:secret` line.
    ///
    /// # Errors
    /// What is wrong with it, never the secret.
    pub fn add_line(&mut self, line: &str) -> Result<(), String> {
        let mut parts = line.splitn(3, ':');
        let (Some(name), Some(scopes), Some(secret)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err("expected `name:scopes:secret`".into());
        };
        let scopes = Scopes::parse(scopes)?;
        let secret = secret.trim();
        if let Some(hex) = secret.strip_prefix("sha256:") {
            self.push(name, scopes, Secret::Digest(parse_digest(hex)?))
        } else if let Some(subject) = secret.strip_prefix("subject:") {
            self.add_subject(name, scopes, subject)
        } else {
            self.add_token(name, scopes, secret)
        }
    }

    /// Reads a credentials file's text; `source` names the file in errors.
    ///
    /// # Errors
    /// `source:line: what is wrong`.
    pub fn add_lines(&mut self, source: &str, text: &str) -> Result<(), String> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            self.add_line(line)
                .map_err(|e| format!("{source}:{}: {e}", i + 1))?;
        }
        Ok(())
    }

    /// Reads `name:token` lines of admin tokens (`--admin-tokens-file`); `source` names the file.
    ///
    /// # Errors
    /// `source:line: what is wrong`.
    pub fn add_admin_lines(&mut self, source: &str, text: &str) -> Result<(), String> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |e: String| format!("{source}:{}: {e}", i + 1);
            let (name, token) = line
                .split_once(':')
                .ok_or_else(|| at("expected `name:token`".into()))?;
            self.add_token(name, Scope::Admin, token).map_err(at)?;
        }
        Ok(())
    }

    /// Adds the credentials of `other` (the file's beside the flags').
    ///
    /// # Errors
    /// A name or token used in both.
    pub fn extend(&mut self, other: &Credentials) -> Result<(), String> {
        for e in &other.entries {
            self.push(&e.name, e.scopes, e.secret.clone())?;
        }
        Ok(())
    }

    /// Whether there is no credential.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the routes of `scope` need a credential: some credential names the scope (the
    /// admin routes always need one).
    pub fn requires(&self, scope: Scope) -> bool {
        scope == Scope::Admin || self.named.contains(scope)
    }

    /// Whether some credential grants `scope`.
    pub fn has(&self, scope: Scope) -> bool {
        self.entries
            .iter()
            .any(|e| e.scopes.granted().contains(scope))
    }

    /// The credentials' names with their scopes, for the start-up line.
    pub fn summary(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| format!("{}:{}", e.name, e.scopes))
            .collect()
    }

    /// The name and scopes of the token `given`, if it is one of them. Every token is compared,
    /// each in constant time.
    pub fn token(&self, given: &str) -> Option<(&str, Scopes)> {
        let d = digest(given);
        let mut found = None;
        for e in &self.entries {
            if let Secret::Digest(known) = &e.secret {
                let same: bool = d.ct_eq(known).into();
                if same && found.is_none() {
                    found = Some((e.name.as_str(), e.scopes.granted()));
                }
            }
        }
        found
    }

    /// The name and scopes of a verified client certificate with these names: the first
    /// credential that matches one, with the scopes of every one that does.
    pub fn certificate(&self, names: &[String]) -> Option<(&str, Scopes)> {
        let mut found: Option<(&str, Scopes)> = None;
        for e in &self.entries {
            if let Secret::Subject(s) = &e.secret
                && names.iter().any(|n| n == s)
            {
                let scopes = e.scopes.granted();
                found = Some(match found {
                    None => (e.name.as_str(), scopes),
                    Some((name, had)) => (name, had.union(scopes)),
                });
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn lines_name_their_scopes_and_secrets() {
        let mut c = Credentials::new();
        let hex: String = digest(B).iter().map(|b| format!("{b:02x}")).collect();
        let text = format!(
            "# ops\nops:admin:{A}\n\nrefunds : worker,reporter : sha256:{hex}\nenvoy:decide:subject:spiffe://t/envoy\n"
        );
        c.add_lines("creds", &text).unwrap();
        assert_eq!(c.token(A).map(|(n, _)| n), Some("ops"));
        let (name, scopes) = c.token(B).unwrap();
        assert_eq!(
            (name, scopes.to_string().as_str()),
            ("refunds", "worker,reporter")
        );
        assert!(c.token(&A[1..]).is_none() && c.token("").is_none());
        let names = vec!["envoy.local".to_owned(), "spiffe://t/envoy".to_owned()];
        assert_eq!(
            c.certificate(&names),
            Some(("envoy", Scopes::from(Scope::Decide)))
        );
        assert!(c.certificate(&["spiffe://t/other".to_owned()]).is_none());
        assert!(c.requires(Scope::Worker) && c.requires(Scope::Decide));
        assert!(
            !c.requires(Scope::Reader),
            "admin grants reader but does not close it"
        );
        assert!(c.has(Scope::Reader));
    }

    #[test]
    fn admin_always_needs_a_credential() {
        let c = Credentials::new();
        assert!(c.requires(Scope::Admin) && !c.has(Scope::Admin));
        assert!(!c.requires(Scope::Worker));
    }

    #[test]
    fn bad_lines_are_located_and_never_echo_the_secret() {
        let mut c = Credentials::new();
        c.add_lines("f", &format!("ops:admin:{A}")).unwrap();
        let cases = [
            ("no-colon", "expected `name:scopes:secret`"),
            (
                "x:root:whatever-whatever-whatever-whatever",
                "unknown scope `root`",
            ),
            ("short:worker:tiny-secret", "at least 32"),
            (&format!("ops:worker:{B}"), "used twice"),
            (&format!("other:worker:{A}"), "the same token"),
            ("d:reader:sha256:abc", "64 hex digits"),
            ("s:decide:subject:", "needs a name"),
            (&format!(":admin:{B}"), "needs a name"),
            (&format!("sp ace:admin:{B}"), "credential name"),
        ];
        for (line, want) in cases {
            let e = c.add_lines("f", line).unwrap_err();
            assert!(e.starts_with("f:1: ") && e.contains(want), "{line}: {e}");
            assert!(!e.contains("tiny-secret") && !e.contains(B), "{e}");
        }
    }

    #[test]
    fn new_tokens_are_long_distinct_and_read_back_as_digests() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        check_token(&a).unwrap();
        let mut c = Credentials::new();
        c.add_line(&format!("w:worker:{}", digest_hex(&a))).unwrap();
        assert_eq!(c.token(&a).map(|(n, _)| n), Some("w"));
        assert!(c.token(&b).is_none());
    }

    #[test]
    fn admin_token_lines_grant_admin() {
        let mut c = Credentials::new();
        c.add_admin_lines("t", &format!("# ops\nalice:{A}\n"))
            .unwrap();
        let (name, scopes) = c.token(A).unwrap();
        assert_eq!(name, "alice");
        assert!(scopes.contains(Scope::Admin) && scopes.contains(Scope::Reader));
        assert_eq!(
            c.add_admin_lines("t", "bob").unwrap_err(),
            "t:1: expected `name:token`"
        );
    }
}
