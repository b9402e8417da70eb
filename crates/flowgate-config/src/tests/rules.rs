//! Rules: the examples, their errors, calendars, schedules, warm-up, adaptive limits, read-back.

use super::*;

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
    let r = &rule("limit = \"500/day\"\ntime_zone = \"Asia/Shanghai\"\n").unwrap()[0].item;
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
        &rule("limit = 500\nwindow = \"day\"\ntime_zone = \"Asia/Shanghai\"\n").unwrap()[0].item;
    assert_eq!(apart.limit, r.limit);
    let utc = &rule("limit = \"1000/month\"\n").unwrap()[0].item;
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
    let r = &ok[0].item;
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

/// Every rule of the examples and of the Envoy compatibility suite, written as its document
/// (`GET /v1/rules`) and read back as JSON or as TOML (`PUT /v1/rules`), is the same rule.
#[test]
fn a_rule_written_by_the_schema_reads_back_the_same() {
    let compat =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../flowgate-server/tests/envoy_compat/valid");
    let mut rules: Vec<Rule> = Vec::new();
    for path in [
        examples().join("flowgate.toml"),
        examples().join("envoy"),
        compat,
    ] {
        rules.extend(read(&path).unwrap().rules.into_iter().map(|r| r.item));
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
    let back = toml_read("all.toml", &text).unwrap().rules;
    let back: Vec<Rule> = back.into_iter().map(|r| r.item).collect();
    assert_eq!(back, rules, "{text}");
}

/// `buckets` given to an algorithm that ignores it (a leaky bucket, its schedule's override too)
/// is written back, so that the document reads back as the same rule (the rule-file fuzzer
/// found one that did not).
#[test]
fn buckets_given_to_another_algorithm_read_back() {
    let text = "[[rule]]\ndomain = \"payments\"\nname = \"wpg\"\nmatch = [\"channel=WPG\"]\nlimit = \"20/s\"\nalgorithm = \"leaky_bucket\"\nburst = 5\nbuckets = 20\n\n[[rule.schedule]]\nlimit = \"100/s\"\ndays = [\"sat\"]\n";
    let rules: Vec<Rule> = toml_read("r.toml", text)
        .unwrap()
        .rules
        .into_iter()
        .map(|r| r.item)
        .collect();
    let file = schema::FileDoc {
        rule: rules.iter().map(schema::RuleDoc::of).collect(),
        ..schema::FileDoc::default()
    };
    let written = ::toml::to_string(&file).unwrap();
    let back: Vec<Rule> = toml_read("back.toml", &written)
        .unwrap()
        .rules
        .into_iter()
        .map(|r| r.item)
        .collect();
    assert_eq!(back, rules, "{written}");
}

/// An Envoy entry's own flags (a parent's shared wildcard, a child's value in the metric label)
/// survive the document: an entry whose flags are not the rule's is written as a table.
#[test]
fn per_entry_flags_are_written_as_tables() {
    let yaml = "domain: d\ndescriptors:\n  - key: path\n    value: files/*\n    share_threshold: true\n    descriptors:\n      - key: user\n        value_to_metric: true\n        rate_limit: { unit: second, requests_per_unit: 5 }\n";
    let config = read_texts(&[("d.yaml".into(), yaml.into())]).unwrap();
    let rule = &config.rules[0].item;
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
    let e = toml_read("b.toml", bad).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(5), "rule[0].match"),
        "{e}"
    );
}

mod warmup {
    use super::*;

    fn rule(extra: &str) -> String {
        format!(
            "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"100/s\"\n{extra}"
        )
    }

