//! The queue conformance suite: one table of scenarios (`queue_scenarios.toml`, kept as data),
//! run against any [`QueueStore`]; every store must give exactly the answers the table expects.
//!
//! Each step runs one operation at a time `at` (ms after the scenario's start) on the
//! [`ManualClock`] the store reads, and its answer, written as text (see [`describe`]), must
//! equal the step's `expect`. A lease made by step `n` (1-based) gets nonce `n`, so later steps
//! name a delivery by the step that leased it (`nonce`).

use std::time::Duration;

use flowgate_core::queue::{
    DeadJob, InstanceStats, LeaseOutcome, Nacked, NewJob, QueueError, QueueSpec, QueueStore,
    Submitted,
};
use flowgate_core::quota::parse_duration;
use flowgate_core::{ManualClock, Matcher, Micros};
use serde::Deserialize;

/// The scenario table.
pub const SCENARIOS: &str = include_str!("../queue_scenarios.toml");

const START: Micros = 1_700_000_000_000_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    scenario: Vec<Scenario>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    name: String,
    queue: Spec,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    rate: String,
    burst: Option<u64>,
    max_depth: Option<u64>,
    lease: Option<String>,
    max_attempts: Option<u32>,
    retry_backoff: Option<String>,
    key_retention: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    /// ms after the start.
    at: u64,
    op: String,
    /// submit: payloads, each `payload`, `payload#key` or `payload@not_before_ms`.
    jobs: Option<Vec<String>>,
    /// lease: how far ahead (ms) a slot may be reserved.
    horizon: Option<u64>,
    /// ack/nack: the job.
    id: Option<u64>,
    /// ack/nack: the step (1-based) whose lease delivered it.
    nonce: Option<u64>,
    /// nack: ms.
    retry_after: Option<u64>,
    /// give_back: the delivery's slot, ms after the start.
    slot: Option<u64>,
    /// requeue/purge_dead: ids (absent: all).
    ids: Option<Vec<u64>>,
    expect: String,
}

fn t(us: Micros) -> String {
    let rel = us as i128 - START as i128;
    if rel % 1000 == 0 {
        format!("+{}ms", rel / 1000)
    } else {
        format!("+{rel}us")
    }
}

