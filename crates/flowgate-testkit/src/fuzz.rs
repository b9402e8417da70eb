//! What every crate's `tests/fuzz.rs` shares: the case count (`FUZZ_CASES`), the proptest
//! configuration, and structure-aware mutations of a valid text document.
//!
//! The fuzz targets run in the test suite with a small default count each, so that all of
//! them together stay under about a minute on a 2-core machine; `FUZZ_CASES=20000 cargo test
//! -p <crate> --test fuzz` runs each target that many cases instead (see `docs/fuzzing.md`).

use proptest::prelude::*;
use proptest::test_runner::Config;

/// The environment variable that sets every fuzz target's case count.
pub const CASES_VAR: &str = "FUZZ_CASES";

/// The case count of a fuzz target: `FUZZ_CASES` when it is set to a positive number, else
/// `default` (the bounded count of the test suite).
pub fn cases(default: u32) -> u32 {
    std::env::var(CASES_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// The proptest configuration of a fuzz target: [`cases`] cases, no regression files (a failure
/// found becomes a named `#[test]` with its input inline), and shrinking bounded in time.
pub fn config(default: u32) -> Config {
    Config {
        cases: cases(default),
        failure_persistence: None,
        max_shrink_time: 30_000,
        ..Config::default()
    }
}

/// Texts that break parsers and bounds: empty, whitespace, NUL and control bytes, quotes and
/// escapes, unicode (combining marks, right-to-left, astral plane), huge and negative numbers,
/// separators of the formats (`=`, `:`, `,`, `*`, `.`), long runs.
pub fn hostile_text() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        Just(String::new()),
        Just(" ".to_owned()),
        Just("\0".to_owned()),
        Just("a\0b".to_owned()),
        Just("\u{7f}\u{1b}[2J".to_owned()),
        Just("\"".to_owned()),
        Just("'\\\"\\u0000".to_owned()),
        Just("é\u{301}".to_owned()),
        Just("\u{202e}evil".to_owned()),
        Just("𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🦀".to_owned()),
        Just("\u{feff}".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("-9223372036854775809".to_owned()),
        Just("1e400".to_owned()),
        Just("-0".to_owned()),
        Just("NaN".to_owned()),
        Just("k=v, k2=v2".to_owned()),
        Just("a=*".to_owned()),
        Just("*".to_owned()),
        Just("=".to_owned()),
        Just(",,,".to_owned()),
        Just("a.b.c".to_owned()),
        Just("[[rule]]".to_owned()),
        Just("- key: x".to_owned()),
        Just("{}".to_owned()),
        (1usize..3000).prop_map(|n| "x".repeat(n)),
        (1usize..200).prop_map(|n| "é".repeat(n)),
        "\\PC{0,40}",
        ".{0,40}",
    ]
}

/// Numbers at and beyond the edges of the integer types, as text.
pub fn hostile_number() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("4294967295".to_owned()),
        Just("4294967296".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("-9223372036854775808".to_owned()),
        Just("1e308".to_owned()),
        Just("1.5".to_owned()),
        Just("0x10".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
    ]
}

/// One structural mutation of a text document.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// Cut the text at a byte (moved back to a character boundary).
    Truncate(prop::sample::Index),
    /// Replace the value after the first `=` or `:` of a line by junk.
    ReplaceValue(prop::sample::Index, String),
    /// Repeat a line right after itself.
    DuplicateLine(prop::sample::Index),
    /// Remove a line.
    DeleteLine(prop::sample::Index),
    /// Swap two lines.
    SwapLines(prop::sample::Index, prop::sample::Index),
    /// Insert junk at a byte (moved back to a character boundary).
    Insert(prop::sample::Index, String),
    /// Replace a byte (at a character boundary) by another ASCII character.
    Flip(prop::sample::Index, char),
    /// Wrap a line's value in `depth` brackets (`[[[…]]]` or `{a={a=…}}`).
    Nest(prop::sample::Index, usize, bool),
    /// Repeat the whole document.
    Repeat(u8),
}

