//! Alerts.

use super::*;

const ALERT_RULES: &str = "domain = \"api\"\n[[rule]]\nname = \"per-client\"\nmatch = \"client\"\nlimit = \"5/s\"\n[[queue]]\nname = \"refunds\"\nmatch = \"biz\"\nrate = \"1/s\"\n";

/// Loads `ALERT_RULES` followed by `alerts` as one file `a.toml` (top-level keys, those before
/// the first table, moved first).
fn load_alerts(alerts: &str) -> Result<Loaded, ConfigError> {
    let (top, tables) = alerts.split_at(alerts.find("[[").unwrap_or(alerts.len()));
    load_texts(&[("a.toml".into(), format!("{top}{ALERT_RULES}{tables}"))])
}

#[test]
fn alerts_of_each_kind_load() {
    use crate::alert::AlertKind;
    let loaded = load_alerts(
        "alert_webhooks = [\"http://127.0.0.1:9093/hook\"]\nalertmanagers = [\"http://am:9093\"]\n\
         [[alert]]\nname = \"r\"\nrule = \"per-client\"\nrejection_ratio = 0.5\nfor = \"10s\"\nmin_rate = 2\nseverity = \"page\"\n\
         [[alert]]\nname = \"age\"\nqueue = \"refunds\"\noldest_age = \"5m\"\nwebhooks = []\nalertmanagers = [\"http://am2:9093/prefix\"]\n\
         [[alert]]\nname = \"depth\"\nqueue = \"refunds\"\ndepth = 1000\n\
         [[alert]]\nname = \"store\"\nstore = \"degraded\"\nfor = \"30s\"\nwebhooks = [\"http://h/x\"]\n",
    )
    .unwrap();
    let a = loaded.alerts.alerts();
    assert_eq!(a.len(), 4);
    assert_eq!(
        a[0].kind,
        AlertKind::Rule {
            domain: "api".into(),
            rule: "per-client".into(),
            ratio: 0.5,
            min_rate: 2.0
        }
    );
    assert_eq!(a[0].for_ms, 10_000);
    assert_eq!(a[0].webhooks, ["http://127.0.0.1:9093/hook"]);
    assert_eq!(a[0].alertmanagers, ["http://am:9093"], "the file's");
    assert_eq!(a[1].alertmanagers, ["http://am2:9093/prefix"], "its own");
    assert_eq!(
        a[1].kind,
        AlertKind::QueueAge {
            domain: "api".into(),
            queue: "refunds".into(),
            seconds: 300.0
        }
    );
    assert!(
        a[1].webhooks.is_empty(),
        "an empty list: shown and logged only"
    );
    assert!(matches!(
        a[2].kind,
        AlertKind::QueueDepth { depth: 1000, .. }
    ));
    assert_eq!(a[2].for_ms, 0);
    assert_eq!(a[3].kind, AlertKind::StoreDegraded);
    assert_eq!(a[3].webhooks, ["http://h/x"]);
    // The default min_rate is 1 request per second.
    let loaded =
        load_alerts("[[alert]]\nname = \"r\"\nrule = \"per-client\"\nrejection_ratio = 0\n")
            .unwrap();
    assert!(
        matches!(loaded.alerts.alerts()[0].kind, AlertKind::Rule { min_rate, .. } if min_rate == 1.0)
    );
}

