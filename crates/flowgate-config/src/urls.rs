//! The URL fields of a configuration document, and how `GET /v1/rules` shows them to a caller
//! without the admin token: a webhook's URL often carries its credential (a password, a query
//! parameter, a path token such as Slack's `/services/T…/B…/…`), and the rules can be read with
//! no token at all.
//!
//! [`FileDoc::urls_mut`] is the one list of those fields, so a URL field added to the schema is
//! one line there. A URL shown redacted and sent back is refused where every URL field is
//! checked, by the conversion of its field.

use crate::schema::FileDoc;

/// What stands for a hidden part of a URL. It is not a valid URL character, so a URL shown
/// redacted and sent back is recognised (and refused) rather than stored.
pub const REDACTED: &str = "<redacted>";

impl FileDoc {
    /// Every URL field of the document, with its path in the document (`alert[0].webhooks[1]`).
    pub fn urls_mut(&mut self) -> Vec<(String, &mut String)> {
        let mut out = Vec::new();
        list(&mut out, "alert_webhooks", &mut self.alert_webhooks);
        list(&mut out, "alertmanagers", &mut self.alertmanagers);
        for (i, a) in self.alert.iter_mut().enumerate() {
            if let Some(w) = &mut a.webhooks {
                list(&mut out, &format!("alert[{i}].webhooks"), w);
            }
            if let Some(w) = &mut a.alertmanagers {
                list(&mut out, &format!("alert[{i}].alertmanagers"), w);
            }
        }
        out
    }

    /// Hides the secrets of every URL field ([`redact`]).
    pub fn redact_urls(&mut self) {
        for (_, url) in self.urls_mut() {
            *url = redact(url);
        }
    }
}

/// Adds the URLs of list field `path` to `out`.
fn list<'a>(out: &mut Vec<(String, &'a mut String)>, path: &str, urls: &'a mut [String]) {
    for (i, url) in urls.iter_mut().enumerate() {
        out.push((format!("{path}[{i}]"), url));
    }
}

/// `url` with what may be a credential replaced by [`REDACTED`]: the user information's
/// password (or a user name alone, which may be a key), each query parameter's value, the
/// fragment, and each path segment that may be a token (16 characters or more, or 6 or more
/// with a digit). The scheme, host, port and plain path segments (`/api/v2/alerts`) stay, so a
/// reader still sees where notifications go. A text without `://` is hidden whole.
pub fn redact(url: &str) -> String {
    let (url, fragment) = match url.split_once('#') {
        Some((u, _)) => (u, Some(REDACTED)),
        None => (url, None),
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return REDACTED.to_owned();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(end);
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    let mut out = format!("{scheme}://");
    if let Some((user, host)) = authority.rsplit_once('@') {
        match user.split_once(':') {
            Some((name, _)) => out.push_str(&format!("{name}:{REDACTED}@")),
            None => out.push_str(&format!("{REDACTED}@")),
        }
        out.push_str(host);
    } else {
        out.push_str(authority);
    }
    let segments: Vec<&str> = path
        .split('/')
        .map(|s| if may_be_token(s) { REDACTED } else { s })
        .collect();
    out.push_str(&segments.join("/"));
    if let Some(q) = query {
        let params: Vec<String> = q
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) => format!("{k}={REDACTED}"),
                None if p.is_empty() => String::new(),
                None => REDACTED.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// Whether a path segment may be a token rather than a word of the path.
fn may_be_token(segment: &str) -> bool {
    let n = segment.chars().count();
    n >= 16 || (n >= 6 && segment.chars().any(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{AlertDoc, StoreCondition, Watch};

    fn alert(name: &str) -> AlertDoc {
        AlertDoc {
            name: name.into(),
            watch: Watch::Store {
                store: StoreCondition::Degraded,
            },
            for_: None,
            webhooks: None,
            alertmanagers: None,
            severity: None,
            summary: None,
            description: None,
        }
    }

    #[test]
    fn secrets_are_hidden_and_the_destination_stays() {
        for (url, shown) in [
            (
                "http://user:pw@alerts.internal:9093/hook?token=abc&x=1",
                "http://user:<redacted>@alerts.internal:9093/hook?token=<redacted>&x=<redacted>",
            ),
            (
                "https://hooks.slack.com/services/T0000000/B0000000/XXXXXXXXXXXXXXXXXXXXXXXX",
                "https://hooks.slack.com/services/<redacted>/<redacted>/<redacted>",
            ),
            (
                "http://alertmanager:9093/api/v2/alerts",
                "http://alertmanager:9093/api/v2/alerts",
            ),
            (
                "http://key@relay/x#frag",
                "http://<redacted>@relay/x#<redacted>",
            ),
            ("http://relay:8080", "http://relay:8080"),
            ("http://relay/?secret", "http://relay/?<redacted>"),
            ("not a url with hunter2", "<redacted>"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    #[test]
    fn every_url_field_is_listed_redacted_and_recognised() {
        let mut doc = FileDoc {
            alert_webhooks: vec!["http://u:p@a/h".into()],
            alertmanagers: vec!["http://am:9093".into()],
            alert: vec![
                alert("x"),
                AlertDoc {
                    webhooks: Some(vec!["http://b/h?k=v".into(), "http://c/h".into()]),
                    alertmanagers: Some(vec!["http://admin:secret@am2:9093".into()]),
                    ..alert("y")
                },
            ],
            ..FileDoc::default()
        };
        let paths: Vec<String> = doc.urls_mut().into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "alert_webhooks[0]",
                "alertmanagers[0]",
                "alert[1].webhooks[0]",
                "alert[1].webhooks[1]",
                "alert[1].alertmanagers[0]"
            ]
        );
        doc.redact_urls();
        assert_eq!(doc.alert_webhooks, ["http://u:<redacted>@a/h"]);
        assert_eq!(
            doc.alert[1].webhooks.as_deref(),
            Some(
                &[
                    "http://b/h?k=<redacted>".to_owned(),
                    "http://c/h".to_owned()
                ][..]
            )
        );
        assert_eq!(doc.alertmanagers, ["http://am:9093"]);
        assert_eq!(
            doc.alert[1].alertmanagers.as_deref(),
            Some(&["http://admin:<redacted>@am2:9093".to_owned()][..])
        );
    }
}