/// A [`Mutation`] whose junk is [`hostile_text`] or [`hostile_number`].
pub fn mutation() -> impl Strategy<Value = Mutation> {
    let junk = prop_oneof![hostile_text(), hostile_number()];
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        (any::<prop::sample::Index>(), junk.clone())
            .prop_map(|(i, j)| Mutation::ReplaceValue(i, j)),
        any::<prop::sample::Index>().prop_map(Mutation::DuplicateLine),
        any::<prop::sample::Index>().prop_map(Mutation::DeleteLine),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (any::<prop::sample::Index>(), junk).prop_map(|(i, j)| Mutation::Insert(i, j)),
        (
            any::<prop::sample::Index>(),
            proptest::char::range(' ', '~')
        )
            .prop_map(|(i, c)| Mutation::Flip(i, c)),
        (any::<prop::sample::Index>(), 1usize..300, any::<bool>())
            .prop_map(|(i, d, b)| Mutation::Nest(i, d, b)),
        (2u8..5).prop_map(Mutation::Repeat),
    ]
}

/// Up to `n` mutations applied in turn to `text`.
pub fn mutated(text: String, n: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(mutation(), 1..=n.max(1))
        .prop_map(move |ms| ms.iter().fold(text.clone(), |t, m| apply(&t, m)))
}

fn boundary(text: &str, i: &prop::sample::Index) -> usize {
    let mut at = i.index(text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `text` with `m` applied.
pub fn apply(text: &str, m: &Mutation) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let line = |i: &prop::sample::Index| i.index(lines.len());
    let join = |ls: Vec<String>| ls.join("\n");
    let owned = || lines.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>();
    match m {
        Mutation::Truncate(i) => text[..boundary(text, i)].to_owned(),
        Mutation::ReplaceValue(i, junk) => {
            let mut ls = owned();
            let n = line(i);
            if let Some(at) = ls[n].find(['=', ':']) {
                ls[n] = format!("{} {junk}", &ls[n][..=at]);
            } else {
                ls[n] = junk.clone();
            }
            join(ls)
        }
        Mutation::DuplicateLine(i) => {
            let mut ls = owned();
            let n = line(i);
            ls.insert(n, ls[n].clone());
            join(ls)
        }
        Mutation::DeleteLine(i) => {
            let mut ls = owned();
            ls.remove(line(i));
            join(ls)
        }
        Mutation::SwapLines(a, b) => {
            let mut ls = owned();
            ls.swap(line(a), line(b));
            join(ls)
        }
        Mutation::Insert(i, junk) => {
            let at = boundary(text, i);
            format!("{}{junk}{}", &text[..at], &text[at..])
        }
        Mutation::Flip(i, c) => {
            let at = boundary(text, i);
            let rest = &text[at..];
            let skip = rest.chars().next().map_or(0, char::len_utf8);
            format!("{}{c}{}", &text[..at], &rest[skip..])
        }
        Mutation::Nest(i, depth, brackets) => {
            let mut ls = owned();
            let n = line(i);
            let (open, close) = if *brackets {
                ("[".repeat(*depth), "]".repeat(*depth))
            } else {
                ("{a=".repeat(*depth), "}".repeat(*depth))
            };
            let value_at = ls[n].find(['=', ':']).map_or(0, |at| at + 1);
            let (head, value) = ls[n].split_at(value_at);
            ls[n] = format!("{head}{open}{value}{close}");
            join(ls)
        }
        Mutation::Repeat(k) => text.repeat(usize::from(*k)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest! {
        #![proptest_config(config(256))]

        /// Every mutation applies to any text, multi-byte characters included (a cut inside a
        /// character would panic); a truncation is a prefix, a repetition a multiple.
        #[test]
        fn mutations_apply_to_any_text(text in "\\PC{0,60}", m in mutation()) {
            let out = apply(&text, &m);
            match &m {
                Mutation::Truncate(_) => prop_assert!(text.starts_with(&out)),
                Mutation::Repeat(k) => prop_assert_eq!(out.len(), text.len() * usize::from(*k)),
                _ => {}
            }
        }
    }
}
