//! A reservation and its commit beside one check, on the memory store, in one run.
//!
//! ```text
//! cargo bench -p flowgate --bench reserve
//! ```

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flowgate::{
    Algorithm, Descriptor, Limit, Limiter, Matcher, MemoryStore, Quota, Request, Rule, RuleSet,
};

const KEYS: usize = 1_000;

fn reserve(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // Never exhausted during a run: every check and reservation is admitted.
    let limit = Limit::builder(
        Algorithm::TokenBucket,
        Quota::per_second(1_000_000).unwrap(),
    )
    .burst(1_000_000_000)
    .build()
    .unwrap();
    let rules = RuleSet::new(vec![Rule::new(
        "llm",
        "tokens",
        vec![Matcher::parse("key")],
        Some(limit),
    )])
    .unwrap();
    let limiter = Arc::new(Limiter::new(rules, MemoryStore::new()));
    let reqs: Vec<Request> = (0..KEYS)
        .map(|i| Request::new("llm", vec![Descriptor::new([("key", format!("k{i}"))])]))
        .collect();
    let mut g = c.benchmark_group("memory store, 1,000 keys");
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("check, cost 100", |b| {
        b.to_async(&rt).iter(|| {
            i = (i + 1) % KEYS;
            let (l, r) = (&limiter, reqs[i].clone().with_cost(100));
            async move { black_box(l.check(&r).await.allowed) }
        })
    });
    g.bench_function("reserve 100 + commit 80", |b| {
        b.to_async(&rt).iter(|| {
            i = (i + 1) % KEYS;
            let (l, r) = (&limiter, &reqs[i]);
            async move {
                let res = l.reserve(r, 100).await.unwrap();
                black_box(res.commit(80).await.unwrap())
            }
        })
    });
    g.finish();
}

criterion_group!(benches, reserve);
criterion_main!(benches);
