//! Rules shared through Redis, with real `flowgate serve` processes on one `redis-server`:
//! every node on a new version within a second, a restarted node on the newest, a missed
//! notification caught by the periodic check, the audit trail, bad input refused with nothing
//! changed, and a node started while Redis is down.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tokio::time::Instant;

use common::{HttpResponse, Proc, TestServer, http, spawn_server, wait_until};
use flowgate_testkit::redis::{RedisServer, raw_command};
use serde_json::{Value, json};

const ALICE: &str = "alice-token-0123456789-0123456789abcdef";
const CI: &str = "ci-token-0123456789-0123456789abcdef";

fn rules(limit: &str) -> String {
    format!(
        "[[rule]]\ndomain = \"pay\"\nname = \"channel\"\nmatch = [\"channel\"]\nalgorithm = \"fixed_window\"\nlimit = \"{limit}\"\n"
    )
}

/// A directory with the seed configuration (5/s) and a tokens file.
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    tokens: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rules.toml");
    std::fs::write(&config, rules("5/s")).unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# admins\nalice:{ALICE}\nci:{CI}\n")).unwrap();
    Setup {
        dir,
        config,
        tokens,
    }
}

/// Node `i`, following the rules in Redis at `url`, its data (the rules' disk cache) in its own
/// directory, so that a restarted node finds it again; checking the version every second.
fn node(s: &Setup, url: &str, i: usize) -> Proc {
    node_checking(s, url, i, "1s")
}

/// As [`node`], checking the version every `check`.
fn node_checking(s: &Setup, url: &str, i: usize, check: &str) -> Proc {
    let data = s.dir.path().join(format!("node{i}"));
    spawn_server(
        &s.config,
        &[
            "--redis-url",
            url,
            "--rules-source",
            "redis",
            "--rules-check",
            check,
            "--admin-tokens-file",
            s.tokens.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ],
    )
}

async fn get_rules(p: &Proc) -> Value {
    http(p.http, "GET", "/v1/rules", &[], "").await.json()
}

async fn version(p: &Proc) -> u64 {
    get_rules(p).await["version"].as_u64().unwrap()
}

async fn put(p: &Proc, token: &str, text: &str) -> HttpResponse {
    let auth = format!("Bearer {token}");
    http(
        p.http,
        "PUT",
        "/v1/rules",
        &[
            ("content-type", "application/toml"),
            ("authorization", &auth),
        ],
        text,
    )
    .await
}

async fn admin_get(p: &Proc, path: &str) -> HttpResponse {
    let auth = format!("Bearer {ALICE}");
    http(p.http, "GET", path, &[("authorization", &auth)], "").await
}

/// The limit node `p` enforces now, as its `RateLimit-Limit` answer to a check says.
async fn enforced(p: &Proc) -> String {
    let r = common::post_json(
        p.http,
        "/v1/check",
        json!({"domain": "pay", "descriptors": ["channel=c1"], "cost": 0}),
    )
    .await;
    r.header("ratelimit-limit").unwrap_or("").to_owned()
}

/// Waits until every node is on `v`; answers how long that took.
async fn all_on(nodes: &[&Proc], v: u64, within: Duration) -> Duration {
    let start = Instant::now();
    for p in nodes {
        let ok = wait_until(within, || async { version(p).await == v }).await;
        assert!(ok, "node {} not on version {v} after {within:?}", p.http);
    }
    start.elapsed()
}

