//! Exactness under concurrency: many threads hammer one key, and several multi-limit requests;
//! the admitted count equals the limit exactly and no limit is charged for a rejected request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flowgate_core::{Algorithm, Item, Limit, ManualClock, MemoryStore, Quota, store::admitted};

const THREADS: usize = 8;
const PER_THREAD: usize = 2_000;

#[test]
fn one_key_admits_exactly_the_limit() {
    for alg in [
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
        Algorithm::SlidingWindow,
        Algorithm::TokenBucket,
        Algorithm::Concurrency,
    ] {
        // The clock stands still, so nothing refills or expires during the run.
        let store = Arc::new(MemoryStore::with_clock(ManualClock::new(
            1_700_000_000_000_000,
        )));
        let limit =
            Arc::new(Limit::new(alg, Quota::new(1_000, Duration::from_secs(60)).unwrap()).unwrap());
        let ok = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (store, limit, ok) = (store.clone(), limit.clone(), ok.clone());
                std::thread::spawn(move || {
                    for _ in 0..PER_THREAD {
                        let item = Item {
                            key: "hot",
                            limit: &limit,
                            cost: 1,
                            enforce: true,
                        };
                        if store.decide_now(&[item]).unwrap()[0].allowed {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(ok.load(Ordering::Relaxed), 1_000, "{alg}");
    }
}

#[test]
fn multi_limit_requests_charge_nothing_when_rejected() {
    let store = Arc::new(MemoryStore::with_clock(ManualClock::new(
        1_700_000_000_000_000,
    )));
    let q = |n| Quota::new(n, Duration::from_secs(60)).unwrap();
    let global = Arc::new(Limit::new(Algorithm::SlidingLog, q(3_000)).unwrap());
    let per_user = Arc::new(Limit::new(Algorithm::FixedWindow, q(40)).unwrap());
    let per_channel = Arc::new(Limit::new(Algorithm::TokenBucket, q(2_500)).unwrap());
    let users: Vec<String> = (0..50).map(|u| format!("user={u}")).collect();
    let users = Arc::new(users);
    let per_user_ok: Arc<Vec<AtomicU64>> = Arc::new((0..50).map(|_| AtomicU64::new(0)).collect());
    let total_ok = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, g, u, c) = (
                store.clone(),
                global.clone(),
                per_user.clone(),
                per_channel.clone(),
            );
            let (users, per_user_ok, total_ok) =
                (users.clone(), per_user_ok.clone(), total_ok.clone());
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let who = (i * 7 + t * 13) % 50;
                    let items = [
                        Item {
                            key: "global",
                            limit: &g,
                            cost: 1,
                            enforce: true,
                        },
                        Item {
                            key: &users[who],
                            limit: &u,
                            cost: 1,
                            enforce: true,
                        },
                        Item {
                            key: "channel=WPG",
                            limit: &c,
                            cost: 1,
                            enforce: true,
                        },
                    ];
                    let d = store.decide_now(&items).unwrap();
                    if admitted(&items, &d) {
                        per_user_ok[who].fetch_add(1, Ordering::Relaxed);
                        total_ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = total_ok.load(Ordering::Relaxed);
    // 50 users x 40 = 2000 is the binding limit: exactly that many pass.
    assert_eq!(total, 2_000);
    let peek = |key: &str, limit: &Limit| {
        store
            .decide_now(&[Item {
                key,
                limit,
                cost: 0,
                enforce: true,
            }])
            .unwrap()[0]
            .remaining
    };
    assert_eq!(
        peek("global", &global),
        3_000 - total,
        "global charged only for admitted"
    );
    assert_eq!(
        peek("channel=WPG", &per_channel),
        2_500 - total,
        "channel charged only for admitted"
    );
    for (u, key) in users.iter().enumerate() {
        let ok = per_user_ok[u].load(Ordering::Relaxed);
        assert_eq!(ok, 40);
        assert_eq!(peek(key, &per_user), 40 - ok);
    }
}
