//! A rule's debt on the dashboard, in a real headless Chromium (as `dashboard.rs`): hidden for a
//! rule never charged past its limit, shown with the debt once a charge puts it in debt, and
//! back at 0 once a refund pays it.

#[path = "common/charges.rs"]
mod charges;
mod common;
#[path = "dashboard/kit.rs"]
mod kit;

use std::time::Duration;

use charges::report_cost;
use common::TestServer;
use kit::*;
use serde_json::json;

const RULES: &str = r#"
domain = "llm"

[[rule]]
name = "tokens"
match = ["api_key"]
limit = "1000/h"
algorithm = "fixed_window"
max_debt = 500

[[rule]]
name = "calls"
match = ["user"]
limit = "10/s"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_debt_is_shown_on_the_dashboard() {
    let ts = TestServer::start_with(&[("rules.toml", RULES)], |mut c| {
        c.clock = None;
        c
    })
    .await;
    let addr = ts.http();
    let driver = start_driver().await;
    let c = browser(&driver).await;
    c.goto(&format!("http://{addr}/dashboard"))
        .await
        .expect("the page");
    let hidden = |rule: &str| {
        format!(
            "const b = document.querySelector('[data-rule=\"{rule}\"] [data-fig=debt]'); return b ? b.hidden : null;"
        )
    };
    let (listed, _) = poll(&c, Duration::from_secs(10), &hidden("llm/tokens"), |v| {
        v == &json!(true)
    })
    .await;
    assert!(listed, "a rule never in debt shows no debt");
    let (status, body) = report_cost(addr, "llm", &["api_key=k"], json!(1300), false).await;
    assert_eq!(status, 200, "{body}");
    let (shown, debt) = poll(
        &c,
        Duration::from_secs(10),
        &rule_fig("llm/tokens", "debt"),
        |v| v == &json!(300),
    )
    .await;
    assert!(shown, "the debt shown: {debt}");
    assert_eq!(js(&c, &hidden("llm/tokens")).await, json!(false));
    assert_eq!(
        js(&c, &hidden("llm/calls")).await,
        json!(true),
        "another rule shows none"
    );
    let (status, body) = report_cost(addr, "llm", &["api_key=k"], json!(2000), true).await;
    assert_eq!(status, 200, "{body}");
    let (paid, debt) = poll(
        &c,
        Duration::from_secs(10),
        &rule_fig("llm/tokens", "debt"),
        |v| v == &json!(0),
    )
    .await;
    assert!(paid, "the debt paid: {debt}");
    assert_eq!(page_errors(&c).await, Vec::<String>::new());
    assert_eq!(console_errors(&c).await, Vec::<String>::new());
}
