//! The dashboard, tested the way a person uses it: a real headless Chromium (Debian's `chromium`
//! and `chromium-driver`, which `scripts/test.sh` installs) driven over WebDriver by
//! `fantoccini`, against a server in this process under real load; and its files and its token
//! over plain HTTP.
//!
//! One browser session serves every browser check (a Chromium start costs seconds).
//! `DASHBOARD_SCREENSHOT=$PWD/docs/img/dashboard.png` (an absolute path) also saves a screenshot of the page
//! under load (the README's).

mod common;

use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use common::{TestServer, http, wait_until};
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use flowgate_server::rules::RulesSource;
use flowgate_testkit::redis::RedisServer;
use serde_json::{Value, json};

const RULES: &str = r#"
domain = "api"

[[rule]]
name = "per-client"
match = ["client"]
limit = 10
window = "1s"
algorithm = "fixed_window"

[[rule]]
name = "per-user"
match = ["user"]
limit = "100/s"

[[breaker]]
name = "backend"
match = ["dep=db"]
strategy = "error_count"
threshold = 3
window = "10s"
min_calls = 3
open_for = "60s"

[[alert]]
name = "per-client-rejecting"
rule = "per-client"
rejection_ratio = 0.3
for = "2s"
min_rate = 2
"#;

/// What a cluster's nodes share through Redis: [`RULES`] (two rules, a breaker, a rule's alert), a
/// queue, and an alert on its waiting jobs that posts to a webhook whose URL holds secrets.
fn cluster_rules() -> String {
    format!(
        r#"{RULES}
[[queue]]
name = "refunds"
match = ["biz=REFUND", "channel"]
rate = "1/s"

[[alert]]
name = "refunds-waiting"
queue = "refunds"
oldest_age = "2s"
webhooks = ["http://ops:{WEBHOOK_SECRET}@127.0.0.1:9/hook"]
"#
    )
}

/// The password in the webhook URL of [`cluster_rules`].
const WEBHOOK_SECRET: &str = "hunter2";

const ADMIN: &str = "admin-secret";
const READER: &str = "reader-secret";

/// `chromedriver` on a free loopback port, in a process group of its own (its id is
/// chromedriver's), with the Chromium it starts. When dropped, whatever happens (a failed check
/// never closes the browser session), the whole group is killed: chromedriver alone would leave
/// its Chromium running.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

async fn start_driver() -> Driver {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start chromedriver ({e}): install Debian's chromium and chromium-driver \
                 (scripts/test.sh does)"
            )
        });
    let driver = Driver { child, port };
    let up = wait_until(Duration::from_secs(15), || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    assert!(up, "chromedriver did not listen on port {port} within 15 s");
    driver
}

async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    let mut args = vec![
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--disable-crash-reporter",
        "--disable-breakpad",
        "--window-size=1280,1000",
        // A locale whose own clock is 12-hour: the page must show its one 24-hour clock anyway.
        "--lang=en-US",
    ];
    if std::env::var_os("CI").is_some() {
        args.push("--disable-extensions");
    }
    let mut chrome = json!({ "args": args });
    if std::path::Path::new("/usr/bin/chromium").exists() {
        chrome["binary"] = json!("/usr/bin/chromium");
    }
    caps.insert("goog:chromeOptions".into(), chrome);
    caps.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a Chromium session")
}

/// chromedriver's browser log (console messages, failed loads, CSP violations) since the last
/// read.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or("")))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({ "type": "browser" }).to_string()),
        )
    }
}

