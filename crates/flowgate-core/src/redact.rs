//! How Flowgate shows a URL that may hold a credential: a Redis URL's password, a webhook's
//! token (in its user information, its query or a path segment such as Slack's
//! `/services/T…/B…/…`). Every error, log line, probe and API answer that names such a URL shows
//! it through [`redact_url`] (or [`Redacted`]), which never fails: a URL that does not parse is
//! redacted too, since the start-up error that says so is where it is shown whole otherwise.
//! Where even the shape of the path is a secret (a webhook shown to a caller without the admin
//! token), [`redact_to_origin`] shows the scheme and host alone.

use std::fmt;

/// What stands for a hidden part of a URL. It is not a valid URL character, so a URL shown
/// redacted and sent back is recognised (and refused) rather than stored.
pub const REDACTED: &str = "<redacted>";

/// `url` with what may be a credential replaced by [`REDACTED`]; the scheme, host, port and
/// plain path segments (`/api/v2/alerts`) stay, so a reader still sees where it points.
///
/// Hidden: the user information's password (a user name alone is hidden too: it may be a key),
/// each query parameter's value, the fragment, and each path segment that may be a token
/// (16 characters or more, or 6 or more with a digit).
///
/// The user information is everything between `://` and the **last** `@` of the text, whatever
/// lies between or after: a password may hold `@ / : ? #`, and a URL that does not parse
/// (`redis://u:p@ss@host:bad-port/`) is shown as safely as one that does. The cost is that an
/// `@` later in a URL (a path or a query value) hides the host as well: more is hidden, never
/// less. In a cluster URL the nodes' list is the host (`redis+cluster://u:<redacted>@h1:1,h2:2`).
/// A text without a scheme is shown from its last `@` on, or hidden whole without one.
///
/// # Examples
/// ```
/// use flowgate_core::redact::redact_url;
/// assert_eq!(
///     redact_url("redis://app:s3cr@t/x@10.0.0.7:bad/0"),
///     "redis://app:<redacted>@10.0.0.7:bad/0"
/// );
/// assert_eq!(redact_url("rediss://:pw@cache:6380"), "rediss://:<redacted>@cache:6380");
/// assert_eq!(redact_url("not a url with hunter2"), "<redacted>");
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) if is_scheme(s) => (Some(s), r),
        _ => (None, url),
    };
    let mut out = String::with_capacity(url.len() + 16);
    if let Some(s) = scheme {
        out.push_str(s);
        out.push_str("://");
    }
    let rest = match rest.rsplit_once('@') {
        Some((user, rest)) => {
            if let Some((name, _)) = user.split_once(':') {
                out.push_str(name);
                out.push(':');
            }
            out.push_str(REDACTED);
            out.push('@');
            rest
        }
        None if scheme.is_none() => return REDACTED.to_owned(),
        None => rest,
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, rest) = rest.split_at(end);
    out.push_str(host);
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, _)) => (r, true),
        None => (rest, false),
    };
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    push_path(&mut out, path);
    if let Some(q) = query {
        out.push('?');
        push_query(&mut out, q);
    }
    if fragment {
        out.push('#');
        out.push_str(REDACTED);
    }
    out
}

/// `url` shown as its origin only: `scheme://host[:port]`, then `/<redacted>` when it had
/// anything else (user information, a path other than `/`, a query, a fragment), e.g.
/// `https://hooks.slack.com/<redacted>`; a URL with nothing else is shown whole. For a reader who must not learn even the shape of a
/// URL whose path is its secret (a Slack or PagerDuty webhook), where [`redact_url`] shows the
/// plain segments.
///
/// The host is read as RFC 3986 has it: the authority ends at the first `/`, `?` or `#`, and
/// the user information at its last `@`. An `@` after that end is either a password holding
/// `/ ? #` or an `@` in the path or query; the host cannot be told then, so all but the scheme
/// is hidden (`scheme://<redacted>`). A text without a scheme is hidden whole.
///
/// # Examples
/// ```
/// use flowgate_core::redact::redact_to_origin;
/// assert_eq!(
///     redact_to_origin("https://u:pw@hooks.slack.com/services/T0/B0/X?x=1"),
///     "https://hooks.slack.com/<redacted>"
/// );
/// assert_eq!(redact_to_origin("http://am:9093"), "http://am:9093");
/// assert_eq!(redact_to_origin("http://relay/x?to=ops@example.com"), "http://<redacted>");
/// ```
pub fn redact_to_origin(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://").filter(|(s, _)| is_scheme(s)) else {
        return REDACTED.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if tail.contains('@') {
        return format!("{scheme}://{REDACTED}");
    }
    let (user, host) = match authority.rsplit_once('@') {
        Some((_, host)) => (true, host),
        None => (false, authority),
    };
    if user || !matches!(tail, "" | "/") {
        format!("{scheme}://{host}/{REDACTED}")
    } else {
        // Nothing to hide: the URL whole, so that what is shown is either the URL or holds
        // `<redacted>` (which `PUT /v1/rules` refuses).
        url.to_owned()
    }
}

/// Shows a URL through [`redact_url`]: `format!("cannot use Redis at {}", Redacted(url))`, or a
/// tracing field `url = %Redacted(url)`.
#[derive(Clone, Copy, Debug)]
pub struct Redacted<'a>(pub &'a str);

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact_url(self.0))
    }
}

/// Whether `s` is a URL scheme (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`), so
/// that a password holding `://` in a text without a scheme is not taken for one.
fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `path` with each segment that may be a token hidden.
fn push_path(out: &mut String, path: &str) {
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(if may_be_token(segment) {
            REDACTED
        } else {
            segment
        });
    }
}

/// `query` with each parameter's value hidden (a parameter without `=` hidden whole).
fn push_query(out: &mut String, query: &str) {
    for (i, param) in query.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match param.split_once('=') {
            Some((key, _)) => {
                out.push_str(key);
                out.push('=');
                out.push_str(REDACTED);
            }
            None if param.is_empty() => {}
            None => out.push_str(REDACTED),
        }
    }
}

/// Whether a path segment may be a token rather than a word of the path.
fn may_be_token(segment: &str) -> bool {
    let n = segment.chars().count();
    n >= 16 || (n >= 6 && segment.chars().any(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod origin_tests;
