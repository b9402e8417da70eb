//! Fuzzing the gRPC API on stable Rust: generated `RateLimitRequest`s (hostile domains, keys and
//! values, long texts, many descriptors and entries, large addends, limit overrides) against the
//! real tonic service, and raw bytes as the protobuf message, sent over HTTP/2. Every answer is a
//! status per descriptor or `INVALID_ARGUMENT` / `OUT_OF_RANGE` with a message, or the decoder's
//! refusal; the server goes on answering. Generated `flowgate.v1.CheckRequest`s on one
//! `CheckStream`: each answered with its id, a verdict or an error naming its field, the stream
//! going on (a message over the bound ends it `OUT_OF_RANGE`). `FUZZ_CASES=N` runs each target N cases (see
//! `docs/fuzzing.md`).

mod common;
mod fuzz_server;
mod generate;

use flowgate_testkit::fuzz::{self, hostile_text};
use fuzz_server::server;
use generate::opt;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;
use flowgate_server::grpc_decisions::{
    CheckAnswer, CheckDescriptor, CheckRequest, DecisionsClient, Entry as DecisionEntry,
    check_answer,
};
use prost::Message as _;

fn grpc_text(valid: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        4 => prop::sample::select(valid).prop_map(str::to_owned),
        1 => hostile_text(),
        1 => (1000usize..1100).prop_map(|n| "k".repeat(n)),
    ]
}

fn grpc_descriptor() -> impl Strategy<Value = RateLimitDescriptor> {
    let entry = (
        grpc_text(&["client", "user", "channel", "export", "path", "ip", ""]),
        grpc_text(&["a", "WPG", "files/x", "1", ""]),
    )
        .prop_map(|(key, value)| Entry { key, value });
    (
        prop_oneof![
            8 => prop::collection::vec(entry.clone(), 0..4),
            1 => prop::collection::vec(entry, 30..40),
        ],
        opt((any::<u32>(), any::<i32>())),
        opt(prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::from(u32::MAX) + 1),
            any::<u64>()
        ]),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(entries, limit, hits, negative)| RateLimitDescriptor {
            entries,
            limit: limit.map(|(requests_per_unit, unit)| RateLimitOverride {
                requests_per_unit,
                unit,
            }),
            hits_addend: hits.map(|value| UInt64Value { value }),
            is_negative_hits: negative,
        })
}

/// A generated request: hostile domains, keys and values, huge addends, many descriptors.
fn grpc_request() -> impl Strategy<Value = RateLimitRequest> {
    (
        grpc_text(&["api", "mongo_cps", ""]),
        prop_oneof![
            8 => prop::collection::vec(grpc_descriptor(), 0..4),
            1 => prop::collection::vec(grpc_descriptor(), 60..70),
        ],
        prop_oneof![Just(0u32), Just(1), Just(u32::MAX), any::<u32>()],
    )
        .prop_map(|(domain, descriptors, hits_addend)| RateLimitRequest {
            domain,
            descriptors,
            hits_addend,
        })
}

/// The answer to `req` is a status per descriptor, or `INVALID_ARGUMENT` / `OUT_OF_RANGE` with
/// a message.
async fn grpc_answer(
    client: &mut envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient<tonic::transport::Channel>,
    req: RateLimitRequest,
) -> Result<(), TestCaseError> {
    let n = req.descriptors.len();
    let shown = format!("{req:?}");
    let shown: String = shown.chars().take(2000).collect();
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client.should_rate_limit(req),
    )
    .await
    .map_err(|_| TestCaseError::fail(format!("no answer within 10 s to {shown}")))?;
    match answer {
        Ok(r) => prop_assert_eq!(r.into_inner().statuses.len(), n, "{}", shown),
        Err(s) => {
            prop_assert!(
                matches!(
                    s.code(),
                    tonic::Code::InvalidArgument | tonic::Code::OutOfRange
                ),
                "{:?} {:?} for {}",
                s.code(),
                s.message(),
                shown
            );
            prop_assert!(!s.message().trim().is_empty(), "no message for {shown}");
        }
    }
    Ok(())
}