/// The browser log's errors (level `SEVERE`) since the last read.
async fn console_errors(c: &Client) -> Vec<String> {
    let log = c.issue_cmd(BrowserLog).await.expect("the browser log");
    log.as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e["level"] == "SEVERE")
                .map(|e| e["message"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The page's own error collector (script errors, failed loads, CSP violations).
async fn page_errors(c: &Client) -> Vec<String> {
    let v = c
        .execute(
            "return window.flowgateErrors || ['no collector: dashboard.js did not run'];",
            vec![],
        )
        .await
        .expect("the page's errors");
    serde_json::from_value(v).unwrap_or_default()
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.expect("a script")
}

/// Evaluates `script` every 200 ms until `ok` holds on its value, or `within` passes; the last
/// value either way.
async fn poll(
    c: &Client,
    within: Duration,
    script: &str,
    ok: impl Fn(&Value) -> bool,
) -> (bool, Value) {
    let end = Instant::now() + within;
    loop {
        let v = js(c, script).await;
        if ok(&v) {
            return (true, v);
        }
        if Instant::now() >= end {
            return (false, v);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The state (`inactive`, `pending`, `firing`) the page shows for alert `name`, if it lists it.
async fn alert_state(c: &Client, name: &str) -> Option<String> {
    let script = format!(
        "const r = [...document.querySelectorAll('#alerts tr[data-alert]')].find(r => r.dataset.alert === {});
         return r ? r.querySelector('[data-f=state]').textContent : null;",
        json!(name)
    );
    js(c, &script).await.as_str().map(str::to_owned)
}

/// Whether the page shows alert `name` in `state` within `within`.
async fn wait_for_alert(c: &Client, name: &str, state: &str, within: Duration) -> bool {
    let end = Instant::now() + within;
    loop {
        if alert_state(c, name).await.as_deref() == Some(state) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A figure of a rule's card (its `data-value`, or its text).
fn rule_fig(rule: &str, f: &str) -> String {
    format!(
        "const card = document.querySelector('[data-rule=\"{rule}\"]');
         if (!card) return null;
         const e = card.querySelector('.value[data-f=\"{f}\"]');
         return e ? (e.dataset.value !== undefined ? Number(e.dataset.value) : e.textContent) : null;"
    )
}

/// The first descriptor of one of a rule's lists (`top_admitted`, `top_rejected`).
fn top_of(rule: &str, list: &str) -> String {
    format!(
        "const card = document.querySelector('[data-rule=\"{rule}\"]');
         const td = card && card.querySelector('table[data-list=\"{list}\"] tbody tr td.desc');
         return td ? td.textContent : null;"
    )
}

/// Decisions at fixed rates, until dropped: `client=hot` 30 per second against its limit of 10
/// (20 rejected), and five other clients 2 per second each (all admitted), so the rule rejects
/// half its requests and `client=hot` heads its rejected list.
struct Load(tokio::task::JoinHandle<()>);

impl Drop for Load {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn load(addr: SocketAddr) -> Load {
    Load(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for n in 0u64.. {
            tick.tick().await;
            let mut clients = vec!["hot", "hot", "hot"];
            if n % 5 == 0 {
                clients.extend(["c1", "c2", "c3", "c4", "c5"]);
            }
            let sends = clients.into_iter().map(|c| {
                let body = json!({"domain": "api", "descriptors": [format!("client={c}")]});
                common::post_json(addr, "/v1/check", body)
            });
            futures::future::join_all(sends).await;
        }
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_a_real_browser() {
    let ts = TestServer::start_with(&[("rules.toml", RULES)], |mut c| {
        c.clock = None;
        c.admin_token = Some(ADMIN.into());
        c
    })
    .await;
    let addr = ts.http();
    let driver = start_driver().await;
    let c = browser(&driver).await;
    let page = format!("http://{addr}/dashboard");

    // The page loads with no error and lists the rules.
    c.goto(&page).await.expect("the page");
    let (listed, rules) = poll(
        &c,
        Duration::from_secs(10),
        "return [...document.querySelectorAll('[data-rule]')].map(e => e.dataset.rule);",
        |v| v.as_array().is_some_and(|a| a.len() == 2),
    )
    .await;
    assert!(listed, "the rules are not listed: {rules}");
    assert_eq!(rules, json!(["api/per-client", "api/per-user"]));
    let (live, state) = poll(
        &c,
        Duration::from_secs(5),
        "return document.getElementById('conn').dataset.state;",
        |v| v == "live",
    )
    .await;
    assert!(live, "the stream is not live: {state}");
    assert_eq!(page_errors(&c).await, Vec::<String>::new());
    assert_eq!(console_errors(&c).await, Vec::<String>::new());

    // Under load, the rule's rejection ratio reads about a half within a few seconds, and the
    // hot key heads its rejected list.
    let first = load(addr);
    let started = Instant::now();
    let (half, ratio) = poll(
        &c,
        Duration::from_secs(12),
        &rule_fig("api/per-client", "ratio"),
        |v| v.as_f64().is_some_and(|r| (0.4..=0.6).contains(&r)),
    )
    .await;
    assert!(half, "the ratio shown is {ratio}, not 0.4–0.6");
    // And it stays there (not a value passed through on the way up).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ratio = js(&c, &rule_fig("api/per-client", "ratio")).await;
    assert!(
        ratio.as_f64().is_some_and(|r| (0.4..=0.6).contains(&r)),
        "2 s later the ratio shown is {ratio}"
    );
    let (hot, top) = poll(
        &c,
        Duration::from_secs(5),
        &top_of("api/per-client", "top_rejected"),
        |v| v == "client=hot",
    )
    .await;
    assert!(hot, "the top rejected descriptor is {top}");
    // The other clients are only admitted.
    let lists = "const card = document.querySelector('[data-rule=\"api/per-client\"]');
                 const of = l => [...card.querySelectorAll('table[data-list=' + l + '] td.desc')].map(e => e.textContent);
                 return [of('top_rejected'), of('top_admitted').sort()];";
    assert_eq!(
        js(&c, lists).await,
        json!([
            ["client=hot"],
            [
                "client=c1",
                "client=c2",
                "client=c3",
                "client=c4",
                "client=c5",
                "client=hot"
            ]
        ])
    );
    eprintln!(
        "ratio {ratio} and hot key shown {:?} after the load started",
        started.elapsed()
    );
    let high = js(&c, "return document.querySelector('[data-rule=\"api/per-client\"] [data-fig=ratio]').classList.contains('high');").await;
    assert_eq!(
        high,
        json!(false),
        "a ratio of about a half is not highlighted (over 60 % is)"
    );

    // The rule's alert (over 30 % rejected for 2 s) fires, highlighted; without load it resolves.
    let alert = "per-client-rejecting";
    let firing = wait_for_alert(&c, alert, "firing", Duration::from_secs(10)).await;
    assert!(
        firing,
        "the alert is not shown firing: {:?}",
        alert_state(&c, alert).await
    );
    let row = format!(
        "return document.querySelector('#alerts tr[data-alert=\"{alert}\"]').classList.contains('firing');"
    );
    assert_eq!(
        js(&c, &row).await,
        json!(true),
        "the firing alert is highlighted"
    );
    drop(first);
    let resolved = wait_for_alert(&c, alert, "inactive", Duration::from_secs(15)).await;
    assert!(
        resolved,
        "the alert is not shown resolved: {:?}",
        alert_state(&c, alert).await
    );
    let _load = load(addr);

    if let Ok(path) = std::env::var("DASHBOARD_SCREENSHOT") {
        screenshot(&c, &page, addr, &path).await;
        // Back to the rules of the checks below.
        set_trial(addr, None).await;
        c.goto(&page).await.expect("the page");
    }

    // A breaker opened by three failed calls is listed open, highlighted.
    for _ in 0..3 {
        let report = json!({"domain": "api", "descriptors": ["dep=db"], "outcome": "error", "latency_ms": 5});
        let r = common::post_json(addr, "/v1/report", report).await;
        assert!(r.status < 300, "report: {} {}", r.status, r.body);
    }
    let breaker = "const r = document.querySelector('#breakers tr[data-breaker]');
                   return r ? [r.dataset.breaker, r.querySelector('[data-f=phase]').textContent, r.className] : null;";
    let (open, shown) = poll(&c, Duration::from_secs(5), breaker, |v| v[1] == "open").await;
    assert!(open, "the breaker shown: {shown}");
    assert_eq!(shown, json!(["api:backend:dep=db", "open", "firing"]));

    // Editing: refused without the token (the JSON error shown), versioned with it.
    let before = http(addr, "GET", "/v1/rules", &[], "").await.json()["version"].clone();
    let edit = "const doc = JSON.parse(document.getElementById('editor').value);
                doc.rule.find(r => r.name === 'per-user').limit = '200/s';
                document.getElementById('editor').value = JSON.stringify(doc, null, 2);
                document.getElementById('editor-send').click();
                return true;";
    let (loaded, _) = poll(
        &c,
        Duration::from_secs(5),
        "return document.getElementById('editor').value.includes('per-user');",
        |v| v == true,
    )
    .await;
    assert!(loaded, "the editor holds the rules");
    // Nothing is sent before its diff is shown and confirmed; cancelled, nothing is.
    js(&c, edit).await;
    let (title, diff) = confirm(&c, "cancel").await;
    assert_eq!(title, "Send the edited rules");
    assert_eq!(diff, "~ rule api/per-user: limit: \"100/s\" → \"200/s\"\n");
    let result = "const e = document.getElementById('edit-result'); return e.hidden ? null : [e.dataset.status, e.textContent];";
    let (cancelled, shown) = poll(&c, Duration::from_secs(5), result, |v| {
        v[1].as_str().is_some_and(|t| t.starts_with("cancelled"))
    })
    .await;
    assert!(cancelled, "{shown}");
    js(&c, edit).await;
    confirm(&c, "apply").await;
    let (refused, shown) = poll(&c, Duration::from_secs(5), result, |v| v[0] == "401").await;
    assert!(refused, "without the token: {shown}");
    assert!(
        shown[1]
            .as_str()
            .is_some_and(|t| t.contains("\"unauthorized\"")),
        "{shown}"
    );
    c.find(Locator::Id("token"))
        .await
        .expect("the token field")
        .send_keys(ADMIN)
        .await
        .expect("typed");
    c.find(Locator::Css("#token-form button[type=submit]"))
        .await
        .expect("its button")
        .click()
        .await
        .expect("clicked");
    js(&c, edit).await;
    confirm(&c, "apply").await;
    let (versioned, shown) = poll(&c, Duration::from_secs(5), result, |v| v[0] == "200").await;
    assert!(versioned, "with the token: {shown}");
    let after = http(addr, "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(after["version"].as_u64(), before.as_u64().map(|v| v + 1));
    assert!(
        shown[1]
            .as_str()
            .is_some_and(|t| t.contains(&format!("version {} in force", after["version"]))),
        "the new version is shown: {shown}"
    );
    assert_eq!(after["rule"][1]["limit"], "200/s");
    // This node follows its files: the history says so plainly.
    let (plain, note) = poll(&c, Duration::from_secs(5), "const n = document.getElementById('history-note'); return [n.dataset.error || null, n.textContent];", |v| v[0] == "follows_files").await;
    assert!(plain, "the history's note: {note}");

    // A limit tried in shadow from the rule's card: its would-be rejections shown; dropped; tried
    // again and promoted. Each is one versioned change.
    let card = "[data-rule=\"api/per-client\"]";
    let result =
        format!("return document.querySelector('{card} [data-f=trial-result]').textContent;");
    try_limit(&c, card, "5").await;
    let (_, diff) = confirm(&c, "apply").await;
    assert_eq!(
        diff,
        "+ rule api/per-client: trial = {\"limit\":5,\"window\":\"1s\"}\n"
    );
    let (tried, shown) = poll(&c, Duration::from_secs(5), &result, |v| {
        v.as_str().is_some_and(|t| t.contains("in force"))
    })
    .await;
    assert!(tried, "the trial was not set: {shown}");
    let trial = http(addr, "GET", "/v1/rules", &[], "").await.json()["rule"][0]["trial"].clone();
    assert_eq!(trial["limit"], "5/s", "{trial}");
    // client=hot sends 30 a second: a limit of 5 would reject about 25 of them.
    let (seen, rate) = poll(
        &c,
        Duration::from_secs(8),
        &rule_fig("api/per-client", "trial"),
        |v| v.as_f64().is_some_and(|r| r >= 15.0),
    )
    .await;
    assert!(seen, "the trial's would-be rejections shown: {rate}");
    let limit = format!("return document.querySelector('{card} [data-f=limit]').textContent;");
    assert!(
        js(&c, &limit)
            .await
            .as_str()
            .is_some_and(|t| t.starts_with("10/s")),
        "the limit in force stays"
    );
    click(&c, &format!("{card} [data-action=drop]")).await;
    let (_, diff) = confirm(&c, "apply").await;
    assert!(
        diff.starts_with("- rule api/per-client: trial = "),
        "{diff}"
    );
    let hidden = format!("return document.querySelector('{card} [data-fig=trial]').hidden;");
    let (dropped, _) = poll(&c, Duration::from_secs(5), &hidden, |v| v == true).await;
    assert!(dropped, "the trial is shown after it was dropped");
    let rule = http(addr, "GET", "/v1/rules", &[], "").await.json()["rule"][0].clone();
    assert!(rule.get("trial").is_none(), "{rule}");
    try_limit(&c, card, "20").await;
    confirm(&c, "apply").await;
    let (again, _) = poll(&c, Duration::from_secs(5), &hidden, |v| v == false).await;
    assert!(again, "the second trial is not shown");
    let version = http(addr, "GET", "/v1/rules", &[], "").await.json()["version"].as_u64();
    // Promoting changes the limit in force: its diff says so; cancelled, nothing changes.
    click(&c, &format!("{card} [data-action=promote]")).await;
    let (_, diff) = confirm(&c, "cancel").await;
    assert!(
        diff.contains("~ rule api/per-client: limit: \"10/s\" → \"20/s\"\n"),
        "{diff}"
    );
    assert_eq!(
        http(addr, "GET", "/v1/rules", &[], "").await.json()["version"].as_u64(),
        version,
        "a cancelled promotion changes nothing"
    );
    click(&c, &format!("{card} [data-action=promote]")).await;
    confirm(&c, "apply").await;
    let (promoted, now) = poll(&c, Duration::from_secs(5), &limit, |v| {
        v.as_str().is_some_and(|t| t.starts_with("20/s"))
    })
    .await;
    assert!(promoted, "the promoted limit is not in force: {now}");
    let after = http(addr, "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(
        after["version"].as_u64(),
        version.map(|v| v + 1),
        "one change"
    );
    assert_eq!(after["rule"][0]["in_force"]["limit"], "20/s");
    assert!(after["rule"][0].get("trial").is_none(), "{after}");

    // A phone-sized window has no horizontal scroll.
    c.set_window_size(375, 740).await.expect("resized");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let widths = js(
        &c,
        "return [document.documentElement.scrollWidth, window.innerWidth];",
    )
    .await;
    let (scroll, inner) = (
        widths[0].as_u64().unwrap_or(u64::MAX),
        widths[1].as_u64().unwrap_or(0),
    );
    assert!(
        inner > 300 && inner <= 400,
        "the window is phone-sized: {widths}"
    );
    assert!(scroll <= inner, "horizontal scroll at 375 px: {widths}");
    c.set_window_size(1280, 1000).await.expect("resized back");

    // A node of a cluster sharing its rules through Redis (a queue, a breaker and alerts too),
    // with a dashboard token: the page asks for the token, then shows the cluster's figures;
    // with the admin token, the versions, a diff and a rollback, and limits tried, dropped and
    // promoted from a rule's card.
    let redis = RedisServer::start();
    let url = redis.url();
    let shared = cluster_rules();
    let guarded = TestServer::start_with(&[("rules.toml", &shared)], |mut c| {
        c.clock = None;
        c.admin_token = Some(ADMIN.into());
        c.dashboard_token = Some(READER.into());
        c.redis_url = Some(url);
        c.rules_source = RulesSource::Redis;
        c
    })
    .await;
    let addr = guarded.http();
    c.goto(&format!("http://{addr}/dashboard"))
        .await
        .expect("the page");
    let conn = "return document.getElementById('conn').dataset.state;";
    let (asked, state) = poll(&c, Duration::from_secs(5), conn, |v| v == "unauthorized").await;
    assert!(asked, "without a token: {state}");
    use_token(&c, READER).await;
    let (shown, state) = poll(&c, Duration::from_secs(5), conn, |v| v == "live").await;
    assert!(shown, "with the dashboard token: {state}");
    let cluster = "return [document.getElementById('scope').textContent,
                           [...document.querySelectorAll('#nodes tr[data-node] .badge')].map(e => e.textContent)];";
    let (summed, seen) = poll(&c, Duration::from_secs(5), cluster, |v| {
        v == &json!(["cluster", ["live"]])
    })
    .await;
    assert!(summed, "the cluster's nodes: {seen}");
    let note = "const n = document.getElementById('history-note'); return [n.dataset.error || null, n.textContent];";
    let (refused, shown) = poll(&c, Duration::from_secs(5), note, |v| v[0] == "unauthorized").await;
    assert!(refused, "the versions with the dashboard token: {shown}");
    // Read without the admin token, the rules' URLs are redacted, and the page says so.
    let editor = "return [document.getElementById('editor').value.includes('refunds-waiting'),
                          document.getElementById('editor').value.includes('hunter2'),
                          !document.getElementById('editor-note').hidden];";
    let (redacted, shown) = poll(&c, Duration::from_secs(5), editor, |v| {
        v == &json!([true, false, true])
    })
    .await;
    assert!(redacted, "the editor without the admin token: {shown}");
    use_token(&c, ADMIN).await;
    let (whole, shown) = poll(&c, Duration::from_secs(5), editor, |v| {
        v == &json!([true, true, false])
    })
    .await;
    assert!(whole, "the editor with the admin token: {shown}");
    let versions = "return [...document.querySelectorAll('#history tr[data-version]')].map(r => Number(r.dataset.version));";
    let (listed, shown) = poll(&c, Duration::from_secs(5), versions, |v| v == &json!([1])).await;
    assert!(listed, "the versions: {shown}");
    let (loaded, _) = poll(
        &c,
        Duration::from_secs(5),
        "return document.getElementById('editor').value.includes('per-user');",
        |v| v == true,
    )
    .await;
    assert!(loaded, "the editor holds the rules");
    js(&c, edit).await;
    confirm(&c, "apply").await;
    let (listed, shown) = poll(&c, Duration::from_secs(5), versions, |v| {
        v == &json!([2, 1])
    })
    .await;
    assert!(listed, "the versions after an edit: {shown}");
    click(&c, "#history tr[data-version=\"2\"] [data-action=diff]").await;
    let diff = "const d = document.getElementById('diff'); return d.hidden ? null : d.textContent;";
    let (shown, text) = poll(&c, Duration::from_secs(5), diff, |v| {
        v.as_str().is_some_and(|t| t.contains("200/s"))
    })
    .await;
    assert!(shown, "version 2's diff: {text}");
    click(&c, "#history tr[data-version=\"1\"] [data-action=rollback]").await;
    let (title, diff) = confirm(&c, "apply").await;
    assert_eq!(title, "Roll back to version 1 (from version 2)");
    assert!(diff.contains("200/s") && diff.contains("100/s"), "{diff}");
    let (listed, shown) = poll(&c, Duration::from_secs(5), versions, |v| {
        v == &json!([3, 2, 1])
    })
    .await;
    assert!(listed, "the versions after a rollback: {shown}");
    let rules = http(addr, "GET", "/v1/rules", &[], "").await.json();
    assert_eq!(rules["version"], 3);
    assert_eq!(
        rules["rule"][1]["limit"], "100/s",
        "version 1's rules: {rules}"
    );
    // Trying, dropping and promoting a limit from a card: each one version, the queue, the
    // breaker and the alerts kept.
    let card = "[data-rule=\"api/per-client\"]";
    let result =
        format!("return document.querySelector('{card} [data-f=trial-result]').textContent;");
    let in_force = |n: u64| {
        move |v: &Value| {
            v.as_str()
                .is_some_and(|t| t.ends_with(&format!("version {n} in force")))
        }
    };
    try_limit(&c, card, "5").await;
    confirm(&c, "apply").await;
    let (tried, shown) = poll(&c, Duration::from_secs(5), &result, in_force(4)).await;
    assert!(tried, "tried on the cluster: {shown}");
    click(&c, &format!("{card} [data-action=drop]")).await;
    confirm(&c, "apply").await;
    let (dropped, shown) = poll(&c, Duration::from_secs(5), &result, in_force(5)).await;
    assert!(dropped, "dropped on the cluster: {shown}");
    try_limit(&c, card, "7").await;
    confirm(&c, "apply").await;
    let (tried, shown) = poll(&c, Duration::from_secs(5), &result, in_force(6)).await;
    assert!(tried, "tried again on the cluster: {shown}");
    click(&c, &format!("{card} [data-action=promote]")).await;
    let (_, diff) = confirm(&c, "apply").await;
    assert!(
        diff.contains("~ rule api/per-client: limit: \"10/s\" → \"7/s\"\n"),
        "{diff}"
    );
    let (promoted, shown) = poll(&c, Duration::from_secs(5), &result, in_force(7)).await;
    assert!(promoted, "promoted on the cluster: {shown}");
    let auth = format!("Bearer {ADMIN}");
    let rules = http(addr, "GET", "/v1/rules", &[("authorization", &auth)], "")
        .await
        .json();
    assert_eq!(rules["rule"][0]["in_force"]["limit"], "7/s", "{rules}");
    assert_eq!(rules["queue"][0]["name"], "refunds", "{rules}");
    assert_eq!(rules["breaker"][0]["name"], "backend", "{rules}");
    assert_eq!(
        rules["alert"][1]["webhooks"][0],
        format!("http://ops:{WEBHOOK_SECRET}@127.0.0.1:9/hook"),
        "{rules}"
    );
    assert_eq!(page_errors(&c).await, Vec::<String>::new());

    c.close().await.expect("the session closed");
}

/// A queue instance's descriptor whose key is long enough to wrap on a phone.
const CHANNEL: &str = "biz=REFUND, channel=WORLDPAYGATEWAYEUROPE";

/// Whether `t` is a time on the page's one clock: `14:03:07`, or `2026-11-27 14:03:07`.
fn is_clock(t: &str) -> bool {
    let time = |s: &str| {
        let b = s.as_bytes();
        b.len() == 8
            && b[2] == b':'
            && b[5] == b':'
            && [0, 1, 3, 4, 6, 7].iter().all(|&i| b[i].is_ascii_digit())
            && s[..2] < *"24"
    };
    match t.split_once(' ') {
        Some((date, hms)) => {
            date.len() == 10
                && date.as_bytes()[4] == b'-'
                && date.as_bytes()[7] == b'-'
                && time(hms)
        }
        None => time(t),
    }
}

/// The per-second counts (admitted and rejected added up) that rule `api/per-client`'s chart
/// draws, and the failure-policy decisions that the store's chart draws: `[[second, n], ...]`
/// each.
const CHARTS: &str = "const rule = document.querySelector('[data-rule=\"api/per-client\"] .chart');
    const store = document.getElementById('store-chart');
    if (!rule || !rule.chart || !store.chart) return null;
    const r = rule.chart.data, s = store.chart.data;
    return [r[0].map((t, i) => [t, r[1][i] + r[2][i]]), s[0].map((t, i) => [t, s[1][i]])];";

/// For every key cell shown (descriptors, queue instances, breaker keys, alert and node names):
/// those not wholly on screen, those broken across lines other than after a separator (or a
/// hyphen, where browsers break words), and how many span more than one line; then the cells of
/// the wide tables (alerts, breakers, queues, nodes) not wholly on screen.
const KEYS: &str = "const off = [], broken = []; let wrapped = 0;
    for (const td of document.querySelectorAll('td.key')) {
      if (td.offsetParent === null) continue;
      const box = td.getBoundingClientRect();
      if (box.left < -0.5 || box.right > window.innerWidth + 0.5) off.push([td.dataset.key, box.left, box.right]);
      let top = null, before = '', lines = 1;
      const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        for (let i = 0; i < n.length; i++) {
          const r = document.createRange();
          r.setStart(n, i);
          r.setEnd(n, i + 1);
          const rects = r.getClientRects();
          if (!rects.length) continue;
          if (top !== null && rects[0].top > top + 2) {
            lines++;
            if (!/[,:;\\/&|\\s-]/.test(before)) broken.push([td.dataset.key, before + n.data[i]]);
          }
          top = rects[0].top;
          before = n.data[i];
        }
      }
      if (lines > 1) wrapped++;
    }
    const cells = [...document.querySelectorAll('table.stack td')]
      .filter(td => td.offsetParent !== null)
      .filter(td => { const b = td.getBoundingClientRect(); return b.left < -0.5 || b.right > window.innerWidth + 0.5; })
      .map(td => td.dataset.label + ': ' + td.textContent);
    return [off, broken, wrapped, cells];";

/// Rule `api/per-client`'s chart redrawn with figures in the hundreds of thousands: the labels of
/// its y axis, the width of the widest in the axis's font, and the axis's width less its ticks
/// and gap.
const AXIS: &str = "const done = arguments[arguments.length - 1];
    const u = document.querySelector('[data-rule=\"api/per-client\"] .chart').chart;
    u.setData(u.data.map((c, k) => k === 0 ? c : c.map((_, i) => 123456 + 1000 * i)));
    requestAnimationFrame(() => requestAnimationFrame(() => {
      const ax = u.axes[1];
      const ctx = document.createElement('canvas').getContext('2d');
      ctx.font = ax.font[0];
      const widest = Math.max(...ax._values.map(v => ctx.measureText(v).width)) / devicePixelRatio;
      done([ax._values, widest, ax._size - ax.ticks.size - ax.gap, u.axes[0]._values]);
    }));";

/// Two nodes following rules shared through Redis (a queue with no consumer, a breaker, alerts),
/// both under load, the page on one of them: the queue reads "no consumer", highlighted, and its
/// row is highlighted while its age alert fires; times are on one 24-hour clock; the y axis fits
/// its labels; at 375 px every key is on screen and broken only after separators. Redis is then
/// killed: the page says so (banner, scope) and marks the queues stale; Redis starts again: the
/// outage's decisions (by the failure policies) are drawn at their seconds, with no burst; a node
/// leaves: the totals say so.
///
/// Two nodes, not one: what caused the burst is how a reader takes another node's seconds, and
/// a node's seconds reach the others only through Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_under_load_on_two_nodes() {
    let mut redis = RedisServer::start();
    let shared = cluster_rules();
    let start = |node: &'static str| {
        let url = redis.url();
        let shared = shared.clone();
        async move {
            TestServer::start_with(&[("rules.toml", &shared)], move |mut c| {
                c.clock = None;
                c.admin_token = Some(ADMIN.into());
                c.redis_url = Some(url);
                c.rules_source = RulesSource::Redis;
                c.node_id = Some(node.to_owned());
                c
            })
            .await
        }
    };
    let a = start("node-a").await;
    let b = start("node-b").await;
    let _load_a = load(a.http());
    let load_b = load(b.http());
    let jobs = json!({"domain": "api", "descriptor": CHANNEL,
                      "jobs": [{"payload": 1}, {"payload": 2}, {"payload": 3}]});
    let r = common::post_json(a.http(), "/v1/queues/submit", jobs).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let driver = start_driver().await;
    let c = browser(&driver).await;
    c.goto(&format!("http://{}/dashboard?window=120", a.http()))
        .await
        .expect("the page");
    let cluster = "return [document.getElementById('scope').textContent,
                           [...document.querySelectorAll('#nodes tr[data-node] .badge')].map(e => e.textContent)];";
    let (summed, seen) = poll(&c, Duration::from_secs(10), cluster, |v| {
        v == &json!(["cluster", ["live", "live"]])
    })
    .await;
    assert!(summed, "the cluster's nodes: {seen}");

    // Nobody leases the queue's jobs: "no consumer" instead of a drain time, highlighted, and the
    // row highlighted while the alert on the queue's waiting jobs fires.
    let queue = "const r = document.querySelector('#queues tr[data-queue]');
                 return r ? [r.querySelector('[data-f=drain]').textContent, r.className, r.dataset.alerting || null] : null;";
    let (unclaimed, shown) = poll(&c, Duration::from_secs(15), queue, |v| {
        v == &json!(["no consumer", "firing attention", "true"])
    })
    .await;
    assert!(unclaimed, "the queue's row: {shown}");

    // One clock: the times shown and the charts' ticks are 24-hour.
    let times = "return [document.getElementById('at').textContent.replace(/^at /, ''),
                   ...[...document.querySelectorAll('#alerts tr[data-alert] td:nth-child(4), #nodes tr[data-node] td:nth-child(3), #nodes tr[data-node] td:nth-child(4)')]
                      .map(e => e.textContent).filter(t => t !== '–')];";
    let shown = js(&c, times).await;
    let texts: Vec<&str> = shown
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(texts.len() >= 6, "{shown}");
    assert!(
        texts.iter().all(|t| is_clock(t)),
        "times not on the 24-hour clock: {shown}"
    );

    // The y axis is as wide as its widest label, however large the figures.
    let axis = c.execute_async(AXIS, vec![]).await.expect("the axis");
    let (widest, room) = (axis[1].as_f64(), axis[2].as_f64());
    assert!(
        widest.zip(room).is_some_and(|(w, r)| w > 20.0 && w <= r),
        "y labels clipped: {axis}"
    );
    let ticks: Vec<&str> = axis[3]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        !ticks.is_empty() && ticks.iter().all(|t| is_clock(&format!("{t}:00")[..8])),
        "the time axis: {axis}"
    );

    // A phone: no horizontal scroll, every key on screen, broken only after a separator (the
    // queue's instance over more than one line).
    c.set_window_size(375, 740).await.expect("resized");
    let phone = "return window.innerWidth;";
    let (narrow, _) = poll(&c, Duration::from_secs(5), phone, |v| {
        v.as_u64().is_some_and(|w| w <= 400)
    })
    .await;
    assert!(narrow, "the window is phone-sized");
    let (fits, keys) = poll(&c, Duration::from_secs(5), KEYS, |v| {
        v[0] == json!([])
            && v[1] == json!([])
            && v[2].as_u64().is_some_and(|n| n >= 1)
            && v[3] == json!([])
    })
    .await;
    assert!(
        fits,
        "keys off screen, broken mid-word, wrapped; cells off screen: {keys}"
    );
    let widths = js(
        &c,
        "return [document.documentElement.scrollWidth, window.innerWidth];",
    )
    .await;
    assert!(widths[0].as_u64() <= widths[1].as_u64(), "{widths}");
    // Wider, where the tables are tables again: a key column is never squeezed into breaking
    // a key mid-word (the table scrolls in its own box instead).
    c.set_window_size(720, 900).await.expect("resized");
    let (whole, keys) = poll(&c, Duration::from_secs(5), KEYS, |v| v[1] == json!([])).await;
    assert!(whole, "keys broken mid-word at 720 px: {keys}");
    c.set_window_size(1280, 1000).await.expect("resized back");

    // Redis killed: the page says so, the queues' figures are marked stale.
    // The Unix second now, by the clock the servers' figures are on.
    let unix = || (flowgate::clock::system_now() / 1_000_000) as i64;
    let stopped = unix();
    redis.stop();
    let outage = "const b = document.getElementById('outage');
                  return [b.hidden ? null : b.textContent, document.getElementById('scope').textContent,
                          !document.getElementById('queues-stale').hidden,
                          document.getElementById('queues-section').classList.contains('stale')];";
    let (told, shown) = poll(&c, Duration::from_secs(15), outage, |v| {
        v[0].as_str().is_some_and(|t| {
            t.ends_with(": node-only figures, limits decided by failure policies.")
        }) && v[1] == "this node · Redis unreachable"
            && v[2] == true
            && v[3] == true
    })
    .await;
    assert!(told, "during the outage: {shown}");
    assert!(
        shown[0]
            .as_str()
            .is_some_and(|t| t.starts_with("Redis unreachable since ")),
        "{shown}"
    );
    // Meanwhile the charts are node a's alone, before the outage too (not the cluster's figures
    // up to the outage, then half of them); long enough that a burst would show, and longer
    // than the 5 seconds a node always publishes.
    let before_outage = |v: &Value| {
        v[0].as_array().map_or(Vec::new(), |s| {
            s.iter()
                .filter(|p| p[0].as_i64().is_some_and(|t| t < stopped - 1))
                .filter_map(|p| p[1].as_u64())
                .collect::<Vec<u64>>()
        })
    };
    let (long, charts) = poll(&c, Duration::from_secs(20), CHARTS, |v| {
        let during = v[1].as_array().map_or(0, |s| {
            s.iter()
                .filter(|p| p[0].as_i64() >= Some(stopped) && p[1].as_u64() > Some(0))
                .count()
        });
        during >= 9 && before_outage(v).iter().rev().take(5).all(|n| *n <= 50)
    })
    .await;
    assert!(
        long,
        "nine seconds of node a's own failure-policy decisions, its own counts before: {charts}"
    );
    redis.restart();
    let restarted = unix();

    // Back: the cluster's figures, the outage's decisions at their seconds, no burst.
    let (from, to) = (stopped, restarted);
    let (back, scope) = poll(&c, Duration::from_secs(20), outage, |v| {
        v[0].is_null() && v[1] == "cluster"
    })
    .await;
    assert!(back, "after the outage: {scope}");
    // The outage's seconds are the cluster's: node b's decisions of those seconds reach node a
    // (node a alone decides 40 a second), at their seconds.
    let in_outage = |v: &Value| -> Vec<u64> {
        v[1].as_array().map_or(Vec::new(), |s| {
            s.iter()
                .filter(|p| p[0].as_i64().is_some_and(|t| t >= from && t <= to))
                .filter_map(|p| p[1].as_u64())
                .filter(|n| *n > 0)
                .collect()
        })
    };
    let (back, charts) = poll(&c, Duration::from_secs(20), CHARTS, |v| {
        let seconds = in_outage(v);
        seconds.len() >= 9 && seconds.iter().any(|n| *n > 50)
    })
    .await;
    assert!(
        back,
        "the outage's seconds ({from} to {to}): {:?}",
        charts[1].as_array().map(|s| s
            .iter()
            .filter(|p| p[1].as_u64() > Some(0))
            .collect::<Vec<_>>())
    );
    // Two nodes, each 40 decisions a second (30 + 2 × 5): 80, with room for a busy machine. (A
    // decision may be left to its policy outside the outage too: a store call that misses its
    // deadline of a few milliseconds on a busy machine.)
    for (i, what) in [(0, "decisions"), (1, "failure-policy decisions")] {
        let most = charts[i]
            .as_array()
            .and_then(|s| s.iter().filter_map(|p| p[1].as_u64()).max());
        assert!(
            most.is_some_and(|m| m <= 140),
            "a burst of {what}: {most:?} in {charts}"
        );
    }
    // Node b leaves: the totals say whose counts they no longer hold.
    drop(load_b);
    b.server.shutdown().await.expect("node b stopped");
    let note =
        "const n = document.querySelector('[data-rule=\"api/per-client\"] [data-f=totals-note]');
                return n && !n.hidden ? n.textContent : null;";
    let (said, shown) = poll(&c, Duration::from_secs(15), note, |v| {
        v.as_str()
            .is_some_and(|t| t.starts_with("live nodes only: node-b left at "))
    })
    .await;
    assert!(said, "the totals' note: {shown}");
    assert_eq!(page_errors(&c).await, Vec::<String>::new());
    c.close().await.expect("the session closed");
}

/// Sets (or removes) the trial of rule `api/per-client` through the admin API.
async fn set_trial(addr: SocketAddr, trial: Option<Value>) {
    let mut rules = http(addr, "GET", "/v1/rules", &[], "").await.json();
    match trial {
        Some(t) => rules["rule"][0]["trial"] = t,
        None => {
            rules["rule"][0].as_object_mut().map(|r| r.remove("trial"));
        }
    }
    let auth = format!("Bearer {ADMIN}");
    let put = http(
        addr,
        "PUT",
        "/v1/rules",
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        &rules.to_string(),
    )
    .await;
    assert_eq!(put.status, 200, "{}", put.body);
}

/// The README's picture: the last two minutes, a limit of 8 per second tried on the rule, and a
/// burst from one more client (50 per second against its 10) over the last 15 seconds, which
/// takes the ratio over 60 %.
async fn screenshot(c: &Client, page: &str, addr: SocketAddr, path: &str) {
    set_trial(addr, Some(json!({"limit": 8, "window": "1s"}))).await;
    c.goto(&format!("{page}?window=120"))
        .await
        .expect("the page");
    tokio::time::sleep(Duration::from_secs(25)).await;
    let burst = Load(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            let sends = (0..5).map(|_| {
                let body = json!({"domain": "api", "descriptors": ["client=burst"]});
                common::post_json(addr, "/v1/check", body)
            });
            futures::future::join_all(sends).await;
        }
    }));
    tokio::time::sleep(Duration::from_secs(15)).await;
    let png = c.screenshot().await.expect("a screenshot");
    drop(burst);
    std::fs::write(path, png).expect("the screenshot written");
    eprintln!("screenshot saved to {path}");
}

