//! `flowgate.v1.Decisions`: checks over one long-lived gRPC stream (and the unary `Check`),
//! answered by id with `POST /v1/check`'s fields; a bad request failing alone; credentials at the
//! stream's start and after a reload; answers out of order behind a slow store; the bound on
//! decisions in flight; a shutdown ending the streams.

mod common;
#[path = "common/credentials.rs"]
mod credentials;

use std::collections::HashMap;
use std::time::Duration;

use common::{TestServer, post_json, spawn_server, write};
use flowgate_server::grpc_decisions::{
    CheckAnswer, CheckDescriptor, CheckRequest, CheckVerdict, Code, DecisionsClient, Entry, Reason,
    check_answer,
};
use flowgate_testkit::redis::RedisServer;
use futures::channel::mpsc;
use serde_json::{Value, json};
use tokio::time::timeout;
use tonic::transport::Channel;

const RULES: &str = r#"
domain = "api"

[[rule]]
name = "per-user"
match = "user"
limit = "3/s"
algorithm = "fixed_window"
"#;

const DECIDE: &str = "decide-token-0123456789abcdef0123456789abcdef";
const REPORTER: &str = "reporter-token-0123456789abcdef0123456789abcdef";

/// How long an answer may take on a busy machine.
const WITHIN: Duration = Duration::from_secs(15);

fn check(id: u64, domain: &str, pairs: &[(&str, &str)]) -> CheckRequest {
    CheckRequest {
        id,
        domain: domain.to_owned(),
        descriptors: vec![CheckDescriptor {
            entries: pairs
                .iter()
                .map(|(k, v)| Entry {
                    key: (*k).to_owned(),
                    value: (*v).to_owned(),
                })
                .collect(),
            hits_addend: None,
        }],
        hits_addend: None,
        cost: None,
    }
}

/// An open `CheckStream`: requests in, answers out.
struct Stream {
    requests: mpsc::UnboundedSender<CheckRequest>,
    answers: tonic::Streaming<CheckAnswer>,
}

