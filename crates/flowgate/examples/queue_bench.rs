//! Queue benchmarks (run by hand; figures in BENCHMARKS.md):
//!
//! ```sh
//! cargo run --release -p flowgate --features queue --example queue_bench -- submit     # Redis batch submit vs pipelined LPUSH
//! cargo run --release -p flowgate --features queue --example queue_bench -- disk       # embedded store, durable batch submit
//! cargo run --release -p flowgate --features queue --example queue_bench -- release    # 1,000/s drained by 16 workers, Redis
//! cargo run --release -p flowgate --features queue --example queue_bench -- release disk   # the same, embedded store
//! ```
//!
//! Each starts its own `redis-server` on a free loopback port (persistence off) and stops it.

use std::sync::Arc;
use std::time::Duration;

// Benchmarks measure wall time: tokio's Instant (not disallowed; the real clock here).
use tokio::time::Instant;

use flowgate::clock::SystemClock;
use flowgate::queue::{DiskQueueStore, NewJob, Queue, QueueSet, QueueSpec, QueueStore};
use flowgate::{Descriptor, Matcher, RedisStore};
use flowgate_testkit::redis::RedisServer;

const PAYLOAD: usize = 200;

fn spec(rate: &str) -> QueueSpec {
    QueueSpec::new(
        "bench",
        "q",
        vec![Matcher::parse("channel")],
        rate.parse().unwrap(),
    )
    .unwrap()
    .with_max_depth(100_000_000)
    .unwrap()
}

fn jobs(n: usize, round: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| {
            let mut p = format!("{{\"refund\":{round}{i:08}}}").into_bytes();
            p.resize(PAYLOAD, b' ');
            NewJob::new(p)
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

async fn submit_vs_lpush() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap().queues();
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let q = spec("1000/s");
    let (batch, batches, rounds) = (1_000, 20, 7);
    let (mut ours, mut lpush) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let all: Vec<Vec<NewJob>> = (0..batches).map(|b| jobs(batch, round * 100 + b)).collect();
        let start = Instant::now();
        for b in &all {
            let mut pipe = redis::pipe();
            for j in b {
                pipe.cmd("LPUSH")
                    .arg("bench:list")
                    .arg(&j.payload[..])
                    .ignore();
            }
            let () = pipe.query_async(&mut conn).await.unwrap();
        }
        lpush.push((batch * batches) as f64 / start.elapsed().as_secs_f64());
        let start = Instant::now();
        for b in &all {
            store.submit(&q, "bench:q:channel=A", b).await.unwrap();
        }
        ours.push((batch * batches) as f64 / start.elapsed().as_secs_f64());
        let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    }
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    for line in info
        .lines()
        .filter(|l| l.contains("evalsha") || l.contains("lpush"))
    {
        println!("  {line}");
    }
    let (o, l) = (median(ours), median(lpush));
    println!(
        "Redis, batches of {batch} jobs of {PAYLOAD} B, median of {rounds} rounds of {} jobs each:",
        batch * batches
    );
    println!("  pipelined LPUSH  {l:>10.0} jobs/s");
    println!("  queue submit     {o:>10.0} jobs/s   ratio {:.2}", o / l);
}

async fn disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskQueueStore::open(dir.path(), SystemClock::new()).unwrap();
    let q = spec("1000/s");
    let batch = 1_000;
    for submitters in [1usize, 4] {
        let total = 100_000;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for s in 0..submitters {
            let store = store.clone();
            let q = q.clone();
            tasks.push(tokio::spawn(async move {
                for b in 0..total / batch / submitters {
                    store
                        .submit(&q, &format!("bench:q:channel=S{s}"), &jobs(batch, b))
                        .await
                        .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let rate = total as f64 / start.elapsed().as_secs_f64();
        println!(
            "embedded store, {submitters} submitter(s), batches of {batch} jobs of {PAYLOAD} B, each answered after fsync: {rate:.0} jobs/s"
        );
    }
    let size = std::fs::metadata(store.path())
        .map(|m| m.len())
        .unwrap_or(0);
    println!("  database file: {:.1} MB", size as f64 / 1e6);
}

async fn release(disk: bool) {
    if disk {
        let dir = tempfile::tempdir().unwrap();
        let store = DiskQueueStore::open(dir.path(), SystemClock::new()).unwrap();
        drain("embedded store", store).await;
    } else {
        let server = RedisServer::start();
        let store = RedisStore::connect(&server.url()).await.unwrap().queues();
        drain("Redis", store).await;
    }
}

async fn drain<S: QueueStore>(name: &str, store: S) {
    let (rate, workers, n) = (1_000u64, 16, 10_000usize);
    let queue = Arc::new(Queue::new(
        QueueSet::new(vec![spec(&format!("{rate}/s"))]).unwrap(),
        store,
    ));
    let d = Descriptor::new([("channel", "A")]);
    for b in 0..n / 1_000 {
        queue.submit("bench", &d, jobs(1_000, b)).await.unwrap();
    }
    let mut tasks = Vec::new();
    let begin = Instant::now();
    for _ in 0..workers {
        let (queue, d) = (queue.clone(), d.clone());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                let asked = Instant::now();
                let Some(job) = queue
                    .lease("bench", &d, Duration::from_millis(500))
                    .await
                    .unwrap()
                else {
                    return seen;
                };
                let got = begin.elapsed().as_micros() as u64;
                seen.push((job.released_at, got, asked.elapsed().as_micros() as u64));
                queue.ack(&job.token).await.unwrap();
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by_key(|s| s.0);
    assert_eq!(all.len(), n);
    let spacing = 1_000_000 / rate;
    let min_gap = all.windows(2).map(|w| w[1].0 - w[0].0).min().unwrap();
    let span = all[n - 1].0 - all[0].0;
    let measured = (n - 1) as f64 * 1e6 / span as f64;
    // Hand-off lateness: when the worker got the job, less its slot, relative to the earliest.
    let offsets: Vec<i64> = all.iter().map(|s| s.1 as i64 - s.0 as i64).collect();
    let base = *offsets.iter().min().unwrap();
    let mut late: Vec<u64> = offsets.iter().map(|o| (o - base) as u64).collect();
    late.sort_unstable();
    let mut call: Vec<u64> = all.iter().map(|s| s.2).collect();
    call.sort_unstable();
    let p = |v: &[u64], q: f64| v[((v.len() - 1) as f64 * q) as usize];
    println!("{name}, {rate}/s queue, {n} jobs, {workers} workers (each lease, then ack):");
    println!(
        "  measured rate {measured:.1}/s ({:+.2} % of the rate); closest releases {min_gap} us apart (spacing {spacing} us)",
        (measured / rate as f64 - 1.0) * 100.0
    );
    println!(
        "  hand-off after the slot, relative to the earliest: p50 {} us, p99 {} us, max {} us",
        p(&late, 0.5),
        p(&late, 0.99),
        late[n - 1]
    );
    println!(
        "  lease call (ask to job, waiting for the slot included): p50 {} us, p99 {} us",
        p(&call, 0.5),
        p(&call, 0.99)
    );
}

#[tokio::main]
async fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("submit") => submit_vs_lpush().await,
        Some("disk") => disk().await,
        Some("release") => release(std::env::args().nth(2).as_deref() == Some("disk")).await,
        _ => eprintln!("usage: queue_bench submit|disk|release [disk]"),
    }
}
