//! Fuzzing the configuration readers (Flowgate TOML and envoyproxy/ratelimit YAML) on stable
//! Rust: the examples, the docs' blocks and the Envoy fixtures mutated, and documents generated
//! by the schema's types (`generate/`). Every error is clear (it names its file and a line or a
//! field), and every declaration of a configuration that loads reads back from its document.
//! `FUZZ_CASES=N` runs each target N cases (see `docs/fuzzing.md`).

mod generate;

use flowgate_config::schema::{AlertDoc, BreakerDoc, FileDoc, QueueDoc, RuleDoc};
use flowgate_config::{Config, ConfigError};
use flowgate_testkit::fuzz;
use generate::{
    Declared, Wrong, file_doc, mutated_seed, toml_seeds, watch, watch_kind, yaml_doc, yaml_seeds,
};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

/// A configuration error is clear: it names the file, and a line (within the text) or a field.
fn clear_config_error(e: &ConfigError, name: &str, text: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(&e.file, name, "{}", e);
    prop_assert!(!e.message.trim().is_empty(), "no message: {e:?}");
    prop_assert!(
        e.line.is_some() || !e.field.is_empty(),
        "neither line nor field: {e}\n--- text ---\n{text}"
    );
    if let Some(line) = e.line {
        let lines = text.split('\n').count() as u64;
        prop_assert!(
            (1..=lines + 1).contains(&line),
            "line {line} of {lines}: {e}"
        );
    }
    Ok(())
}

/// Loads `text` as the file `name` and checks what comes back: a configuration whose every
/// declaration reads back from its document ([`reads_back`]), or a clear error.
fn load(name: &str, text: &str) -> Result<(), TestCaseError> {
    match flowgate_config::load_texts(&[(name.to_owned(), text.to_owned())]) {
        Ok(loaded) => reads_back(&loaded.config),
        Err(e) => clear_config_error(&e, name, text),
    }
}

/// Every declaration of `config` written as its document (`RuleDoc::of`, ..., as `GET /v1/rules`
/// writes them) and read back, as a TOML file and as a JSON `PUT` body, is the same declaration:
/// `to_rule(of(rule)) == rule`, and so for queues, alerts and breakers.
fn reads_back(config: &Config) -> Result<(), TestCaseError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| TestCaseError::fail(format!("{what}: {e}"));
    let mut breaker = Vec::new();
    for b in &config.breakers {
        breaker.push(BreakerDoc::of(&b.item).map_err(|e| fail("a breaker's document", &e))?);
    }
    let doc = FileDoc {
        domain: None,
        alert_webhooks: Vec::new(),
        alertmanagers: Vec::new(),
        rule: config.rules.iter().map(|r| RuleDoc::of(&r.item)).collect(),
        queue: config
            .queues
            .iter()
            .map(|q| QueueDoc::of(&q.item))
            .collect(),
        alert: config
            .alerts
            .iter()
            .map(|a| AlertDoc::of(&a.item))
            .collect(),
        breaker,
    };
    let text = toml::to_string(&doc).map_err(|e| fail("written as TOML", &e))?;
    let back = flowgate_config::read_texts(&[("back.toml".to_owned(), text.clone())])
        .map_err(|e| fail(&format!("read back from\n{text}"), &e))?;
    prop_assert_eq!(
        declared(&back),
        declared(config),
        "read back from TOML:\n{}",
        text
    );
    let json = match serde_json::to_value(&doc) {
        Ok(serde_json::Value::Object(m)) => m,
        other => return Err(fail("written as JSON", &format!("{other:?}"))),
    };
    let (_, back) = flowgate_config::parse_json("the JSON body", &json)
        .map_err(|e| fail(&format!("read back from {json:?}"), &e))?;
    prop_assert_eq!(
        declared(&back),
        declared(config),
        "read back from JSON: {:?}",
        json
    );
    Ok(())
}

