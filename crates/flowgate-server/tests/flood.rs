//! A flood of random keys never switches limiting off: with a small `--max-keys`, several
//! clients send random keys as fast as they can while a real key sends at twice its limit and a
//! new key arrives mid-flood. Both stay limited to their limit, the store never holds more than
//! its cap, and the flood's keys are evicted instead of refused. (Its own test binary: it loads
//! both cores for a few seconds.)

mod common;

use std::time::Duration;

use common::{descriptor, http, should, spawn_server};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tokio::time::Instant;

/// 20 per 10 s per user: a flood key holds 1/20 of its limit for the whole test, so the flood's
/// keys stay live and the cap is what bounds them.
const RULES: &str = r#"
[[rule]]
domain = "api"
name = "per-user"
match = "user"
limit = "20/10s"
algorithm = "sliding_window"
"#;

const MAX_KEYS: u64 = 512;
/// Two connections with 16 requests in flight each.
const FLOOD_CLIENTS: usize = 32;
const FLOOD_FOR: Duration = Duration::from_secs(6);
/// Per client, so the load stops by itself whatever the machine's speed.
const FLOOD_MAX_REQUESTS: u64 = 10_000;

async fn admitted(
    client: &mut RateLimitServiceClient<tonic::transport::Channel>,
    user: &str,
) -> bool {
    let r = should(client, "api", vec![descriptor(&[("user", user)])], 1).await;
    r.overall_code == Code::Ok as i32
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_random_keys_leaves_real_keys_limited() {
    let (_dir, cfg) = common::config(RULES);
    let p = spawn_server(&cfg, &["--max-keys", &MAX_KEYS.to_string()]);
    let url = format!("http://{}", p.grpc);

    let started = Instant::now();
    let mut flood = Vec::new();
    let connections = [
        RateLimitServiceClient::connect(url.clone()).await.unwrap(),
        RateLimitServiceClient::connect(url.clone()).await.unwrap(),
    ];
    for c in 0..FLOOD_CLIENTS as u64 {
        let mut client = connections[c as usize % 2].clone();
        flood.push(tokio::spawn(async move {
            let mut x = 0x9E37_79B9_7F4A_7C15_u64 ^ (c + 1);
            let mut sent = 0;
            while started.elapsed() < FLOOD_FOR && sent < FLOOD_MAX_REQUESTS {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                admitted(&mut client, &format!("flood-{x}")).await;
                sent += 1;
            }
            sent
        }));
    }

    // The real key: 40 requests in 10 s is twice its limit; one every 125 ms, 40 of them (5 s),
    // all inside one window, so exactly 20 may pass.
    let mut client = RateLimitServiceClient::connect(url.clone()).await.unwrap();
    let mut real = 0;
    let mut newcomer = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(125));
    let mut most_keys = 0.0_f64;
    for i in 0..40 {
        tick.tick().await;
        real += u32::from(admitted(&mut client, "real").await);
        if i % 4 == 0 {
            // Throughout, not only at the end: the store never holds more than its cap.
            let m = http(p.http, "GET", "/metrics", &[], "").await.body;
            most_keys = most_keys.max(metric(&m, "flowgate_memory_keys"));
        }
        if i == 20 {
            // A key first seen mid-flood, sending 30 at once.
            for _ in 0..30 {
                newcomer += u32::from(admitted(&mut client, "newcomer").await);
            }
        }
    }
    let mut sent = 0;
    for f in flood {
        sent += f.await.unwrap();
    }
    let metrics = http(p.http, "GET", "/metrics", &[], "").await.body;
    let keys = metric(&metrics, "flowgate_memory_keys");
    let evicted = metric(&metrics, "flowgate_memory_evicted_keys_total");
    eprintln!(
        "flood: {sent} requests of random keys in {:?}; real key admitted {real} of 40, \
         newcomer {newcomer} of 30; keys held {keys} (at most {most_keys} during the flood), \
         evicted {evicted}",
        started.elapsed()
    );
    assert!(
        evicted >= 2.0 * MAX_KEYS as f64,
        "the flood filled the store ({evicted} evictions)"
    );
    assert!(keys <= MAX_KEYS as f64, "{keys} keys held, cap {MAX_KEYS}");
    assert!(
        most_keys <= MAX_KEYS as f64,
        "{most_keys} keys held during the flood, cap {MAX_KEYS}"
    );
    // A key that holds no more of its limit than a flood key (the real key and the newcomer
    // after their first request, and again after each time they were chosen) can be chosen
    // between two of its requests; each time it gains that one unit. Twice in one run has been
    // seen (22 of 40, 22 of 30) on a loaded machine; the bound allows three.
    assert!(
        (20..=23).contains(&real),
        "the real key stayed at its limit: {real} of 40"
    );
    assert!(
        (20..=23).contains(&newcomer),
        "the new key was limited: {newcomer} of 30"
    );
    // A request is never refused or left to a failure policy because the store is full.
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("flowgate_store_errors_total{") && !l.ends_with(" 0"))
    );
}
