//! What the dashboard's browser tests share: the rules they serve, Chromium driven over
//! WebDriver by `fantoccini` (a `chromedriver` in a process group of its own, killed with its
//! Chromium when dropped), helpers that read and drive the page, and steady load.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::common::{self, wait_until};

pub const RULES: &str = r#"
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
pub fn cluster_rules() -> String {
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
pub const WEBHOOK_SECRET: &str = "hunter2";

pub const ADMIN: &str = "admin-secret-0123456789abcdef0123456789abcdef";
pub const REPORTER: &str = "reporter-secret-0123456789abcdef0123456789abcdef";
pub const READER: &str = "reader-secret-0123456789abcdef0123456789abcdef";

/// `chromedriver` on a free loopback port, in a process group of its own (its id is
/// chromedriver's), with the Chromium it starts. When dropped, whatever happens (a failed check
/// never closes the browser session), the whole group is killed: chromedriver alone would leave
/// its Chromium running.
pub struct Driver {
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

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

pub async fn start_driver() -> Driver {
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

pub async fn browser(driver: &Driver) -> Client {
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
pub struct BrowserLog;

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
pub async fn console_errors(c: &Client) -> Vec<String> {
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
pub async fn page_errors(c: &Client) -> Vec<String> {
    let v = c
        .execute(
            "return window.flowgateErrors || ['no collector: dashboard.js did not run'];",
            vec![],
        )
        .await
        .expect("the page's errors");
    serde_json::from_value(v).unwrap_or_default()
}

pub async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.expect("a script")
}

/// Evaluates `script` every 200 ms until `ok` holds on its value, or `within` passes; the last
/// value either way.
pub async fn poll(
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
pub async fn alert_state(c: &Client, name: &str) -> Option<String> {
    let script = format!(
        "const r = [...document.querySelectorAll('#alerts tr[data-alert]')].find(r => r.dataset.alert === {});
         return r ? r.querySelector('[data-f=state]').textContent : null;",
        json!(name)
    );
    js(c, &script).await.as_str().map(str::to_owned)
}

/// Whether the page shows alert `name` in `state` within `within`.
pub async fn wait_for_alert(c: &Client, name: &str, state: &str, within: Duration) -> bool {
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
pub fn rule_fig(rule: &str, f: &str) -> String {
    format!(
        "const card = document.querySelector('[data-rule=\"{rule}\"]');
         if (!card) return null;
         const e = card.querySelector('.value[data-f=\"{f}\"]');
         return e ? (e.dataset.value !== undefined ? Number(e.dataset.value) : e.textContent) : null;"
    )
}

/// The first descriptor of one of a rule's lists (`top_admitted`, `top_rejected`).
pub fn top_of(rule: &str, list: &str) -> String {
    format!(
        "const card = document.querySelector('[data-rule=\"{rule}\"]');
         const td = card && card.querySelector('table[data-list=\"{list}\"] tbody tr td.desc');
         return td ? td.textContent : null;"
    )
}

/// Decisions at fixed rates, until dropped: `client=hot` 30 per second against its limit of 10
/// (20 rejected), and five other clients 2 per second each (all admitted), so the rule rejects
/// half its requests and `client=hot` heads its rejected list.
pub struct Load(pub tokio::task::JoinHandle<()>);

impl Drop for Load {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub fn load(addr: SocketAddr) -> Load {
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

/// Clicks the element `css` once it is shown (within 5 s: the page shows some buttons only once
/// the figures reflect a change).
pub async fn click(c: &Client, css: &str) {
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
pub async fn confirm(c: &Client, answer: &str) -> (String, String) {
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
pub async fn try_limit(c: &Client, card: &str, limit: &str) {
    let field = c
        .find(Locator::Css(&format!("{card} input[name=limit]")))
        .await
        .expect("the trial's limit field");
    field.clear().await.expect("cleared");
    field.send_keys(limit).await.expect("typed");
    click(c, &format!("{card} [data-action=try]")).await;
}

/// Types `token` into the page's token field and uses it.
pub async fn use_token(c: &Client, token: &str) {
    let field = c.find(Locator::Id("token")).await.expect("the token field");
    field.clear().await.expect("cleared");
    field.send_keys(token).await.expect("typed");
    click(c, "#token-form button[type=submit]").await;
}
