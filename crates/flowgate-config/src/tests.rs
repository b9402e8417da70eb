use std::path::Path;

use flowgate_core::{Algorithm, Descriptor, FailurePolicy, Mode, Request};

use super::*;

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn find<'a>(set: &'a RuleSet, domain: &str, d: &str) -> Option<&'a str> {
    let d: Descriptor = d.parse().unwrap();
    set.find(domain, &d).map(|r| r.name.as_str())
}

#[test]
fn loads_the_toml_example() {
    let loaded = load(&examples().join("flowgate.toml")).unwrap();
    let (config, set) = (loaded.config, loaded.rules);
    assert_eq!(config.rules.len(), 9);
    let refunds = &loaded.queues.specs()[0];
    assert_eq!(
        (refunds.name.as_str(), refunds.spacing()),
        ("refunds", 1_000_000)
    );
    let wpg = set
        .rules()
        .iter()
        .find(|r| r.name == "wpg-pay")
        .unwrap()
        .clone();
    let l = wpg.limit.as_ref().unwrap();
    assert_eq!(l.algorithm(), Algorithm::LeakyBucket);
    assert_eq!(l.mode(), Mode::Delay);
    assert_eq!(l.max_wait(), 500_000);
    let refund = set
        .rules()
        .iter()
        .find(|r| r.name == "refund-channel")
        .unwrap();
    assert_eq!(refund.failure, FailurePolicy::Closed);
    let pay = set
        .rules()
        .iter()
        .find(|r| r.name == "pay-channel")
        .unwrap();
    assert_eq!(pay.schedule.as_ref().unwrap().overrides().len(), 2);
    let daily = set.rules().iter().find(|r| r.name == "free-daily").unwrap();
    let calendar = daily.limit.as_ref().unwrap().quota().calendar().unwrap();
    assert_eq!(calendar.zone(), flowgate_core::Tz::Europe__Paris);
    let per_client = set.rules().iter().find(|r| r.name == "per-client").unwrap();
    assert_eq!(per_client.limit.as_ref().unwrap().window(), 30_000_000);
    assert_eq!(
        find(&set, "payments", "biz=PAY, channel=WPG"),
        Some("wpg-pay")
    );
    assert_eq!(
        find(&set, "payments", "biz=PAY, channel=ALI"),
        Some("pay-channel")
    );
    assert_eq!(find(&set, "sms", "user=vip-1"), Some("vip"));
    assert!(
        set.rules()
            .iter()
            .find(|r| r.name == "vip")
            .unwrap()
            .limit
            .is_none()
    );
}

#[test]
fn loads_the_envoy_examples_directory() {
    let loaded = load(&examples().join("envoy")).unwrap();
    let (config, set) = (loaded.config, loaded.rules);
    assert_eq!(config.files.len(), 2);
    assert_eq!(
        find(&set, "mongo_cps", "database=users"),
        Some("database_users")
    );
    assert_eq!(find(&set, "mongo_cps", "database=other"), None);
    // Value-specific beats key-only; nested entries must match in depth.
    assert_eq!(
        find(&set, "rl", "source_cluster=proxy, destination_cluster=bar"),
        Some("source_cluster_proxy.destination_cluster_bar")
    );
    assert_eq!(
        find(&set, "rl", "source_cluster=proxy, destination_cluster=foo"),
        Some("source_cluster_proxy.destination_cluster")
    );
    assert_eq!(find(&set, "rl", "source_cluster=proxy"), None);
    assert_eq!(
        find(&set, "rl", "remote_address=10.0.0.2"),
        Some("per-address")
    );
    let blocked = set
        .find("rl", &"remote_address=10.0.0.1".parse().unwrap())
        .unwrap();
    assert_eq!(blocked.limit.as_ref().unwrap().limit(), 0);
    let day = set
        .find("rl", &"category=account".parse().unwrap())
        .unwrap();
    assert_eq!(day.limit.as_ref().unwrap().window(), 86_400_000_000);
    assert_eq!(
        day.limit.as_ref().unwrap().algorithm(),
        Algorithm::FixedWindow
    );
    let ua = set
        .find("rl", &"user_agent=curl/8".parse().unwrap())
        .unwrap();
    assert!(ua.shadow && ua.detailed_metric);
    assert!(
        set.find("rl", &"health_check=x".parse().unwrap())
            .unwrap()
            .limit
            .is_none()
    );
    // `replaces`: the partner's rule drops the per-address rule.
    let req = Request::new(
        "rl",
        vec![
            "remote_address=1.2.3.4".parse().unwrap(),
            "partner=acme".parse().unwrap(),
        ],
    );
    let m = set.resolve(&req);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].rule.name, "partner_acme");
}