#[test]
fn alert_errors_name_file_line_and_field() {
    // (alerts text, line, field, words of the message); ALERT_RULES is 9 lines.
    let cases: &[(&str, u64, &str, &str)] = &[
        (
            "[[alert]]\nname = \"r\"\nrule = \"nope\"\nrejection_ratio = 0.5\n",
            12,
            "alert[0].rule",
            "no rule `nope` in domain `api`",
        ),
        (
            "[[alert]]\nname = \"q\"\nqueue = \"nope\"\ndepth = 3\n",
            12,
            "alert[0].queue",
            "no queue `nope`",
        ),
        (
            "[[alert]]\nname = \"r\"\nrule = \"per-client\"\nrejection_ratio = 1.0\n",
            13,
            "alert[0].rejection_ratio",
            "could never fire",
        ),
        (
            "[[alert]]\nname = \"r\"\nrule = \"per-client\"\nrejection_ratio = -0.1\n",
            13,
            "alert[0].rejection_ratio",
            "not a ratio",
        ),
        (
            "[[alert]]\nname = \"r\"\nrule = \"per-client\"\nqueue = \"refunds\"\nrejection_ratio = 0.5\n",
            13,
            "alert[0].queue",
            "watches one thing",
        ),
        (
            "[[alert]]\nname = \"r\"\nfor = \"1s\"\n",
            11,
            "alert[0].rule",
            "watches nothing",
        ),
        (
            "[[alert]]\nname = \"r\"\nrule = \"per-client\"\n",
            12,
            "alert[0].rejection_ratio",
            "needs `rejection_ratio`",
        ),
        (
            "[[alert]]\nname = \"q\"\nqueue = \"refunds\"\ndepth = 1\noldest_age = \"1m\"\n",
            13,
            "alert[0].depth",
            "both given",
        ),
        (
            "[[alert]]\nname = \"q\"\nqueue = \"refunds\"\nrejection_ratio = 0.5\ndepth = 1\n",
            13,
            "alert[0].rejection_ratio",
            "is for `rule` alerts",
        ),
        (
            "[[alert]]\nname = \"b\"\nbreaker = \"nope\"\n",
            12,
            "alert[0].breaker",
            "no breaker `nope` in domain `api`",
        ),
        (
            "[[alert]]\nname = \"s\"\nstore = \"down\"\n",
            12,
            "alert[0].store",
            "unknown variant `down`, expected `degraded`",
        ),
        (
            "[[alert]]\nname = \"s\"\nstore = \"degraded\"\nfor = \"soon\"\n",
            13,
            "alert[0].for",
            "soon",
        ),
        (
            "[[alert]]\nname = \"s\"\nstore = \"degraded\"\nwebhooks = [\"https://h/x\"]\n",
            13,
            "alert[0].webhooks[0]",
            "plain http://",
        ),
        (
            // The URL shows its scheme and host alone: errors are logged, and shown to readers.
            "[[alert]]\nname = \"s\"\nstore = \"degraded\"\nwebhooks = [\"https://u:pw@h/x?k=v\"]\n",
            13,
            "alert[0].webhooks[0]",
            "`https://h/<redacted>`: webhooks are POSTed over plain http://",
        ),
        (
            "[[alert]]\nname = \"s\"\nstore = \"degraded\"\nwebhooks = [\"hook\"]\n",
            13,
            "alert[0].webhooks[0]",
            "not an http:// URL",
        ),
        (
            "alert_webhooks = [\"ftp://h\"]\n",
            1,
            "alert_webhooks[0]",
            "not an http:// URL",
        ),
        (
            "alertmanagers = [\"am:9093\"]\n",
            1,
            "alertmanagers[0]",
            "not an http:// URL",
        ),
        (
            "[[alert]]\nname = \"s\"\nstore = \"degraded\"\nalertmanagers = [\"http://ok:9093\", \"nope\"]\n",
            13,
            "alert[0].alertmanagers[1]",
            "not an http:// URL",
        ),
        (
            "[[alert]]\nname = \"s\"\nstore = \"degraded\"\n[[alert]]\nname = \"s\"\nstore = \"degraded\"\n",
            13,
            "alert[1].name",
            "duplicate alert name `s`: already declared in a.toml:10",
        ),
        (
            "[[alert]]\nname = \"s\"\nstore = \"degraded\"\nthreshold = 3\n",
            13,
            "alert[0].threshold",
            "unknown field",
        ),
    ];
    for (text, line, field, words) in cases {
        let e = load_alerts(text).err().expect(text);
        assert_eq!(
            (e.file.as_str(), e.line, e.field.as_str()),
            ("a.toml", Some(*line), *field),
            "{text}\n{e}"
        );
        assert!(e.message.contains(words), "{text}\n{e}");
    }
}

#[test]
fn alerts_through_the_admin_api_of_a_node_on_files_are_refused() {
    let e = parse(
        "<api>",
        Format::Toml,
        "[[alert]]\nname = \"s\"\nstore = \"degraded\"\n",
    )
    .unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (Some(1), "alert[0]"));
    assert!(e.message.contains("alerts are declared"), "{e}");
}

#[test]
fn an_alert_written_by_the_schema_reads_back_the_same() {
    let loaded = load_alerts(
        "[[alert]]\nname = \"r\"\nrule = \"per-client\"\nrejection_ratio = 0.25\nfor = \"90s\"\nmin_rate = 0.5\nseverity = \"page\"\nsummary = \"s\"\ndescription = \"d\"\nwebhooks = [\"http://h:1/x\"]\nalertmanagers = [\"http://am:9093\"]\n\
         [[alert]]\nname = \"age\"\nqueue = \"refunds\"\noldest_age = \"1500ms\"\n\
         [[alert]]\nname = \"depth\"\nqueue = \"refunds\"\ndepth = 7\n\
         [[alert]]\nname = \"store\"\nstore = \"degraded\"\n",
    )
    .unwrap();
    for a in loaded.alerts.alerts() {
        let doc = schema::AlertDoc::of(a);
        let json = serde_json::to_string(&doc).unwrap();
        let back: schema::AlertDoc = serde_json::from_str(&json).unwrap();
        let none = crate::convert::FileContext::default();
        assert_eq!(&back.to_spec(&none).unwrap(), a, "{json}");
    }
}