fn d(us: Micros) -> String {
    if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

fn error(e: &QueueError) -> String {
    match e {
        QueueError::QueueFull { held, asked, max } => {
            format!("full held {held} asked {asked} max {max}")
        }
        QueueError::NotHeld { id } => format!("not_held {id}"),
        QueueError::NotDead { id } => format!("not_dead {id}"),
        other => format!("error {other}"),
    }
}

fn submitted(s: &[Submitted]) -> String {
    s.iter()
        .map(|s| match (s.duplicate, s.position, s.release_at) {
            (true, Some(p), _) => format!("dup {} {} pos {p}", s.id, s.state.as_str()),
            (true, None, _) => format!("dup {} {}", s.id, s.state.as_str()),
            (false, Some(p), Some(r)) => format!("{} pos {p} at {}", s.id, t(r)),
            (false, None, Some(r)) => format!("{} delayed until {}", s.id, t(r)),
            _ => format!("{} ?", s.id),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn leased(o: &LeaseOutcome) -> String {
    match o {
        LeaseOutcome::Leased(j) => format!(
            "job {} {} attempt {} at {} until {} sub {}",
            j.id,
            String::from_utf8_lossy(&j.payload),
            j.attempt,
            t(j.released_at),
            t(j.lease_deadline),
            t(j.submitted_at)
        ),
        LeaseOutcome::Later(after) => format!("later {}", d(*after)),
        LeaseOutcome::Empty { next: None } => "empty".into(),
        LeaseOutcome::Empty { next: Some(n) } => format!("empty next {}", d(*n)),
    }
}

fn stats(s: &Option<InstanceStats>) -> String {
    let Some(s) = s else {
        return "forgotten".into();
    };
    let reserved = match s.reserved {
        0 => String::new(),
        n => format!(" reserved {n}"),
    };
    format!(
        "ready {} delayed {} in_flight {}{reserved} dead {} oldest {} totals {}/{}/{}/{} next {}",
        s.ready,
        s.delayed,
        s.in_flight,
        s.dead,
        s.oldest_submitted.map_or("-".into(), t),
        s.submitted_total,
        s.released_total,
        s.acked_total,
        s.dead_total,
        t(s.next_slot)
    )
}

fn dead(list: &[DeadJob]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter()
        .map(|j| {
            format!(
                "{} {} attempts {} died {}{}",
                j.id,
                String::from_utf8_lossy(&j.payload),
                j.attempts,
                t(j.died_at),
                j.key
                    .as_ref()
                    .map_or(String::new(), |k| format!(" key {k}"))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// An answer as the table writes it.
pub fn describe<T>(r: Result<T, QueueError>, ok: impl FnOnce(T) -> String) -> String {
    r.map_or_else(|e| error(&e), ok)
}

fn dur(text: &str) -> Duration {
    parse_duration(text).unwrap_or_else(|e| panic!("{e}"))
}

fn spec(s: &Spec) -> QueueSpec {
    let mut q = QueueSpec::new(
        "conf",
        "q",
        vec![Matcher::parse("k")],
        s.rate.parse().unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let set = |r: Result<QueueSpec, _>| r.unwrap_or_else(|e| panic!("{e}"));
    if let Some(b) = s.burst {
        q = set(q.with_burst(b));
    }
    if let Some(m) = s.max_depth {
        q = set(q.with_max_depth(m));
    }
    if let Some(l) = &s.lease {
        q = set(q.with_lease(dur(l)));
    }
    if let Some(m) = s.max_attempts {
        q = set(q.with_max_attempts(m));
    }
    if let Some(b) = &s.retry_backoff {
        q = set(q.with_retry_backoff(dur(b)));
    }
    if let Some(r) = &s.key_retention {
        q = set(q.with_key_retention(dur(r)));
    }
    q
}

fn new_job(text: &str) -> NewJob {
    if let Some((p, k)) = text.split_once('#') {
        return NewJob::new(p.as_bytes()).with_key(k);
    }
    if let Some((p, at)) = text.split_once('@') {
        let ms: u64 = at.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        return NewJob::new(p.as_bytes()).not_before(START + ms * 1000);
    }
    NewJob::new(text.as_bytes())
}

/// The scenarios' names.
///
/// # Panics
/// When the table does not parse.
pub fn names() -> Vec<String> {
    table().scenario.into_iter().map(|s| s.name).collect()
}

fn table() -> Table {
    toml::from_str(SCENARIOS).unwrap_or_else(|e| panic!("queue_scenarios.toml: {e}"))
}

/// Runs every scenario against `store`, which reads its time from `clock`; instances are named
/// `<prefix><scenario>` so that runs sharing a store do not meet.
///
/// # Panics
/// On the first answer that differs from the table, naming the scenario and step.
pub async fn run<S: QueueStore>(store: &S, clock: &ManualClock, prefix: &str) {
    for sc in table().scenario {
        let q = spec(&sc.queue);
        let instance = format!("{prefix}{}", sc.name);
        for (i, step) in sc.steps.iter().enumerate() {
            let n = i as u64 + 1;
            clock.set(START + step.at * 1000);
            let ids = step.ids.as_deref();
            let id = step.id.unwrap_or(0);
            let nonce = step.nonce.unwrap_or(0);
            let got = match step.op.as_str() {
                "submit" => {
                    let jobs: Vec<NewJob> =
                        step.jobs.iter().flatten().map(|j| new_job(j)).collect();
                    describe(store.submit(&q, &instance, &jobs).await, |s| submitted(&s))
                }
                "lease" => {
                    let h = step.horizon.unwrap_or(0) * 1000;
                    describe(store.lease(&q, &instance, h, n).await, |o| leased(&o))
                }
                "ack" => describe(store.ack(&q, &instance, id, nonce).await, |()| "ok".into()),
                "give_back" => {
                    let slot = START + step.slot.unwrap_or(0) * 1000;
                    describe(
                        store.give_back(&q, &instance, id, nonce, slot).await,
                        |()| "ok".into(),
                    )
                }
                "nack" => {
                    let r = step.retry_after.map(|ms| ms * 1000);
                    describe(store.nack(&q, &instance, id, nonce, r).await, |o| match o {
                        Nacked::Retry { at } => format!("retry at {}", t(at)),
                        Nacked::Dead => "dead".into(),
                    })
                }
                "dead" => describe(store.dead(&q, &instance, 0, 100).await, |l| dead(&l)),
                "requeue" => describe(store.requeue_dead(&q, &instance, ids).await, |n| {
                    n.to_string()
                }),
                "purge_dead" => describe(store.purge_dead(&q, &instance, ids).await, |n| {
                    n.to_string()
                }),
                "purge" => describe(store.purge(&q, &instance).await, |n| n.to_string()),
                "stats" => describe(store.stats(&q, &instance).await, |s| stats(&s)),
                "listed" => describe(store.instances().await, |all| {
                    if all.contains(&instance) {
                        "listed".into()
                    } else {
                        "not listed".into()
                    }
                }),
                other => panic!("{}: step {n}: unknown op `{other}`", sc.name),
            };
            assert_eq!(
                got, step.expect,
                "queue scenario `{}`, step {n} ({} at +{}ms)",
                sc.name, step.op, step.at
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_parses() {
        assert!(super::names().len() >= 8);
    }
}
