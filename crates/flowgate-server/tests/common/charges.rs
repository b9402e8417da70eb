#![allow(dead_code, unreachable_pub)]
//! Charges through real `flowgate` processes: the server on the embedded store or on a real
//! Redis, Envoy's calls as Envoy AI Gateway makes them, and `POST /v1/report` with a cost.

use std::net::SocketAddr;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::google::protobuf::UInt64Value;
use flowgate_testkit::redis::RedisServer;
use serde_json::{Value, json};
use tonic::transport::Channel;

use crate::common::{Proc, descriptor, post_json, spawn_server};

/// The store a test runs on: the embedded one, or a real `redis-server` of its own.
pub enum OnStore {
    Memory,
    Redis(RedisServer),
}

impl OnStore {
    pub fn memory() -> Self {
        OnStore::Memory
    }

    pub fn redis() -> Self {
        OnStore::Redis(RedisServer::start())
    }

    /// `flowgate serve` on this store with `config` and `extra` flags.
    pub fn serve(&self, config: &std::path::Path, extra: &[&str]) -> Proc {
        let mut args: Vec<String> = Vec::new();
        if let OnStore::Redis(r) = self {
            args.extend(["--redis-url".to_owned(), r.url()]);
            if !extra.contains(&"--redis-deadline") {
                // A deadline a busy machine meets.
                args.extend(["--redis-deadline", "2s"].map(str::to_owned));
            }
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        spawn_server(config, &args)
    }
}

pub async fn envoy(addr: SocketAddr) -> RateLimitServiceClient<Channel> {
    RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

/// `api_key=<key>` with Envoy's descriptor-level `hits_addend` (as Envoy AI Gateway sets it:
/// 0 at request time, the tokens at stream end), a refund when `negative`.
pub fn tokens(key: &str, hits: u64, negative: bool) -> RateLimitDescriptor {
    RateLimitDescriptor {
        is_negative_hits: negative,
        ..tokens_of("api_key", key, hits)
    }
}

/// One `ShouldRateLimit` of `descriptors` in `domain`: the overall code and the first
/// descriptor's.
pub async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    descriptors: Vec<RateLimitDescriptor>,
) -> Result<(Code, Code), tonic::Status> {
    let r = client
        .should_rate_limit(RateLimitRequest {
            domain: domain.to_owned(),
            descriptors,
            hits_addend: 0,
        })
        .await?
        .into_inner();
    Ok((
        Code::try_from(r.overall_code).unwrap(),
        Code::try_from(r.statuses[0].code).unwrap(),
    ))
}

/// `POST /v1/report` of one report with a cost: the answer's status and body.
pub async fn report_cost(
    addr: SocketAddr,
    domain: &str,
    descriptors: &[&str],
    cost: Value,
    refund: bool,
) -> (u16, Value) {
    let mut body = json!({"domain": domain, "descriptors": descriptors, "cost": cost});
    if refund {
        body["refund"] = json!(true);
    }
    let r = post_json(addr, "/v1/report", body).await;
    (r.status, r.json())
}

/// What a look (a charge of 0) finds of the rule `rule` for `descriptors`: its debt and the
/// units a check may still take.
pub async fn look(addr: SocketAddr, domain: &str, descriptors: &[&str], rule: &str) -> (u64, u64) {
    let (status, body) = report_cost(addr, domain, descriptors, json!(0), false).await;
    assert_eq!(status, 200, "{body}");
    let r = body["charges"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == rule)
        .unwrap_or_else(|| panic!("no rule {rule} in {body}"))
        .clone();
    assert_eq!(r["applied"], 0, "a look charges nothing: {body}");
    (
        r["debt"].as_u64().unwrap(),
        r["remaining"].as_u64().unwrap(),
    )
}

/// `<key>=<value>` with Envoy's descriptor-level `hits_addend`.
pub fn tokens_of(key: &str, value: &str, hits: u64) -> RateLimitDescriptor {
    RateLimitDescriptor {
        hits_addend: Some(UInt64Value { value: hits }),
        ..descriptor(&[(key, value)])
    }
}
