//! Alertmanager's webhook message, version 4: what Alertmanager POSTs to a `webhook_config`
//! receiver (its `notify/webhook` `Message`: `template.Data` with `version`, `groupKey` and
//! `truncatedAlerts`), so every receiver built for Alertmanager reads Flowgate's unchanged.
//!
//! Each message carries one alert's transition: `status` `firing` with `endsAt`
//! `0001-01-01T00:00:00Z` (Alertmanager's zero time, as it sends for an alert with no end yet),
//! or `resolved` with `endsAt` the time it resolved. The group is the alert alone
//! (`groupLabels` = `{alertname}`, `groupKey` = `{}:{alertname="<name>"}`, as Alertmanager's
//! root route grouped by `alertname` writes it), and the `fingerprint` is Prometheus's label-set
//! fingerprint (FNV-1a 64 over the sorted labels), 16 hex digits, so the same alert has the same
//! fingerprint as it would through Alertmanager.

use std::collections::BTreeMap;

use serde::Serialize;

use super::condition::Reading;
use super::machine::Transition;
use flowgate_config::alert::AlertSpec;

/// Alertmanager's zero time, the `endsAt` of a firing alert.
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// The receiver's name in every message.
pub const RECEIVER: &str = "flowgate";

/// A webhook message (Alertmanager's `Message`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The receiver's name: `flowgate`.
    pub receiver: String,
    /// `firing` or `resolved`.
    pub status: &'static str,
    /// The alerts of the group (here, one).
    pub alerts: Vec<AlertMessage>,
    /// The labels the group is made by: `alertname`.
    pub group_labels: BTreeMap<String, String>,
    /// The labels every alert of the group has.
    pub common_labels: BTreeMap<String, String>,
    /// The annotations every alert of the group has.
    pub common_annotations: BTreeMap<String, String>,
    /// The server's address (where the dashboard is).
    #[serde(rename = "externalURL")]
    pub external_url: String,
    /// `"4"`.
    pub version: &'static str,
    /// The group's key.
    pub group_key: String,
    /// Alerts left out of the message: always 0.
    pub truncated_alerts: u64,
}

/// One alert of a message (Alertmanager's `template.Alert`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertMessage {
    /// `firing` or `resolved`.
    pub status: &'static str,
    /// `alertname`, `domain`, `rule`/`queue` or `store`, `severity`.
    pub labels: BTreeMap<String, String>,
    /// `summary`, `description` (when given), `value` and `who` (when known).
    pub annotations: BTreeMap<String, String>,
    /// When it fired (RFC 3339).
    pub starts_at: String,
    /// When it resolved, or [`ZERO_TIME`] while firing.
    pub ends_at: String,
    /// Where to look at it: the dashboard.
    #[serde(rename = "generatorURL")]
    pub generator_url: String,
    /// The labels' fingerprint, 16 hex digits.
    pub fingerprint: String,
}

/// RFC 3339 of a Unix time in milliseconds, UTC, to the millisecond.
pub fn rfc3339(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0).unsigned_abs());
    humantime::format_rfc3339_millis(at).to_string()
}

/// Prometheus's fingerprint of a label set (`model.LabelSet.Fingerprint`): FNV-1a 64 over each
/// name and value, sorted by name, each followed by the byte 0xff.
pub fn fingerprint(labels: &BTreeMap<String, String>) -> String {
    const OFFSET: u64 = 14_695_981_039_346_656_037;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET;
    let mut add = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(PRIME);
        }
    };
    for (k, v) in labels {
        add(k.as_bytes());
        add(&[0xff]);
        add(v.as_bytes());
        add(&[0xff]);
    }
    format!("{h:016x}")
}

/// The labels of `alert`, as every message carries them (`alertname`, what it watches,
/// `severity`): the same on every node, so the same fingerprint.
pub fn labels(alert: &AlertSpec) -> BTreeMap<String, String> {
    alert.labels().into_iter().collect()
}

/// The annotations of `alert` as read in `reading`: `summary` (its own, else what it watches),
/// `description` (when given), `value` (the value read, with its unit) and `who` (whom it is
/// about: the most rejected descriptors with their rates, the queue instance, the breaker's
/// instances), each when known.
pub fn annotations(alert: &AlertSpec, reading: &Reading) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "summary".to_owned(),
        alert.summary.clone().unwrap_or_else(|| alert.watches()),
    );
    if let Some(d) = &alert.description {
        annotations.insert("description".to_owned(), d.clone());
    }
    if let Some(v) = &reading.text {
        annotations.insert("value".to_owned(), v.clone());
    }
    if let Some(w) = &reading.who {
        annotations.insert("who".to_owned(), w.clone());
    }
    annotations
}