    #[test]
    fn warmup_fields_load_and_read_back() {
        let set = parse(
            "f.toml",
            Format::Toml,
            &rule("algorithm = \"token_bucket\"\nwarmup = \"30s\"\ncold_factor = 2.5\n"),
        )
        .unwrap();
        let r = &set[0].item;
        let l = r.limit.as_ref().unwrap();
        let w = l.warmup().unwrap();
        assert_eq!(
            (w.period(), w.cold_milli(), l.burst()),
            (30_000_000, 2500, 1)
        );
        let doc = schema::RuleDoc::of(r);
        assert_eq!(doc.warmup.as_deref(), Some("30s"));
        assert_eq!(doc.cold_factor, Some(2.5));
        assert_eq!(&doc.to_rule(None).unwrap(), r);
        // The default factor is not written.
        let set = parse(
            "f.toml",
            Format::Toml,
            &rule("algorithm = \"token_bucket\"\nwarmup = \"10s\"\n"),
        )
        .unwrap();
        assert_eq!(schema::RuleDoc::of(&set[0].item).cold_factor, None);
    }

    #[test]
    fn bad_warmup_fields_are_refused_with_file_line_and_field() {
        for (extra, line, field, says) in [
            (
                "algorithm = \"sliding_log\"\nwarmup = \"30s\"\n",
                7,
                "warmup",
                "token_bucket",
            ),
            ("warmup = \"30s\"\n", 6, "warmup", "token_bucket"),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"30s\"\ncold_factor = 1.0\n",
                8,
                "cold_factor",
                "more than 1",
            ),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"30s\"\ncold_factor = -3\n",
                8,
                "cold_factor",
                "more than 1",
            ),
            (
                "algorithm = \"token_bucket\"\ncold_factor = 2.0\n",
                7,
                "cold_factor",
                "needs a warmup",
            ),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"0s\"\n",
                7,
                "warmup",
                "at most 1h",
            ),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"30d\"\n",
                7,
                "warmup",
                "at most 1h",
            ),
            (
                "algorithm = \"token_bucket\"\nwarmup = \"soon\"\n",
                7,
                "warmup",
                "",
            ),
        ] {
            let e = parse("f.toml", Format::Toml, &rule(extra)).unwrap_err();
            assert_eq!(
                (e.file.as_str(), e.line, e.field.as_str()),
                ("f.toml", Some(line), format!("rule[0].{field}").as_str()),
                "{extra}: {e}"
            );
            assert!(e.message.contains(says), "{extra}: {e}");
        }
    }
}

mod adaptive {
    use super::*;

    fn rule(limit: &str, extra: &str) -> String {
        format!(
            "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"{limit}\"\n{extra}"
        )
    }

    #[test]
    fn adaptive_fields_load_and_read_back() {
        let set = parse(
            "f.toml",
            Format::Toml,
            &rule(
                "10/30s",
                "algorithm = \"concurrency\"\nadaptive = { min = 5, max = 200, max_latency = \"250ms\", backoff = 0.8, initial = 20 }\n",
            ),
        )
        .unwrap();
        let r = &set[0].item;
        let a = r.adaptive.as_ref().unwrap();
        assert_eq!(
            (a.initial, a.min, a.max, a.max_latency, a.backoff),
            (20, 5, 200, 250_000.0, 0.8)
        );
        let doc = schema::RuleDoc::of(r);
        assert_eq!(doc.adaptive.as_ref().unwrap().max_latency, "250ms");
        assert_eq!(&doc.to_rule(None).unwrap(), r);
        // Defaults: min 1, backoff 0.9, the rule's limit as the start.
        let set = parse(
            "f.toml",
            Format::Toml,
            &rule(
                "10/30s",
                "algorithm = \"concurrency\"\nadaptive = { max = 50, max_latency = \"1s\" }\n",
            ),
        )
        .unwrap();
        let a = set[0].item.adaptive.as_ref().unwrap();
        assert_eq!((a.initial, a.min, a.backoff), (10, 1, 0.9));
    }

