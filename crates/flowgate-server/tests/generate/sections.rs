//! Generated queues, alerts and breakers, and whole files.

use flowgate_config::schema::{
    AlertDoc, BreakerDoc, FileDoc, QueueDoc, StoreCondition, StrategyDoc, Watch,
};
use proptest::prelude::*;

use super::rules::{BREAKER_PATTERNS, BREAKERS, QUEUE_PATTERNS, QUEUES, RULES, rule_doc};
use super::{Wrong, count, duration_text, named, opt, pattern, select, wild_number};

/// The `i`-th queue of a file.
pub(crate) fn queue_doc(w: Wrong, i: usize) -> BoxedStrategy<QueueDoc> {
    (
        w.stray(w.word(&["payments", ""])),
        w.pick(Just(QUEUES[i].to_owned()), w.word(&[""])),
        pattern(w, QUEUE_PATTERNS, i),
        w.pick(
            select(&["1/s", "100/m", "5/30s"][..]).prop_map(str::to_owned),
            w.word(&["0/s", "5/day"]),
        ),
        opt(count(w, &[1u64, 5])),
        opt(count(w, &[100u64, 100_000])),
        opt(duration_text(w, &["30s", "1m"])),
        opt(count(w, &[1u32, 5])),
        opt(duration_text(w, &["1s", "10s"])),
        opt(count(w, &[1024usize, 65536])),
        opt(duration_text(w, &["24h", "1h"])),
    )
        .prop_map(
            |(
                domain,
                name,
                pattern,
                rate,
                burst,
                max_depth,
                lease,
                max_attempts,
                retry_backoff,
                max_payload,
                key_retention,
            )| QueueDoc {
                domain,
                name,
                pattern,
                rate,
                burst,
                max_depth,
                lease,
                max_attempts,
                retry_backoff,
                max_payload,
                key_retention,
            },
        )
        .boxed()
}

pub(crate) fn webhooks(w: Wrong) -> BoxedStrategy<Vec<String>> {
    prop::collection::vec(
        w.pick(
            select(&["http://127.0.0.1:9/hook", "http://u:pw@am:9093/x?k=v"][..])
                .prop_map(str::to_owned),
            w.word(&["https://h/x", "hook", "http://relay/<redacted>"]),
        ),
        0..3,
    )
    .boxed()
}

/// What an alert watches: every kind ([`watch_kind`] names them), naming the rules, queues and
/// breakers a generated file declares.
pub(crate) fn watch(w: Wrong, declared: Declared) -> BoxedStrategy<Watch> {
    let domain = w.stray(w.word(&["payments", ""]));
    let name = |all: &'static [&'static str], n: usize| {
        w.pick(
            select(&all[..n.max(1).min(all.len())]).prop_map(str::to_owned),
            w.word(all),
        )
    };
    let (rules, queues, breakers) = (
        name(&RULES, declared.rules),
        name(&QUEUES, declared.queues),
        name(&BREAKERS, declared.breakers),
    );
    // What the file does not declare is watched in a hostile file only.
    let weight = |n: usize| if n > 0 { 2 } else { w.0 };
    prop_oneof![
        weight(declared.rules) => (
            domain.clone(),
            rules,
            w.pick(select(&[0.0, 0.5, 0.99][..]), wild_number()),
            opt(w.pick(select(&[1.0, 0.5][..]), wild_number()))
        )
            .prop_map(|(domain, rule, rejection_ratio, min_rate)| Watch::Rule {
                domain,
                rule,
                rejection_ratio,
                min_rate,
            }),
        weight(declared.rules) => (domain.clone(), name(&RULES, declared.rules), count(w, &[0u64, 5000]))
            .prop_map(|(domain, rule, debt)| Watch::RuleDebt { domain, rule, debt }),
        weight(declared.queues) => (domain.clone(), queues.clone(), duration_text(w, &["5m", "90s"])).prop_map(
            |(domain, queue, oldest_age)| Watch::QueueAge {
                domain,
                queue,
                oldest_age,
            }
        ),
        weight(declared.queues) => (domain.clone(), queues, count(w, &[0u64, 1000])).prop_map(
            |(domain, queue, depth)| Watch::QueueDepth {
                domain,
                queue,
                depth,
            }
        ),
        1 => named::<StoreCondition>().prop_map(|store| Watch::Store { store }),
        weight(declared.breakers) => (domain, breakers).prop_map(|(domain, breaker)| Watch::Breaker {
            domain,
            breaker,
        }),
    ]
    .boxed()
}

/// Which kind of alert `w` is: a kind added to the schema fails to compile here, and
/// `every_kind_of_alert_is_generated` fails until [`watch`] generates it.
pub(crate) fn watch_kind(w: &Watch) -> usize {
    match w {
        Watch::Rule { .. } => 0,
        Watch::QueueAge { .. } => 1,
        Watch::QueueDepth { .. } => 2,
        Watch::Store { .. } => 3,
        Watch::Breaker { .. } => 4,
        Watch::RuleDebt { .. } => 5,
    }
}