/// Polls every node each 10 ms until all are on `v`; answers the time from `since`.
async fn converged(nodes: &[&Proc], v: u64, since: Instant, bound: Duration) -> Duration {
    loop {
        let mut all = true;
        for p in nodes {
            all &= version(p).await == v;
        }
        if all {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < bound,
            "not every node on version {v} after {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn cli(server: &Proc, token: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flowgate"))
        .args(["rules", "--server", &format!("http://{}", server.http)])
        .args(args)
        .env("FLOWGATE_ADMIN_TOKEN", token)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_follow_every_change_within_a_second() {
    let redis = RedisServer::start();
    let url = redis.url();
    let s = setup();
    // Checking every 10 s: within one second, only the notification can bring a change.
    let a = node_checking(&s, &url, 0, "10s");
    let mut b = node_checking(&s, &url, 1, "10s");
    let c = node_checking(&s, &url, 2, "10s");
    // The first node seeded Redis with its files; the others read that version.
    all_on(&[&a, &b, &c], 1, Duration::from_secs(1)).await;
    let r = get_rules(&c).await;
    assert_eq!(r["follows"], "redis");
    assert_eq!(r["author"], "seed");
    assert_eq!(enforced(&c).await, "5");

    // A change through one node is in force on all three within one second.
    let start = Instant::now();
    let r = put(&a, ALICE, &rules("7/s")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["version"], 2);
    let took = converged(&[&a, &b, &c], 2, start, Duration::from_secs(1)).await;
    eprintln!("version 2 on 3 nodes {took:?} after the push began");
    assert_eq!(enforced(&b).await, "7");
    assert_eq!(enforced(&c).await, "7");

    // A node killed misses a push; restarted, it comes up on the newest version.
    drop(b);
    let file = s.dir.path().join("push").join("pay.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, rules("9/s")).unwrap();
    let (ok, out, err) = cli(&c, CI, &["push", file.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("version 3 stored and in force"), "{out}");
    all_on(&[&a, &c], 3, Duration::from_secs(1)).await;
    // The same files again (a CI job run twice): nothing stored, the history lists changes only.
    let (ok, out, err) = cli(&c, CI, &["push", file.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("version 3 is in force with these rules already"),
        "{out}"
    );
    assert_eq!(version(&a).await, 3);
    b = node_checking(&s, &url, 1, "10s");
    assert_eq!(
        version(&b).await,
        3,
        "a restarted node starts on the newest version"
    );
    assert_eq!(enforced(&b).await, "9");

    // A rollback restores the old limit everywhere.
    let start = Instant::now();
    let (ok, out, err) = cli(&a, ALICE, &["rollback", "1"]);
    assert!(ok, "{out}{err}");
    converged(&[&a, &b, &c], 4, start, Duration::from_secs(1)).await;
    for p in [&a, &b, &c] {
        assert_eq!(enforced(p).await, "5");
    }

    // The audit trail: every version with its author, action and diff.
    let h = admin_get(&b, "/v1/rules/history").await.json();
    assert_eq!(h["current"], 4);
    let authors: Vec<&str> = h["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["author"].as_str().unwrap())
        .collect();
    assert_eq!(authors, ["alice", "ci", "alice", "seed"]);
    assert_eq!(h["versions"][0]["action"], "rollback to 1");
    let v2 = admin_get(&a, "/v1/rules/versions/2").await.json();
    let diff = v2["diff"].as_str().unwrap();
    assert!(
        diff.contains("-limit = \"5/s\"\n+limit = \"7/s\"\n"),
        "{diff}"
    );
    assert_eq!(v2["summary"], "+1 -1 lines");
    let (ok, out, _) = cli(&a, CI, &["history"]);
    assert!(
        ok && out.contains("rollback to 1") && out.contains("seed"),
        "{out}"
    );
    let (ok, out, _) = cli(&a, CI, &["show", "3"]);
    assert!(ok && out.contains("+limit = \"9/s\""), "{out}");

    // Bad input changes nothing.
    let mut bad = rules("5/s");
    bad.push_str("burst = \"many\"\n");
    let r = put(&a, ALICE, &bad).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let detail = r.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.contains("rules.toml:7") && detail.contains("rule[0].burst"),
        "{detail}"
    );
    let bad_file = s.dir.path().join("bad.toml");
    std::fs::write(&bad_file, "[[rule]]\nlimit = \n").unwrap();
    let (ok, _, err) = cli(&a, CI, &["push", bad_file.to_str().unwrap()]);
    assert!(!ok && err.contains("bad.toml:2"), "{err}");
    let (ok, _, err) = cli(&a, CI, &["rollback", "99"]);
    assert!(
        !ok && err.contains("404") && err.contains("version 99 does not exist"),
        "{err}"
    );
    let r = put(&a, "not-a-token", &rules("1/s")).await;
    assert_eq!(r.status, 401);
    let r = http(
        a.http,
        "POST",
        "/v1/rules/versions",
        &[
            ("authorization", &format!("Bearer {CI}")),
            ("content-type", "application/json"),
        ],
        &json!({"files": [{"name": "a.toml", "text": rules("3/s")}], "base_version": 2})
            .to_string(),
    )
    .await;
    assert_eq!(
        r.status, 409,
        "a push on a stale version is refused: {}",
        r.body
    );
    // The nodes follow Redis: an edit of their files is not applied. Each node logs that it
    // saw the edit and ignored it; the assertions run once all three have.
    const IGNORED: &str = "the configuration files changed, but this node follows the rules";
    let before: Vec<usize> = [&a, &b, &c].iter().map(|p| p.logged(IGNORED)).collect();
    common::write(&s.config, &rules("2/s"));
    for (p, n) in [&a, &b, &c].into_iter().zip(before) {
        p.wait_logged(IGNORED, n, Duration::from_secs(20)).await;
    }
    for p in [&a, &b, &c] {
        assert_eq!(version(p).await, 4);
        assert_eq!(enforced(p).await, "5");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_notification_converges_within_the_check_period() {
    let redis = RedisServer::start();
    let url = redis.url();
    let s = setup();
    let a = node(&s, &url, 0);
    let b = node(&s, &url, 1);
    all_on(&[&a, &b], 1, Duration::from_secs(1)).await;
    // Cut the nodes' subscriptions (they subscribe again), then store a version without
    // notifying anyone: only the periodic check can find it.
    let subscribed = || async {
        raw_command(redis.port(), "PUBSUB NUMSUB flowgate:rules")
            .unwrap()
            .ends_with(":2\r\n")
    };
    assert!(wait_until(Duration::from_secs(5), subscribed).await);
    let killed = raw_command(redis.port(), "CLIENT KILL TYPE pubsub").unwrap();
    assert_eq!(killed, ":2\r\n");
    assert!(wait_until(Duration::from_secs(5), subscribed).await);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let doc = json!({"files": [{"name": "rules.toml", "text": rules("11/s")}]}).to_string();
    let start = Instant::now();
    let () = redis::pipe()
        .atomic()
        .hset_multiple(
            "flowgate:{rules}:v:2",
            &[
                ("doc", doc.as_str()),
                ("author", "ops"),
                ("action", "push"),
                ("at_ms", "0"),
                ("diff", ""),
                ("summary", ""),
            ],
        )
        .ignore()
        .set("flowgate:{rules}:version", 2)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();
    let took = converged(&[&a, &b], 2, start, Duration::from_millis(1500)).await;
    eprintln!("unnotified version 2 on 2 nodes after {took:?}");
    assert_eq!(enforced(&a).await, "11");
    // Subscribed again: the next push is notified at once, well within the period.
    let start = Instant::now();
    assert_eq!(put(&b, CI, &rules("12/s")).await.status, 200);
    let took = converged(&[&a, &b], 3, start, Duration::from_secs(1)).await;
    eprintln!("notified version 3 after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_redis_serves_its_last_version_and_says_so() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let s = setup();
    let a = node(&s, &url, 0);
    all_on(&[&a], 1, Duration::from_secs(5)).await;
    assert_eq!(put(&a, ALICE, &rules("8/s")).await.status, 200);
    assert_eq!(version(&a).await, 2);

    // Redis unreachable during a push: refused, nothing changed.
    redis.stop();
    let r = put(&a, ALICE, &rules("1/s")).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("nothing changed"), "{}", r.body);
    assert_eq!(version(&a).await, 2);
    assert_eq!(limit_in_rules(&a).await, "8/s");
    drop(a);

    // Restarted while Redis is down: its disk cache, and /readyz says so.
    let a = node(&s, &url, 0);
    let ready = http(a.http, "GET", "/readyz", &[], "").await;
    let rules_state = &ready.json()["rules"];
    assert_eq!(rules_state["version"], 2);
    assert_eq!(rules_state["in_sync"], false);
    let problem = rules_state["problem"].as_str().unwrap();
    assert!(problem.contains("disk cache"), "{problem}");
    assert_eq!(limit_in_rules(&a).await, "8/s");

    // A node with no cache serves its files, and says so.
    let fresh = node(&s, &url, 7);
    serves_its_files_and_says_so(&fresh).await;
    assert_eq!(get_rules(&fresh).await["rule"][0]["limit"], "5/s");
    drop(fresh);

    // Redis back, empty (it kept nothing): the node seeds it again with its version.
    redis.restart();
    let ok = wait_until(Duration::from_secs(5), || async {
        get_rules(&a).await["in_sync"] == true
    })
    .await;
    assert!(ok, "{}", get_rules(&a).await);
    assert_eq!(limit_in_rules(&a).await, "8/s");
    let v = admin_get(&a, "/v1/rules/versions/1").await.json();
    assert!(
        v["action"]
            .as_str()
            .unwrap()
            .contains("seed from version 2"),
        "{v}"
    );
}

/// `p` follows Redis but cannot read it: it serves its files, and `GET /v1/rules` says so.
async fn serves_its_files_and_says_so(p: &Proc) {
    let r = get_rules(p).await;
    assert_eq!(r["in_sync"], false, "{r}");
    let problem = r["problem"].as_str().unwrap_or("");
    assert!(problem.contains("serving the configuration files"), "{r}");
}

async fn limit_in_rules(p: &Proc) -> String {
    get_rules(p).await["rule"][0]["limit"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_node_following_files_has_no_versions_and_tokens_have_names() {
    let t = TestServer::start_with(&[("r.toml", &rules("5/s"))], |mut c| {
        c.credentials
            .add_token(
                "ops",
                flowgate_server::auth::Scope::Admin,
                "ops-token-0123456789abcdef0123456789abcdef",
            )
            .unwrap();
        c
    })
    .await;
    let auth = "Bearer ops-token-0123456789abcdef0123456789abcdef";
    let r = http(
        t.http(),
        "GET",
        "/v1/rules/history",
        &[("authorization", auth)],
        "",
    )
    .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["error"], "follows_files");
    let r = http(t.http(), "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(r["follows"], "files");
    let r = http(
        t.http(),
        "PUT",
        "/v1/rules",
        &[
            ("authorization", auth),
            ("content-type", "application/toml"),
        ],
        &rules("6/s"),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http(t.http(), "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(r["source"], "api");
    assert_eq!(r["rule"][0]["limit"], "6/s");
}

#[tokio::test]
async fn a_write_based_on_a_stale_version_is_refused_by_redis() {
    use flowgate_server::rules::doc::RulesDoc;
    use flowgate_server::rules::shared::{Base, SharedError, SharedRules, Written};
    let redis = RedisServer::start();
    let shared = SharedRules::connect(&redis.url()).await.unwrap();
    let doc = RulesDoc::single("r.toml", &rules("5/s"));
    let diff = doc.diff(&RulesDoc::default());
    let w = |base| shared.write(&doc, base, "t", "push", &diff);
    assert_eq!(w(Base::Empty).await.unwrap(), Written::New(1));
    assert_eq!(w(Base::Empty).await.unwrap(), Written::Exists(1));
    assert_eq!(w(Base::Version(1)).await.unwrap(), Written::New(2));
    match w(Base::Version(1)).await {
        Err(SharedError::Conflict {
            base: 1,
            current: 2,
        }) => {}
        other => panic!("{other:?}"),
    }
    let v = shared.get(2).await.unwrap().unwrap();
    assert_eq!((v.author.as_str(), v.doc), ("t", doc.clone()));
    assert!(
        v.at_ms > 1_700_000_000_000,
        "Redis's clock, in ms: {}",
        v.at_ms
    );
    assert!(shared.get(3).await.unwrap().is_none());
}

/// `redis+cluster://host:port,…` for `cluster`.
fn cluster_url(cluster: &flowgate_testkit::redis::RedisCluster) -> String {
    let hosts: Vec<String> = cluster
        .urls()
        .iter()
        .map(|u| {
            u.trim_start_matches("redis://")
                .trim_end_matches('/')
                .to_owned()
        })
        .collect();
    format!("redis+cluster://{}", hosts.join(","))
}

const QUEUE: &str =
    "\n[[queue]]\ndomain = \"pay\"\nname = \"refunds\"\nmatch = [\"channel\"]\nrate = \"1/s\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_carries_the_rules_and_queues_are_not_dropped_by_a_rules_edit() {
    let cluster = flowgate_testkit::redis::RedisCluster::start(3);
    // The first node named is down: the nodes connect, and subscribe, through the others.
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down_at = down.local_addr().unwrap();
    drop(down);
    let url =
        cluster_url(&cluster).replace("redis+cluster://", &format!("redis+cluster://{down_at},"));
    let s = setup();
    std::fs::write(&s.config, format!("{}{QUEUE}", rules("5/s"))).unwrap();
    // Checking every 10 s: only the notification meets the 1 s bound.
    let a = node_checking(&s, &url, 0, "10s");
    let b = node_checking(&s, &url, 1, "10s");
    all_on(&[&a, &b], 1, Duration::from_secs(5)).await;

    // A rules-only body would drop the queues the version in force declares: refused.
    let r = put(&a, ALICE, &rules("6/s")).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.json()["error"], "queues_would_be_removed");

    // The whole configuration, queues included, goes through; both nodes follow.
    let start = Instant::now();
    let r = put(&a, ALICE, &format!("{}{QUEUE}", rules("6/s"))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let took = converged(&[&a, &b], 2, start, Duration::from_secs(1)).await;
    eprintln!("version 2 on a Redis Cluster's 2 nodes after {took:?}");
    assert_eq!(enforced(&b).await, "6");
    let queues = http(b.http, "GET", "/v1/queues", &[], "").await.json();
    assert!(queues.to_string().contains("refunds"), "{queues}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_starts_while_the_redis_cluster_is_down_and_follows_it_once_up() {
    let mut cluster = flowgate_testkit::redis::RedisCluster::start(3);
    let url = cluster_url(&cluster);
    cluster.stop();
    let s = setup();
    let a = node(&s, &url, 0);

    // Up, on its files, saying so; decisions follow the failure policy (open), and the node is
    // ready (a store outage must not take every node out of service), its store down.
    let ready = http(a.http, "GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    let store = http(a.http, "GET", "/v1/store", &[], "").await;
    assert_eq!(store.status, 503, "{}", store.body);
    serves_its_files_and_says_so(&a).await;
    assert_eq!(enforced(&a).await, "5");

    // The cluster back: the node seeds it and both stores answer.
    cluster.restart();
    let ok = wait_until(Duration::from_secs(10), || async {
        get_rules(&a).await["in_sync"] == true
    })
    .await;
    assert!(ok, "{}", get_rules(&a).await);
    assert_eq!(version(&a).await, 1);
    let ok = wait_until(Duration::from_secs(10), || async {
        http(a.http, "GET", "/v1/store", &[], "").await.status == 200
    })
    .await;
    assert!(
        ok,
        "{}",
        http(a.http, "GET", "/v1/store", &[], "").await.body
    );
    // (an hour's window: two checks a second's end apart would each find a fresh one)
    let r = put(&a, ALICE, &rules("9/h")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(enforced(&a).await, "9");
    // Decisions are Redis's now: the counter moves.
    for left in ["8", "7"] {
        let r = common::post_json(
            a.http,
            "/v1/check",
            json!({"domain": "pay", "descriptors": ["channel=c1"]}),
        )
        .await;
        assert_eq!(r.header("ratelimit-remaining"), Some(left), "{}", r.body);
    }
}
