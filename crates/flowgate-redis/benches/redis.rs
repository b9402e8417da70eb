//! Redis store benchmarks against one local `redis-server` started for the run (see
//! BENCHMARKS.md, "Redis"). Every figure of one run shares the server, the client
//! and the connection set-up (one multiplexed `ConnectionManager` per store).
//!
//! `cargo bench -p flowgate-redis --bench redis` (optionally `-- <seconds per figure>`).
//! `-- <secs> only <algorithm>` measures one algorithm (INCR, plain, coalesced at 64 in flight);
//! `FOCUS=incr|direct|coalesced` runs one of those alone, `BATCHES=n` sets the coalesced calls in
//! flight, `INFLIGHT=n` the requests in flight (default 64) and `WORKERS=n` the client runtime's
//! worker threads (default 2); focus mode prints the CPU each side spent.
//! `-- <secs> users` prints BENCHMARKS.md's table of decisions against raw `INCR`.
//! `-- <secs> paired [algorithm...]` alternates INCR and the coalesced store in short rounds and
//! prints the median ratio (`ROUNDS=n`, default 5); `paired three` alternates the 1-rule and the
//! field's 3-rule request instead.
//! `BENCH_REDIS_URL=redis://…` uses a server started by hand (to profile it), `BENCH_CLUSTER=n`
//! (focus mode) an n-master Redis Cluster started by the bench.
//! `-- <secs> batch` (with `BENCH_CLUSTER=3`): `decide_batch` of 64 two-rule requests (keys on
//! two slots, shared by no other request) against the same requests decided one after another.

#![allow(missing_docs)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use flowgate_core::{Algorithm, Item, Limit, Quota, Store};
use flowgate_redis::{RedisOptions, RedisStore};
use flowgate_testkit::redis::{RedisCluster, RedisServer};
use tokio::time::Instant;

/// Keys per figure: 10,000, or `BENCH_KEYS` (focus mode, e.g. to keep each key's rate when
/// profiling a slowed-down server).
static KEYS: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
    std::env::var("BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
});

/// Operations per second, and the latency of one at the median and the 99th percentile.
#[derive(Clone, Copy)]
struct Rate {
    per_s: f64,
    p50_us: u64,
    p99_us: u64,
}

/// Runs `op` from `inflight` tasks for `secs`; answers operations per second.
async fn rate<F, Fut>(inflight: usize, secs: f64, op: F) -> f64
where
    F: Fn(u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    rate_latency(inflight, secs, op).await.per_s
}

/// Runs `op` from `inflight` tasks for `secs` (after 200 ms of warm-up); answers the rate and
/// latencies.
async fn rate_latency<F, Fut>(inflight: usize, secs: f64, op: F) -> Rate
where
    F: Fn(u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..inflight {
        let (op, stop, measuring, done) =
            (op.clone(), stop.clone(), measuring.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut hist = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
            let mut i = t as u64 * 7919;
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                op(i).await;
                if measuring.load(Ordering::Relaxed) {
                    let _ = hist.record(t0.elapsed().as_micros() as u64);
                }
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            hist
        }));
    }
    // Warm up, then measure.
    tokio::time::sleep(Duration::from_millis(200)).await;
    measuring.store(true, Ordering::Relaxed);
    let start_n = done.load(Ordering::Relaxed);
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    let n = done.load(Ordering::Relaxed) - start_n;
    let el = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut all = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
    for t in tasks {
        if let Ok(h) = t.await {
            let _ = all.add(&h);
        }
    }
    Rate {
        per_s: n as f64 / el,
        p50_us: all.value_at_quantile(0.5),
        p99_us: all.value_at_quantile(0.99),
    }
}

fn limit(a: Algorithm, q: &str) -> Limit {
    Limit::new(a, q.parse::<Quota>().expect("quota")).expect("limit")
}

/// The 1-rule request of the throughput figures: `a` at 100/s per key (concurrency: leases of
/// 1 ms, so that keys never fill up, since the bench never releases them).
fn one_limit(a: Algorithm) -> Arc<Vec<Limit>> {
    let q = if a == Algorithm::Concurrency {
        "100/1ms"
    } else {
        "100/s"
    };
    Arc::new(vec![limit(a, q)])
}

/// `BENCH_CLUSTER=n`: the nodes of an n-master Redis Cluster the bench started (focus mode).
static CLUSTER: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// A store on the bench's server, or on its cluster (`BENCH_CLUSTER`).
async fn connect(url: &str, options: RedisOptions) -> RedisStore {
    match CLUSTER.get() {
        Some(urls) => RedisStore::connect_cluster_with(urls, options).await,
        None => RedisStore::connect_with(url, options).await,
    }
    .expect("connect")
}

