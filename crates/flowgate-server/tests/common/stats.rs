#![allow(dead_code, unreachable_pub)]
//! What a running server's `GET /v1/stats` says of its rules and alerts, read as the tests of
//! debts and alerts need it.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::{http, wait_until};

/// The debt `/v1/stats` shows for rule `rule` (by name), if it lists the rule.
pub async fn rule_debt(addr: SocketAddr, rule: &str) -> Option<u64> {
    let stats = http(addr, "GET", "/v1/stats", &[], "").await.json();
    stats["rules"]
        .as_array()?
        .iter()
        .find(|r| r["name"] == rule)?["debt"]
        .as_u64()
}

/// Whether alert `alert` reaches `state` (`firing`, `ok`) in `/v1/stats` within `within`
/// (alerts are evaluated every second).
pub async fn alert_reaches(addr: SocketAddr, alert: &str, state: &str, within: Duration) -> bool {
    wait_until(within, || async {
        let stats = http(addr, "GET", "/v1/stats", &[], "").await.json();
        stats["alerts"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["name"] == alert && x["state"] == state))
    })
    .await
}