/// The message announcing `transition` of `alert`, as last read in `reading`; `external_url`
/// is the server's address.
pub fn message(
    alert: &AlertSpec,
    transition: Transition,
    reading: &Reading,
    external_url: &str,
) -> Message {
    let labels = labels(alert);
    let annotations = annotations(alert, reading);
    let (status, starts_at, ends_at) = match transition {
        Transition::Fired { fired_ms } => ("firing", rfc3339(fired_ms), ZERO_TIME.to_owned()),
        Transition::Resolved { fired_ms, ended_ms } => {
            ("resolved", rfc3339(fired_ms), rfc3339(ended_ms))
        }
    };
    let external_url = external_url.trim_end_matches('/').to_owned();
    let group_labels: BTreeMap<String, String> =
        [("alertname".to_owned(), alert.name.clone())].into();
    let group_key = format!(
        "{{}}:{{alertname={}}}",
        serde_json::to_string(&alert.name).unwrap_or_default()
    );
    Message {
        receiver: RECEIVER.to_owned(),
        status,
        alerts: vec![AlertMessage {
            status,
            fingerprint: fingerprint(&labels),
            labels: labels.clone(),
            annotations: annotations.clone(),
            starts_at,
            ends_at,
            generator_url: format!("{external_url}/dashboard"),
        }],
        group_labels,
        common_labels: labels,
        common_annotations: annotations,
        external_url,
        version: "4",
        group_key,
        truncated_alerts: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowgate_config::alert::AlertKind;

    fn alert() -> AlertSpec {
        AlertSpec {
            name: "per-client-rejecting".into(),
            kind: AlertKind::Rule {
                domain: "api".into(),
                rule: "per-client".into(),
                ratio: 0.5,
                min_rate: 2.0,
            },
            for_ms: 10_000,
            webhooks: vec![],
            alertmanagers: vec![],
            severity: Some("page".into()),
            summary: None,
            description: Some("a client is limited".into()),
        }
    }

    #[test]
    fn fingerprint_is_prometheus_label_set_fingerprint() {
        // Prometheus: model.LabelSet{}.Fingerprint() is the FNV-1a offset basis;
        // LabelSet{"alertname": "a"}: hashed "alertname" 0xff "a" 0xff.
        assert_eq!(fingerprint(&BTreeMap::new()), "cbf29ce484222325");
        // The label set of docs/alerts.md's example, as written there.
        let documented: BTreeMap<String, String> = [
            ("alertname", "per-client-rejecting"),
            ("domain", "api"),
            ("rule", "per-client"),
            ("severity", "page"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(fingerprint(&documented), "0f172db2e6c71e4a");
        let one: BTreeMap<String, String> = [("alertname".to_owned(), "a".to_owned())].into();
        let f = fingerprint(&one);
        assert_eq!(f.len(), 16);
        assert_ne!(
            f,
            fingerprint(&[("alertname".to_owned(), "b".to_owned())].into())
        );
        // Name and value are separated: ("ab", "") differs from ("a", "b").
        assert_ne!(
            fingerprint(&[("ab".to_owned(), String::new())].into()),
            fingerprint(&[("a".to_owned(), "b".to_owned())].into())
        );
    }

    #[test]
    fn firing_and_resolved_messages_have_alertmanagers_shape() {
        let m = message(
            &alert(),
            Transition::Fired {
                fired_ms: 1_700_000_000_123,
            },
            &Reading {
                holds: true,
                value: Some(0.75),
                text: Some("75.0 % rejected at 4.0 req/s".into()),
                who: Some("client=hot 3.0/s".into()),
            },
            "http://127.0.0.1:8080/",
        );
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["version"], "4");
        assert_eq!(json["status"], "firing");
        assert_eq!(json["receiver"], "flowgate");
        assert_eq!(json["groupKey"], "{}:{alertname=\"per-client-rejecting\"}");
        assert_eq!(
            json["groupLabels"],
            serde_json::json!({"alertname": "per-client-rejecting"})
        );
        assert_eq!(json["externalURL"], "http://127.0.0.1:8080");
        assert_eq!(json["truncatedAlerts"], 0);
        let a = &json["alerts"][0];
        assert_eq!(a["status"], "firing");
        assert_eq!(
            a["labels"],
            serde_json::json!({"alertname": "per-client-rejecting", "domain": "api", "rule": "per-client", "severity": "page"})
        );
        assert_eq!(a["annotations"]["description"], "a client is limited");
        assert_eq!(a["annotations"]["value"], "75.0 % rejected at 4.0 req/s");
        assert_eq!(a["annotations"]["who"], "client=hot 3.0/s");
        assert!(
            a["annotations"]["summary"]
                .as_str()
                .unwrap()
                .contains("rejection ratio > 0.5")
        );
        assert_eq!(a["startsAt"], "2023-11-14T22:13:20.123Z");
        assert_eq!(a["endsAt"], ZERO_TIME);
        assert_eq!(a["generatorURL"], "http://127.0.0.1:8080/dashboard");
        assert_eq!(a["fingerprint"].as_str().unwrap().len(), 16);
        assert_eq!(json["commonLabels"], a["labels"]);
        assert_eq!(json["commonAnnotations"], a["annotations"]);

        let r = message(
            &alert(),
            Transition::Resolved {
                fired_ms: 1_700_000_000_123,
                ended_ms: 1_700_000_060_000,
            },
            &Reading::default(),
            "http://x",
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["status"], "resolved");
        assert_eq!(json["alerts"][0]["endsAt"], "2023-11-14T22:14:20.000Z");
        assert_eq!(json["alerts"][0]["fingerprint"], a["fingerprint"]);
    }
}