async fn store(url: &str, coalesce: bool) -> Arc<RedisStore> {
    store_with(url, coalesce, RedisOptions::default().batches_in_flight).await
}

async fn store_with(url: &str, coalesce: bool, in_flight: usize) -> Arc<RedisStore> {
    Arc::new(
        connect(
            url,
            RedisOptions::default()
                .deadline(Duration::from_secs(5))
                .blocked_capacity(0)
                .coalesce(coalesce)
                .batches_in_flight(in_flight),
        )
        .await,
    )
}

/// The names `<prefix>0` .. `<prefix>{n - 1}`. Every figure builds its keys before it runs, so
/// that what it measures is the store's work, not `format!`'s (the same for INCR and the
/// decisions).
fn names(prefix: &str, n: u64) -> Arc<Vec<String>> {
    Arc::new((0..n).map(|k| format!("{prefix}{k}")).collect())
}

async fn incr_rate(s: &Arc<RedisStore>, inflight: usize, secs: f64) -> f64 {
    incr_latency(s, *KEYS, inflight, secs).await.per_s
}

/// Raw `INCR` on `keys` keys, through the store's connection.
async fn incr_latency(s: &Arc<RedisStore>, keys: u64, inflight: usize, secs: f64) -> Rate {
    let s = s.clone();
    let names = names("bench:incr:", keys);
    rate_latency(inflight, secs, move |i| {
        let s = s.clone();
        let names = names.clone();
        async move {
            let mut c = redis::cmd("INCR");
            c.arg(&names[(i % keys) as usize]);
            s.query(&c).await.expect("incr");
        }
    })
    .await
}

async fn decide_rate(
    s: &Arc<RedisStore>,
    limits: Arc<Vec<Limit>>,
    tag: &'static str,
    inflight: usize,
    secs: f64,
) -> f64 {
    let spread = vec![*KEYS; limits.len()];
    decide_rate_spread(s, limits, spread, tag, inflight, secs)
        .await
        .per_s
}

/// As [`decide_rate`], rule `r` of each request naming one of `spread[r]` keys (1: a global
/// limit, 10: one per channel, `KEYS`: one per user).
async fn decide_rate_spread(
    s: &Arc<RedisStore>,
    limits: Arc<Vec<Limit>>,
    spread: Vec<u64>,
    tag: &'static str,
    inflight: usize,
    secs: f64,
) -> Rate {
    let s = s.clone();
    let keys: Arc<Vec<Arc<Vec<String>>>> = Arc::new(
        (0..limits.len())
            .map(|r| names(&format!("bench:{tag}:{r}:"), spread[r]))
            .collect(),
    );
    rate_latency(inflight, secs, move |i| {
        let s = s.clone();
        let limits = limits.clone();
        let keys = keys.clone();
        async move {
            let items: Vec<Item<'_>> = limits
                .iter()
                .zip(keys.iter())
                .map(|(l, k)| Item {
                    key: &k[(i % k.len() as u64) as usize],
                    limit: l,
                    cost: 1,
                    enforce: true,
                })
                .collect();
            s.decide(&items).await.expect("decide");
        }
    })
    .await
}

/// The field's 3-rule request: a global limit, one per channel (10 channels) and one per user,
/// token buckets high enough to admit everything here. `SPREAD=a,b,c` sets how many distinct keys
/// each rule has instead (e.g. `10000,10000,10000`: three keys no request shares).
fn field_rules() -> (Arc<Vec<Limit>>, Vec<u64>) {
    (
        Arc::new(vec![
            limit(Algorithm::TokenBucket, "1000000/s"),
            limit(Algorithm::TokenBucket, "100000/s"),
            limit(Algorithm::TokenBucket, "100/s"),
        ]),
        std::env::var("SPREAD")
            .ok()
            .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_else(|| vec![1, 10, *KEYS]),
    )
}

/// Decisions per second on one hot key from `inflight` tasks.
async fn hot_rate(
    s: &Arc<RedisStore>,
    limit: Arc<Limit>,
    tag: &'static str,
    inflight: usize,
    secs: f64,
) -> f64 {
    let s = s.clone();
    let key = Arc::new(format!("bench:hot:{tag}"));
    rate(inflight, secs, move |_| {
        let s = s.clone();
        let limit = limit.clone();
        let key = key.clone();
        async move {
            s.decide(&[Item {
                key: &key,
                limit: &limit,
                cost: 1,
                enforce: true,
            }])
            .await
            .expect("decide");
        }
    })
    .await
}