#[test]
fn toml_errors_name_file_line_and_field() {
    let e = parse(
        "f.toml",
        Format::Toml,
        "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"x/s\"\n",
    )
    .unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line, e.field.as_str()),
        ("f.toml", Some(5), "rule[0].limit")
    );
    assert!(e.message.contains("not a quota"), "{e}");

    let e = parse(
        "f.toml",
        Format::Toml,
        "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"5/s\"\n\n[[rule]]\nname = \"b\"\nmatch = \"user\"\nlimit = \"5/s\"\nburts = 3\n",
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(11), "rule[1].burts"),
        "{e}"
    );
    assert!(e.message.contains("unknown field"), "{e}");

    let e = parse(
        "f.toml",
        Format::Toml,
        "[[rule]]\ndomain = \"d\"\nname = \"a\"\nmatch = \"user\"\nlimit = \"5/s\"\nalgorithm = \"fixed_window\"\nmode = \"delay\"\nmax_wait = \"1s\"\n",
    )
    .unwrap_err();
    assert_eq!(e.field, "rule[0].mode", "{e}");
    assert!(e.to_string().starts_with("f.toml:"), "{e}");

    let e = parse(
        "f.toml",
        Format::Toml,
        "[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = 3\n",
    )
    .unwrap_err();
    assert_eq!(e.field, "rule[0].domain", "{e}");

    let e = parse("f.toml", Format::Toml, "[[rule]\n").unwrap_err();
    assert_eq!(e.line, Some(1), "{e}");
}

#[test]
fn calendar_windows_and_time_zones() {
    let rule = |extra: &str| {
        parse(
            "c.toml",
            Format::Toml,
            &format!("domain = \"sms\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\n{extra}"),
        )
    };
    let r = &rule("limit = \"500/day\"\ntime_zone = \"Asia/Shanghai\"\n").unwrap()[0].rule;
    let l = r.limit.as_ref().unwrap();
    assert_eq!(
        l.algorithm(),
        Algorithm::FixedWindow,
        "calendar windows count per period"
    );
    assert_eq!(
        l.quota().calendar(),
        Some(flowgate_core::Calendar::new(
            flowgate_core::CalendarUnit::Day,
            flowgate_core::Tz::Asia__Shanghai
        ))
    );
    assert_eq!(r.time_zone, flowgate_core::Tz::Asia__Shanghai);
    let apart =
        &rule("limit = 500\nwindow = \"day\"\ntime_zone = \"Asia/Shanghai\"\n").unwrap()[0].rule;
    assert_eq!(apart.limit, r.limit);
    let utc = &rule("limit = \"1000/month\"\n").unwrap()[0].rule;
    assert_eq!(utc.time_zone, flowgate_core::Tz::UTC);

    let e = rule("limit = \"500/day\"\ntime_zone = \"Asia/Shangai\"\n").unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line, e.field.as_str()),
        ("c.toml", Some(6), "rule[0].time_zone")
    );
    assert!(e.message.contains("Asia/Shangai"), "{e}");
    let e = rule("limit = \"500/day\"\nalgorithm = \"sliding_window\"\n").unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(6), "rule[0].algorithm"),
        "{e}"
    );
    assert!(
        e.message.contains("fixed_window") && e.message.contains("1d"),
        "{e}"
    );
    let e = rule("limit = \"500/2day\"\n").unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(5), "rule[0].limit"),
        "{e}"
    );
}

