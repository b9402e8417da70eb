//! The LLM proxy example end to end over real HTTP on loopback: streamed requests pass until
//! their committed tokens fill the key's budget, then 429 with the budget headers; a stream cut
//! short by its client commits the estimate.

use std::sync::Arc;
use std::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::{Descriptor, Limiter, MemoryStore, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "../examples/llm_proxy/app.rs"]
mod app;

const LIMIT: u64 = 1_000;

type Shared = Arc<Limiter<MemoryStore<ManualClock>>>;

/// The proxy served on a free loopback port, stopped when dropped.
struct Proxy {
    addr: std::net::SocketAddr,
    limiter: Shared,
    clock: ManualClock,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start() -> Proxy {
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = MemoryStore::with_clock(clock.clone());
    let limiter = Arc::new(Limiter::new(app::rules(LIMIT), store));
    let router = app::router(Arc::clone(&limiter), Duration::from_millis(20));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    Proxy {
        addr,
        limiter,
        clock,
        task,
    }
}

fn words(n: usize) -> String {
    (0..n)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A chat completion with a system prompt of `system` words and a user message of `user`.
fn body(max_tokens: u64, system: usize, user: usize) -> serde_json::Value {
    serde_json::json!({
        "model": "fake",
        "stream": true,
        "max_tokens": max_tokens,
        "messages": [
            {"role": "system", "content": words(system)},
            {"role": "user", "content": words(user)},
        ],
    })
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Posts a chat completion as `key` and reads the whole answer (a blocking client on a thread
/// of its own).
async fn post(addr: std::net::SocketAddr, key: &str, body: serde_json::Value) -> Answer {
    let auth = format!("Bearer {key}");
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let mut res = agent
            .post(format!("http://{addr}/v1/chat/completions"))
            .header("Authorization", &auth)
            .send_json(&body)
            .unwrap();
        let headers = res
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        Answer {
            status: res.status().as_u16(),
            headers,
            body: res.body_mut().read_to_string().unwrap(),
        }
    })
    .await
    .unwrap()
}

async fn remaining(l: &Shared, key: &str) -> u64 {
    let r = Request::new("llm", vec![Descriptor::new([("api_key", key)])]).with_cost(0);
    l.check(&r).await.statuses[0].decision.remaining
}

async fn until_remaining(l: &Shared, key: &str, want: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = remaining(l, key).await;
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{got} left, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Each request reserves 150 + 100 = 250 tokens and commits its usage, 100 prompt + 10
/// completion = 110: 7 pass (1000 - 7 × 110 = 230 < 250), the 8th is refused. Committing the
/// estimate instead would let only 4 pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_pass_until_their_committed_tokens_fill_the_budget() {
    let proxy = start().await;
    let key = "sk-budget";
    for n in 0..7u64 {
        let a = post(proxy.addr, key, body(150, 90, 10)).await;
        assert_eq!(a.status, 200, "request {n}: {}", a.body);
        assert_eq!(a.header("content-type"), Some("text/event-stream"));
        let after_reserve = (LIMIT - n * 110 - 250).to_string();
        assert_eq!(
            a.header("ratelimit-remaining"),
            Some(after_reserve.as_str())
        );
        assert_eq!(
            a.header("x-ratelimit-remaining-tokens"),
            Some(after_reserve.as_str())
        );
        assert_eq!(a.header("x-ratelimit-limit-tokens"), Some("1000"));
        assert!(
            a.header("x-ratelimit-reset-tokens")
                .is_some_and(|v| v.ends_with('s'))
        );
        assert!(a.body.contains("\"total_tokens\":110"), "{}", a.body);
        assert!(a.body.ends_with("data: [DONE]\n\n"));
        until_remaining(&proxy.limiter, key, LIMIT - (n + 1) * 110).await;
    }
    let a = post(proxy.addr, key, body(150, 90, 10)).await;
    assert_eq!(a.status, 429, "{}", a.body);
    assert_eq!(a.header("ratelimit-remaining"), Some("230"));
    assert_eq!(a.header("x-ratelimit-remaining-tokens"), Some("230"));
    assert_eq!(a.header("x-ratelimit-limit-tokens"), Some("1000"));
    // 20 tokens short at 1000 a minute: 1.2 s.
    assert_eq!(a.header("retry-after"), Some("2"));
    assert_eq!(a.header("x-ratelimit-reset-tokens"), Some("46.2s"));
    let json: serde_json::Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(json["error"]["code"], "rate_limit_exceeded");
    assert!(json["error"]["message"].as_str().unwrap().contains("1.2s"));
    // Another key has its own budget.
    assert_eq!(
        post(proxy.addr, "sk-other", body(150, 90, 10)).await.status,
        200
    );
}

/// A client gone mid-stream: the reservation commits its estimate. Its tokens, reserved before
/// a minute that refills the bucket, count again after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_short_commits_the_estimate() {
    let proxy = start().await;
    let key = "sk-cut";
    // 300 + 200 = 500 tokens reserved; 200 words streamed take 4 s.
    let payload = body(300, 0, 200).to_string();
    let mut conn = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        proxy.addr,
        payload.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(payload.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("data: ") {
        let n = tokio::time::timeout(Duration::from_secs(20), conn.read(&mut buf))
            .await
            .expect("the first chunk within 20 s")
            .unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    assert_eq!(remaining(&proxy.limiter, key).await, LIMIT - 500);
    proxy.clock.advance(Duration::from_secs(60));
    assert_eq!(remaining(&proxy.limiter, key).await, LIMIT, "refilled");
    drop(conn);
    until_remaining(&proxy.limiter, key, LIMIT - 500).await;
}

/// A request that names no `max_tokens`, as most OpenAI clients send it, reserves the default
/// (256) plus its prompt, within one request's share of the budget: it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_max_tokens_is_served() {
    let proxy = start().await;
    let mut plain = body(0, 0, 5);
    plain.as_object_mut().unwrap().remove("max_tokens");
    let a = post(proxy.addr, "sk-plain", plain).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let reserved = (LIMIT - app::DEFAULT_MAX_TOKENS - 5).to_string();
    assert_eq!(a.header("ratelimit-remaining"), Some(reserved.as_str()));
}