/// The blog-post sliding log: ZREMRANGEBYSCORE, ZCARD, ZADD as three round trips (racy).
async fn naive_log(s: &RedisStore, key: &str, limit: u64, window_us: u64, member: u64) -> bool {
    let now = {
        let t: (u64, u64) =
            redis::from_redis_value(s.query(&redis::cmd("TIME")).await.expect("time"))
                .expect("time");
        t.0 * 1_000_000 + t.1
    };
    let mut rem = redis::cmd("ZREMRANGEBYSCORE");
    rem.arg(key).arg(0).arg(now.saturating_sub(window_us));
    s.query(&rem).await.expect("zrem");
    let card: u64 =
        redis::from_redis_value(s.query(redis::cmd("ZCARD").arg(key)).await.expect("zcard"))
            .expect("zcard");
    if card < limit {
        let mut add = redis::cmd("ZADD");
        add.arg(key).arg(now).arg(format!("{now}:{member}"));
        s.query(&add).await.expect("zadd");
        true
    } else {
        false
    }
}

fn memory_usage(v: redis::Value) -> i64 {
    redis::from_redis_value(v).unwrap_or(-1)
}

/// CPU time of this process and of redis-server, and Redis's own count of what it ran: per
/// operation, what each side spent (focus mode).
struct Cpu {
    client: f64,
    redis: f64,
    calls: u64,
    usec: u64,
    at: Instant,
}

impl Cpu {
    async fn read(s: &RedisStore) -> Cpu {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let f: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
        let client = tick(11) + tick(12);
        let info: String =
            redis::from_redis_value(s.query(redis::cmd("INFO").arg("all")).await.expect("info"))
                .unwrap_or_default();
        let field = |name: &str| -> f64 {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0)
        };
        let redis = field("used_cpu_sys:") + field("used_cpu_user:");
        let (mut calls, mut usec) = (0, 0);
        for l in info
            .lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_incr:"))
        {
            for kv in l.split([':', ',']) {
                if let Some(v) = kv.strip_prefix("calls=") {
                    calls += v.parse::<u64>().unwrap_or(0);
                } else if let Some(v) = kv.strip_prefix("usec=") {
                    usec += v.parse::<u64>().unwrap_or(0);
                }
            }
        }
        Cpu {
            client,
            redis,
            calls,
            usec,
            at: Instant::now(),
        }
    }

    /// Prints CPU per operation since `before` (operations counted by Redis: INCRs or script
    /// calls, and the decisions the stores counted are not known here, so per call).
    fn since(&self, before: &Cpu, what: &str) {
        let wall = self.at.duration_since(before.at).as_secs_f64();
        let calls = (self.calls - before.calls).max(1) as f64;
        println!(
            "  {what}: client {:.2} cores, redis-server {:.2} cores; {:.0} calls/s, redis command time {:.1} us per call",
            (self.client - before.client) / wall,
            (self.redis - before.redis) / wall,
            calls / wall,
            (self.usec - before.usec) as f64 / calls,
        );
    }
}

fn algorithm(name: &str) -> Algorithm {
    match name {
        "fixed_window" => Algorithm::FixedWindow,
        "sliding_window" => Algorithm::SlidingWindow,
        "sliding_log" => Algorithm::SlidingLog,
        "leaky_bucket" => Algorithm::LeakyBucket,
        "concurrency" => Algorithm::Concurrency,
        _ => Algorithm::TokenBucket,
    }
}

/// `-- <secs> only three`: a 1-rule request (per user) against the field's 3-rule request
/// (global, channel, user), at 1 and 64 in flight, coalesced (the store as shipped, cache off).
/// `FOCUS=1|3` runs only that many rules, `INFLIGHT=n` only n in flight (to profile one).
async fn focus_three(url: &str, secs: f64) {
    let s = store(url, true).await;
    let one = Arc::new(vec![limit(Algorithm::TokenBucket, "100/s")]);
    let (three, spread) = field_rules();
    let focus = std::env::var("FOCUS").unwrap_or_default();
    let run = |f: &str| focus.is_empty() || focus == f;
    let inflight: Vec<usize> = match std::env::var("INFLIGHT").ok().and_then(|v| v.parse().ok()) {
        Some(n) => vec![n],
        None => vec![1, 64],
    };
    for n in inflight {
        let mut r1 = f64::NAN;
        if run("1") {
            let before = Cpu::read(&s).await;
            r1 = decide_rate(&s, one.clone(), "f1", n, secs).await;
            Cpu::read(&s).await.since(&before, "1 rule");
        }
        let mut r3 = f64::NAN;
        if run("3") {
            let before = Cpu::read(&s).await;
            r3 = decide_rate_spread(&s, three.clone(), spread.clone(), "f3", n, secs)
                .await
                .per_s;
            Cpu::read(&s).await.since(&before, "3 rules");
        }
        println!(
            "{n} in flight: 1 rule {r1:.0}/s, 3 rules (global, channel, user) {r3:.0}/s: cost ratio {:.2}",
            r1 / r3
        );
    }
    // (the requests decided in all, warm-up included: what `script-cost.sh three` divides by)
    println!("in all: {} decisions", s.stats().decisions);
}