#[test]
fn schedules_load_and_their_errors_name_the_override() {
    let base = "domain = \"pay\"\n[[rule]]\nname = \"channel\"\nmatch = [\"channel\"]\nlimit = \"20/s\"\nalgorithm = \"token_bucket\"\ntime_zone = \"Asia/Shanghai\"\n";
    let with = |extra: &str| parse("s.toml", Format::Toml, &format!("{base}{extra}"));
    let ok = with(
        "[[rule.schedule]]\nlimit = \"100/s\"\ndates = \"2026-11-11..2026-11-11\"\n\
         [[rule.schedule]]\nlimit = \"40/s\"\ndays = [\"sat\", \"sun\"]\nhours = \"22:00-06:00\"\n\
         [[rule.schedule]]\nlimit = \"unlimited\"\nhours = \"03:00-04:00\"\n",
    )
    .unwrap();
    let r = &ok[0].rule;
    let s = r.schedule.as_ref().unwrap();
    assert_eq!(s.zone(), flowgate_core::Tz::Asia__Shanghai);
    assert_eq!(s.overrides().len(), 3);
    let promo = s.overrides()[0].limit.as_ref().unwrap();
    assert_eq!(
        (promo.algorithm(), promo.limit(), promo.burst()),
        (Algorithm::TokenBucket, 100, 100)
    );
    assert_eq!(s.overrides()[1].days.len(), 2);
    assert!(s.overrides()[2].limit.is_none());
    // 2026-11-11T12:00+08:00: the promotion.
    assert_eq!(
        r.limit_at(1_794_369_600_000_000).map(|l| l.limit()),
        Some(100)
    );

    let err = |extra: &str| with(extra).unwrap_err();
    let e = err("[[rule.schedule]]\nlimit = \"40/s\"\ndays = [\"caturday\"]\n");
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(10), "rule[0].schedule[0].days"),
        "{e}"
    );
    assert!(e.message.contains("caturday"), "{e}");
    let e = err(
        "[[rule.schedule]]\nlimit = \"40/s\"\nhours = \"9-17\"\n\n[[rule.schedule]]\nlimit = \"40/s\"\nhours = \"09:00-17:00\"\n",
    );
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(10), "rule[0].schedule[0].hours"),
        "{e}"
    );
    let e = err(
        "[[rule.schedule]]\nlimit = \"40/s\"\ndays = [\"sat\"]\n[[rule.schedule]]\nlimit = \"40/s\"\ndates = \"2026-11-12..2026-11-11\"\n",
    );
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(13), "rule[0].schedule[1].dates"),
        "{e}"
    );
    let e = err("[[rule.schedule]]\nlimit = \"40/x\"\ndays = [\"sat\"]\n");
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(9), "rule[0].schedule[0].limit"),
        "{e}"
    );
    let e = err("[[rule.schedule]]\nlimit = \"40/s\"\n");
    assert_eq!(e.field, "rule[0].schedule[0].limit", "{e}");
    assert!(e.message.contains("dates"), "{e}");
    let e = err("[[rule.schedule]]\nlimit = \"40/s\"\ndays = [\"sat\"]\nburst = 0\n");
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(11), "rule[0].schedule[0].burst"),
        "{e}"
    );
    let e = err("[[rule.schedule]]\nlimit = \"40/s\"\ndays = [\"sat\"]\nweekdays = 1\n");
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(11), "rule[0].schedule[0].weekdays"),
        "{e}"
    );
}

#[test]
fn duplicate_rules_are_located() {
    let rules = parse(
        "f.toml",
        Format::Toml,
        "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"5/s\"\n\n[[rule]]\nname = \"b\"\nmatch = \"user\"\nlimit = \"5/s\"\n",
    )
    .unwrap();
    let config = Config {
        rules,
        ..Config::default()
    };
    let e = config.rule_set().unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (Some(7), "rule[1]"), "{e}");
}

#[test]
fn envoy_errors_name_file_line_and_field() {
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 3\n",
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(5), "descriptors[0].rate_limit.unit"),
        "{e}"
    );
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n    rate_limitt:\n      unit: second\n",
    )
    .unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.message.contains("rate_limitt"), "{e}");
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: many\n",
    )
    .unwrap_err();
    assert_eq!(e.line, Some(6), "{e}");
    assert_eq!(e.field, "requests_per_unit", "{e}");
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n",
    )
    .unwrap_err();
    assert!(e.message.contains("unlimited"), "{e}");
    let e = parse("r.yaml", Format::EnvoyYaml, "domain: \"\"\n").unwrap_err();
    assert_eq!(e.field, "domain");
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n  - key: a\n",
    )
    .unwrap_err();
    assert!(e.message.contains("duplicate"), "{e}");
}

#[test]
fn envoy_numeric_values_and_null_lists_load() {
    let rules = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: code\n    value: 200\n    rate_limit: {unit: SECOND, requests_per_unit: 3}\n    descriptors:\n",
    )
    .unwrap();
    assert_eq!(rules[0].rule.name, "code_200");
    assert_eq!(rules[0].rule.limit.as_ref().unwrap().limit(), 3);
}

