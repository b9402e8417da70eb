//! Every HTTP answer says `X-Content-Type-Options: nosniff`: each route and method of the
//! served OpenAPI document (errors included: most of these requests lack a token or a body), a
//! 404 and a 405, so that a browser never runs an answer as another type than it says.

mod common;

use std::net::SocketAddr;

/// The status and `X-Content-Type-Options` of one request, read from the answer's head only
/// (the event stream's body never ends).
async fn nosniff_of(addr: SocketAddr, method: &str, path: &str) -> (u16, Option<String>) {
    let (status, headers) = common::head(addr, method, path, &[]).await;
    let value = headers
        .get("x-content-type-options")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, value)
}

#[tokio::test]
async fn every_route_a_404_and_a_405_answer_nosniff() {
    let t = common::TestServer::start(&[(
        "rules.toml",
        "[[rule]]\ndomain = \"d\"\nname = \"r\"\nmatch = \"user\"\nlimit = \"5/s\"\n",
    )])
    .await;
    let doc = common::http(t.http(), "GET", "/openapi.json", &[], "")
        .await
        .json();
    let mut asked = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        // A path parameter (`{queue}`, `{asset}`) takes a plain word.
        let path: String = path
            .split('/')
            .map(|s| if s.starts_with('{') { "x" } else { s })
            .collect::<Vec<_>>()
            .join("/");
        for method in item.as_object().unwrap().keys() {
            asked.push((method.to_uppercase(), path.clone()));
        }
    }
    assert!(asked.len() > 20, "the document's routes: {asked:?}");
    asked.push(("GET".into(), "/no/such/route".into()));
    asked.push(("DELETE".into(), "/v1/check".into()));
    let mut statuses = Vec::new();
    for (method, path) in &asked {
        let (status, value) = nosniff_of(t.http(), method, path).await;
        assert_eq!(
            value.as_deref(),
            Some("nosniff"),
            "{method} {path}: {status}"
        );
        statuses.push(status);
    }
    // The walk met successes and errors alike, the two fallbacks last.
    assert!(statuses.contains(&200) && statuses.iter().any(|s| *s >= 400));
    assert_eq!(statuses[statuses.len() - 2..], [404, 405]);
}