    #[test]
    fn bad_adaptive_fields_are_refused_with_file_line_and_field() {
        let ok = "max = 50, max_latency = \"250ms\"";
        for (limit, extra, line, field, says) in [
            (
                "10/30s",
                format!("adaptive = {{ {ok} }}\n"),
                6,
                "adaptive",
                "needs algorithm = \"concurrency\"",
            ),
            (
                "10/s",
                format!("algorithm = \"token_bucket\"\nadaptive = {{ {ok} }}\n"),
                7,
                "adaptive",
                "not token_bucket",
            ),
            (
                "10/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ min = 0, {ok} }}\n"),
                7,
                "adaptive.min",
                "at least 1",
            ),
            (
                "10/30s",
                "algorithm = \"concurrency\"\nadaptive = { min = 60, max = 50, max_latency = \"1s\" }\n".to_owned(),
                7,
                "adaptive.max",
                "below min 60",
            ),
            (
                "10/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ {ok}, backoff = 1.0 }}\n"),
                7,
                "adaptive.backoff",
                "between 0 and 1",
            ),
            (
                "10/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ {ok}, backoff = 0 }}\n"),
                7,
                "adaptive.backoff",
                "between 0 and 1",
            ),
            (
                "10/30s",
                "algorithm = \"concurrency\"\nadaptive = { max = 50, max_latency = \"0s\" }\n"
                    .to_owned(),
                7,
                "adaptive.max_latency",
                "longer than 0",
            ),
            (
                "10/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ {ok}, initial = 51 }}\n"),
                7,
                "adaptive.initial",
                "outside min..=max",
            ),
            (
                "100/30s",
                format!("algorithm = \"concurrency\"\nadaptive = {{ {ok} }}\n"),
                5,
                "limit",
                "adaptive.initial",
            ),
        ] {
            let e = parse("f.toml", Format::Toml, &rule(limit, &extra)).unwrap_err();
            assert_eq!(
                (e.file.as_str(), e.line, e.field.as_str()),
                ("f.toml", Some(line), format!("rule[0].{field}").as_str()),
                "{extra}: {e}"
            );
            assert!(e.message.contains(says), "{extra}: {e}");
        }
    }
}

/// An unknown `algorithm`, `mode` or `failure` is serde's "expected one of" error, at its file,
/// line and field; so is one in a schedule's override or a trial.
#[test]
fn unknown_names_are_refused_with_the_names_expected() {
    let base = "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"5/s\"\n";
    for (extra, line, field, says) in [
        (
            "algorithm = \"token\"\n",
            6,
            "rule[0].algorithm",
            "unknown variant `token`, expected one of `fixed_window`, `sliding_log`, `sliding_window`, `token_bucket`, `leaky_bucket`, `concurrency`",
        ),
        (
            "mode = \"wait\"\n",
            6,
            "rule[0].mode",
            "unknown variant `wait`, expected `reject` or `delay`",
        ),
        (
            "failure = \"fallback\"\n",
            6,
            "rule[0].failure",
            "unknown variant `fallback`, expected one of `open`, `closed`, `local`",
        ),
        (
            "trial = { limit = \"2/s\", algorithm = \"gcra\" }\n",
            6,
            "rule[0].trial.algorithm",
            "unknown variant `gcra`",
        ),
        (
            "[[rule.schedule]]\nlimit = \"1/s\"\ndays = [\"sat\"]\nalgorithm = \"fast\"\n",
            9,
            "rule[0].schedule[0].algorithm",
            "unknown variant `fast`",
        ),
    ] {
        let e = parse("f.toml", Format::Toml, &format!("{base}{extra}")).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line, e.field.as_str()),
            ("f.toml", Some(line), field),
            "{extra}: {e}"
        );
        assert!(e.message.contains(says), "{extra}: {e}");
    }
}

/// A TOML syntax error names its line and the table and key it is in, found in what the parser
/// recovers of the file.
#[test]
fn a_syntax_error_names_its_table() {
    let e = parse(
        "f.toml",
        Format::Toml,
        "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"5/s\"\n[[rule]]\nname = \"b\"\nlimit = \"5/s\n",
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(8), "rule[1].limit"),
        "{e}"
    );
    let e = parse(
        "f.toml",
        Format::Toml,
        "domain = \"d\"\n[[rule]]\nname = \"a\"\nmatch = \"user\"\nlimit = \"5/s\"\n[[rule.schedule]]\nlimit = \"1/s\"\ndays = [\"sat\"\n",
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(8), "rule[0].schedule[0].days"),
        "{e}"
    );
    let e = parse("f.toml", Format::Toml, "domain = \"d\nx = 1\n").unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (Some(1), "domain"), "{e}");
}