#[test]
fn queue_errors_name_file_line_and_field() {
    let bad = |text: &str| super::toml::parse("q.toml", text).unwrap_err().to_string();
    let e = bad("[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"0/s\"\n");
    assert!(e.starts_with("q.toml:5: field `queue[0].rate`"), "{e}");
    let e = bad(
        "[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\nlease = \"soon\"\n",
    );
    assert!(e.starts_with("q.toml:6: field `queue[0].lease`"), "{e}");
    let e = bad(
        "[[rule]]\ndomain = \"d\"\nname = \"r\"\nmatch = \"c\"\nlimit = 1\n[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\nburst = \"x\"\n",
    );
    assert!(e.starts_with("q.toml:11: field `queue[0].burst`"), "{e}");
    let e = bad("[[queue]]\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\n");
    assert!(
        e.contains("field `queue[0].domain`") && e.contains("no domain"),
        "{e}"
    );
    let e = bad(
        "[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\nmax_depth = 0\n",
    );
    assert!(e.starts_with("q.toml:6: field `queue[0].max_depth`"), "{e}");
    let e =
        bad("[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\nspeed = 3\n");
    assert!(
        e.contains("queue[0].speed") && e.contains("unknown field"),
        "{e}"
    );
    // Two queues with one name: the second is named.
    let super::toml::Parsed { queues, .. } = super::toml::parse(
        "q.toml",
        "domain = \"d\"\n[[queue]]\nname = \"q\"\nmatch = \"a\"\nrate = \"1/s\"\n[[queue]]\nname = \"q\"\nmatch = \"b\"\nrate = \"1/s\"\n",
    )
    .unwrap();
    let config = Config {
        queues,
        ..Config::default()
    };
    let e = config.queue_set().unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (Some(6), "queue[1]"), "{e}");
    assert!(e.message.contains("two queues"), "{e}");
    // Queues are not set through the admin API.
    let e = parse(
        "<api>",
        Format::Toml,
        "[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("not through the admin API"), "{e}");
}

/// Every rule of the examples and of the Envoy compatibility suite, written as its document
/// (`GET /v1/rules`) and read back as JSON or as TOML (`PUT /v1/rules`), is the same rule.
#[test]
fn a_rule_written_by_the_schema_reads_back_the_same() {
    let compat = Path::new(env!("CARGO_MANIFEST_DIR")).join("../flowgate-server/tests/envoy_compat/valid");
    let mut rules: Vec<Rule> = Vec::new();
    for path in [
        examples().join("flowgate.toml"),
        examples().join("envoy"),
        compat,
    ] {
        rules.extend(read(&path).unwrap().rules.into_iter().map(|r| r.rule));
    }
    assert!(rules.len() > 30, "{}", rules.len());
    let docs: Vec<schema::RuleDoc> = rules.iter().map(schema::RuleDoc::of).collect();
    for (rule, doc) in rules.iter().zip(&docs) {
        let json = serde_json::to_string(doc).unwrap();
        let back: schema::RuleDoc = serde_json::from_str(&json).unwrap();
        assert_eq!(&back.to_rule(None).unwrap(), rule, "{json}");
    }
    // One TOML file of them all, per domain (a file holds one domain's rules once).
    let file = schema::FileDoc {
        rule: docs.clone(),
        ..schema::FileDoc::default()
    };
    let text = ::toml::to_string(&file).unwrap();
    let back = super::toml::parse("all.toml", &text).unwrap().rules;
    let back: Vec<Rule> = back.into_iter().map(|r| r.rule).collect();
    assert_eq!(back, rules, "{text}");
}

/// An Envoy entry's own flags (a parent's shared wildcard, a child's value in the metric label)
/// survive the document: an entry whose flags are not the rule's is written as a table.
#[test]
fn per_entry_flags_are_written_as_tables() {
    let yaml = "domain: d\ndescriptors:\n  - key: path\n    value: files/*\n    share_threshold: true\n    descriptors:\n      - key: user\n        value_to_metric: true\n        rate_limit: { unit: second, requests_per_unit: 5 }\n";
    let config = read_texts(&[("d.yaml".into(), yaml.into())]).unwrap();
    let rule = &config.rules[0].rule;
    assert!(rule.pattern[0].share && !rule.pattern[0].value_to_metric);
    assert!(!rule.pattern[1].share && rule.pattern[1].value_to_metric);
    let doc = schema::RuleDoc::of(rule);
    let json = serde_json::to_value(&doc).unwrap();
    assert_eq!(json["share_threshold"], true);
    assert_eq!(
        json["match"],
        serde_json::json!(["path=files/*", {"entry": "user", "value_to_metric": true}])
    );
    assert_eq!(&doc.to_rule(None).unwrap(), rule);
    // A shared entry needs a wildcard.
    let bad = "[[rule]]\ndomain = \"d\"\nname = \"n\"\nlimit = \"1/s\"\nmatch = [{ entry = \"user=1\", share_threshold = true }]\n";
    let e = super::toml::parse("b.toml", bad).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(5), "rule[0].match"),
        "{e}"
    );
}

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
            "expected \"degraded\"",
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
            // The URL is shown redacted: errors are logged.
            "[[alert]]\nname = \"s\"\nstore = \"degraded\"\nwebhooks = [\"https://u:pw@h/x?k=v\"]\n",
            13,
            "alert[0].webhooks[0]",
            "`https://u:<redacted>@h/x?k=<redacted>`: webhooks are POSTed over plain http://",
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
        let none = super::convert::FileDestinations {
            webhooks: &[],
            alertmanagers: &[],
        };
        assert_eq!(&back.to_spec(None, &none).unwrap(), a, "{json}");
    }
}