/// A JSON document is read as a TOML file is: its errors name the field (JSON has no lines),
/// and an alert's kind is checked at the key at fault.
#[test]
fn json_errors_name_the_field() {
    let bad = |body: serde_json::Value| {
        let serde_json::Value::Object(m) = body else {
            panic!("not an object")
        };
        parse_json("the JSON body", &m).expect_err("refused")
    };
    for (body, field, says) in [
        (
            serde_json::json!({"rule": [{"domain": "d", "name": "x", "match": "c", "limit": "fast"}]}),
            "rule[0].limit",
            "not a quota",
        ),
        (
            serde_json::json!({"rule": [{"domain": "d", "name": "x", "match": "c", "limit": "1/s", "mode": "later"}]}),
            "rule[0].mode",
            "unknown variant `later`",
        ),
        (
            serde_json::json!({"alert": [{"name": "q", "queue": "refunds", "depth": 1, "oldest_age": "1m"}]}),
            "alert[0].depth",
            "both given",
        ),
        (
            serde_json::json!({"alert": [{"name": "s", "store": "degraded", "webhooks": ["http://h/<redacted>"]}]}),
            "alert[0].webhooks[0]",
            "this URL is shown redacted",
        ),
        (
            serde_json::json!({"alert": [{"name": "s", "store": "degraded", "webhooks": ["http://<redacted>"]}]}),
            "alert[0].webhooks[0]",
            "this URL is shown redacted",
        ),
        (
            serde_json::json!({"alertmanagers": ["http://am:9093/<redacted>"], "alert": [{"name": "s", "store": "degraded"}]}),
            "alertmanagers[0]",
            "this URL is shown redacted",
        ),
        (
            serde_json::json!({"alert": [{"name": "s", "store": "degraded", "alertmanagers": ["http://hooks.slack.com/<redacted>"]}]}),
            "alert[0].alertmanagers[0]",
            "this URL is shown redacted",
        ),
        (
            serde_json::json!({"domain": "d", "colour": "red"}),
            "colour",
            "unknown field",
        ),
        (
            serde_json::json!({"rule": {"name": "x"}}),
            "rule",
            "expected a sequence",
        ),
    ] {
        let e = bad(body.clone());
        assert_eq!(
            (e.file.as_str(), e.line, e.field.as_str()),
            ("the JSON body", None, field),
            "{body}: {e}"
        );
        assert!(e.message.contains(says), "{body}: {e}");
    }
    // What is declared is read, the document as given.
    let body = serde_json::json!({"domain": "api", "alert": [{"name": "s", "store": "degraded"}], "rule": [{"name": "x", "match": "c", "limit": "1/s"}]});
    let serde_json::Value::Object(m) = body else {
        unreachable!()
    };
    let (doc, config) = parse_json("the JSON body", &m).unwrap();
    assert_eq!(config.rules[0].item.domain, "api");
    assert_eq!(
        config.alerts[0].item.kind,
        crate::alert::AlertKind::StoreDegraded
    );
    assert_eq!(
        serde_json::to_value(&doc).unwrap(),
        serde_json::Value::Object(m)
    );
}

#[test]
fn a_debt_alert_loads_reads_back_and_its_errors_name_the_field() {
    use crate::alert::AlertKind;
    let loaded = load_alerts(
        "[[alert]]\nname = \"owed\"\nrule = \"per-client\"\ndebt = 5000\nfor = \"30s\"\n",
    )
    .unwrap();
    let a = &loaded.alerts.alerts()[0];
    assert_eq!(
        a.kind,
        AlertKind::RuleDebt {
            domain: "api".into(),
            rule: "per-client".into(),
            debt: 5000
        }
    );
    assert_eq!(a.watches(), "rule api/per-client debt > 5000 for 30s");
    let doc = crate::schema::AlertDoc::of(a);
    let written = ::toml::to_string(&doc).unwrap();
    assert!(written.contains("debt = 5000"), "{written}");
    for (text, field, says) in [
        (
            "[[alert]]\nname = \"x\"\nrule = \"per-client\"\ndebt = 5\nrejection_ratio = 0.5\n",
            "debt",
            "`rejection_ratio` and `debt` are both given",
        ),
        (
            "[[alert]]\nname = \"x\"\nrule = \"per-client\"\ndebt = 5\nmin_rate = 2\n",
            "min_rate",
            "`min_rate` is for `rejection_ratio` alerts",
        ),
        (
            "[[alert]]\nname = \"x\"\nqueue = \"refunds\"\ndebt = 5\n",
            "debt",
            "`debt` is for `rule` alerts",
        ),
        (
            "[[alert]]\nname = \"x\"\nrule = \"per-client\"\ndebt = -5\n",
            "debt",
            "",
        ),
        (
            "[[alert]]\nname = \"x\"\nrule = \"nope\"\ndebt = 5\n",
            "rule",
            "no rule `nope`",
        ),
    ] {
        let Err(e) = load_alerts(text) else {
            panic!("{text}: loaded")
        };
        let e = e.to_string();
        assert!(e.contains(field) && e.contains(says), "{text}: {e}");
    }
}
