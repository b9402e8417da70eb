//! The store conformance suite: one table of scenarios (`scenarios.toml`, kept as data), run
//! against any [`Store`]; every store must produce exactly the decisions the table expects.
//! Charges and refunds have a table of their own (`charges.toml`, [`run_charges`]), run against
//! every store that takes charges.
//!
//! The store under test must read its time from the [`ManualClock`] given to [`run`] (the memory
//! store does through `MemoryStore::with_clock`; the Redis store through its test-only clock
//! override).

use std::collections::BTreeMap;
use std::time::Duration;

use flowgate_core::{
    Algorithm, ChargeItem, Decision, Item, Limit, ManualClock, Mode, Quota, Store,
    algorithm::{Amount, Charged},
    calendar::parse_zone,
    quota::parse_duration,
    schedule::{Dates, Hours, Override, Schedule, parse_day},
};
use serde::Deserialize;

/// The scenario table.
pub const SCENARIOS: &str = include_str!("../scenarios.toml");

/// The charges' table.
pub const CHARGES: &str = include_str!("../charges.toml");

const DEFAULT_START: u64 = 1_700_000_000_000_000;

#[derive(Deserialize)]
struct Table {
    scenario: Vec<Scenario>,
}

#[derive(Deserialize)]
struct Scenario {
    name: String,
    start: Option<u64>,
    limits: BTreeMap<String, LimitSpec>,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct LimitSpec {
    algorithm: String,
    quota: String,
    burst: Option<u64>,
    buckets: Option<u32>,
    mode: Option<String>,
    max_wait: Option<String>,
    warmup: Option<String>,
    cold_factor: Option<f64>,
    max_debt: Option<u64>,
    time_zone: Option<String>,
    #[serde(default)]
    schedule: Vec<OverrideSpec>,
}

/// A scheduled override of a limit: the same limit with another quota, in the limit's
/// `time_zone`.
#[derive(Deserialize)]
struct OverrideSpec {
    quota: String,
    hours: Option<String>,
    #[serde(default)]
    days: Vec<String>,
    dates: Option<String>,
}

/// A limit as a rule holds it: its base limit and, when scheduled, its overrides.
struct Scheduled {
    base: Limit,
    schedule: Option<Schedule>,
}

impl Scheduled {
    /// The limit in force at `at`, as `Rule::limit_at` picks it.
    fn at(&self, at: u64) -> &Limit {
        match &self.schedule {
            Some(s) => s
                .in_force(at)
                .and_then(|i| s.overrides()[i].limit.as_ref())
                .unwrap_or(&self.base),
            None => &self.base,
        }
    }
}

#[derive(Deserialize)]
struct Step {
    at: u64,
    items: Option<String>,
    /// Charges and refunds, `limit:key:+N` or `limit:key:-N`, comma-separated, one report.
    charge: Option<String>,
    release: Option<String>,
    lease_of: Option<usize>,
    repeat: Option<u32>,
    /// With `counts`: the request is sent every `every` us from `at` on, and `counts` is how
    /// many are admitted in each second from `at`.
    every: Option<u64>,
    counts: Option<Vec<u64>>,
    allowed: Option<Vec<bool>>,
    remaining: Option<Vec<u64>>,
    retry: Option<Vec<i64>>,
    wait: Option<Vec<u64>>,
    reset: Option<Vec<u64>>,
    lease: Option<Vec<bool>>,
    limit: Option<Vec<u64>>,
    /// For a charge: units applied, dropped, and the debt left, per item.
    applied: Option<Vec<u64>>,
    dropped: Option<Vec<u64>>,
    debt: Option<Vec<u64>>,
}

/// The scenarios' names, for listing.
///
/// # Panics
/// When the table does not parse (a defect of the test kit, caught by its own tests).
pub fn names() -> Vec<String> {
    table().scenario.into_iter().map(|s| s.name).collect()
}

fn table() -> Table {
    parse(SCENARIOS)
}

fn parse(text: &str) -> Table {
    toml::from_str(text).unwrap_or_else(|e| panic!("conformance table: {e}"))
}

/// Builds a scenario's limit and its schedule.
///
/// # Panics
/// When the table holds an invalid limit or schedule.
fn build(spec: &LimitSpec) -> Scheduled {
    let base = build_limit(spec, &spec.quota);
    let schedule = (!spec.schedule.is_empty()).then(|| {
        let zone = spec.time_zone.as_deref().unwrap_or("UTC");
        let zone = parse_zone(zone).unwrap_or_else(|e| panic!("{e}"));
        let overrides = spec
            .schedule
            .iter()
            .map(|o| Override {
                limit: Some(build_limit(spec, &o.quota)),
                dates: o
                    .dates
                    .as_deref()
                    .map(|d| Dates::parse(d).unwrap_or_else(|e| panic!("{e}"))),
                days: o
                    .days
                    .iter()
                    .map(|d| parse_day(d).unwrap_or_else(|e| panic!("{e}")))
                    .collect(),
                hours: o
                    .hours
                    .as_deref()
                    .map(|h| Hours::parse(h).unwrap_or_else(|e| panic!("{e}"))),
            })
            .collect();
        Schedule::new(zone, overrides)
    });
    Scheduled { base, schedule }
}

fn build_limit(spec: &LimitSpec, quota: &str) -> Limit {
    let algorithm: Algorithm = spec.algorithm.parse().unwrap_or_else(|e| panic!("{e}"));
    let mut quota: Quota = quota.parse().unwrap_or_else(|e| panic!("{e}"));
    if let Some(zone) = &spec.time_zone {
        quota = quota.with_zone(parse_zone(zone).unwrap_or_else(|e| panic!("{e}")));
    }
    let mut b = Limit::builder(algorithm, quota);
    if let Some(x) = spec.burst {
        b = b.burst(x);
    }
    if let Some(x) = spec.buckets {
        b = b.buckets(x);
    }
    if spec.mode.as_deref() == Some("delay") {
        b = b.mode(Mode::Delay);
    }
    if let Some(w) = &spec.max_wait {
        b = b.max_wait(parse_duration(w).unwrap_or_else(|e| panic!("{e}")));
    }
    if let Some(w) = &spec.warmup {
        b = b.warmup(parse_duration(w).unwrap_or_else(|e| panic!("{e}")));
    }
    if let Some(c) = spec.cold_factor {
        b = b.cold_factor(c);
    }
    if let Some(d) = spec.max_debt {
        b = b.max_debt(d);
    }
    b.build().unwrap_or_else(|e| panic!("{e}"))
}

fn micros(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// Runs every scenario against `store`, which reads its time from `clock`. Keys are prefixed by
/// `key_prefix` so that runs sharing a Redis do not meet.
///
/// # Panics
/// On the first decision that differs from the table, naming the scenario, step and field.
pub async fn run<S: Store>(store: &S, clock: &ManualClock, key_prefix: &str) {
    run_table(store, clock, key_prefix, &table()).await;
}

/// Runs every scenario of the charges' table ([`CHARGES`]) against `store`, as [`run`].
///
/// # Panics
/// As [`run`].
pub async fn run_charges<S: Store>(store: &S, clock: &ManualClock, key_prefix: &str) {
    run_table(
        store,
        clock,
        &format!("{key_prefix}:charges"),
        &parse(CHARGES),
    )
    .await;
}

async fn run_table<S: Store>(store: &S, clock: &ManualClock, key_prefix: &str, table: &Table) {
    for (si, sc) in table.scenario.iter().enumerate() {
        let limits: BTreeMap<&str, Scheduled> = sc
            .limits
            .iter()
            .map(|(k, v)| (k.as_str(), build(v)))
            .collect();
        let start = sc.start.unwrap_or(DEFAULT_START);
        let mut leases: Vec<Option<u64>> = Vec::new();
        for (i, step) in sc.steps.iter().enumerate() {
            clock.set(start + step.at);
            let at = format!("scenario {si} `{}`, step {i}", sc.name);
            // A scheduled limit is picked at the store's clock, as the limiter picks it.
            let now = store.now();
            let limit_of = |name: &str| {
                limits
                    .get(name)
                    .unwrap_or_else(|| panic!("{at}: unknown limit {name}"))
                    .at(now)
            };
            if let Some(target) = &step.release {
                let (name, key) = target.split_once(':').unwrap_or((target, ""));
                let lease = step
                    .lease_of
                    .and_then(|s| leases.get(s).copied().flatten())
                    .unwrap_or_else(|| panic!("{at}: no lease to release"));
                let key = format!("{key_prefix}:{si}:{key}");
                let held = store
                    .release(&key, limit_of(name), lease)
                    .await
                    .unwrap_or_else(|e| panic!("{at}: release failed: {e}"));
                assert!(held, "{at}: the lease was not held");
                leases.push(None);
                continue;
            }
            if let Some(text) = &step.charge {
                let specs: Vec<(&str, String, Amount)> = text
                    .split(',')
                    .map(|p| {
                        let parts: Vec<&str> = p.trim().split(':').collect();
                        let (sign, n) = parts[2].split_at(1);
                        let (n, taken) = match n.split_once('@') {
                            Some((n, t)) => (n, Some(t)),
                            None => (n, None),
                        };
                        let n = n.parse().unwrap_or_else(|_| panic!("{at}: bad charge"));
                        let taken = taken.map(|t| {
                            start
                                + t.replace('_', "")
                                    .parse::<u64>()
                                    .unwrap_or_else(|_| panic!("{at}: bad @"))
                        });
                        let amount = match (sign, taken) {
                            ("+", None) => Amount::Charge(n),
                            ("-", None) => Amount::Refund(n),
                            ("-", Some(taken)) => Amount::release(n, taken),
                            _ => panic!("{at}: a charge is +N, -N or -N@T"),
                        };
                        (parts[0], format!("{key_prefix}:{si}:{}", parts[1]), amount)
                    })
                    .collect();
                let items: Vec<ChargeItem<'_>> = specs
                    .iter()
                    .map(|(l, key, amount)| ChargeItem {
                        key,
                        limit: limit_of(l),
                        amount: *amount,
                    })
                    .collect();
                let got = store
                    .charge(&items)
                    .await
                    .unwrap_or_else(|e| panic!("{at}: store error: {e}"));
                assert_eq!(got.len(), items.len(), "{at}: one answer per item");
                check_charges(&at, step, &got);
                leases.push(None);
                continue;
            }
            let text = step.items.as_deref().unwrap_or("");
            let specs: Vec<(&str, String, u64, bool)> = text
                .split(',')
                .map(|p| {
                    let parts: Vec<&str> = p.trim().split(':').collect();
                    let cost = parts[2]
                        .parse()
                        .unwrap_or_else(|_| panic!("{at}: bad cost"));
                    let shadow = parts.get(3) == Some(&"shadow");
                    (
                        parts[0],
                        format!("{key_prefix}:{si}:{}", parts[1]),
                        cost,
                        shadow,
                    )
                })
                .collect();
            let items: Vec<Item<'_>> = specs
                .iter()
                .map(|(l, key, cost, shadow)| Item {
                    key,
                    limit: limit_of(l),
                    cost: *cost,
                    enforce: !shadow,
                })
                .collect();
            if let Some(want) = &step.counts {
                let every = step
                    .every
                    .unwrap_or_else(|| panic!("{at}: counts needs every"));
                let mut counts = vec![0u64; want.len()];
                let end = step.at + 1_000_000 * want.len() as u64;
                for t in (step.at..end).step_by(every as usize) {
                    clock.set(start + t);
                    let got = store
                        .decide(&items)
                        .await
                        .unwrap_or_else(|e| panic!("{at}: store error: {e}"));
                    counts[((t - step.at) / 1_000_000) as usize] += u64::from(got[0].allowed);
                }
                assert_eq!(&counts, want, "{at}: admitted per second");
                leases.push(None);
                continue;
            }
            let mut first_lease = None;
            for r in 0..step.repeat.unwrap_or(1) {
                let got = store
                    .decide(&items)
                    .await
                    .unwrap_or_else(|e| panic!("{at}: store error: {e}"));
                let at = format!("{at} (repeat {r})");
                assert_eq!(got.len(), items.len(), "{at}: one decision per item");
                check(&at, step, &got);
                first_lease = first_lease.or(got[0].lease);
            }
            leases.push(first_lease);
        }
    }
}

fn check_charges(at: &str, step: &Step, got: &[Charged]) {
    for (j, c) in got.iter().enumerate() {
        let ctx = || format!("{at}, charge {j}: got {c:?}");
        for (want, value, field) in [
            (&step.applied, c.applied, "applied"),
            (&step.dropped, c.dropped, "dropped"),
            (&step.debt, c.debt, "debt"),
        ] {
            if let Some(v) = want {
                assert_eq!(value, v[j], "{field} — {}", ctx());
            }
        }
    }
    let decisions: Vec<Decision> = got.iter().map(|c| c.decision).collect();
    check(at, step, &decisions);
}

fn check(at: &str, step: &Step, got: &[Decision]) {
    for (j, d) in got.iter().enumerate() {
        let ctx = || format!("{at}, item {j}: got {d:?}");
        if let Some(v) = &step.allowed {
            assert_eq!(d.allowed, v[j], "allowed — {}", ctx());
        }
        if let Some(v) = &step.remaining {
            assert_eq!(d.remaining, v[j], "remaining — {}", ctx());
        }
        if let Some(v) = &step.retry {
            let want = u64::try_from(v[j]).ok().map(Duration::from_micros);
            assert_eq!(d.retry_after, want, "retry_after — {}", ctx());
        }
        if let Some(v) = &step.wait {
            assert_eq!(micros(d.wait), v[j], "wait — {}", ctx());
        }
        if let Some(v) = &step.reset {
            assert_eq!(micros(d.reset_after), v[j], "reset_after — {}", ctx());
        }
        if let Some(v) = &step.lease {
            assert_eq!(d.lease.is_some(), v[j], "lease — {}", ctx());
        }
        if let Some(v) = &step.limit {
            assert_eq!(d.limit, v[j], "limit — {}", ctx());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_parses_and_every_limit_builds() {
        let t = super::table();
        assert!(t.scenario.len() >= 15);
        for s in &t.scenario {
            for l in s.limits.values() {
                super::build(l);
            }
        }
        let t = super::parse(super::CHARGES);
        assert!(t.scenario.len() >= 5);
        for s in &t.scenario {
            for l in s.limits.values() {
                super::build(l);
            }
        }
    }
}
