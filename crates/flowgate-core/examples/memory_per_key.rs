//! Memory per live key: fills the memory store and governor's keyed (DashMap) limiter with
//! 1,000,000 distinct 16-byte keys and reports the growth of the process's resident memory.
//!
//! ```text
//! cargo run --release -p flowgate-core --example memory_per_key
//! ```

use std::num::NonZeroU32;
use std::time::Duration;

use flowgate_core::{Algorithm, Item, Limit, MemoryStore, Quota};

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn main() {
    const N: usize = 1_000_000;
    let keys: Vec<String> = (0..N)
        .map(|i| format!("{:016x}", i as u64 * 0x9E37_79B9))
        .collect();
    let limit = Limit::builder(Algorithm::TokenBucket, "1/1h".parse::<Quota>().unwrap())
        .burst(1000)
        .build()
        .unwrap();

    let before = rss_bytes();
    let store = MemoryStore::new().with_max_keys(4 * N);
    for k in &keys {
        let item = Item {
            key: k,
            limit: &limit,
            cost: 1,
            enforce: true,
        };
        store.decide_now(&[item]).unwrap();
    }
    let ours = rss_bytes() - before;
    assert_eq!(store.len(), N);

    let before = rss_bytes();
    let gov = governor::RateLimiter::<String, _, _>::keyed(
        governor::Quota::with_period(Duration::from_secs(3600))
            .unwrap()
            .allow_burst(NonZeroU32::new(1000).unwrap()),
    );
    for k in &keys {
        let _ = gov.check_key(k);
    }
    let theirs = rss_bytes() - before;
    println!("keys: {N} distinct keys of 16 bytes (the caller's copies are not counted)");
    println!(
        "flowgate MemoryStore: {:.1} bytes per live key (it stores a 12-byte digest, not the key)",
        ours as f64 / N as f64
    );
    println!(
        "governor keyed (DashMap<String, _>): {:.1} bytes per live key (with its own copy of the key)",
        theirs as f64 / N as f64
    );
    std::hint::black_box((store, gov));
}
