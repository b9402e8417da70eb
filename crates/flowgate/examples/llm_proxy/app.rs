//! The LLM proxy's router, shared by the example (`examples/llm_proxy.rs`) and its end-to-end
//! test (`tests/llm_proxy.rs`): a fake streaming model, and a proxy in front of it that limits
//! tokens per minute per API key by reserving each request's `max_tokens` (plus its prompt) and
//! committing the usage of the stream's last chunk.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use axum::routing::post;
use axum::{Json, Router};
use flowgate::store::Store;
use flowgate::{
    Algorithm, Descriptor, Limit, Limiter, Matcher, Quota, Request, ReserveError, Rule, RuleSet,
};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use tower::ServiceExt;

/// The completion tokens a request may ask for when its body names no `max_tokens` (as most
/// OpenAI clients send it): within one request's share of the default budget, so that a
/// request without it is served.
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 256;

/// The rules: `tokens_per_minute` per API key, a token bucket (refilled continuously, as
/// OpenAI's limits are).
pub(crate) fn rules(tokens_per_minute: u64) -> RuleSet {
    let tpm = Limit::new(
        Algorithm::TokenBucket,
        Quota::new(tokens_per_minute, Duration::from_secs(60)).expect("a valid quota"),
    )
    .expect("a valid limit");
    RuleSet::new(vec![Rule::new(
        "llm",
        "tokens-per-key",
        vec![Matcher::parse("api_key")],
        Some(tpm),
    )])
    .expect("valid rules")
}

/// A chat message.
#[derive(Deserialize)]
pub(crate) struct Message {
    /// `system`, `user`, `assistant`.
    #[allow(dead_code)]
    pub(crate) role: String,
    /// The text.
    pub(crate) content: String,
}

/// The fields of a chat-completion request this proxy and model read.
#[derive(Deserialize)]
pub(crate) struct Completion {
    /// The messages.
    pub(crate) messages: Vec<Message>,
    /// The most completion tokens the answer may have.
    pub(crate) max_tokens: Option<u64>,
}

/// The prompt's tokens: one per word (the fake model's tokenizer; a real proxy would count
/// with the model's tokenizer, or estimate 4 characters a token).
pub(crate) fn prompt_tokens(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| m.content.split_whitespace().count() as u64)
        .sum()
}

/// The fake model: echoes the last message's words back, one SSE chunk a word every `pace`, at
/// most `max_tokens` of them, then a chunk with `finish_reason`, one with `usage` (as OpenAI
/// streams with `stream_options.include_usage`), and `[DONE]`.
pub(crate) fn model(pace: Duration) -> Router {
    Router::new().route(
        "/v1/chat/completions",
        post(move |Json(req): Json<Completion>| async move { stream_answer(req, pace) }),
    )
}

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> Bytes {
    let c = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    Bytes::from(format!("data: {c}\n\n"))
}

fn stream_answer(req: Completion, pace: Duration) -> Response<Body> {
    let prompt = prompt_tokens(&req.messages);
    let max = req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS) as usize;
    let words: Vec<String> = req
        .messages
        .last()
        .map(|m| {
            m.content
                .split_whitespace()
                .take(max)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let completion = words.len() as u64;
    let usage = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    });
    let tail = [
        chunk(json!({}), Some("stop")),
        Bytes::from(format!("data: {usage}\n\n")),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ];
    let body = futures::stream::iter(words)
        .then(move |w| async move {
            tokio::time::sleep(pace).await;
            chunk(json!({"content": format!("{w} ")}), None)
        })
        .chain(futures::stream::iter(tail))
        .map(Ok::<_, Infallible>);
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(body))
        .expect("a valid response")
}

/// Reads the `usage.total_tokens` of an OpenAI chat-completion SSE stream as it passes.
#[derive(Default)]
pub(crate) struct SseUsage {
    pending: Vec<u8>,
}

/// An event longer than this is not one of a chat completion's chunks: it is skipped.
const MAX_EVENT: usize = 1 << 20;

impl SseUsage {
    /// Feeds the next bytes of the stream; answers the total tokens when an event carrying
    /// `usage` completes in them.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Option<u64> {
        self.pending.extend_from_slice(bytes);
        let mut found = None;
        while let Some(end) = find_event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end.0 + end.1).collect();
            found = found.or_else(|| usage_of(&event[..end.0]));
        }
        if self.pending.len() > MAX_EVENT {
            self.pending.clear();
        }
        found
    }
}

/// Where the first event of `buf` ends: its length, and the blank line's.
fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The total tokens of an event whose data is a chunk carrying `usage`.
fn usage_of(event: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(event).ok()?;
    let data: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("\n");
    if data == "[DONE]" {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&data).ok()?;
    v.get("usage")?.get("total_tokens")?.as_u64()
}

