//! Alert deliveries never follow a redirect: a webhook receiver and an Alertmanager that answer
//! `302 Location: <an internal address>` get a failed delivery (retried as other failures are,
//! logged with the status and the Location redacted, counted as `failed`), and the internal
//! address is never reached.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, Uri, header};
use common::{config, metric, post_json, serve_app as serve, spawn_server, wait_until};
use parking_lot::Mutex;
use serde_json::json;

const SECRET: &str = "hunter2-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirecting_receiver_is_a_failed_delivery_and_its_location_is_never_reached() {
    // The internal address: counts every request it gets.
    let internal_hits = Arc::new(AtomicUsize::new(0));
    let hits = Arc::clone(&internal_hits);
    let internal = serve(Router::new().fallback(move || {
        hits.fetch_add(1, Ordering::SeqCst);
        async { "reached" }
    }))
    .await;
    // The receiver: answers every request with a redirect there, and keeps the paths asked.
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let a = Arc::clone(&asked);
    let location = format!(
        "{}/internal?token=abc",
        internal.replacen("http://", &format!("http://ops:{SECRET}@"), 1)
    );
    let receiver = serve(Router::new().fallback(move |uri: Uri| {
        a.lock().push(uri.path().to_owned());
        let location = location.clone();
        async move { (StatusCode::FOUND, [(header::LOCATION, location)]) }
    }))
    .await;
    let (_dir, path) = config(&format!(
        r#"domain = "pay"
alert_webhooks = ["{receiver}/hook"]
alertmanagers = ["{receiver}"]

[[rule]]
name = "per-channel"
match = "channel"
limit = "1000/s"

[[breaker]]
name = "channel"
match = ["channel"]
strategy = "error_count"
threshold = 2
window = "10s"
min_calls = 2
open_for = "300s"

[[alert]]
name = "channel-open"
breaker = "channel"
"#
    ));
    let p = spawn_server(&path, &[]);
    let error = json!({"domain": "pay", "descriptors": ["channel=WPG"], "outcome": "error", "latency_ms": 5});
    let r = post_json(p.http, "/v1/report", json!({"reports": [error, error]})).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // The webhook's message is tried four times (after 1 s, 2 s, 4 s), then given up.
    let given_up = "an alert message could not be delivered; given up";
    p.wait_logged(given_up, 0, Duration::from_secs(30)).await;
    p.wait_logged(
        "Alertmanager does not take alerts",
        0,
        Duration::from_secs(10),
    )
    .await;
    let webhook_posts = asked.lock().iter().filter(|p| *p == "/hook").count();
    assert_eq!(webhook_posts, 4, "{:?}", asked.lock());
    assert!(
        asked.lock().iter().any(|p| p == "/api/v2/alerts"),
        "{:?}",
        asked.lock()
    );
    let counted = wait_until(Duration::from_secs(5), || async {
        metric(
            p.http,
            "flowgate_alert_notifications_total",
            &[r#"result="failed""#],
        )
        .await
            >= 2.0
    })
    .await;
    assert!(
        counted,
        "the webhook's and the Alertmanager's failures are counted"
    );
    for needle in [given_up, "Alertmanager does not take alerts"] {
        let log = p.log.lock().unwrap();
        let line = log.iter().find(|l| l.contains(needle)).unwrap();
        assert!(
            line.contains("302") && line.contains("redirects are never followed"),
            "{line}"
        );
        let shown = internal.replacen("http://", "http://ops:<redacted>@", 1);
        assert!(
            line.contains(&format!("{shown}/internal?token=<redacted>")),
            "{line}"
        );
        assert!(!line.contains(SECRET) && !line.contains("abc"), "{line}");
    }
    assert_eq!(
        internal_hits.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
}