async fn focus(url: &str, name: &str, secs: f64) {
    if name == "three" {
        return focus_three(url, secs).await;
    }
    let direct = store(url, false).await;
    // BATCHES=n: coalesced script calls in flight (default: the store's default).
    let coalesced = match std::env::var("BATCHES").ok().and_then(|v| v.parse().ok()) {
        Some(n) => store_with(url, true, n).await,
        None => Arc::new(
            connect(
                url,
                RedisOptions::default()
                    .deadline(Duration::from_secs(5))
                    .blocked_capacity(0),
            )
            .await,
        ),
    };
    let a = algorithm(name);
    let l = one_limit(a);
    // FOCUS=incr|direct|coalesced runs that figure alone (to profile it); the others are NaN.
    let focus = std::env::var("FOCUS").unwrap_or_default();
    let run = |f: &str| focus.is_empty() || focus == f;
    // INFLIGHT=n: requests in flight (default 64; the printed labels keep saying @64).
    let n = std::env::var("INFLIGHT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let incr64 = if run("incr") {
        let before = Cpu::read(&direct).await;
        let r = incr_rate(&direct, n, secs).await;
        Cpu::read(&direct).await.since(&before, "incr");
        r
    } else {
        f64::NAN
    };
    let r64 = if run("direct") {
        let before = Cpu::read(&direct).await;
        let r = decide_rate(&direct, l.clone(), "focus", n, secs).await;
        Cpu::read(&direct).await.since(&before, "direct");
        r
    } else {
        f64::NAN
    };
    let c64 = if run("coalesced") {
        let before = Cpu::read(&direct).await;
        let r = decide_rate(&coalesced, l.clone(), "focus", n, secs).await;
        Cpu::read(&direct).await.since(&before, "coalesced");
        r
    } else {
        f64::NAN
    };
    let st = coalesced.stats();
    println!(
        "INCR@64 {incr64:.0}/s | {name}@64 {r64:.0}/s ({:.2}) | coalesced {c64:.0}/s ({:.2}), {:.1} per call, {} decisions",
        r64 / incr64,
        c64 / incr64,
        st.decisions as f64 / st.script_calls.max(1) as f64,
        st.decisions + direct.stats().decisions
    );
}

/// `-- <secs> paired [algorithm...]`: for each algorithm (default all six), `ROUNDS` rounds
/// (default 5) of raw INCR then the coalesced store (blocked-keys cache off), `secs` each, 64 in
/// flight, 10,000 keys: the ratio of each adjacent pair, and their median. The machine's speed
/// drifts by tens of percent over seconds; a ratio of two figures measured seconds apart
/// cancels most of that drift, a ratio of figures a minute apart does not.
async fn paired(url: &str, names: &[String], secs: f64) {
    let all = [
        "fixed_window",
        "sliding_window",
        "sliding_log",
        "token_bucket",
        "leaky_bucket",
        "concurrency",
    ];
    let names: Vec<&str> = if names.is_empty() {
        all.to_vec()
    } else {
        names.iter().map(String::as_str).collect()
    };
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let direct = store(url, false).await;
    let coalesced = store(url, true).await;
    let mut header = true;
    for name in names {
        if name == "three" {
            // PLAIN=1: without coalescing (one script call per request)
            let s = if std::env::var("PLAIN").is_ok_and(|v| v == "1") {
                &direct
            } else {
                &coalesced
            };
            paired_three(s, rounds, secs).await;
            continue;
        }
        if std::mem::take(&mut header) {
            println!(
                "| algorithm | INCR@64 /s, per round | coalesced@64 /s, per round | ratio per round | median ratio |"
            );
            println!("|---|---|---|---|---|");
        }
        let a = algorithm(name);
        let l = one_limit(a);
        let mut pairs = Pairs::default();
        for _ in 0..rounds {
            let i = incr_rate(&direct, 64, secs).await;
            let c = decide_rate(&coalesced, l.clone(), "paired", 64, secs).await;
            pairs.push(i, c, c / i);
        }
        println!("| {name} | {} |", pairs.row());
    }
}

/// Rates measured in alternating pairs, and a ratio per pair.
#[derive(Default)]
struct Pairs {
    first: Vec<String>,
    second: Vec<String>,
    ratios: Vec<f64>,
}

