//! OpenAI's token budget headers (`x-ratelimit-limit-tokens`, `x-ratelimit-remaining-tokens`,
//! `x-ratelimit-reset-tokens`), which LLM clients and SDKs already read, and the `RateLimit-*`
//! headers of a commit.

use std::fmt::Write as _;
use std::time::Duration;

use flowgate_core::Decision;

use crate::reservation::Committed;
use crate::verdict::{Verdict, ceil_secs};

/// A duration as OpenAI writes `x-ratelimit-reset-tokens` (Go's `time.Duration` format, to the
/// millisecond, rounded up): `20ms`, `1s`, `1.5s`, `6m0s`, `1h0m0s`; `0s` for zero.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use flowgate::decision::openai_duration;
/// assert_eq!(openai_duration(Duration::from_secs(360)), "6m0s");
/// assert_eq!(openai_duration(Duration::from_millis(20)), "20ms");
/// assert_eq!(openai_duration(Duration::from_millis(1_500)), "1.5s");
/// ```
pub fn openai_duration(d: Duration) -> String {
    let ms = d.as_micros().div_ceil(1_000);
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let (h, m) = (ms / 3_600_000, ms / 60_000 % 60);
    let (s, frac) = (ms / 1_000 % 60, ms % 1_000);
    let mut out = String::new();
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if h > 0 || m > 0 {
        let _ = write!(out, "{m}m");
    }
    let _ = write!(out, "{s}");
    if frac > 0 {
        let digits = format!("{frac:03}");
        let _ = write!(out, ".{}", digits.trim_end_matches('0'));
    }
    out.push('s');
    out
}

/// OpenAI's token headers for a decision on a token rule.
pub(crate) fn token_headers(d: &Decision) -> [(&'static str, String); 3] {
    [
        ("x-ratelimit-limit-tokens", d.limit.to_string()),
        ("x-ratelimit-remaining-tokens", d.remaining.to_string()),
        ("x-ratelimit-reset-tokens", openai_duration(d.reset_after)),
    ]
}

impl Verdict {
    /// OpenAI's token headers (`x-ratelimit-limit-tokens`, `x-ratelimit-remaining-tokens`,
    /// `x-ratelimit-reset-tokens` in [`openai_duration`]'s format) from the binding status
    /// ([`Verdict::binding`]), for a verdict on token rules (a reservation's); none when no
    /// limit applied. Add them beside [`Verdict::headers`].
    pub fn openai_token_headers(&self) -> Vec<(&'static str, String)> {
        self.binding()
            .filter(|s| s.is_limited())
            .map(|s| token_headers(&s.decision).to_vec())
            .unwrap_or_default()
    }
}

impl Committed {
    /// The `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` headers after the
    /// commit, from the rule with the fewest units left; `Retry-After` too while it is over its
    /// limit (in debt).
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let Some(r) = self.binding() else {
            return Vec::new();
        };
        let d = &r.decision;
        let mut h = vec![
            ("ratelimit-limit", d.limit.to_string()),
            ("ratelimit-remaining", d.remaining.to_string()),
            ("ratelimit-reset", ceil_secs(d.reset_after).to_string()),
        ];
        if let Some(retry) = d.retry_after.filter(|_| r.over()) {
            h.push(("retry-after", ceil_secs(retry).to_string()));
        }
        h
    }

    /// OpenAI's token headers after the commit, from the rule with the fewest units left.
    pub fn openai_token_headers(&self) -> Vec<(&'static str, String)> {
        self.binding()
            .map(|r| token_headers(&r.decision).to_vec())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::openai_duration;
    use std::time::Duration;

    #[test]
    fn durations_are_written_as_openai_writes_them() {
        let ms = Duration::from_millis;
        for (d, want) in [
            (ms(0), "0s"),
            (Duration::from_micros(1), "1ms"),
            (ms(20), "20ms"),
            (ms(999), "999ms"),
            (ms(1_000), "1s"),
            (ms(1_500), "1.5s"),
            (ms(1_020), "1.02s"),
            (ms(59_999), "59.999s"),
            (ms(60_000), "1m0s"),
            (ms(360_000), "6m0s"),
            (ms(90_500), "1m30.5s"),
            (ms(3_600_000), "1h0m0s"),
            (ms(3_723_000), "1h2m3s"),
        ] {
            assert_eq!(openai_duration(d), want, "{d:?}");
        }
    }
}