impl Stream {
    async fn open(addr: std::net::SocketAddr, token: Option<&str>) -> Result<Self, tonic::Status> {
        let mut client = client(addr).await;
        let (requests, rx) = mpsc::unbounded();
        let mut req = tonic::Request::new(rx);
        if let Some(t) = token {
            req.metadata_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        let answers = client.check_stream(req).await?.into_inner();
        Ok(Stream { requests, answers })
    }

    fn send(&self, req: CheckRequest) {
        self.requests.unbounded_send(req).unwrap();
    }

    /// The next answer (panics when the stream ends or fails, or after [`WITHIN`]).
    async fn next(&mut self) -> CheckAnswer {
        timeout(WITHIN, self.answers.message())
            .await
            .expect("an answer in time")
            .expect("an answer, not an error")
            .expect("an answer, not the stream's end")
    }

    /// How the stream ends, after its remaining answers (which are returned).
    async fn end(&mut self) -> (Vec<CheckAnswer>, Result<(), tonic::Status>) {
        let mut answers = Vec::new();
        loop {
            match timeout(WITHIN, self.answers.message())
                .await
                .expect("the stream ends in time")
            {
                Ok(Some(a)) => answers.push(a),
                Ok(None) => return (answers, Ok(())),
                Err(s) => return (answers, Err(s)),
            }
        }
    }
}

async fn client(addr: std::net::SocketAddr) -> DecisionsClient<Channel> {
    DecisionsClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

fn verdict(a: &CheckAnswer) -> &CheckVerdict {
    match &a.result {
        Some(check_answer::Result::Verdict(v)) => v,
        other => panic!("answer {}: not a verdict: {other:?}", a.id),
    }
}

#[tokio::test]
async fn many_checks_on_one_stream_are_answered_by_id_with_the_http_answers_fields() {
    let s = TestServer::start(&[("flowgate.toml", RULES)]).await;
    let mut stream = Stream::open(s.server.grpc_addr(), None).await.unwrap();
    for id in 100..105 {
        stream.send(check(id, "api", &[("user", "a")]));
    }
    stream.send(check(7, "api", &[("user", "b")]));
    stream.send(check(8, "unruled", &[("user", "a")]));
    let mut answers = HashMap::new();
    for _ in 0..7 {
        let a = stream.next().await;
        assert!(answers.insert(a.id, a).is_none(), "one answer per id");
    }
    // (decided in the order read on the embedded store: the first three of `a` pass)
    for id in 100..103 {
        let v = verdict(&answers[&id]);
        assert!(v.allowed, "{id}");
        assert_eq!((v.code(), v.reason()), (Code::Ok, Reason::Unspecified));
        let st = &v.statuses[0];
        assert_eq!(st.rule.as_deref(), Some("per-user"));
        assert_eq!((st.limit, st.quota.as_deref()), (Some(3), Some("3/s")));
        assert_eq!(st.remaining, Some(102 - id));
        assert!(st.reset_after_ms.is_some_and(|r| r > 0.0 && r <= 1000.0));
    }
    for id in 103..105 {
        let v = verdict(&answers[&id]);
        assert!(!v.allowed, "{id}");
        assert_eq!((v.code(), v.reason()), (Code::OverLimit, Reason::OverLimit));
        let retry = v.retry_after_ms.expect("a retry time");
        assert!(retry > 0.0 && retry <= 1000.0, "{retry}");
        assert_eq!(v.statuses[0].code(), Code::OverLimit);
        assert!(v.statuses[0].over_limit);
        assert_eq!(v.statuses[0].retry_after_ms, Some(retry));
    }
    assert!(verdict(&answers[&7]).allowed);
    let unruled = verdict(&answers[&8]);
    assert!(unruled.allowed);
    assert_eq!(unruled.statuses[0].rule, None);
    assert_eq!(unruled.statuses[0].limit, None);

    // The same over-limit answer over HTTP: the same fields, the same values.
    let http = post_json(
        s.http(),
        "/v1/check",
        json!({"domain": "api", "descriptors": ["user=a"]}),
    )
    .await;
    assert_eq!(http.status, 429);
    let h = http.json();
    let g = verdict(&answers[&104]);
    assert_eq!(h["allowed"], json!(g.allowed));
    assert_eq!(h["code"], "OVER_LIMIT");
    assert_eq!(h["reason"], "over_limit");
    assert_eq!(h["statuses"][0]["rule"], "per-user");
    assert_eq!(h["statuses"][0]["quota"], "3/s");
    assert_eq!(
        h["statuses"][0]["remaining"],
        json!(g.statuses[0].remaining)
    );

    // Closing its side ends the stream, OK.
    stream.requests.close_channel();
    let (rest, end) = stream.end().await;
    assert!(rest.is_empty());
    assert!(end.is_ok(), "{end:?}");
}

/// The names of the fields of message `name` in `proto`.
fn proto_fields(proto: &str, name: &str) -> Vec<String> {
    let start = proto
        .find(&format!("message {name} {{"))
        .unwrap_or_else(|| panic!("no message {name}"));
    let body = &proto[start..start + proto[start..].find("\n}").unwrap()];
    let mut fields: Vec<String> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && l.ends_with(';') && l.contains('='))
        .filter_map(|l| Some(l.split('=').next()?.split_whitespace().last()?.to_owned()))
        // (named apart in the proto, where `descriptor` clashes with Java's getDescriptor())
        .map(|f| {
            if f == "descriptor_index" {
                "descriptor".to_owned()
            } else {
                f
            }
        })
        .collect();
    fields.sort();
    fields
}

fn schema_fields(doc: &Value, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = doc["components"]["schemas"][name]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no schema {name}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

/// The gRPC verdict has the HTTP answer's fields, one for one (docs/openapi.json).
#[test]
fn the_verdict_messages_have_the_http_answers_fields() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let proto = std::fs::read_to_string(root.join("proto/flowgate/v1/decisions.proto")).unwrap();
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("docs/openapi.json")).unwrap())
            .unwrap();
    for (message, schema) in [
        ("CheckVerdict", "VerdictAnswer"),
        ("DescriptorStatus", "StatusAnswer"),
        ("Lease", "LeaseRef"),
        ("Probe", "ProbeRef"),
        ("BreakerRef", "BreakerRef"),
    ] {
        assert_eq!(
            proto_fields(&proto, message),
            schema_fields(&doc, schema),
            "{message} and {schema}"
        );
    }
    let mut request = proto_fields(&proto, "CheckRequest");
    request.retain(|f| f != "id");
    assert_eq!(request, schema_fields(&doc, "CheckBody"));
}