/// What a configuration declares, without where.
#[allow(clippy::type_complexity)]
fn declared(
    c: &Config,
) -> (
    Vec<&flowgate::Rule>,
    Vec<&flowgate::queue::QueueSpec>,
    Vec<&flowgate_config::alert::AlertSpec>,
    Vec<&flowgate::breakers::BreakerDef>,
) {
    (
        c.rules.iter().map(|l| &l.item).collect(),
        c.queues.iter().map(|l| &l.item).collect(),
        c.alerts.iter().map(|l| &l.item).collect(),
        c.breakers.iter().map(|l| &l.item).collect(),
    )
}

proptest! {
    #![proptest_config(fuzz::config(400))]

    #[test]
    fn toml_mutated_from_the_examples(text in mutated_seed(toml_seeds(), 4)) {
        load("fuzz.toml", &text)?;
    }

    #[test]
    fn toml_generated_by_the_schema(doc in file_doc()) {
        // (the writer refuses what TOML cannot hold, such as a key after a table: not a case)
        if let Ok(text) = toml::to_string(&doc) {
            load("fuzz.toml", &text)?;
        }
    }

    #[test]
    fn yaml_mutated_from_the_fixtures(text in mutated_seed(yaml_seeds(), 4)) {
        load("fuzz.yaml", &text)?;
    }

    #[test]
    fn every_kind_of_alert_is_generated(kinds in prop::collection::vec(watch(Wrong(0), Declared { rules: 1, queues: 1, breakers: 1 }), 200)) {
        let seen: std::collections::BTreeSet<usize> = kinds.iter().map(watch_kind).collect();
        prop_assert_eq!(seen.len(), 6, "{:?}", seen);
    }

    #[test]
    fn yaml_generated_by_the_schema(text in yaml_doc()) {
        load("fuzz.yaml", &text)?;
    }
}

/// The generator reaches what it is for: among the files it writes, some load with alerts,
/// breakers, a token bucket's warm-up, a trial limit and an adaptive limit (and so are read
/// back by [`reads_back`]).
#[test]
fn generated_files_load_with_every_section() {
    use proptest::strategy::ValueTree;
    let mut runner = TestRunner::deterministic();
    let (mut loaded, mut seen) = (0, [0usize; 5]);
    for _ in 0..300 {
        let doc = file_doc().new_tree(&mut runner).expect("a file").current();
        let Ok(text) = toml::to_string(&doc) else {
            continue;
        };
        let Ok(l) = flowgate_config::load_texts(&[("f.toml".to_owned(), text)]) else {
            continue;
        };
        loaded += 1;
        let rules = l.rules.rules();
        for (n, has) in seen.iter_mut().zip([
            !l.config.alerts.is_empty(),
            !l.config.breakers.is_empty(),
            rules
                .iter()
                .any(|r| r.limit.as_ref().is_some_and(|l| l.warmup().is_some())),
            rules.iter().any(|r| r.trial.is_some()),
            rules.iter().any(|r| r.adaptive.is_some()),
        ]) {
            *n += usize::from(has);
        }
    }
    assert!(loaded >= 100, "{loaded} of 300 load");
    assert!(
        seen.iter().all(|&n| n >= 5),
        "alerts, breakers, warm-up, trial, adaptive: {seen:?} of {loaded}"
    );
}

/// Found by `toml_generated_by_the_schema`: a breaker's (or a queue's) entry written as a table
/// with a flag lost it in its document (`GET /v1/rules`), so a `PUT` of what `GET` showed changed
/// the pattern.
#[test]
fn a_breakers_flagged_entry_reads_back() {
    let text = "domain = \"api\"\n[[breaker]]\nname = \"wpg\"\nmatch = [{ entry = \"biz=PAY\", value_to_metric = true }]\nstrategy = \"error_ratio\"\nthreshold = 0.25\nwindow = \"10s\"\nmin_calls = 1\nopen_for = \"30s\"\n\
        [[queue]]\nname = \"refunds\"\nmatch = [{ entry = \"channel=*\", share_threshold = true }]\nrate = \"1/s\"\n";
    let loaded = flowgate_config::load_texts(&[("f.toml".to_owned(), text.to_owned())])
        .unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = reads_back(&loaded.config) {
        panic!("{e}");
    }
}