/// Clicks the element `css` once it is shown (within 5 s: the page shows some buttons only once
/// the figures reflect a change).
async fn click(c: &Client, css: &str) {
    let script = format!(
        "const e = document.querySelector({}); return !!e && e.offsetParent !== null;",
        json!(css)
    );
    let (shown, _) = poll(c, Duration::from_secs(5), &script, |v| v == true).await;
    assert!(shown, "{css} is not shown");
    // Found again if the page replaced it between finding and clicking (a refreshed table).
    let mut tries = 0;
    loop {
        let clicked = match c.find(Locator::Css(css)).await {
            Ok(e) => e.click().await,
            Err(e) => Err(e),
        };
        match clicked {
            Ok(()) => return,
            Err(e) if tries < 5 => {
                tries += 1;
                eprintln!("{css}: {e}; again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{css} clicked: {e}"),
        }
    }
}

/// The confirmation of a change from the page: waits for it, and answers it (`apply` or
/// `cancel`); its title and diff as shown.
async fn confirm(c: &Client, answer: &str) -> (String, String) {
    let shown = "const d = document.getElementById('confirm');
                 return d.open ? [document.getElementById('confirm-title').textContent,
                                  document.getElementById('confirm-diff').textContent] : null;";
    let (open, what) = poll(c, Duration::from_secs(5), shown, |v| !v.is_null()).await;
    assert!(open, "no confirmation was shown");
    click(c, &format!("#confirm [data-action={answer}]")).await;
    let (closed, _) = poll(
        c,
        Duration::from_secs(5),
        "return !document.getElementById('confirm').open;",
        |v| v == true,
    )
    .await;
    assert!(closed, "the confirmation stays open");
    (
        what[0].as_str().unwrap_or("").to_owned(),
        what[1].as_str().unwrap_or("").to_owned(),
    )
}

/// Fills the trial form of the rule card `card` with `limit` per second and sends it.
async fn try_limit(c: &Client, card: &str, limit: &str) {
    let field = c
        .find(Locator::Css(&format!("{card} input[name=limit]")))
        .await
        .expect("the trial's limit field");
    field.clear().await.expect("cleared");
    field.send_keys(limit).await.expect("typed");
    click(c, &format!("{card} [data-action=try]")).await;
}

/// Types `token` into the page's token field and uses it.
async fn use_token(c: &Client, token: &str) {
    let field = c.find(Locator::Id("token")).await.expect("the token field");
    field.clear().await.expect("cleared");
    field.send_keys(token).await.expect("typed");
    click(c, "#token-form button[type=submit]").await;
}

async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> common::HttpResponse {
    http(addr, "GET", path, headers, "").await
}

#[tokio::test]
async fn files_are_served_with_their_types_policy_and_cache_validators() {
    let ts = TestServer::start(&[("rules.toml", RULES)]).await;
    let addr = ts.http();
    for (path, ctype) in [
        ("/dashboard", "text/html; charset=utf-8"),
        ("/dashboard/dashboard.js", "text/javascript; charset=utf-8"),
        ("/dashboard/format.js", "text/javascript; charset=utf-8"),
        ("/dashboard/charts.js", "text/javascript; charset=utf-8"),
        ("/dashboard/stream.js", "text/javascript; charset=utf-8"),
        ("/dashboard/changes.js", "text/javascript; charset=utf-8"),
        ("/dashboard/dashboard.css", "text/css; charset=utf-8"),
        (
            "/dashboard/uPlot.iife.min.js",
            "text/javascript; charset=utf-8",
        ),
        ("/dashboard/uPlot.min.css", "text/css; charset=utf-8"),
        ("/dashboard/favicon.svg", "image/svg+xml"),
        ("/dashboard/uPlot.LICENSE.txt", "text/plain; charset=utf-8"),
    ] {
        let r = get(addr, path, &[]).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some(ctype), "{path}");
        assert_eq!(r.header("cache-control"), Some("no-cache"), "{path}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        let csp = r.header("content-security-policy").unwrap_or("");
        assert!(csp.contains("script-src 'self';"), "{path}: {csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        let etag = r.header("etag").expect("an ETag").to_owned();
        let again = get(addr, path, &[("if-none-match", &etag)]).await;
        assert_eq!(again.status, 304, "{path}");
        assert!(again.body.is_empty());
        let stale = get(addr, path, &[("if-none-match", "\"other\"")]).await;
        assert_eq!(stale.status, 200, "{path}");
        assert_eq!(stale.body, r.body);
    }
    let page = get(addr, "/dashboard", &[]).await;
    assert!(
        page.body
            .contains("<script src=\"dashboard/dashboard.js\" type=\"module\"></script>")
    );
    let slash = get(addr, "/dashboard/", &[]).await;
    assert_eq!(slash.status, 308);
    assert_eq!(slash.header("location"), Some("../dashboard"));
    let index = get(addr, "/dashboard/index.html", &[]).await;
    assert_eq!(index.status, 308);
    let missing = get(addr, "/dashboard/secrets.txt", &[]).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"], "not_found");
    let up = get(addr, "/dashboard/..%2Fhealthz", &[]).await;
    assert_eq!(up.status, 404);
}

/// Payments through channel WPG (two rules match them, a breaker per channel: 3 bad calls of 6
/// open it), for the breaker checks below.
const BREAKER_RULES: &str = r#"
domain = "pay"

[[rule]]
name = "per-channel"
match = "channel"
limit = "10000/s"

[[rule]]
name = "per-merchant"
match = "merchant"
limit = "10000/s"

[[breaker]]
name = "channel"
match = ["channel"]
strategy = "error_ratio"
threshold = 0.5
window = "10s"
min_calls = 4
open_for = "2s"
probes = 1
probe_timeout = "30s"
"#;

/// Three calls of WPG succeed, then three fail: its breaker opens at the sixth, 3 bad of 6.
async fn open_wpg(addr: SocketAddr) {
    let report = |outcome: &str| json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": outcome, "latency_ms": 4});
    let reports = json!({"reports": [report("ok"), report("ok"), report("ok"),
        report("error"), report("error"), report("error")]});
    let r = common::post_json(addr, "/v1/report", reports).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Payments through WPG at 20 per second, until dropped.
fn payments(addr: SocketAddr) -> Load {
    Load(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let body = json!({"domain": "pay", "descriptors": ["channel=WPG", "merchant=m1"]});
            let two = [body.clone(), body].map(|b| common::post_json(addr, "/v1/check", b));
            futures::future::join_all(two).await;
        }
    }))
}