#[test]
fn grpc_generated_requests() {
    let (rt, t) = server();
    let client = rt.block_on(t.grpc());
    let mut runner = TestRunner::new(fuzz::config(300));
    let result = runner.run(&grpc_request(), |req| {
        rt.block_on(grpc_answer(&mut client.clone(), req))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Bytes as the protobuf: mutations of a valid request's encoding, and arbitrary bytes.
fn protobuf_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        (
            grpc_request(),
            prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            any::<prop::sample::Index>(),
        )
            .prop_map(|(req, flips, cut)| {
                let mut b = req.encode_to_vec();
                for (i, x) in flips {
                    if !b.is_empty() {
                        let at = i.index(b.len());
                        b[at] = x;
                    }
                }
                let keep = cut.index(b.len() + 1);
                b.truncate(keep.max(b.len() / 2));
                b
            }),
    ]
}

/// Sends `bytes` as one gRPC message of `ShouldRateLimit` over HTTP/2: the gRPC status and
/// message.
async fn raw_grpc(addr: std::net::SocketAddr, bytes: &[u8]) -> (Option<String>, String) {
    use http_body_util::{BodyExt as _, Full};
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap_or_else(|e| panic!("handshake: {e}"));
    tokio::spawn(conn);
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(bytes);
    let req = hyper::Request::builder()
        .method("POST")
        .uri(format!(
            "http://{addr}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(hyper::body::Bytes::from(frame)))
        .unwrap_or_else(|e| panic!("request: {e}"));
    let resp = send
        .send_request(req)
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    let header =
        |h: &http::HeaderMap, k: &str| h.get(k).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let (parts, body) = resp.into_parts();
    if let Some(status) = header(&parts.headers, "grpc-status") {
        let message = header(&parts.headers, "grpc-message").unwrap_or_default();
        return (Some(status), message);
    }
    let collected = body.collect().await.unwrap_or_else(|e| panic!("body: {e}"));
    let trailers = collected.trailers().cloned().unwrap_or_default();
    (
        header(&trailers, "grpc-status"),
        header(&trailers, "grpc-message").unwrap_or_default(),
    )
}

#[test]
fn grpc_raw_bytes_as_the_protobuf() {
    let (rt, t) = server();
    let mut client = rt.block_on(t.grpc());
    let addr = t.server.grpc_addr();
    let mut runner = TestRunner::new(fuzz::config(200));
    let result = runner.run(&protobuf_bytes(), |bytes| {
        match RateLimitRequest::decode(bytes.as_slice()) {
            // What decodes is a request like any other.
            Ok(req) => rt.block_on(grpc_answer(&mut client.clone(), req))?,
            // What does not is refused by the service's decoder, which says so (over the
            // message bound: OUT_OF_RANGE, naming the bound).
            Err(_) => {
                let (status, message) = rt.block_on(raw_grpc(addr, &bytes));
                match status.as_deref() {
                    Some("13") => prop_assert!(message.contains("decode"), "{message}"),
                    Some("11") => prop_assert!(message.contains("65536"), "{message}"),
                    other => prop_assert!(false, "{other:?} {message}"),
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The server goes on answering.
    let ok = rt.block_on(client.should_rate_limit(RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![common::descriptor(&[("user", "u")])],
        hits_addend: 1,
    }));
    assert!(ok.is_ok(), "{ok:?}");
}

fn check_descriptor() -> impl Strategy<Value = CheckDescriptor> {
    let entry = (
        grpc_text(&["client", "user", "channel", "export", "path", "ip", ""]),
        grpc_text(&["a", "WPG", "files/x", "1", ""]),
    )
        .prop_map(|(key, value)| DecisionEntry { key, value });
    (
        prop_oneof![
            8 => prop::collection::vec(entry.clone(), 0..4),
            1 => prop::collection::vec(entry, 30..40),
        ],
        opt(prop_oneof![
            Just(0u64),
            Just(u64::from(u32::MAX) + 1),
            any::<u64>()
        ]),
    )
        .prop_map(|(entries, hits_addend)| CheckDescriptor {
            entries,
            hits_addend,
        })
}

fn check_request() -> impl Strategy<Value = CheckRequest> {
    let cost = || {
        opt(prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::from(u32::MAX) + 1),
            any::<u64>()
        ])
    };
    (
        any::<u64>(),
        grpc_text(&["api", "mongo_cps", ""]),
        prop_oneof![
            8 => prop::collection::vec(check_descriptor(), 0..4),
            1 => prop::collection::vec(check_descriptor(), 60..70),
        ],
        cost(),
        cost(),
    )
        .prop_map(
            |(id, domain, descriptors, hits_addend, cost)| CheckRequest {
                id,
                domain,
                descriptors,
                hits_addend,
                cost,
            },
        )
}

/// An open `CheckStream`.
type Open = (
    futures::channel::mpsc::UnboundedSender<CheckRequest>,
    tonic::Streaming<CheckAnswer>,
);

async fn open(addr: std::net::SocketAddr) -> Open {
    let mut client = DecisionsClient::connect(format!("http://{addr}"))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let answers = client
        .check_stream(rx)
        .await
        .unwrap_or_else(|e| panic!("stream: {e}"))
        .into_inner();
    (tx, answers)
}

/// Sends `req` on `stream`: its answer carries its id, and is a verdict with a status per
/// descriptor or a `bad_request` naming its field; a message over the bound ends the stream
/// `OUT_OF_RANGE` (then another is opened).
async fn stream_answer(
    stream: &mut Open,
    addr: std::net::SocketAddr,
    req: CheckRequest,
) -> Result<(), TestCaseError> {
    let (id, n, too_big) = (req.id, req.descriptors.len(), req.encoded_len() > 64 * 1024);
    let shown: String = format!("{req:?}").chars().take(2000).collect();
    stream
        .0
        .unbounded_send(req)
        .map_err(|e| TestCaseError::fail(format!("send: {e}")))?;
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), stream.1.message())
        .await
        .map_err(|_| TestCaseError::fail(format!("no answer within 10 s to {shown}")))?;
    if too_big {
        prop_assert!(
            matches!(&answer, Err(s) if s.code() == tonic::Code::OutOfRange),
            "{:?} for {}",
            answer,
            shown
        );
        *stream = open(addr).await;
        return Ok(());
    }
    let answer = match answer {
        Ok(Some(a)) => a,
        other => return Err(TestCaseError::fail(format!("{other:?} for {shown}"))),
    };
    prop_assert_eq!(answer.id, id);
    match answer.result {
        Some(check_answer::Result::Verdict(v)) => prop_assert_eq!(v.statuses.len(), n, "{}", shown),
        Some(check_answer::Result::Error(e)) => {
            prop_assert_eq!(e.error.as_str(), "bad_request", "{}", shown);
            prop_assert!(
                !e.field.is_empty() && !e.detail.trim().is_empty(),
                "{:?} {}",
                e,
                shown
            );
        }
        None => prop_assert!(false, "an empty answer to {}", shown),
    }
    Ok(())
}

#[test]
fn grpc_generated_checks_on_one_stream() {
    let (rt, t) = server();
    let addr = t.server.grpc_addr();
    let stream = std::cell::RefCell::new(rt.block_on(open(addr)));
    let mut runner = TestRunner::new(fuzz::config(300));
    let result = runner.run(&check_request(), |req| {
        rt.block_on(stream_answer(&mut stream.borrow_mut(), addr, req))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
