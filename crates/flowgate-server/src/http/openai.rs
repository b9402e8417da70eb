//! OpenAI's token headers (`--openai-headers`), which LLM clients already read:
//! `x-ratelimit-limit-tokens`, `x-ratelimit-remaining-tokens` and `x-ratelimit-reset-tokens`
//! (a duration as OpenAI writes it: `6m0s`, `1s`, `1.5s`, `20ms`), from the binding rule, the
//! one `RateLimit-*` describes.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use flowgate::Verdict;

/// `x-ratelimit-limit-tokens`.
const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit-tokens");
/// `x-ratelimit-remaining-tokens`.
const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining-tokens");
/// `x-ratelimit-reset-tokens`.
const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset-tokens");

/// Adds the three headers for `v`'s binding rule, if a limit binds.
pub(super) fn insert(v: &Verdict, headers: &mut HeaderMap) {
    let Some(s) = v.binding().filter(|s| s.is_limited()) else {
        return;
    };
    let d = &s.decision;
    headers.insert(LIMIT, HeaderValue::from(d.limit));
    headers.insert(REMAINING, HeaderValue::from(d.remaining));
    if let Ok(reset) = HeaderValue::from_str(&duration(d.reset_after)) {
        headers.insert(RESET, reset);
    }
}

/// `d` as OpenAI (and Go's `time.Duration`) writes it, to the millisecond: `20ms` under a
/// second, else hours, minutes and seconds with the larger units only when not zero and the
/// seconds' fraction trimmed (`1s`, `1.5s`, `6m0s`, `1h0m0s`).
pub(super) fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, m, s, frac) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let secs = if frac == 0 {
        format!("{s}s")
    } else {
        let f = format!("{frac:03}");
        format!("{s}.{}s", f.trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}

#[cfg(test)]
mod tests {
    use super::duration;
    use std::time::Duration;

    #[test]
    fn durations_as_openai_writes_them() {
        let ms = Duration::from_millis;
        assert_eq!(duration(ms(0)), "0ms");
        assert_eq!(duration(ms(20)), "20ms");
        assert_eq!(duration(ms(1000)), "1s");
        assert_eq!(duration(ms(1500)), "1.5s");
        assert_eq!(duration(ms(1020)), "1.02s");
        assert_eq!(duration(ms(360_000)), "6m0s");
        assert_eq!(duration(ms(3_600_000)), "1h0m0s");
        assert_eq!(duration(ms(3_725_250)), "1h2m5.25s");
    }
}