/// The proxy's state: the limiter and the model behind it.
pub(crate) struct Proxy<S: Store> {
    limiter: Arc<Limiter<S>>,
    model: Router,
}

/// The proxy: `POST /v1/chat/completions` limited in tokens per API key, in front of the fake
/// model streaming one word every `pace`.
pub(crate) fn router<S: Store>(limiter: Arc<Limiter<S>>, pace: Duration) -> Router {
    let proxy = Arc::new(Proxy {
        limiter,
        model: model(pace),
    });
    Router::new()
        .route("/v1/chat/completions", post(complete::<S>))
        .with_state(proxy)
}

/// An OpenAI-style error answer.
fn error(status: StatusCode, kind: &str, code: &str, message: String) -> Response<Body> {
    let body = json!({"error": {"message": message, "type": kind, "code": code}});
    let mut res = Response::new(Body::from(body.to_string()));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

fn add(headers: &mut HeaderMap, pairs: Vec<(&'static str, String)>) {
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
}

/// The API key of `Authorization: Bearer <key>`.
fn api_key(headers: &HeaderMap) -> Option<&str> {
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let key = auth.strip_prefix("Bearer ")?.trim();
    (!key.is_empty()).then_some(key)
}

async fn complete<S: Store>(
    State(proxy): State<Arc<Proxy<S>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let Some(key) = api_key(&headers) else {
        let msg = "an API key is required: Authorization: Bearer <key>".to_owned();
        return error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid_api_key",
            msg,
        );
    };
    let req: Completion = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            let msg = format!("the body is not a chat completion request: {e}");
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_body",
                msg,
            );
        }
    };
    // OpenAI's rule: a request counts its prompt and the most it may answer, up front.
    let estimate = req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS) + prompt_tokens(&req.messages);
    let flow = Request::new("llm", vec![Descriptor::new([("api_key", key)])]);
    let reservation = match proxy.limiter.reserve(&flow, estimate).await {
        Ok(r) => r,
        Err(e) => return refused(e),
    };
    let upstream = axum::http::Request::post("/v1/chat/completions")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("a valid request");
    let Ok(answer) = proxy.model.clone().oneshot(upstream).await;
    if !answer.status().is_success() {
        // The model answered an error: it generated nothing, and nothing is billed.
        let _ = reservation.cancel().await;
        return answer;
    }
    let (mut parts, body) = answer.into_parts();
    add(&mut parts.headers, reservation.verdict().headers());
    add(
        &mut parts.headers,
        reservation.verdict().openai_token_headers(),
    );
    // The usage of the stream's last chunk commits; a stream cut short (the client gone)
    // drops the reservation, which commits the estimate.
    let mut reservation = Some(reservation);
    let mut sse = SseUsage::default();
    let metered = body.into_data_stream().map(move |chunk| {
        if let Ok(bytes) = &chunk
            && let Some(total) = sse.feed(bytes)
            && let Some(r) = reservation.take()
        {
            r.commit_later(total);
        }
        chunk
    });
    Response::from_parts(parts, Body::from_stream(metered))
}

/// The answer to a reservation that was not taken.
fn refused(e: ReserveError) -> Response<Body> {
    match e {
        ReserveError::Refused(verdict) => {
            let wait = verdict.retry_after().unwrap_or_default();
            let msg = format!(
                "Rate limit reached for tokens per min. Please try again in {}.",
                flowgate::decision::openai_duration(wait)
            );
            let mut res = error(
                StatusCode::TOO_MANY_REQUESTS,
                "tokens",
                "rate_limit_exceeded",
                msg,
            );
            add(res.headers_mut(), verdict.headers());
            add(res.headers_mut(), verdict.openai_token_headers());
            res
        }
        ReserveError::OverClamp { estimate, max, .. } => error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "max_tokens_too_large",
            format!(
                "this request may take {estimate} tokens (max_tokens, {DEFAULT_MAX_TOKENS} when the request has none, plus the prompt); one request may take at most {max}"
            ),
        ),
        other => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "misconfigured",
            other.to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::SseUsage;

    #[test]
    fn usage_is_read_across_split_chunks() {
        let stream = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\r\n\r\ndata: [DONE]\n\n";
        for split in 1..stream.len() {
            let mut sse = SseUsage::default();
            let a = sse.feed(&stream[..split]);
            let b = sse.feed(&stream[split..]);
            assert_eq!(a.or(b), Some(7), "split at {split}");
        }
    }
}