/// What a rule's card shows of breaker refusals: [rate shown, shown, highlighted, charted].
fn card_refusals(rule: &str) -> String {
    format!(
        "const card = document.querySelector('[data-rule=\"{rule}\"]');
         if (!card) return null;
         const fig = card.querySelector('[data-fig=\"circuit-open\"]');
         const labels = [...card.querySelectorAll('.u-legend .u-label')].map(e => e.textContent);
         return [Number(fig.querySelector('.value').dataset.value), !fig.hidden,
                 fig.classList.contains('high'), labels.includes('refused by breaker/s')];"
    )
}

/// What WPG's breaker row shows: [phase, opened by, refused/s, refusing highlighted, probes
/// out, decided by].
const WPG_ROW: &str = "const r = document.querySelector('#breakers tr[data-breaker=\"pay:channel:channel=WPG\"]');
     if (!r) return null;
     const f = n => r.querySelector('[data-f=' + n + ']');
     return [f('phase').textContent, f('opened').textContent, Number(f('refused').dataset.value),
             f('refused').classList.contains('refusing'), f('probes').textContent, f('scope').textContent];";

/// Breakers seen truthfully in the browser: requests an open breaker refuses are on the cards of
/// the rules they would have been decided by (highlighted, charted, not in the rejection ratio),
/// and on the breaker's row with why it opened and the probes out; on the embedded store, then
/// on two nodes sharing their breakers through a real Redis, where the page of the node that
/// sees none of the traffic and none of the reports shows the cluster's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_refusals_reasons_and_probes_in_a_real_browser() {
    let driver = start_driver().await;
    let c = browser(&driver).await;

    // Embedded store, on a manual clock: open until the clock moves.
    let ts = TestServer::start(&[("rules.toml", BREAKER_RULES)]).await;
    let addr = ts.http();
    c.goto(&format!("http://{addr}/dashboard"))
        .await
        .expect("the page");
    open_wpg(addr).await;
    let load = payments(addr);
    for rule in ["pay/per-channel", "pay/per-merchant"] {
        let (shown, card) = poll(&c, Duration::from_secs(10), &card_refusals(rule), |v| {
            v[0].as_f64().is_some_and(|r| r >= 10.0) && v[1] == true && v[2] == true && v[3] == true
        })
        .await;
        assert!(shown, "{rule}'s card: {card}");
        let ratio = js(&c, &rule_fig(rule, "ratio")).await;
        assert_eq!(
            ratio.as_f64(),
            Some(0.0),
            "{rule}: the limit rejected nothing"
        );
    }
    let (shown, row) = poll(&c, Duration::from_secs(5), WPG_ROW, |v| {
        v[0] == "open"
            && v[1] == "3 bad of 6"
            && v[2].as_f64().is_some_and(|r| r >= 10.0)
            && v[3] == true
    })
    .await;
    assert!(shown, "the breaker's row: {row}");
    // Half-open: the next payment is the probe, out for 30 s; the others are refused.
    ts.clock.advance(Duration::from_secs(2));
    let (shown, row) = poll(&c, Duration::from_secs(5), WPG_ROW, |v| {
        v[0] == "half-open" && v[4] == "1"
    })
    .await;
    assert!(shown, "the breaker's row: {row}");
    assert_eq!((&row[1], &row[5]), (&json!("3 bad of 6"), &json!("node")));
    drop(load);
    assert_eq!(page_errors(&c).await, Vec::<String>::new());
    // Away from the page before its server stops (its reconnections would log errors).
    c.goto("about:blank").await.expect("a blank page");
    ts.server.shutdown().await.unwrap();

    // Two nodes on one Redis: the payments and the reports go through a; b's page shows them.
    let redis = RedisServer::start();
    let start = |node: &'static str| {
        let url = redis.url();
        TestServer::start_with(&[("rules.toml", BREAKER_RULES)], move |mut cfg| {
            cfg.clock = None;
            cfg.redis_url = Some(url);
            cfg.node_id = Some(node.to_owned());
            cfg
        })
    };
    let (a, b) = (start("node-a").await, start("node-b").await);
    c.goto(&format!("http://{}/dashboard", b.http()))
        .await
        .expect("b's page");
    let two_live = "return [...document.querySelectorAll('#nodes [data-node]')].length;";
    let (both, nodes) = poll(&c, Duration::from_secs(6), two_live, |v| v == 2).await;
    assert!(both, "b's page lists {nodes} nodes");
    open_wpg(a.http()).await;
    let load = payments(a.http());
    let (shown, card) = poll(
        &c,
        Duration::from_secs(10),
        &card_refusals("pay/per-channel"),
        |v| v[0].as_f64().is_some_and(|r| r >= 10.0) && v[2] == true,
    )
    .await;
    assert!(shown, "b's card of the cluster's refusals: {card}");
    // Past open_for the load takes the probe, through a: b shows it out.
    let (shown, row) = poll(&c, Duration::from_secs(10), WPG_ROW, |v| {
        v[0] == "half-open" && v[4] == "1" && v[2].as_f64().is_some_and(|r| r > 0.0)
    })
    .await;
    assert!(shown, "b's breaker row: {row}");
    assert_eq!(
        (&row[1], &row[5]),
        (&json!("3 bad of 6"), &json!("cluster"))
    );
    drop(load);
    assert_eq!(page_errors(&c).await, Vec::<String>::new());
    assert_eq!(console_errors(&c).await, Vec::<String>::new());
    c.goto("about:blank").await.expect("a blank page");
    c.close().await.expect("closing the browser");
    a.server.shutdown().await.unwrap();
    b.server.shutdown().await.unwrap();
}
