#![allow(dead_code, unreachable_pub)]
//! Reservations through a running server: `POST /v1/reserve` and `POST /v1/commit`.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::common::{HttpResponse, post_json};

/// `POST /v1/reserve` of `estimate` units for `descriptors` in `domain`, held `ttl` (`None`:
/// the server's maximum).
pub async fn reserve(
    addr: SocketAddr,
    domain: &str,
    descriptors: &[&str],
    estimate: u64,
    ttl: Option<&str>,
) -> HttpResponse {
    let mut body = json!({"domain": domain, "descriptors": descriptors, "estimate": estimate});
    if let Some(ttl) = ttl {
        body["ttl"] = json!(ttl);
    }
    post_json(addr, "/v1/reserve", body).await
}

/// `POST /v1/commit` of `body`.
pub async fn commit(addr: SocketAddr, body: Value) -> HttpResponse {
    post_json(addr, "/v1/commit", body).await
}

/// The id of an admitted reservation's answer (a 200).
pub fn id_of(r: &HttpResponse) -> String {
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {}", r.body))
        .to_owned()
}
