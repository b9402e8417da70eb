//! How a rejected request is answered.

use http::{HeaderValue, Response, StatusCode};

use crate::verdict::Verdict;

/// Builds the response to a rejected request.
pub trait Reject<B>: Clone + Send + Sync + 'static {
    /// The response for `verdict`.
    fn reject(&self, verdict: &Verdict) -> Response<B>;
}

fn with_headers<B>(mut res: Response<B>, verdict: &Verdict) -> Response<B> {
    for (name, value) in verdict.headers() {
        if let Ok(v) = HeaderValue::from_str(&value) {
            res.headers_mut().insert(name, v);
        }
    }
    res
}

/// HTTP 429 with `RateLimit-*` and `Retry-After` headers and a JSON body
/// `{"error":"rate_limited","rule":…,"retry_after_ms":…}` (`"error":"circuit_open"` and
/// `"breaker"` instead of `"rule"` when an open circuit breaker refused it).
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpReject;

impl<B: From<String>> Reject<B> for HttpReject {
    fn reject(&self, verdict: &Verdict) -> Response<B> {
        let rule = verdict
            .binding()
            .and_then(|s| s.rule.as_ref())
            .map(|r| r.name.clone());
        let body = match verdict.circuit_open() {
            Some(b) => serde_json::json!({
                "error": "circuit_open",
                "breaker": b.name,
                "retry_after_ms": verdict.retry_after().map(|d| d.as_millis() as u64),
            }),
            None => serde_json::json!({
            "error": "rate_limited",
            "rule": rule,
            "retry_after_ms": verdict.retry_after().map(|d| d.as_millis() as u64),
            }),
        };
        let mut res = Response::new(B::from(body.to_string()));
        *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        res.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        with_headers(res, verdict)
    }
}

/// A gRPC `RESOURCE_EXHAUSTED` (code 8) trailers-only response, with the `RateLimit-*` headers.
#[derive(Clone, Copy, Debug, Default)]
pub struct GrpcReject;

impl<B: Default> Reject<B> for GrpcReject {
    fn reject(&self, verdict: &Verdict) -> Response<B> {
        let mut res = Response::new(B::default());
        let h = res.headers_mut();
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        h.insert("grpc-status", HeaderValue::from_static("8"));
        h.insert("grpc-message", HeaderValue::from_static("rate%20limited"));
        with_headers(res, verdict)
    }
}
