//! `flowgate serve` on `rediss+sentinel://` whose sentinels require a named ACL user: the data
//! nodes, their replication and the three sentinels serve TLS only with a private CA's
//! certificates and require client certificates. A node given the CA, its client certificate
//! and the sentinels' user and password (`--redis-sentinel-username`,
//! `--redis-sentinel-password-file`) decides exactly; a node given a wrong user decides by the
//! rule's failure policy (closed), and its log names the sentinels' addresses, never the password.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Proc, post_json, spawn_server, wait_until};
use flowgate_testkit::pki::TestPki;
use flowgate_testkit::sentinel::{RedisSentinels, SentinelsConfig};
use serde_json::json;

const USER: &str = "flowgate-app";
const PASSWORD: &str = "sentinel-acl-pass-51d0";

const RULES: &str = r#"
[[rule]]
domain = "pay"
name = "channel"
match = ["channel"]
algorithm = "fixed_window"
limit = "3/m"
failure = "closed"
"#;

async fn check(addr: SocketAddr, channel: &str) -> u16 {
    post_json(
        addr,
        "/v1/check",
        json!({"domain": "pay", "descriptors": [format!("channel={channel}")]}),
    )
    .await
    .status
}

/// A node on the sentinels of `url` as the sentinels' user `user`, with `pki`'s CA and client
/// certificate.
fn node(url: &str, pki: &TestPki, dir: &std::path::Path, user: &str) -> Proc {
    let config = dir.join("rules.toml");
    std::fs::write(&config, RULES).unwrap();
    let password = dir.join("sentinel-password");
    std::fs::write(&password, format!("{PASSWORD}\n")).unwrap();
    let path = |name: &str| pki.path(name).to_str().unwrap().to_owned();
    spawn_server(
        &config,
        &[
            "--redis-url",
            url,
            "--redis-deadline",
            "500ms",
            "--redis-ca-cert",
            &path("ca.pem"),
            "--redis-client-cert",
            &path("client.pem"),
            "--redis-client-key",
            &path("client.key"),
            "--redis-sentinel-username",
            user,
            "--redis-sentinel-password-file",
            password.to_str().unwrap(),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_sentinels_with_an_acl_user() {
    let test = async {
        let pki = TestPki::new();
        let s = RedisSentinels::start_with(SentinelsConfig {
            sentinel_user: Some(USER.into()),
            sentinel_password: Some(PASSWORD.into()),
            tls: Some(pki.server_tls(true)),
            ..SentinelsConfig::default()
        });
        let url = s.url();
        assert!(url.starts_with("rediss+sentinel://"), "{url}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();

        let a = node(&url, &pki, &dir.path().join("a"), USER);
        let found = wait_until(Duration::from_secs(10), || async {
            check(a.http, "probe").await == 200
        })
        .await;
        assert!(found, "the right user never reached the primary");
        let mut admitted = 0;
        for _ in 0..4 {
            admitted += usize::from(check(a.http, "shared").await == 200);
        }
        assert_eq!(admitted, 3);

        let b = node(&url, &pki, &dir.path().join("b"), "intruder");
        for _ in 0..3 {
            assert_eq!(check(b.http, "other").await, 429, "the closed policy");
        }
        let port = s.sentinel_ports()[0];
        b.wait_logged(&format!("127.0.0.1:{port}"), 0, Duration::from_secs(10))
            .await;
        for p in [&a, &b] {
            let log = p.log.lock().unwrap().join("\n");
            assert!(!log.contains(PASSWORD), "the password in the log:\n{log}");
        }
        eprintln!(
            "{}",
            b.log
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(&format!("127.0.0.1:{port}")))
                .cloned()
                .unwrap_or_default()
        );
    };
    tokio::time::timeout(Duration::from_secs(90), test)
        .await
        .unwrap_or_else(|_| panic!("did not finish within 90 s"));
}
