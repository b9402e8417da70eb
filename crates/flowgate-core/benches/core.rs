//! Core benchmarks, side by side with governor in one run (same machine, same clock source:
//! both read quanta's TSC clock).
//!
//! ```text
//! cargo bench -p flowgate-core --bench core
//! ```

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use flowgate_core::{
    Algorithm, DirectBucket, Item, Limit, Matcher, MemoryStore, Quota, Request, Rule, RuleSet,
};
use governor::{Quota as GQuota, RateLimiter};

const KEYS: usize = 1_000_000;

#[path = "support/mod.rs"]
mod support;
use support::{keys as key_set, random_indices};

fn direct(c: &mut Criterion) {
    let mut g = c.benchmark_group("direct token bucket, one key");
    g.throughput(Throughput::Elements(1));
    // Never exhausted during a run: both admit every call.
    let limit = Limit::builder(
        Algorithm::TokenBucket,
        Quota::per_second(1_000_000).unwrap(),
    )
    .burst(1_000_000_000)
    .build()
    .unwrap();
    let ours = DirectBucket::new(limit).unwrap();
    g.bench_function("flowgate DirectBucket::check", |b| {
        b.iter(|| black_box(ours.check(1).allowed))
    });
    let gov = RateLimiter::direct(
        GQuota::per_second(NonZeroU32::new(1_000_000).unwrap())
            .allow_burst(NonZeroU32::new(1_000_000_000).unwrap()),
    );
    g.bench_function("governor direct check", |b| {
        b.iter(|| black_box(gov.check().is_ok()))
    });
    g.finish();
}

fn keyed(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed token bucket");
    g.throughput(Throughput::Elements(1));
    // 1/h with burst 1000: every key stays live (its bucket is not full again) for the run.
    let limit = Limit::builder(Algorithm::TokenBucket, "1/1h".parse::<Quota>().unwrap())
        .burst(1_000)
        .build()
        .unwrap();
    let gq = GQuota::with_period(Duration::from_secs(3600))
        .unwrap()
        .allow_burst(NonZeroU32::new(1_000).unwrap());
    for n in [1usize, KEYS] {
        let keys = key_set(n);
        let idx = random_indices(n, 1 << 22);
        let ours = MemoryStore::new().with_max_keys(4 * KEYS);
        let gov = RateLimiter::<String, _, _>::keyed(gq);
        for k in &keys {
            let item = Item {
                key: k,
                limit: &limit,
                cost: 1,
                enforce: true,
            };
            ours.decide_now(&[item]).unwrap();
            let _ = gov.check_key(k);
        }
        let mut i = 0usize;
        g.bench_with_input(BenchmarkId::new("flowgate MemoryStore", n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) & ((1 << 22) - 1);
                let key = &keys[idx[i] as usize];
                let item = Item {
                    key,
                    limit: &limit,
                    cost: 1,
                    enforce: true,
                };
                black_box(ours.decide_now(&[item]).map(|d| d[0].allowed))
            })
        });
        let mut i = 0usize;
        g.bench_with_input(
            BenchmarkId::new("governor keyed (DashMap)", n),
            &n,
            |b, _| {
                b.iter(|| {
                    i = (i + 1) & ((1 << 22) - 1);
                    black_box(gov.check_key(&keys[idx[i] as usize]).is_ok())
                })
            },
        );
    }
    g.finish();
}

fn algorithms(c: &mut Criterion) {
    let mut g = c.benchmark_group("algorithm on the memory store, 1 hot key");
    g.throughput(Throughput::Elements(1));
    fn run(store: &MemoryStore, limit: &Limit, n: u64) {
        for _ in 0..n {
            let item = Item {
                key: "hot",
                limit,
                cost: 1,
                enforce: true,
            };
            let d = store.decide_one_now(&item);
            // Concurrency: hold the lease only for the call, as a request would; the other
            // algorithms never grant one.
            if let Some(lease) = d.as_ref().ok().and_then(|d| d.lease) {
                store.release_now("hot", limit, lease);
            }
            black_box(d.ok());
        }
    }
    for alg in Algorithm::ALL {
        // Mostly admitted; the window is long so sliding logs stay bounded by the limit.
        let limit = Limit::new(alg, "1000/1s".parse::<Quota>().unwrap()).unwrap();
        let store = MemoryStore::new();
        for threads in [1u64, 2] {
            let id = BenchmarkId::new(alg.name(), format!("{threads} thread(s)"));
            g.bench_function(id, |b| {
                b.iter_custom(|iters| {
                    #[allow(clippy::disallowed_methods)] // wall time of the whole run
                    let start = Instant::now();
                    if threads == 1 {
                        run(&store, &limit, iters);
                    } else {
                        std::thread::scope(|s| {
                            for _ in 0..threads {
                                s.spawn(|| run(&store, &limit, iters.div_ceil(threads)));
                            }
                        });
                    }
                    // Wall time for `iters` decisions spread over the threads: the inverse of
                    // aggregate throughput.
                    start.elapsed()
                })
            });
        }
    }
    g.finish();
}

fn rules(c: &mut Criterion) {
    use futures::FutureExt;
    let mut g = c.benchmark_group("request through rule matching + store");
    g.throughput(Throughput::Elements(1));
    let tb = |q: &str| {
        Some(
            Limit::builder(Algorithm::TokenBucket, q.parse::<Quota>().unwrap())
                .burst(1_000_000_000)
                .build()
                .unwrap(),
        )
    };
    let rules = RuleSet::new(vec![
        Rule::new(
            "sms",
            "global",
            vec![Matcher::parse("scope=all")],
            tb("100000/s"),
        ),
        Rule::new(
            "sms",
            "carrier",
            vec![Matcher::parse("carrier")],
            tb("20000/s"),
        ),
        Rule::new("sms", "user", vec![Matcher::parse("user")], tb("500/s")),
    ])
    .unwrap();
    let store = MemoryStore::new();
    let one = Request::new("sms", vec!["user=123".parse().unwrap()]);
    let three = Request::new(
        "sms",
        vec![
            "scope=all".parse().unwrap(),
            "carrier=cmcc".parse().unwrap(),
            "user=123".parse().unwrap(),
        ],
    );
    for (name, req) in [("1 rule", &one), ("3 rules", &three)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let matched = rules.resolve(req);
                let items: Vec<Item<'_>> = matched
                    .iter()
                    .filter_map(|m| {
                        Some(Item {
                            key: &m.key,
                            limit: m.rule.limit.as_ref()?,
                            cost: m.cost,
                            enforce: true,
                        })
                    })
                    .collect();
                black_box(
                    flowgate_core::Store::decide(&store, &items)
                        .now_or_never()
                        .map(|d| d.map(|d| d.len())),
                )
            })
        });
    }
    g.finish();
}

#[allow(missing_docs)] // generated by the macro
mod group {
    use super::*;
    criterion_group!(benches, direct, keyed, algorithms, rules);
}
use group::benches;
criterion_main!(benches);
