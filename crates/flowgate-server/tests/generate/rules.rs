//! A generated `[[rule]]`: its fields chosen for its algorithm.

use flowgate::Algorithm;
use flowgate_config::schema::{
    AdaptiveDoc, AlgorithmDoc, ChargeDoc, FailureDoc, ModeDoc, OverrideDoc, RuleDoc, TrialDoc,
};
use flowgate_testkit::fuzz::hostile_text;
use proptest::prelude::*;

use super::{Wrong, count, duration_text, limit_field, named, opt, pattern, select, wild_number};

/// The names of the rules, queues and breakers a generated file declares, by place: alerts
/// name them.
pub(crate) const RULES: [&str; 4] = ["per-client", "wpg-pay", "daily", "in-flight"];
pub(crate) const RULE_PATTERNS: &[&[&str]] = &[
    &["client"],
    &["biz=PAY", "channel=WPG"],
    &["user"],
    &["path=files/*"],
];
pub(crate) const QUEUES: [&str; 2] = ["refunds", "payouts"];
pub(crate) const QUEUE_PATTERNS: &[&[&str]] = &[&["biz=REFUND", "channel"], &["biz=PAYOUT"]];
pub(crate) const BREAKERS: [&str; 2] = ["wpg", "ali"];
pub(crate) const BREAKER_PATTERNS: &[&[&str]] = &[&["channel=WPG"], &["channel=ALI"]];

/// The quotas an algorithm takes.
pub(crate) fn quotas(a: Algorithm) -> &'static [&'static str] {
    match a {
        Algorithm::FixedWindow => &["20/s", "500/day", "1000/month", "5/30s"],
        Algorithm::Concurrency => &["10/30s", "50/1m"],
        _ => &["20/s", "5/30s", "1000/1m"],
    }
}

pub(crate) fn override_doc(w: Wrong, a: Algorithm) -> BoxedStrategy<OverrideDoc> {
    (
        limit_field(w, quotas(a)),
        w.stray(named::<AlgorithmDoc>()),
        w.stray(any::<u64>()),
        opt(w.word(&["2026-11-11..2026-11-12", "2026-02-28", "2026-12-31"])),
        opt(prop::collection::vec(w.word(&["sat", "sun", "mon"]), 1..3)),
        w.pick(
            select(&["22:00-06:00", "09:00-17:00"][..]).prop_map(|h| Some(h.to_owned())),
            prop_oneof![Just(None), w.word(&["25:00-26:00"]).prop_map(Some)],
        ),
    )
        .prop_map(
            |(limit, algorithm, burst, dates, days, hours)| OverrideDoc {
                limit,
                algorithm,
                burst,
                dates,
                days,
                hours,
            },
        )
        .boxed()
}

pub(crate) fn trial_doc(w: Wrong, a: Algorithm) -> BoxedStrategy<TrialDoc> {
    (
        limit_field(w, quotas(a)),
        w.stray(duration_text(w, &["1s"])),
        w.stray(named::<AlgorithmDoc>()),
        w.stray(any::<u64>()),
    )
        .prop_map(|(limit, window, algorithm, burst)| TrialDoc {
            limit,
            window,
            algorithm,
            burst,
        })
        .boxed()
}

/// A concurrency rule's adaptive limit, its range around the rule's limit (10 or 50).
pub(crate) fn adaptive_doc(w: Wrong) -> BoxedStrategy<AdaptiveDoc> {
    (
        opt(count(w, &[1u64, 5])),
        count(w, &[50u64, 200]),
        duration_text(w, &["250ms", "1s"]),
        opt(w.pick(select(&[0.5, 0.9][..]), wild_number())),
        w.stray(count(w, &[10u64, 20])),
    )
        .prop_map(|(min, max, max_latency, backoff, initial)| AdaptiveDoc {
            min,
            max,
            max_latency,
            backoff,
            initial,
        })
        .boxed()
}

pub(crate) fn metadata() -> impl Strategy<Value = serde_json::Value> + Clone {
    prop_oneof![
        Just(serde_json::json!({"team": "pay"})),
        hostile_text().prop_map(|t| serde_json::json!({ "note": t, "n": [1, 2] })),
    ]
}

