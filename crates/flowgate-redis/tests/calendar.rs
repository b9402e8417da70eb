//! Calendar windows on Redis: the script decides with Redis's clock among the periods the client
//! sent around its own, so a client clock on the other side of midnight still counts in the
//! period of Redis's clock; a client a period away gets an error, never a wrong count.

mod common;

use common::{bounded, single, test_options};
use flowgate_core::{Algorithm, Clock, Item, Limit, ManualClock, Micros, Quota, Store, Tz};
use flowgate_redis::RedisStore;
use flowgate_testkit::redis::RedisServer;

/// A clock `offset` microseconds from another.
struct Skewed(ManualClock, i64);

impl Clock for Skewed {
    fn now(&self) -> Micros {
        self.0.now().saturating_add_signed(self.1)
    }
}

/// 2026-03-29T00:00+01:00: the start of Paris's 23-hour day.
const MIDNIGHT: Micros = 1_774_738_800_000_000;
const HOUR: i64 = 3_600_000_000;

fn day() -> Limit {
    let q: Quota = "1/day".parse().unwrap_or_else(|e| panic!("{e}"));
    Limit::new(Algorithm::FixedWindow, q.with_zone(Tz::Europe__Paris))
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn store_skewed(server: &RedisServer, clock: &ManualClock, skew: i64) -> RedisStore {
    single(
        server,
        test_options(clock).local_clock(Skewed(clock.clone(), skew)),
    )
    .await
}

async fn take(store: &RedisStore, key: &str, l: &Limit) -> Result<bool, String> {
    let d = store
        .decide(&[Item {
            key,
            limit: l,
            cost: 1,
            enforce: true,
        }])
        .await
        .map_err(|e| e.to_string())?;
    Ok(d[0].allowed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_clock_picks_the_period_whatever_side_of_midnight_the_client_is() {
    let server = RedisServer::start();
    bounded(30, async {
        let l = day();
        let clock = ManualClock::new(MIDNIGHT - 1);
        // Redis at 23:59:59.999999 on the 28th; the client a second ahead (on the 29th), then a
        // second behind at the 29th's first instant.
        let ahead = store_skewed(&server, &clock, 1_000_000).await;
        let behind = store_skewed(&server, &clock, -1_000_000).await;
        assert_eq!(take(&ahead, "k", &l).await, Ok(true));
        assert_eq!(take(&behind, "k", &l).await, Ok(false), "the same day");
        clock.set(MIDNIGHT);
        assert_eq!(take(&behind, "k", &l).await, Ok(true), "the next day");
        assert_eq!(take(&ahead, "k", &l).await, Ok(false));
        // The 29th is 23 hours long: its last microsecond, then the 30th.
        clock.set(MIDNIGHT + 23 * HOUR as u64 - 1);
        assert_eq!(take(&ahead, "k", &l).await, Ok(false));
        clock.set(MIDNIGHT + 23 * HOUR as u64);
        assert_eq!(take(&behind, "k", &l).await, Ok(true));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_a_period_away_gets_an_error_not_a_count() {
    let server = RedisServer::start();
    bounded(30, async {
        let l = day();
        let clock = ManualClock::new(MIDNIGHT + HOUR as u64);
        let late = store_skewed(&server, &clock, -3 * 24 * HOUR).await;
        let early = store_skewed(&server, &clock, 2 * 24 * HOUR).await;
        for store in [&late, &early] {
            let e = take(store, "far", &l).await.expect_err("an error");
            assert!(e.contains("calendar period"), "{e}");
        }
        let on_time = store_skewed(&server, &clock, 0).await;
        assert_eq!(
            take(&on_time, "far", &l).await,
            Ok(true),
            "nothing was counted"
        );
    })
    .await;
}