impl Pairs {
    fn push(&mut self, first: f64, second: f64, ratio: f64) {
        self.first.push(format!("{:.0}k", first / 1e3));
        self.second.push(format!("{:.0}k", second / 1e3));
        self.ratios.push(ratio);
    }

    /// The cells: the first rates, the second rates, the ratios, their median.
    fn row(&self) -> String {
        let shown: Vec<String> = self.ratios.iter().map(|r| format!("{r:.2}")).collect();
        let mut sorted = self.ratios.clone();
        sorted.sort_by(f64::total_cmp);
        format!(
            "{} | {} | {} | {:.2}",
            self.first.join(" "),
            self.second.join(" "),
            shown.join(" "),
            sorted[sorted.len() / 2]
        )
    }
}

/// `batch`: batches of 64 requests of two token buckets (a user's and its account's, keys on two
/// slots of a cluster, each in one request of the batch): `decide_batch` against `decide` one
/// request after another (what `decide_batch` did with such a batch before it decided in waves).
async fn batch(url: &str, secs: f64) {
    let s = store(url, false).await;
    let l = limit(Algorithm::TokenBucket, "1000000/s");
    let mut round = 0u64;
    let mut keys = || {
        round += 1;
        (0..64)
            .map(|i| {
                [
                    format!("batch:user:{round}:{i}"),
                    format!("batch:account:{round}:{i}"),
                ]
            })
            .collect::<Vec<_>>()
    };
    for (name, batched) in [("decide_batch", true), ("decide, one after another", false)] {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            let keys = keys();
            let requests: Vec<[Item<'_>; 2]> = keys
                .iter()
                .map(|[u, a]| {
                    [
                        Item {
                            key: u,
                            limit: &l,
                            cost: 1,
                            enforce: true,
                        },
                        Item {
                            key: a,
                            limit: &l,
                            cost: 1,
                            enforce: true,
                        },
                    ]
                })
                .collect();
            if batched {
                let refs: Vec<&[Item<'_>]> = requests.iter().map(|r| &r[..]).collect();
                let d = s.decide_batch(&refs).await.expect("batch");
                assert!(d.iter().all(|d| d.iter().all(|d| d.allowed)));
            } else {
                for r in &requests {
                    let d = s.decide(r).await.expect("decide");
                    assert!(d.iter().all(|d| d.allowed));
                }
            }
            n += 64;
        }
        let rate = n as f64 / start.elapsed().as_secs_f64();
        println!("| {name} | {rate:.0} requests/s |");
    }
}

/// `paired three`: `rounds` pairs of the 1-rule request (per user) and the field's 3-rule
/// request (global, channel, user), 64 in flight, coalesced (`PLAIN=1`: one call per request);
/// the cost ratio (1-rule rate / 3-rule rate) of each pair and their median.
async fn paired_three(s: &Arc<RedisStore>, rounds: usize, secs: f64) {
    let one = Arc::new(vec![limit(Algorithm::TokenBucket, "100/s")]);
    let (three, spread) = field_rules();
    let mut pairs = Pairs::default();
    for _ in 0..rounds {
        let r1 = decide_rate(s, one.clone(), "p1", 64, secs).await;
        let r3 = decide_rate_spread(s, three.clone(), spread.clone(), "p3", 64, secs)
            .await
            .per_s;
        pairs.push(r1, r3, r1 / r3);
    }
    println!(
        "| 1 rule /s, per round | 3 rules (global, channel, user) /s, per round | cost ratio per round | median cost ratio |"
    );
    println!("|---|---|---|---|");
    println!("| {} |", pairs.row());
}

/// Redis's memory per key (`MEMORY USAGE … SAMPLES 0`) after one decision of each algorithm, of
/// a raw `INCR` counter, and of sliding logs at their limit.
async fn memory_table(direct: &Arc<RedisStore>) {
    println!("## bytes of Redis memory per key (MEMORY USAGE ... SAMPLES 0)");
    println!("| state | bytes |");
    println!("|---|---|");
    let usage = |k: String| async move {
        let v = direct
            .query(
                redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(&k)
                    .arg("SAMPLES")
                    .arg(0),
            )
            .await
            .expect("memory");
        memory_usage(v)
    };
    direct
        .query(redis::cmd("INCR").arg("bench:mem:incr"))
        .await
        .expect("incr");
    println!(
        "| raw INCR counter | {} |",
        usage("bench:mem:incr".into()).await
    );
    for a in Algorithm::ALL {
        let name = a.name();
        let l = limit(a, "100/s");
        let key = format!("mem:{name}");
        direct
            .decide(&[Item {
                key: &key,
                limit: &l,
                cost: 1,
                enforce: true,
            }])
            .await
            .expect("decide");
        println!(
            "| {name} | {} |",
            usage(flowgate_redis::keys::redis_key(&key, &l)).await
        );
    }
    for n in [100u64, 1000] {
        let l = limit(Algorithm::SlidingLog, &format!("{n}/1h"));
        let key = format!("mem:log_full:{n}");
        for _ in 0..n {
            let d = direct
                .decide(&[Item {
                    key: &key,
                    limit: &l,
                    cost: 1,
                    enforce: true,
                }])
                .await
                .expect("decide");
            assert!(d[0].allowed);
        }
        let b = usage(flowgate_redis::keys::redis_key(&key, &l)).await;
        println!(
            "| sliding_log at its limit of {n} | {b} ({:.1} per entry) |",
            b as f64 / n as f64
        );
    }
}

/// `-- <secs> users`: BENCHMARKS.md's Redis table. Decisions per second and their latency
/// against raw `INCR` on as many keys through the same connection, the store as shipped
/// (coalescing and the blocked-keys cache on): 10,000 keys at 1 and 64 requests in flight, and
/// one hot key; the 1-rule request (a token bucket, 100/s per key) and the field's 3 rules
/// (global, channel, user: token buckets, the user's at 100/s).
async fn users(url: &str, secs: f64) {
    let shipped = RedisOptions::default().deadline(Duration::from_secs(5));
    let s = Arc::new(connect(url, shipped.clone()).await);
    let uncached = Arc::new(connect(url, shipped.blocked_capacity(0)).await);
    let one = Arc::new(vec![limit(Algorithm::TokenBucket, "100/s")]);
    let (three, _) = field_rules();
    let cell = |r: Rate| format!("{:.0}/s, {} / {} µs", r.per_s, r.p50_us, r.p99_us);
    println!(
        "| load | raw INCR: rate, p50 / p99 | 1 rule | ratio to INCR | 3 rules | ratio to INCR |"
    );
    println!("|---|---|---|---|---|---|");
    for (label, keys, inflight, cache) in [
        ("10,000 keys, 1 in flight", 10_000u64, 1usize, true),
        ("10,000 keys, 64 in flight", 10_000, 64, true),
        ("1 hot key, 64 in flight (mostly rejections)", 1, 64, true),
        (
            "1 hot key, 64 in flight, blocked-keys cache off",
            1,
            64,
            false,
        ),
    ] {
        let s = if cache { &s } else { &uncached };
        let incr = incr_latency(s, keys, inflight, secs).await;
        let r1 = decide_rate_spread(s, one.clone(), vec![keys], "u1", inflight, secs).await;
        let spread = if keys == 1 {
            vec![1, 1, 1]
        } else {
            vec![1, 10, keys]
        };
        let r3 = decide_rate_spread(s, three.clone(), spread, "u3", inflight, secs).await;
        println!(
            "| {label} | {} | {} | {:.2} | {} | {:.2} |",
            cell(incr),
            cell(r1),
            r1.per_s / incr.per_s,
            cell(r3),
            r3.per_s / incr.per_s
        );
    }
    println!();
    memory_table(&uncached).await;
}

fn main() {
    let secs: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2.0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::env::var("WORKERS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2),
        )
        .enable_all()
        .build()
        .expect("runtime");
    // BENCH_CLUSTER=n (focus mode): an n-master Redis Cluster of ours instead of one server.
    let cluster = std::env::var("BENCH_CLUSTER")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(RedisCluster::start);
    if let Some(c) = &cluster {
        let _ = CLUSTER.set(c.urls());
    }
    // BENCH_REDIS_URL=redis://…: a server started by hand (to profile it) instead of one of ours.
    let server =
        (std::env::var("BENCH_REDIS_URL").is_err() && cluster.is_none()).then(RedisServer::start);
    let url = std::env::var("BENCH_REDIS_URL")
        .unwrap_or_else(|_| server.as_ref().map(RedisServer::url).unwrap_or_default());
    // `-- <secs> only <algorithm>`: INCR and that algorithm at 64 in flight, plain and coalesced
    // (for profiling one figure at a time).
    // (without the `--bench` flag cargo passes)
    let args: Vec<String> = std::env::args().filter(|a| !a.starts_with("--")).collect();
    if let Some(i) = args.iter().position(|a| a == "only") {
        let name = args
            .get(i + 1)
            .cloned()
            .unwrap_or_else(|| "token_bucket".into());
        rt.block_on(focus(&url, &name, secs));
        return;
    }
    if args.iter().any(|a| a == "batch") {
        rt.block_on(batch(&url, secs));
        return;
    }
    if args.iter().any(|a| a == "users") {
        rt.block_on(users(&url, secs));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "paired") {
        let names: Vec<String> = args[i + 1..].to_vec();
        rt.block_on(paired(&url, &names, secs));
        return;
    }
    rt.block_on(async move {
        let direct = store(&url, false).await;
        let coalesced = store(&url, true).await;
        let algs: [(&str, Algorithm); 6] = [
            ("fixed_window", Algorithm::FixedWindow),
            ("sliding_window", Algorithm::SlidingWindow),
            ("sliding_log", Algorithm::SlidingLog),
            ("token_bucket", Algorithm::TokenBucket),
            ("leaky_bucket", Algorithm::LeakyBucket),
            ("concurrency", Algorithm::Concurrency),
        ];

        println!("## throughput, {} keys at random-ish, 100/s per key (all allowed), ops/s", *KEYS);
        println!("| what | 1 in flight | 64 in flight | 64 in flight, coalesced | ratio to INCR @1 | @64 | @64 coalesced |");
        println!("|---|---|---|---|---|---|---|");
        let incr1 = incr_rate(&direct, 1, secs).await;
        let incr64 = incr_rate(&direct, 64, secs).await;
        println!("| raw INCR | {incr1:.0} | {incr64:.0} | | 1.00 | 1.00 | |");
        for (name, a) in algs {
            let l = one_limit(a);
            let r1 = decide_rate(&direct, l.clone(), name, 1, secs).await;
            let r64 = decide_rate(&direct, l.clone(), name, 64, secs).await;
            let c64 = decide_rate(&coalesced, l.clone(), name, 64, secs).await;
            println!(
                "| {name} | {r1:.0} | {r64:.0} | {c64:.0} | {:.2} | {:.2} | {:.2} |",
                r1 / incr1,
                r64 / incr64,
                c64 / incr64
            );
        }
        // Latency at 1 in flight with coalescing on versus off: interleaved rounds (the machine
        // is noisy), medians reported.
        let tb = Arc::new(vec![limit(Algorithm::TokenBucket, "100/s")]);
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            off.push(decide_rate(&direct, tb.clone(), "tb_c1", 1, secs / 4.0).await);
            on.push(decide_rate(&coalesced, tb.clone(), "tb_c1", 1, secs / 4.0).await);
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (c1, d1) = (median(&mut on), median(&mut off));
        println!("| token_bucket, 1 in flight, 5 interleaved rounds (median): coalescing on | {c1:.0} | | | {:.2} | | |", c1 / incr1);
        println!("| token_bucket, 1 in flight, 5 interleaved rounds (median): coalescing off | {d1:.0} | | | {:.2} | | |", d1 / incr1);
        let one = store_with(&url, true, 1).await;
        let c1 = decide_rate(&one, Arc::new(vec![limit(Algorithm::TokenBucket, "100/s")]), "tb_c2", 64, secs).await;
        println!("| token_bucket, coalescing with 1 call in flight (default 2) | | | {c1:.0} | | | {:.2} |", c1 / incr64);
        let st = one.stats();
        println!("(1 call in flight: {:.1} requests per script call)", st.decisions as f64 / st.script_calls.max(1) as f64);
        let st = coalesced.stats();
        println!("(2 calls in flight: {:.1} requests per script call so far)", st.decisions as f64 / st.script_calls.max(1) as f64);

        println!();
        println!("## 64 in flight, 1 hot key at 100/s (mostly rejections), ops/s");
        println!("| what | plain | coalesced | as shipped (coalesced + blocked-keys cache) | ratio to INCR: plain | coalesced | as shipped |");
        println!("|---|---|---|---|---|---|---|");
        let shipped = Arc::new(
            RedisStore::connect_with(&url, RedisOptions::default().deadline(Duration::from_secs(5)))
                .await
                .expect("connect"),
        );
        let incr_hot = {
            let s = direct.clone();
            rate(64, secs, move |_| {
                let s = s.clone();
                async move {
                    s.query(redis::cmd("INCR").arg("bench:incr:hot")).await.expect("incr");
                }
            })
            .await
        };
        println!("| raw INCR, one key | {incr_hot:.0} | | | 1.00 | | |");
        for (name, a) in algs {
            let q = if a == Algorithm::Concurrency { "100/1ms" } else { "100/s" };
            let l = Arc::new(limit(a, q));
            let p = hot_rate(&direct, l.clone(), name, 64, secs).await;
            let c = hot_rate(&coalesced, l.clone(), name, 64, secs).await;
            let h = hot_rate(&shipped, l.clone(), name, 64, secs).await;
            println!(
                "| {name} | {p:.0} | {c:.0} | {h:.0} | {:.2} | {:.2} | {:.2} |",
                p / incr_hot,
                c / incr_hot,
                h / incr_hot
            );
        }
        println!("(as shipped: {:?})", shipped.stats());

        println!();
        println!("## 3 rules vs 1 rule per request (distinct keys: token bucket, sliding window, sliding log; 3 token buckets; the field's global + channel + user), decisions/s");
        println!("| in flight | 1 rule | 3 rules | cost ratio (1-rule rate / 3-rule rate) |");
        println!("|---|---|---|---|");
        let one = Arc::new(vec![limit(Algorithm::TokenBucket, "100/s")]);
        let three = Arc::new(vec![
            limit(Algorithm::TokenBucket, "100/s"),
            limit(Algorithm::SlidingWindow, "1000/s"),
            limit(Algorithm::SlidingLog, "100/s"),
        ]);
        let three_tb = Arc::new(vec![
            limit(Algorithm::TokenBucket, "100/s"),
            limit(Algorithm::TokenBucket, "1000/s"),
            limit(Algorithm::TokenBucket, "10000/s"),
        ]);
        let (field, spread) = field_rules();
        for (label, s, n) in [("1", &direct, 1), ("64", &direct, 64), ("64 coalesced", &coalesced, 64)] {
            let r1 = decide_rate(s, one.clone(), "r1", n, secs).await;
            let r3 = decide_rate(s, three.clone(), "r3", n, secs).await;
            let t3 = decide_rate(s, three_tb.clone(), "t3", n, secs).await;
            let f3 = decide_rate_spread(s, field.clone(), spread.clone(), "f3", n, secs).await.per_s;
            println!("| {label} | {r1:.0} | mixed {r3:.0}, 3 x token_bucket {t3:.0}, global + channel + user {f3:.0} | mixed {:.2}, token_bucket {:.2}, global + channel + user {:.2} |", r1 / r3, r1 / t3, r1 / f3);
        }

        println!();
        println!("## naive 3-round-trip sliding log vs ours");
        let naive_rate = {
            let s = direct.clone();
            let keys = names("bench:naive:", *KEYS);
            rate(64, secs, move |i| {
                let s = s.clone();
                let keys = keys.clone();
                async move {
                    naive_log(&s, &keys[(i % *KEYS) as usize], 100, 1_000_000, i).await;
                }
            })
            .await
        };
        let ours_rate = decide_rate(&direct, Arc::new(vec![limit(Algorithm::SlidingLog, "100/s")]), "ours", 64, secs).await;
        // Over-admission: one key, limit 100 per hour, 64 tasks x 10 attempts, two app servers.
        let mut naive_admitted = 0u64;
        let mut ours_admitted = 0u64;
        {
            let l = Arc::new(limit(Algorithm::SlidingLog, "100/1h"));
            let mut tasks = Vec::new();
            for t in 0..64u64 {
                let s = if t % 2 == 0 { direct.clone() } else { coalesced.clone() };
                let l = l.clone();
                tasks.push(tokio::spawn(async move {
                    let mut n = 0u64;
                    let mut o = 0u64;
                    for r in 0..10u64 {
                        if naive_log(&s, "bench:naive:hot", 100, 3_600_000_000, t * 100 + r).await {
                            n += 1;
                        }
                        let d = s
                            .decide(&[Item { key: "bench:ours:hot", limit: &l, cost: 1, enforce: true }])
                            .await
                            .expect("decide");
                        if d[0].allowed {
                            o += 1;
                        }
                    }
                    (n, o)
                }));
            }
            for t in tasks {
                let (n, o) = t.await.expect("task");
                naive_admitted += n;
                ours_admitted += o;
            }
        }
        println!("| | naive (3 calls) | ours (1 script) |");
        println!("|---|---|---|");
        println!("| throughput, 64 in flight, {} keys | {naive_rate:.0} | {ours_rate:.0} |", *KEYS);
        println!("| admitted of 640 attempts on one key, limit 100 | {naive_admitted} | {ours_admitted} |");

        println!();
        memory_table(&direct).await;
        let info = direct.query(redis::cmd("INFO").arg("commandstats")).await.expect("info");
        let info: String = redis::from_redis_value(info).unwrap_or_default();
        println!();
        println!("## Redis commandstats (usec_per_call)");
        for line in info.lines().filter(|l| l.contains("evalsha") || l.contains("cmdstat_incr") || l.contains("zcard")) {
            println!("    {line}");
        }
        println!("stats: direct {:?}", direct.stats());
        println!("stats: coalesced {:?}", coalesced.stats());
    });
}
