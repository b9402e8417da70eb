//! A rule's `max_debt`: loaded, read back, and its errors naming the field.

use super::*;

fn rule(extra: &str) -> String {
    format!(
        "[[rule]]\ndomain = \"llm\"\nname = \"tokens\"\nmatch = [\"api_key\"]\nlimit = \"10000/m\"\n{extra}"
    )
}

fn rules(text: &str) -> Vec<Rule> {
    toml_read("r.toml", text)
        .unwrap()
        .rules
        .into_iter()
        .map(|r| r.item)
        .collect()
}

#[test]
fn max_debt_loads_defaults_to_the_limit_and_reads_back() {
    let set = rules(&rule(
        "max_debt = 2500\n[[rule.schedule]]\nlimit = \"500/m\"\ndays = [\"sat\"]\n",
    ));
    let l = set[0].limit.as_ref().unwrap();
    assert_eq!(l.max_debt(), 2500);
    let o = &set[0].schedule.as_ref().unwrap().overrides()[0];
    assert_eq!(
        o.limit.as_ref().unwrap().max_debt(),
        2500,
        "every limit of the rule"
    );
    assert_eq!(
        rules(&rule(""))[0].limit.as_ref().unwrap().max_debt(),
        10_000
    );
    for text in [
        rule("max_debt = 2500\n"),
        rule(""),
        rule("max_debt = 10000\n"),
    ] {
        let set = rules(&text);
        let file = schema::FileDoc {
            rule: set.iter().map(schema::RuleDoc::of).collect(),
            ..schema::FileDoc::default()
        };
        let written = ::toml::to_string(&file).unwrap();
        assert_eq!(rules(&written), set, "{written}");
        assert_eq!(
            written.contains("max_debt = 2500"),
            text.contains("2500"),
            "{written}"
        );
    }
}

#[test]
fn a_bad_max_debt_is_a_clear_error_naming_the_field() {
    for (extra, says) in [
        ("max_debt = 0\n", "max_debt must be at least 1 unit, not 0"),
        (
            "max_debt = -3\n",
            "max_debt must be at least 1 unit, not -3",
        ),
        (
            "max_debt = 5000000000\nalgorithm = \"fixed_window\"\n",
            "max_debt 5000000000 is larger than this limit can hold",
        ),
        (
            "max_debt = 100\nalgorithm = \"concurrency\"\n",
            "max_debt is for charges: concurrency takes no charges",
        ),
    ] {
        let e = toml_read("r.toml", &rule(extra)).unwrap_err();
        assert_eq!(e.field, "rule[0].max_debt", "{extra}: {e}");
        assert!(e.message.contains(says), "{extra}: {e}");
    }
}

#[test]
fn charge_report_loads_and_reads_back() {
    use flowgate_core::ChargeMode;
    for (extra, mode) in [
        ("", ChargeMode::Check),
        ("charge = \"check\"\n", ChargeMode::Check),
        ("charge = \"report\"\n", ChargeMode::Report),
        (
            "charge = \"report\"\nalgorithm = \"token_bucket\"\n",
            ChargeMode::Report,
        ),
    ] {
        let set = rules(&rule(extra));
        assert_eq!(set[0].charge, mode, "{extra}");
        let file = schema::FileDoc {
            rule: set.iter().map(schema::RuleDoc::of).collect(),
            ..schema::FileDoc::default()
        };
        let written = ::toml::to_string(&file).unwrap();
        assert_eq!(rules(&written), set, "{written}");
    }
}

#[test]
fn a_bad_charge_is_a_clear_error_naming_the_field() {
    for (extra, says) in [
        (
            "charge = \"report\"\nalgorithm = \"concurrency\"\n",
            "charge = \"report\" needs a rule that takes charges: concurrency takes no charges",
        ),
        (
            "charge = \"report\"\nalgorithm = \"token_bucket\"\nwarmup = \"30s\"\n",
            "token_bucket with warmup takes no charges",
        ),
        ("charge = \"later\"\n", "later"),
    ] {
        let e = toml_read("r.toml", &rule(extra)).unwrap_err();
        assert_eq!(e.field, "rule[0].charge", "{extra}: {e}");
        assert!(e.message.contains(says), "{extra}: {e}");
    }
    let unlimited = "[[rule]]\ndomain = \"llm\"\nname = \"tokens\"\nmatch = [\"api_key\"]\nunlimited = true\ncharge = \"report\"\n";
    let e = toml_read("r.toml", unlimited).unwrap_err();
    assert_eq!(e.field, "rule[0].charge", "{e}");
    assert!(
        e.message.contains("an unlimited rule counts nothing"),
        "{e}"
    );
}