const BREAKER: &str = "domain = \"payments\"\n[[breaker]]\nname = \"wpg\"\nmatch = [\"channel=WPG\"]\nstrategy = \"error_ratio\"\nthreshold = 0.5\nwindow = \"10s\"\nmin_calls = 10\nopen_for = \"30s\"\nprobes = 1\n";

/// Loads `text` as one file `b.toml`.
fn load_breakers(text: &str) -> Result<Loaded, ConfigError> {
    load_texts(&[("b.toml".into(), text.to_owned())])
}

#[test]
fn the_issues_breaker_loads_with_its_defaults() {
    use flowgate::breakers::Strategy;
    let loaded = load_breakers(BREAKER).unwrap();
    let d = &loaded.breakers.defs()[0];
    assert_eq!((d.domain.as_str(), d.name.as_str()), ("payments", "wpg"));
    assert_eq!(d.pattern_text(), "channel=WPG");
    let s = &d.spec;
    assert_eq!(s.strategy(), Strategy::ErrorRatio);
    assert_eq!(
        (s.threshold(), s.window(), s.min_calls(), s.open_for()),
        (0.5, 10_000_000, 10, 30_000_000)
    );
    assert_eq!(s.probes(), 1);
    assert_eq!(s.probe_timeout(), 30_000_000, "default: open_for");
    assert_eq!(d.min_nodes, None);
    let loaded = load_breakers(
        "[[breaker]]\ndomain = \"p\"\nname = \"slow\"\nmatch = \"channel\"\nstrategy = \"slow_call_ratio\"\nslow_call = \"800ms\"\nthreshold = 1\nwindow = \"1m\"\nmin_calls = 1\nopen_for = \"5s\"\nprobes = 3\nprobe_timeout = \"2s\"\nmin_nodes = 2\n\
         [[breaker]]\ndomain = \"p\"\nname = \"count\"\nmatch = \"acct\"\nstrategy = \"error_count\"\nthreshold = 5\nwindow = \"10s\"\nmin_calls = 1\nopen_for = \"5s\"\n",
    )
    .unwrap();
    let d = loaded.breakers.defs();
    assert_eq!(
        d[0].spec.strategy(),
        Strategy::SlowCallRatio { slow_call: 800_000 }
    );
    assert_eq!(
        (
            d[0].spec.probes(),
            d[0].spec.probe_timeout(),
            d[0].min_nodes
        ),
        (3, 2_000_000, Some(2))
    );
    assert_eq!(
        (d[1].spec.strategy(), d[1].spec.threshold()),
        (Strategy::ErrorCount, 5.0)
    );
}