#[tokio::test]
async fn a_bad_request_fails_alone_naming_its_field_and_the_stream_goes_on() {
    let s = TestServer::start(&[("flowgate.toml", RULES)]).await;
    let mut stream = Stream::open(s.server.grpc_addr(), None).await.unwrap();
    stream.send(check(1, "", &[("user", "a")]));
    stream.send(check(2, "api", &[("", "a")]));
    let mut huge = check(3, "api", &[("user", "a")]);
    huge.cost = Some(1 << 40);
    stream.send(huge);
    stream.send(check(4, "api", &[("user", "a")]));
    let mut errors = HashMap::new();
    for _ in 0..4 {
        let a = stream.next().await;
        match a.result {
            Some(check_answer::Result::Error(e)) => {
                errors.insert(a.id, e);
            }
            Some(check_answer::Result::Verdict(v)) => {
                assert_eq!(a.id, 4);
                assert!(v.allowed);
            }
            None => panic!("an empty answer"),
        }
    }
    let field = |id: u64| (errors[&id].error.as_str(), errors[&id].field.as_str());
    assert_eq!(field(1), ("bad_request", "domain"));
    assert_eq!(field(2), ("bad_request", "descriptors[0].entries"));
    assert_eq!(field(3), ("bad_request", "cost"));
    assert!(errors[&1].detail.contains("domain"), "{:?}", errors[&1]);
    // The unary call answers the same.
    let mut c = client(s.server.grpc_addr()).await;
    let a = c.check(check(9, "", &[("user", "a")])).await.unwrap();
    let a = a.into_inner();
    assert_eq!(a.id, 9);
    assert!(matches!(a.result, Some(check_answer::Result::Error(e)) if e.field == "domain"));
    let invalid = common::metric(
        s.http(),
        "flowgate_requests_total",
        &["api=\"grpc\"", "code=\"invalid\""],
    )
    .await;
    assert_eq!(invalid, 4.0);
}

#[tokio::test]
async fn the_unary_check_answers_as_the_stream() {
    let s = TestServer::start(&[("flowgate.toml", RULES)]).await;
    let mut c = client(s.server.grpc_addr()).await;
    for (i, allowed) in [true, true, true, false].into_iter().enumerate() {
        let a = c
            .check(check(i as u64, "api", &[("user", "u")]))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(a.id, i as u64);
        assert_eq!(verdict(&a).allowed, allowed, "{i}");
    }
}

