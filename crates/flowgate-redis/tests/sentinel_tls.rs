//! Redis Sentinel over TLS (`rediss+sentinel://`) with real processes: the data nodes, their
//! replication and the three sentinels serve TLS only, with certificates of a private CA. The
//! primary is found and a promotion followed over mutual TLS; without the CA (or without the
//! client certificate the sentinels require) connecting fails at once with an error that names
//! the certificate trouble, never hangs.

mod common;

use std::time::Duration;

use common::bounded;
use common::sentinel::{DEADLINE, admitted, decide, options, per_minute, until_answered};
use flowgate_core::StoreError;
use flowgate_redis::{RedisStore, RedisTls};
use flowgate_testkit::pki::TestPki;
use flowgate_testkit::sentinel::{RedisSentinels, SentinelsConfig};
use tokio::time::Instant;

/// The sentinels and data nodes serving TLS only with `pki`'s files (`mutual`: requiring
/// client certificates).
fn start_tls(pki: &TestPki, mutual: bool) -> RedisSentinels {
    let s = RedisSentinels::start_with(SentinelsConfig {
        tls: Some(pki.server_tls(mutual)),
        ..SentinelsConfig::default()
    });
    assert!(s.url().starts_with("rediss+sentinel://"), "{}", s.url());
    s
}

/// `pki`'s CA, and its client certificate with `client`.
fn certificates(pki: &TestPki, client: bool) -> RedisTls {
    let (cert, key) = (pki.path("client.pem"), pki.path("client.key"));
    RedisTls::from_files(
        Some(&pki.path("ca.pem")),
        client.then_some(cert.as_path()),
        client.then_some(key.as_path()),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Connecting with `tls` fails within a few seconds; the error's text.
async fn refused(url: &str, tls: Option<RedisTls>) -> String {
    let started = Instant::now();
    let options = match tls {
        Some(t) => options().tls(t),
        None => options(),
    };
    let r = RedisStore::connect_with(url, options).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    match r {
        Err(StoreError::Unavailable(m)) => m,
        Err(e) => panic!("not unavailable: {e:?}"),
        Ok(_) => panic!("connected"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_promotion_over_mutual_tls() {
    bounded(90, async {
        let pki = TestPki::new();
        let mut s = start_tls(&pki, true);
        let first = s.primary().port();
        // The CA alone: the sentinels ask for a client certificate.
        let e = refused(&s.url(), Some(certificates(&pki, false))).await;
        assert!(
            e.contains("Certificate") && e.contains("127.0.0.1:"),
            "unclear: {e}"
        );

        let store = RedisStore::connect_with(&s.url(), options().tls(certificates(&pki, true)))
            .await
            .unwrap_or_else(|e| panic!("connect over TLS: {e}"));
        assert_eq!(
            store.topology().primaries,
            vec![format!("127.0.0.1:{first}")]
        );
        let limit = per_minute(3);
        assert_eq!(admitted(&store, "before", &limit, 5).await, 3);

        let old = s.kill_primary();
        let window = until_answered(&store, "during", &limit).await;
        let new = s.wait_promoted(old);
        eprintln!("sentinel failover over TLS: decisions answered again after {window:?}");
        let topology = store.topology();
        assert_eq!(topology.primaries, vec![format!("127.0.0.1:{new}")]);
        assert_eq!(topology.failovers, 1);
        assert_eq!(admitted(&store, "after", &limit, 5).await, 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_private_ca_fails_clearly_and_at_once() {
    bounded(60, async {
        let pki = TestPki::new();
        let s = start_tls(&pki, false);
        // The system's roots do not know the private CA.
        let e = refused(&s.url(), None).await;
        assert!(
            e.contains("certificate") && e.contains("127.0.0.1:"),
            "unclear: {e}"
        );
        // Clear text to TLS-only sentinels.
        let plain = s.url().replacen("rediss+", "redis+", 1);
        let e = refused(&plain, None).await;
        assert!(e.contains("127.0.0.1:"), "unclear: {e}");
        // A lazy store decides by its failure policy meanwhile: each decision fails within its
        // deadline.
        let lazy = RedisStore::connect_lazy_with(&s.url(), options())
            .unwrap_or_else(|e| panic!("lazy store: {e}"));
        for _ in 0..3 {
            let started = Instant::now();
            let r = decide(&lazy, "k", &per_minute(2)).await;
            assert!(
                matches!(r, Err(StoreError::Unavailable(_) | StoreError::Timeout)),
                "{r:?}"
            );
            assert!(started.elapsed() < DEADLINE + Duration::from_secs(1));
        }
        // With the CA: found.
        let store = RedisStore::connect_with(&s.url(), options().tls(certificates(&pki, false)))
            .await
            .unwrap_or_else(|e| panic!("connect with the CA: {e}"));
        assert_eq!(admitted(&store, "k", &per_minute(2), 3).await, 2);
    })
    .await;
}