/// A bucket's `mode` and `max_wait`: a delay with its longest wait, mostly.
pub(crate) fn delay(w: Wrong) -> BoxedStrategy<Option<(ModeDoc, Option<String>)>> {
    opt(named::<ModeDoc>().prop_flat_map(move |mode| {
        let wait = duration_text(w, &["500ms", "1s"]);
        let wait = if mode == ModeDoc::Delay {
            w.pick(wait.prop_map(Some), Just(None))
        } else {
            w.stray(wait)
        };
        (Just(mode), wait)
    }))
    .boxed()
}

/// A token bucket's `warmup` and `cold_factor`.
pub(crate) fn warmup(w: Wrong) -> BoxedStrategy<Option<(String, Option<f64>)>> {
    prop::option::weighted(
        0.6,
        (
            duration_text(w, &["30s", "1m"]),
            opt(w.pick(select(&[2.0, 3.0][..]), wild_number())),
        ),
    )
    .boxed()
}

/// The `i`-th rule of a file: its fields chosen for its algorithm (a bucket's burst and delay,
/// a token bucket's warm-up, a concurrency rule's adaptive limit, ...), now and then one of
/// another's.
pub(crate) fn rule_doc(w: Wrong, i: usize) -> BoxedStrategy<RuleDoc> {
    opt(named::<AlgorithmDoc>())
        .prop_flat_map(move |algorithm| {
            let a = algorithm.map_or(Algorithm::SlidingWindow, Algorithm::from);
            let bucket = matches!(a, Algorithm::TokenBucket | Algorithm::LeakyBucket);
            let limit = (
                w.stray(w.word(&["payments", ""])),
                w.pick(Just(RULES[i].to_owned()), w.word(&["", "per-client"])),
                pattern(w, RULE_PATTERNS, i),
                w.pick(limit_field(w, quotas(a)).prop_map(Some), Just(None)),
                w.stray(duration_text(w, &["1s", "day"])),
                w.pick(Just(false), Just(true)),
                Just(algorithm),
                w.of(bucket, opt(count(w, &[1u64, 20])).boxed()),
                w.of(
                    a == Algorithm::SlidingWindow,
                    opt(count(w, &[2u32, 10])).boxed(),
                ),
                w.of(bucket, delay(w)),
            );
            let token = a == Algorithm::TokenBucket;
            let concurrency = a == Algorithm::Concurrency;
            let rest = (
                w.of(token, warmup(w)),
                opt(named::<FailureDoc>()),
                opt(count(w, &[1u32, 3])),
                prop::collection::vec(w.word(&RULES), 0..2),
                any::<[bool; 4]>(),
                w.of(i == 3, opt(Just(true)).boxed()),
                opt(metadata()),
                opt(w.word(&["UTC", "Asia/Shanghai", "Europe/Paris"])),
                opt(trial_doc(w, a)),
                w.of(
                    !concurrency,
                    prop::collection::vec(override_doc(w, a), 1..3)
                        .prop_map(Some)
                        .boxed(),
                )
                .prop_map(Option::unwrap_or_default),
                w.of(
                    concurrency,
                    prop::option::weighted(0.8, adaptive_doc(w)).boxed(),
                ),
                // Charges: a debt bound and Envoy's report mode, on the algorithms that take
                // them (now and then on one that does not, to be refused).
                w.of(
                    !concurrency,
                    opt((
                        opt(w.pick(1i64..=10_000, any::<i64>())),
                        opt(named::<ChargeDoc>()),
                    ))
                    .boxed(),
                )
                .prop_map(Option::unwrap_or_default),
            );
            (limit, rest)
        })
        .prop_map(
            |(
                (domain, name, pattern, limit, window, unlimited, algorithm, burst, buckets, delay),
                (
                    warmup,
                    failure,
                    nodes,
                    replaces,
                    flags,
                    share,
                    metadata,
                    time_zone,
                    trial,
                    schedule,
                    adaptive,
                    (max_debt, charge),
                ),
            )| RuleDoc {
                domain,
                name,
                pattern,
                limit,
                window,
                unlimited,
                algorithm,
                burst,
                buckets,
                mode: delay.as_ref().map(|d| d.0),
                max_wait: delay.and_then(|d| d.1),
                warmup: warmup.as_ref().map(|w| w.0.clone()),
                cold_factor: warmup.and_then(|w| w.1),
                max_debt,
                charge,
                failure,
                nodes,
                shadow: flags[0],
                replaces,
                detailed_metric: flags[1],
                value_to_metric: flags[2],
                share_threshold: share.unwrap_or(false),
                quota_mode: flags[3],
                metadata,
                time_zone,
                trial,
                schedule,
                adaptive,
            },
        )
        .boxed()
}
