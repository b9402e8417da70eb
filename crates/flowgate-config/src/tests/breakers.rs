//! Circuit breakers.

use super::*;

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
            "unknown variant `errors`, expected one of `error_ratio`, `slow_call_ratio`, `error_count`",
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
        let doc = schema::BreakerDoc::of(d).unwrap();
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
