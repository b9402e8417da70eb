//! The dashboard, tested the way a person uses it: a real headless Chromium (Debian's `chromium`
//! and `chromium-driver`, which `scripts/test.sh` installs) driven over WebDriver by
//! `fantoccini`, against a server in this process under real load; and its files and its token
//! over plain HTTP.
//!
//! One browser session serves every browser check (a Chromium start costs seconds).
//! `DASHBOARD_SCREENSHOT=$PWD/docs/img/dashboard.png` (an absolute path) also saves a screenshot of the page
//! under load (the README's).

mod common;
#[path = "dashboard/kit.rs"]
mod kit;

use std::net::SocketAddr;
use std::time::Duration;

use common::{TestServer, http};
use fantoccini::{Client, Locator};
use flowgate_server::rules::RulesSource;
use flowgate_testkit::redis::RedisServer;
use kit::*;
use serde_json::{Value, json};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_a_real_browser() {
    let ts = TestServer::start_with(&[("rules.toml", RULES)], |mut c| {
        c.clock = None;
        c.credentials
            .add_token("admin", flowgate_server::auth::Scope::Admin, ADMIN)
            .unwrap();
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
    // And it stays there (not a value passed through on the way up): read again after 2 s more
    // of the same load, a fixed span by design.
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
    // The charts follow their boxes' width through a ResizeObserver, a frame or more after the
    // window's: the widths are read once the window is phone-sized and nothing overflows it,
    // or after 10 s, whichever comes first.
    c.set_window_size(375, 740).await.expect("resized");
    let (_, widths) = poll(
        &c,
        Duration::from_secs(10),
        "return [document.documentElement.scrollWidth, window.innerWidth];",
        |w| {
            let (scroll, inner) = (w[0].as_u64(), w[1].as_u64());
            inner.is_some_and(|i| i > 300 && i <= 400) && scroll <= inner
        },
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
        c.credentials
            .add_token("admin", flowgate_server::auth::Scope::Admin, ADMIN)
            .unwrap();
        c.credentials
            .add_token("dashboard", flowgate_server::auth::Scope::Reader, READER)
            .unwrap();
        c.credentials
            .add_token("reporter", flowgate_server::auth::Scope::Reporter, REPORTER)
            .unwrap();
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
    // A token of another scope (a reporter's) is asked to be replaced too, saying why.
    use_token(&c, REPORTER).await;
    let problem = "return document.getElementById('problem').textContent;";
    let (told, text) = poll(&c, Duration::from_secs(5), problem, |v| {
        v.as_str()
            .is_some_and(|t| t.contains("forbidden") && t.contains("reader"))
    })
    .await;
    assert!(told, "with a reporter's token: {text}");
    let (asked, state) = poll(&c, Duration::from_secs(5), conn, |v| v == "unauthorized").await;
    assert!(asked, "with a reporter's token: {state}");
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
    let (refused, shown) = poll(&c, Duration::from_secs(5), note, |v| v[0] == "forbidden").await;
    assert!(refused, "the versions with the dashboard token: {shown}");
    // Read without the admin token, the rules' URLs show their scheme and host alone, and the
    // page says so.
    let editor = "const t = document.getElementById('editor').value;
                  return [t.includes('refunds-waiting'), t.includes('hunter2'), t.includes('/hook'),
                          t.includes('http://127.0.0.1:9/<redacted>'),
                          !document.getElementById('editor-note').hidden];";
    let (redacted, shown) = poll(&c, Duration::from_secs(5), editor, |v| {
        v == &json!([true, false, false, true, true])
    })
    .await;
    assert!(redacted, "the editor without the admin token: {shown}");
    use_token(&c, ADMIN).await;
    let (whole, shown) = poll(&c, Duration::from_secs(5), editor, |v| {
        v == &json!([true, true, true, false, false])
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
    let reader = format!("Bearer {READER}");
    let rules = http(addr, "GET", "/v1/rules", &[("authorization", &reader)], "")
        .await
        .json();
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

/// Sets (or removes) the trial of rule `api/per-client` through the admin API.
async fn set_trial(addr: SocketAddr, trial: Option<Value>) {
    let admin = format!("Bearer {ADMIN}");
    let mut rules = http(addr, "GET", "/v1/rules", &[("authorization", &admin)], "")
        .await
        .json();
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
        (
            "/dashboard/reservations.js",
            "text/javascript; charset=utf-8",
        ),
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