/// How many rules, queues and breakers a file declares (its first of [`RULES`], ...).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Declared {
    pub(crate) rules: usize,
    pub(crate) queues: usize,
    pub(crate) breakers: usize,
}

/// The `i`-th alert of a file.
pub(crate) fn alert_doc(w: Wrong, declared: Declared, i: usize) -> BoxedStrategy<AlertDoc> {
    (
        w.pick(Just(format!("alert-{i}")), w.word(&["", "alert-0"])),
        watch(w, declared),
        opt(duration_text(w, &["10s", "1m"])),
        opt(webhooks(w)),
        opt(webhooks(w)),
        opt(w.word(&["page", "ticket"])),
        opt(w.word(&["a summary"])),
        opt(w.word(&["a description"])),
    )
        .prop_map(
            |(name, watch, for_, webhooks, alertmanagers, severity, summary, description)| {
                AlertDoc {
                    name,
                    watch,
                    for_,
                    webhooks,
                    alertmanagers,
                    severity,
                    summary,
                    description,
                }
            },
        )
        .boxed()
}

/// The `i`-th circuit breaker of a file, its fields chosen for its strategy.
pub(crate) fn breaker_doc(w: Wrong, i: usize) -> BoxedStrategy<BreakerDoc> {
    named::<StrategyDoc>()
        .prop_flat_map(move |strategy| {
            let slow = strategy == StrategyDoc::SlowCallRatio;
            let threshold: &'static [f64] = if strategy == StrategyDoc::ErrorCount {
                &[1.0, 5.0]
            } else {
                &[0.25, 0.5, 1.0]
            };
            (
                w.stray(w.word(&["payments", ""])),
                w.pick(Just(BREAKERS[i].to_owned()), w.word(&[""])),
                pattern(w, BREAKER_PATTERNS, i),
                Just(strategy),
                if slow {
                    w.pick(Just(Some("800ms".to_owned())), Just(None))
                } else {
                    w.stray(w.word(&["800ms"]))
                },
                w.pick(select(threshold), wild_number()),
                duration_text(w, &["10s", "1m"]),
                count(w, &[1u64, 10]),
                duration_text(w, &["30s", "5s"]),
                opt(count(w, &[1u32, 3])),
                opt(duration_text(w, &["5s"])),
                opt(count(w, &[1u32, 2])),
            )
        })
        .prop_map(
            |(
                domain,
                name,
                pattern,
                strategy,
                slow_call,
                threshold,
                window,
                min_calls,
                open_for,
                probes,
                probe_timeout,
                min_nodes,
            )| BreakerDoc {
                domain,
                name,
                pattern,
                strategy,
                slow_call,
                threshold,
                window,
                min_calls,
                open_for,
                probes,
                probe_timeout,
                min_nodes,
            },
        )
        .boxed()
}

/// `n` of a kind, the `i`-th from `each(i)`, `n` in `0..=max`.
pub(crate) fn some<T: std::fmt::Debug + 'static>(
    max: usize,
    each: impl Fn(usize) -> BoxedStrategy<T> + 'static,
) -> BoxedStrategy<Vec<T>> {
    (0..=max)
        .prop_flat_map(move |n| (0..n).map(&each).collect::<Vec<_>>())
        .boxed()
}

/// The first `n` of a kind, the `i`-th from `each`.
pub(crate) fn all<T: std::fmt::Debug>(
    w: Wrong,
    n: usize,
    each: fn(Wrong, usize) -> BoxedStrategy<T>,
) -> Vec<BoxedStrategy<T>> {
    (0..n).map(|i| each(w, i)).collect()
}

/// A configuration file generated by the schema: every section and every field of each (the
/// literals name every field, so that a field added to the schema fails to compile here until
/// it is generated, and the enums' names are the schema's own, [`variants`]); one file in three
/// hostile ([`Wrong`]).
pub(crate) fn file_doc() -> impl Strategy<Value = FileDoc> + Clone {
    let sizes = (0..=RULES.len(), 0..=QUEUES.len(), 0..=BREAKERS.len());
    (prop_oneof![2 => Just(Wrong(0)), 1 => Just(Wrong(1))], sizes)
        .prop_flat_map(|(w, (rules, queues, breakers))| {
            let declared = Declared {
                rules,
                queues,
                breakers,
            };
            (
                w.pick(Just(Some("api".to_owned())), opt(w.word(&["payments", ""]))),
                w.pick(Just(Vec::new()), webhooks(w)),
                w.pick(Just(Vec::new()), webhooks(w)),
                all(w, rules, rule_doc),
                all(w, queues, queue_doc),
                some(4, move |i| alert_doc(w, declared, i)),
                all(w, breakers, breaker_doc),
            )
        })
        .prop_map(
            |(domain, alert_webhooks, alertmanagers, rule, queue, alert, breaker)| FileDoc {
                domain,
                alert_webhooks,
                alertmanagers,
                rule,
                queue,
                alert,
                breaker,
            },
        )
}
