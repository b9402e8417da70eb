//! Adaptive concurrency through the limiter, against a simulated dependency whose latency rises
//! with its load: callers always want more calls than the limit admits, each call reports its
//! latency when it ends, and the limit settles where latency crosses `max_latency`.
//!
//! `cargo test -p flowgate --test adaptive -- --nocapture` prints the trace shown in
//! `docs/breakers.md` ("Adaptive concurrency").

use std::collections::VecDeque;
use std::time::Duration;

use flowgate::breakers::Outcome;
use flowgate::clock::ManualClock;
use flowgate::rule::AimdSpec;
use flowgate::{
    Algorithm, Descriptor, Limit, Limiter, Matcher, MemoryStore, Quota, Request, Rule, RuleSet,
};

/// A dependency serving `capacity` calls at once in `base_ms`; calls beyond wait their turn.
fn latency_ms(base_ms: f64, capacity: f64, in_flight: usize) -> f64 {
    base_ms * (in_flight as f64 / capacity).max(1.0)
}

fn limiter(spec: AimdSpec) -> Limiter<MemoryStore<ManualClock>> {
    let limit = Limit::new(Algorithm::Concurrency, "10/30s".parse::<Quota>().unwrap()).unwrap();
    let mut rule = Rule::new("pay", "calls", vec![Matcher::parse("channel")], Some(limit));
    rule.adaptive = Some(spec);
    let clock = ManualClock::new(1_800_000_000_000_000);
    Limiter::new(
        RuleSet::new(vec![rule]).unwrap(),
        MemoryStore::with_clock(clock),
    )
}

/// One sampled step: (step, limit, calls in flight, latency of the call that ended, ms).
type Row = (usize, u64, usize, f64);

/// Runs `steps` steps: the caller fills the limit, then the oldest call ends and reports. Every
/// `every` steps a row is kept.
async fn run(
    capacity: f64,
    base_ms: f64,
    bound_ms: f64,
    steps: usize,
    every: usize,
) -> (Vec<Row>, Vec<u64>) {
    let spec = AimdSpec {
        initial: 10,
        ..AimdSpec::new(1, 1_000, bound_ms * 1000.0)
    };
    let l = limiter(spec);
    let d = Descriptor::new([("channel", "WPG")]);
    let req = Request::new("pay", vec![d.clone()]);
    let mut out: VecDeque<(u64, f64)> = VecDeque::new();
    let (mut rows, mut limits) = (Vec::new(), Vec::new());
    for step in 1..=steps {
        loop {
            let v = l.check(&req).await;
            if !v.allowed {
                break;
            }
            let lease = v.statuses[0].decision.lease.unwrap();
            out.push_back((lease, latency_ms(base_ms, capacity, out.len() + 1)));
        }
        let in_flight = out.len();
        let (lease, ms) = out.pop_front().unwrap();
        l.report(
            "pay",
            std::slice::from_ref(&d),
            Outcome::Ok,
            Duration::from_secs_f64(ms / 1000.0),
            None,
        );
        assert!(l.release("pay", &d, lease).await.unwrap());
        let limit = l.adaptive().limits("pay", "calls")[0].limit;
        limits.push(limit);
        if step % every == 0 || step <= 3 {
            rows.push((step, limit, in_flight, ms));
        }
    }
    (rows, limits)
}

#[tokio::test]
async fn the_limit_settles_in_its_band_against_a_queueing_dependency() {
    for (capacity, base_ms, bound_ms) in [(10.0, 10.0, 25.0), (40.0, 5.0, 8.0)] {
        let (rows, limits) = run(capacity, base_ms, bound_ms, 3_000, 200).await;
        // L: the load at which the dependency's latency reaches max_latency.
        let big_l = capacity * bound_ms / base_ms;
        println!(
            "capacity {capacity}, base {base_ms} ms, max_latency {bound_ms} ms: L = {big_l}\n"
        );
        println!("| step | limit | in flight | latency (ms) |\n|---:|---:|---:|---:|");
        for (step, limit, in_flight, ms) in &rows {
            println!("| {step} | {limit} | {in_flight} | {ms:.1} |");
        }
        let tail = &limits[2_000..];
        let (lo, hi) = (
            *tail.iter().min().unwrap() as f64,
            *tail.iter().max().unwrap() as f64,
        );
        println!("\nsteps 2001..=3000: limit in {lo}..={hi}\n");
        assert!(
            lo >= 0.9 * big_l - 1.0 && hi <= big_l + 1.0,
            "L {big_l}: settled in {lo}..={hi}"
        );
    }
}

#[tokio::test]
async fn a_permit_reports_to_the_adaptive_limit_it_was_admitted_under() {
    let l = std::sync::Arc::new(limiter(AimdSpec {
        initial: 10,
        ..AimdSpec::new(2, 50, 100_000.0)
    }));
    let req = Request::new("pay", vec![Descriptor::new([("channel", "WPG")])]);
    let mut permits = Vec::new();
    while let Ok(p) = l.acquire(&req).await {
        permits.push(p);
    }
    assert_eq!(permits.len(), 10);
    let got = permits[0].report(true, Duration::from_millis(400));
    assert_eq!(got.adaptive, 1);
    assert_eq!(l.adaptive().limits("pay", "calls")[0].limit, 9, "10 × 0.9");
    assert_eq!(l.adaptive().shared(), None, "per process");
    assert_eq!(l.adaptive().unsent(), 0);
    for p in permits {
        p.release().await;
    }
    assert_eq!(l.adaptive().limits("pay", "calls")[0].in_flight, 0);
    let mut permits = Vec::new();
    while let Ok(p) = l.acquire(&req).await {
        permits.push(p);
    }
    assert_eq!(permits.len(), 9);
}