#[test]
fn breaker_errors_name_file_line_and_field() {
    // (the key replaced in BREAKER, its new line, line, field, words of the message)
    let cases: &[(&str, &str, u64, &str, &str)] = &[
        (
            "threshold",
            "threshold = 1.5",
            6,
            "breaker[0].threshold",
            "at most 1",
        ),
        (
            "threshold",
            "threshold = 0",
            6,
            "breaker[0].threshold",
            "over 0",
        ),
        (
            "min_calls",
            "min_calls = 0",
            8,
            "breaker[0].min_calls",
            "at least 1",
        ),
        (
            "probes",
            "probes = 0",
            10,
            "breaker[0].probes",
            "at least 1",
        ),
        (
            "open_for",
            "open_for = \"0s\"",
            9,
            "breaker[0].open_for",
            "over 0",
        ),
        (
            "open_for",
            "open_for = \"soon\"",
            9,
            "breaker[0].open_for",
            "soon",
        ),
        (
            "window",
            "window = \"5ms\"",
            7,
            "breaker[0].window",
            "at least 10ms",
        ),
        (
            "strategy",
            "strategy = \"errors\"",
            5,
            "breaker[0].strategy",
            "unknown strategy `errors`",
        ),
        (
            "strategy",
            "strategy = \"slow_call_ratio\"",
            5,
            "breaker[0].slow_call",
            "needs `slow_call`",
        ),
        (
            "probes",
            "probes = 1\nslow_call = \"1s\"",
            11,
            "breaker[0].slow_call",
            "is for the slow_call_ratio",
        ),
        (
            "probes",
            "probes = 1\nmin_nodes = 0",
            11,
            "breaker[0].min_nodes",
            "at least 1",
        ),
        (
            "probes",
            "probes = 1\nprobe_timeout = \"0s\"",
            11,
            "breaker[0].probe_timeout",
            "over 0",
        ),
        (
            "probes",
            "probes = 1\nthreshhold = 2",
            11,
            "breaker[0].threshhold",
            "unknown field",
        ),
        (
            "strategy",
            "strategy = \"error_count\"",
            6,
            "breaker[0].threshold",
            "whole number",
        ),
    ];
    for (key, line_text, line, field, words) in cases {
        let text: String = BREAKER
            .lines()
            .map(|l| {
                if l.starts_with(&format!("{key} =")) {
                    (*line_text).to_owned()
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let e = load_breakers(&text).err().expect(&text);
        assert_eq!(
            (e.file.as_str(), e.line, e.field.as_str()),
            ("b.toml", Some(*line), *field),
            "{text}\n{e}"
        );
        assert!(e.message.contains(words), "{text}\n{e}");
    }
    // Two breakers with one name, or one pattern, in a domain.
    let twice = format!("{BREAKER}{}", &BREAKER[BREAKER.find("[[").unwrap()..]);
    let e = load_breakers(&twice).err().unwrap();
    assert_eq!((e.line, e.field.as_str()), (Some(11), "breaker[1]"), "{e}");
    assert!(
        e.message
            .contains("two breakers in domain `payments` are named `wpg`"),
        "{e}"
    );
    let renamed = twice.replacen("name = \"wpg\"", "name = \"other\"", 1);
    let e = load_breakers(&renamed).err().unwrap();
    assert!(
        e.message.contains(
            "breakers `other` and `wpg` in domain `payments` have the same descriptor pattern"
        ),
        "{e}"
    );
    assert_eq!(e.line, Some(11));
}

#[test]
fn a_breaker_written_by_the_schema_reads_back_the_same() {
    let loaded = load_breakers(
        "[[breaker]]\ndomain = \"p\"\nname = \"slow\"\nmatch = \"channel, acct=a*\"\nstrategy = \"slow_call_ratio\"\nslow_call = \"800ms\"\nthreshold = 0.25\nwindow = \"1m\"\nmin_calls = 3\nopen_for = \"5s\"\nprobes = 3\nprobe_timeout = \"2s\"\nmin_nodes = 2\n\
         [[breaker]]\ndomain = \"p\"\nname = \"count\"\nmatch = \"acct\"\nstrategy = \"error_count\"\nthreshold = 5\nwindow = \"10s\"\nmin_calls = 1\nopen_for = \"5s\"\n",
    )
    .unwrap();
    for d in loaded.breakers.defs() {
        let doc = schema::BreakerDoc::of(d);
        // Through JSON (GET /v1/rules) and TOML (a JSON PUT is read as TOML).
        let json = serde_json::to_string(&doc).unwrap();
        let back: schema::BreakerDoc = serde_json::from_str(&json).unwrap();
        assert_eq!(&back.to_def(None).unwrap(), d, "{json}");
        let file = schema::FileDoc {
            breaker: vec![doc],
            ..schema::FileDoc::default()
        };
        let text = ::toml::to_string(&file).unwrap();
        let again = load_breakers(&text).unwrap();
        assert_eq!(&again.breakers.defs()[0], d, "{text}");
    }
}

#[test]
fn breakers_sent_to_a_node_on_files_are_read_with_the_rules() {
    let c = parse_config("<api>", Format::Toml, BREAKER).unwrap();
    assert_eq!(c.breaker_set().unwrap().defs().len(), 1);
    let e = parse_config("<api>", Format::Toml, &BREAKER.replace("0.5", "2.0")).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line, e.field.as_str()),
        ("<api>", Some(6), "breaker[0].threshold")
    );
}
