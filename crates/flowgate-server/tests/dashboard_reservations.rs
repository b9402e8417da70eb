//! Outstanding reservations on the dashboard, in a real headless Chromium (see `dashboard.rs`
//! for the harness): a reservation shows in its rule's row until its commit.

mod common;
#[path = "dashboard/kit.rs"]
mod kit;
#[path = "common/reservations.rs"]
mod reservations;

use std::time::Duration;

use common::TestServer;
use kit::*;
use serde_json::json;

const RULES: &str = r#"
domain = "llm"

[[rule]]
name = "tokens"
match = "api_key"
limit = "10000/m"
"#;

/// The reservations' row of `llm/tokens`: its outstanding count and units, and whether the
/// "none" line is hidden; `null` while there is no row.
const ROW: &str = r#"
const row = document.querySelector('#reservations [data-reservations="llm/tokens"]');
if (!row) return null;
return [row.querySelector('[data-f=count]').textContent, row.querySelector('[data-f=units]').textContent, document.getElementById('no-reservations').hidden];
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outstanding_reservations_in_a_real_browser() {
    let driver = start_driver().await;
    let c = browser(&driver).await;
    let ts = TestServer::start(&[("rules.toml", RULES)]).await;
    let addr = ts.http();
    c.goto(&format!("http://{addr}/dashboard"))
        .await
        .expect("the page");
    let none = "return document.getElementById('no-reservations').hidden === false;";
    let (shown, _) = poll(&c, Duration::from_secs(10), none, |v| v == true).await;
    assert!(shown, "no reservation: the page says so");
    let mut ids = Vec::new();
    for estimate in [1000, 2500] {
        let r = reservations::reserve(addr, "llm", &["api_key=k1"], estimate, None).await;
        ids.push(reservations::id_of(&r));
    }
    let (shown, row) = poll(&c, Duration::from_secs(10), ROW, |v| {
        *v == json!(["2", "3500", true])
    })
    .await;
    assert!(shown, "the row: {row}");
    let r = reservations::commit(addr, json!({"id": ids[0], "cost": 10})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (shown, row) = poll(&c, Duration::from_secs(10), ROW, |v| {
        *v == json!(["1", "2500", true])
    })
    .await;
    assert!(shown, "the row after a commit: {row}");
    assert_eq!(page_errors(&c).await, Vec::<String>::new());
    assert_eq!(console_errors(&c).await, Vec::<String>::new());
    c.goto("about:blank").await.expect("a blank page");
    c.close().await.expect("closing the browser");
    ts.server.shutdown().await.unwrap();
}
