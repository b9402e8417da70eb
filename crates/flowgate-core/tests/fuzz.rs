//! Fuzzing the core's text decoders: every text a configuration, a request body or a lease token
//! carries into the core (quotas, durations, descriptors, dates, hours, days, zones, algorithm
//! names, lease tokens), generated well formed, then mutated. Each decodes or answers an error
//! that quotes the text at fault; none panics. `FUZZ_CASES=N` runs each target N cases (see
//! `docs/fuzzing.md`).

use flowgate_core::calendar::parse_zone;
use flowgate_core::queue::{QueueError, Token};
use flowgate_core::quota::parse_duration;
use flowgate_core::schedule::{Dates, Hours, parse_day};
use flowgate_core::{Algorithm, Descriptor, Quota};
use flowgate_testkit::fuzz::{self, hostile_number, hostile_text};
use proptest::prelude::*;

/// Well-formed texts of each decoder, to mutate.
const SEEDS: &[&str] = &[
    "20/s",
    "5/30s",
    "1000/1m",
    "500/day",
    "100/week",
    "1/month",
    "4294967295/1w",
    "250ms",
    "10 s",
    "2h",
    "biz=PAY, channel=WPG",
    "path=files/*",
    "2026-11-11..2026-11-12",
    "2026-02-28",
    "22:00-06:00",
    "00:00-24:00",
    "sat",
    "Sunday",
    "Asia/Shanghai",
    "UTC",
    "token_bucket",
    "1f.42.api:refunds:biz=REFUND",
];

/// A seed, a hostile text, a hostile number, or a seed mutated up to three times.
fn text() -> impl Strategy<Value = String> {
    let seed = prop::sample::select(SEEDS).prop_map(str::to_owned);
    prop_oneof![
        seed.clone(),
        hostile_text(),
        hostile_number(),
        (hostile_number(), hostile_text()).prop_map(|(n, t)| format!("{n}/{t}")),
        (
            hostile_number(),
            prop::sample::select(&["us", "ms", "s", "m", "h", "d", "w"][..])
        )
            .prop_map(|(n, u)| format!("{n}{u}")),
        seed.prop_flat_map(|s| fuzz::mutated(s, 3)),
    ]
}

/// An error message that quotes the text it refuses (its first characters, when the text is
/// long), so that the person reading it finds the fault.
fn quotes(message: &str, text: &str) -> bool {
    let head: String = text.chars().take(100).collect();
    message.contains(&head)
}

proptest! {
    #![proptest_config(fuzz::config(2000))]

    #[test]
    fn text_decoders_answer_a_value_or_an_error_naming_the_text(t in text()) {
        match t.parse::<Quota>() {
            // A quota reads back as itself.
            Ok(q) => prop_assert_eq!(q.to_string().parse::<Quota>(), Ok(q)),
            Err(e) => {
                let m = e.to_string();
                prop_assert!(
                    quotes(&m, &t) || m.contains("window") || m.contains("limit"),
                    "{t:?}: {m}"
                );
            }
        }
        if let Err(e) = parse_duration(&t) {
            let m = e.to_string();
            prop_assert!(quotes(&m, &t) || m.contains("window"), "{t:?}: {m}");
        }
        if let Err(e) = t.parse::<Descriptor>() {
            prop_assert!(quotes(&e.to_string(), &t), "{t:?}: {e}");
        }
        if let Err(m) = Dates::parse(&t) {
            prop_assert!(quotes(&m, &t), "{t:?}: {m}");
        }
        if let Err(m) = Hours::parse(&t) {
            prop_assert!(quotes(&m, &t), "{t:?}: {m}");
        }
        if let Err(m) = parse_day(&t) {
            prop_assert!(quotes(&m, &t), "{t:?}: {m}");
        }
        if let Err(m) = parse_zone(&t) {
            prop_assert!(quotes(&m, &t), "{t:?}: {m}");
        }
        if let Err(e) = t.parse::<Algorithm>() {
            prop_assert!(quotes(&e.to_string(), &t), "{t:?}: {e}");
        }
    }

    #[test]
    fn lease_tokens_decode_to_a_token_or_bad_token(t in text()) {
        match t.parse::<Token>() {
            // A token reads back as itself.
            Ok(tok) => prop_assert_eq!(tok.to_string().parse::<Token>(), Ok(tok)),
            Err(QueueError::BadToken(quoted)) => {
                let head: String = t.chars().take(200).collect();
                prop_assert_eq!(quoted, head);
            }
            Err(e) => prop_assert!(false, "{t:?}: {e}"),
        }
    }
}

/// Found by the fuzzer: a quota with an empty window was refused as "`` is not a duration",
/// which names nothing the user wrote.
#[test]
fn a_quota_without_its_window_is_quoted_whole() {
    for text in ["4294967295/", "5/", "5/ ", "20/x"] {
        let e = text.parse::<Quota>().err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(format!("`{text}` is not a duration: write a whole number and a unit (us, ms, s, m, h, d, w)").as_str())
        );
    }
}
