//! The URL fields of a configuration document, and how `GET /v1/rules` shows them to a caller
//! without the admin token: as their scheme and host alone (`https://hooks.slack.com/<redacted>`).
//! A webhook's URL often carries its credential (a password, a query parameter), and for a Slack
//! or PagerDuty webhook the path *is* the credential, so a reader learns not even its shape.
//!
//! [`FileDoc::urls_mut`] is the one list of those fields, so a URL field added to the schema is
//! one line there. A URL shown redacted and sent back is refused where every URL field is
//! checked, by the conversion of its field. How a URL is redacted is
//! [`flowgate_core::redact`]'s ([`redact_to_origin`]), the one place every crate shows a URL
//! through.

use crate::schema::FileDoc;

use flowgate_core::redact::redact_to_origin;

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

    /// Shows every URL field as its scheme and host alone ([`redact_to_origin`]).
    pub fn redact_urls(&mut self) {
        for (_, url) in self.urls_mut() {
            *url = redact_to_origin(url);
        }
    }
}

/// Adds the URLs of list field `path` to `out`.
fn list<'a>(out: &mut Vec<(String, &'a mut String)>, path: &str, urls: &'a mut [String]) {
    for (i, url) in urls.iter_mut().enumerate() {
        out.push((format!("{path}[{i}]"), url));
    }
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
        assert_eq!(doc.alert_webhooks, ["http://a/<redacted>"]);
        assert_eq!(
            doc.alert[1].webhooks.as_deref(),
            Some(
                &[
                    "http://b/<redacted>".to_owned(),
                    "http://c/<redacted>".to_owned()
                ][..]
            )
        );
        // Nothing to hide: shown whole.
        assert_eq!(doc.alertmanagers, ["http://am:9093"]);
        assert_eq!(
            doc.alert[1].alertmanagers.as_deref(),
            Some(&["http://am2:9093/<redacted>".to_owned()][..])
        );
        // Each one shown redacted is refused as the URL it stands for.
        for (path, url) in doc.urls_mut() {
            if url.contains(crate::REDACTED) {
                let refused = crate::convert::webhook_of(&path, url);
                assert!(refused.is_err(), "{path}: {url}");
            }
        }
    }
}