fn served_with(dir: &std::path::Path, creds: &str) -> common::Proc {
    let cfg = dir.join("flowgate.toml");
    write(&cfg, RULES);
    let path = dir.join("credentials");
    write(&path, creds);
    spawn_server(&cfg, &["--credentials-file", path.to_str().unwrap()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_needs_the_decide_scope_and_ends_when_its_credential_is_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let p = served_with(
        dir.path(),
        &format!("svc:decide:{DECIDE}\nrep:reporter:{REPORTER}\n"),
    );
    let refused = |r: Result<Stream, tonic::Status>| r.err().map(|s| s.code());
    assert_eq!(
        refused(Stream::open(p.grpc, None).await),
        Some(tonic::Code::Unauthenticated)
    );
    assert_eq!(
        refused(Stream::open(p.grpc, Some(REPORTER)).await),
        Some(tonic::Code::PermissionDenied)
    );
    let mut stream = Stream::open(p.grpc, Some(DECIDE)).await.unwrap();
    stream.send(check(1, "api", &[("user", "a")]));
    assert!(verdict(&stream.next().await).allowed);

    // Another credential added: the stream's still holds.
    let creds = dir.path().join("credentials");
    let both = format!("svc:decide:{DECIDE}\nrep:reporter:{REPORTER}\nnew:decide:{REPORTER}x\n");
    credentials::rotate(&p, &creds, &both).await;
    stream.send(check(2, "api", &[("user", "a")]));
    assert_eq!(stream.next().await.id, 2);

    // Its credential revoked: the next request is refused, and the stream ends.
    let revoked = format!("rep:reporter:{REPORTER}\nnew:decide:{REPORTER}x\n");
    credentials::rotate(&p, &creds, &revoked).await;
    stream.send(check(3, "api", &[("user", "a")]));
    let (answers, end) = stream.end().await;
    assert!(answers.is_empty(), "{answers:?}");
    assert_eq!(end.unwrap_err().code(), tonic::Code::Unauthenticated);
}

/// A server on `RULES` over `redis`, whose decisions wait for it up to `deadline`, never taking
/// it for down.
async fn on_redis(redis: &RedisServer, deadline: Duration) -> TestServer {
    let url = redis.url();
    TestServer::start_with(&[("flowgate.toml", RULES)], |mut c| {
        c.redis_url = Some(url);
        c.redis_deadline = deadline;
        c.redis_down_after = 0;
        c
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_decision_holds_no_other_answer() {
    let redis = RedisServer::start();
    let s = on_redis(&redis, Duration::from_secs(3)).await;
    let mut stream = Stream::open(s.server.grpc_addr(), None).await.unwrap();
    stream.send(check(1, "api", &[("user", "a")]));
    assert_eq!(stream.next().await.id, 1);
    redis.pause();
    // 1 waits for the store; 2 matches no rule and needs none.
    stream.send(check(1, "api", &[("user", "a")]));
    stream.send(check(2, "unruled", &[("user", "a")]));
    let first = stream.next().await;
    redis.resume();
    assert_eq!(first.id, 2, "the answer that needs no store comes first");
    assert_eq!(stream.next().await.id, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_decides_at_most_256_requests_at_once() {
    const SENT: u64 = 300;
    let redis = RedisServer::start();
    let deadline = Duration::from_secs(2);
    let s = on_redis(&redis, deadline).await;
    let mut stream = Stream::open(s.server.grpc_addr(), None).await.unwrap();
    redis.pause();
    let start = tokio::time::Instant::now();
    for id in 0..SENT {
        stream.send(check(id, "api", &[("user", "a")]));
    }
    // Each decision waits the whole deadline for the paused store: the first 256 are answered
    // after one deadline, together; the rest are read only as those end, and answered a whole
    // deadline later (half of it allowed to a busy machine's scheduling).
    let mut times = Vec::new();
    for _ in 0..SENT {
        let _ = stream.next().await;
        times.push(start.elapsed());
    }
    redis.resume();
    assert!(times[0] >= deadline, "{times:?}");
    let gaps: Vec<(usize, Duration)> = (1..times.len())
        .map(|i| (i, times[i] - times[i - 1]))
        .filter(|(_, gap)| *gap >= deadline / 2)
        .collect();
    assert_eq!(
        gaps.len(),
        1,
        "one pause, after the first 256: {gaps:?} in {times:?}"
    );
    assert_eq!(gaps[0].0, 256, "{times:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_answers_what_is_in_flight_and_ends_the_stream_unavailable() {
    let s = TestServer::start(&[("flowgate.toml", RULES)]).await;
    let mut stream = Stream::open(s.server.grpc_addr(), None).await.unwrap();
    stream.send(check(1, "api", &[("user", "a")]));
    assert_eq!(stream.next().await.id, 1);
    let stopped = tokio::spawn(s.server.shutdown());
    let (_, end) = stream.end().await;
    assert_eq!(end.unwrap_err().code(), tonic::Code::Unavailable);
    timeout(WITHIN, stopped)
        .await
        .expect("the server stops in time, not held by the stream")
        .unwrap()
        .expect("a clean shutdown");
}

#[tokio::test]
async fn a_message_over_the_bound_ends_its_stream_alone() {
    let s = TestServer::start(&[("flowgate.toml", RULES)]).await;
    let mut stream = Stream::open(s.server.grpc_addr(), None).await.unwrap();
    stream.send(check(1, "api", &[("user", "a")]));
    assert_eq!(stream.next().await.id, 1);
    stream.send(check(2, &"d".repeat(70 * 1024), &[("user", "a")]));
    let (answers, end) = stream.end().await;
    assert!(answers.is_empty(), "{answers:?}");
    assert_eq!(end.unwrap_err().code(), tonic::Code::OutOfRange);
    // Another stream, on the same connection or a new one, is answered.
    let mut again = Stream::open(s.server.grpc_addr(), None).await.unwrap();
    again.send(check(3, "api", &[("user", "a")]));
    assert!(verdict(&again.next().await).allowed);
}

/// A rule whose failure policy is `closed`, on a Redis that is stopped: the stream's verdict
/// says the failure policy refused it (`REASON_STORE_UNAVAILABLE`), as `POST /v1/check` does,
/// not that a limit did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_policys_refusal_is_store_unavailable() {
    let mut redis = RedisServer::start();
    let closed = RULES.replace(
        "algorithm = \"fixed_window\"",
        "algorithm = \"fixed_window\"\nfailure = \"closed\"",
    );
    let url = redis.url();
    let s = TestServer::start_with(&[("flowgate.toml", closed.as_str())], |mut c| {
        c.redis_url = Some(url);
        c
    })
    .await;
    redis.stop();
    let mut stream = Stream::open(s.server.grpc_addr(), None).await.unwrap();
    stream.send(check(1, "api", &[("user", "a")]));
    let answer = stream.next().await;
    let v = verdict(&answer);
    assert!(!v.allowed, "{v:?}");
    assert_eq!(v.reason, Reason::StoreUnavailable as i32, "{v:?}");
}
