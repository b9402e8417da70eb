//! [`ReserveLayer`]: reserves a request's estimated cost before the inner service runs and
//! commits the actual cost from the response.

use std::sync::Arc;

use flowgate_core::{MemoryStore, Store};
use http::HeaderName;
use http::request::Parts;
use tower_layer::Layer;

use super::reject::HttpReject;
use super::reserve_service::ReserveService;
use crate::limiter::Limiter;

/// The header [`Estimate::default_header`] reads: `x-flowgate-estimate`.
pub const ESTIMATE_HEADER: HeaderName = HeaderName::from_static("x-flowgate-estimate");

/// The header or trailer a response's actual cost is read from by default: `x-flowgate-usage`.
pub const USAGE_HEADER: HeaderName = HeaderName::from_static("x-flowgate-usage");

type EstimateFn = dyn Fn(&Parts) -> Option<u64> + Send + Sync;

/// Where [`ReserveLayer`] finds a request's estimated cost.
#[derive(Clone)]
pub struct Estimate {
    source: Source,
    default: Option<u64>,
}

#[derive(Clone)]
enum Source {
    Header(HeaderName),
    With(Arc<EstimateFn>),
}

impl std::fmt::Debug for Estimate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Source::Header(h) => write!(f, "Estimate::header({h})")?,
            Source::With(_) => f.write_str("Estimate::with(..)")?,
        }
        match self.default {
            Some(d) => write!(f, ".or({d})"),
            None => Ok(()),
        }
    }
}

impl Estimate {
    /// The decimal integer in request header `name`.
    pub fn header(name: HeaderName) -> Self {
        Self {
            source: Source::Header(name),
            default: None,
        }
    }

    /// The decimal integer in `x-flowgate-estimate` ([`ESTIMATE_HEADER`]).
    pub fn default_header() -> Self {
        Self::header(ESTIMATE_HEADER)
    }

    /// What `f` reads from the request's head (method, URI, headers, extensions).
    pub fn with(f: impl Fn(&Parts) -> Option<u64> + Send + Sync + 'static) -> Self {
        Self {
            source: Source::With(Arc::new(f)),
            default: None,
        }
    }

    /// The estimate when the request has none (the header is absent, or the function answers
    /// `None`); without it such a request is answered 400. A header that is present but not a
    /// decimal integer is answered 400 all the same.
    pub fn or(mut self, default: u64) -> Self {
        self.default = Some(default);
        self
    }

    /// The estimate of a request's head; `Err` says why there is none.
    pub(crate) fn of(&self, parts: &Parts) -> Result<u64, String> {
        let found = match &self.source {
            Source::Header(name) => match parts.headers.get(name) {
                None => None,
                Some(v) => Some(
                    v.to_str()
                        .ok()
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .ok_or_else(|| {
                            format!("header {name} must be a whole number of units (0 or more)")
                        })?,
                ),
            },
            Source::With(f) => f(parts),
        };
        found.or(self.default).ok_or_else(|| match &self.source {
            Source::Header(name) => format!("header {name} is required: the estimated cost"),
            Source::With(_) => "the request carries no estimated cost".to_owned(),
        })
    }
}

/// Options of [`ReserveLayer`] shared by its services.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) estimate: Estimate,
    pub(crate) usage: HeaderName,
    pub(crate) openai: bool,
}

/// Limits the wrapped service by a cost known only when its response ends (LLM tokens, SMS
/// segments, bytes): reserves each request's estimate with [`Limiter::reserve`] before the
/// inner service runs, and commits the actual cost read from the response.
///
/// - The estimate: [`Estimate`] (a request header, `x-flowgate-estimate` by default, or a
///   function of the request's head). A request without one is answered 400, as is an
///   estimate over the reservation clamp ([`Limiter::set_reserve_share`]); a refused
///   reservation is answered as [`super::RateLimitLayer`] answers a refusal (429 with
///   `Retry-After` and `RateLimit-*`, or the `reject` policy's answer).
/// - The actual cost: the response header or trailer named by [`ReserveLayer::usage`]
///   (`x-flowgate-usage` by default), a decimal integer. A response header is committed before
///   the response is passed on, and the answer's `RateLimit-*` headers then say what is left
///   after it. Otherwise the body is wrapped ([`super::CommitBody`]) and its trailers commit
///   when they arrive (gRPC and streamed answers); the answer's headers say what was left once
///   the estimate was taken. A body that ends without the trailer, or is dropped before its
///   end (a client gone mid-stream), or an inner service that fails, commits the estimate:
///   see [`crate::Reservation`]. A handler that knows it spent nothing answers a usage of 0.
/// - [`ReserveLayer::openai_headers`] adds OpenAI's `x-ratelimit-*-tokens` headers to every
///   answer, refusals included.
///
/// Every rule the request matches must take charges (see [`Limiter::reserve`]): to limit
/// requests per second as well as tokens, put a [`super::RateLimitLayer`] beside this one with
/// a key function of its own.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use axum::{Router, routing::post};
/// use flowgate::layer::{Estimate, ReserveLayer};
/// use flowgate::{Descriptor, Limiter, MemoryStore, Request, RuleSet};
///
/// let limiter = Arc::new(Limiter::new(RuleSet::default(), MemoryStore::new()));
/// let app: Router = Router::new()
///     .route("/v1/complete", post(|| async { ([("x-flowgate-usage", "42")], "done") }))
///     .layer(
///         ReserveLayer::new(limiter, Estimate::default_header().or(1_000), |req: &http::Request<axum::body::Body>| {
///             let key = req.headers().get("x-api-key")?.to_str().ok()?;
///             Some(Request::new("llm", vec![Descriptor::new([("api_key", key)])]))
///         })
///         .openai_headers(true),
///     );
/// ```
pub struct ReserveLayer<K, S: Store = MemoryStore, R = HttpReject> {
    limiter: Arc<Limiter<S>>,
    key: K,
    reject: R,
    options: Options,
}

impl<K: Clone, S: Store, R: Clone> Clone for ReserveLayer<K, S, R> {
    fn clone(&self) -> Self {
        Self {
            limiter: Arc::clone(&self.limiter),
            key: self.key.clone(),
            reject: self.reject.clone(),
            options: self.options.clone(),
        }
    }
}

impl<K, S: Store> ReserveLayer<K, S, HttpReject> {
    /// A layer reserving `estimate` for each request `key` extracts (`None`: not limited),
    /// committing the `x-flowgate-usage` response header or trailer, answering refusals with
    /// HTTP 429.
    pub fn new(limiter: Arc<Limiter<S>>, estimate: Estimate, key: K) -> Self {
        Self {
            limiter,
            key,
            reject: HttpReject,
            options: Options {
                estimate,
                usage: USAGE_HEADER,
                openai: false,
            },
        }
    }
}

impl<K, S: Store, R> ReserveLayer<K, S, R> {
    /// Reads the actual cost from response header or trailer `name` instead.
    pub fn usage(mut self, name: HeaderName) -> Self {
        self.options.usage = name;
        self
    }

    /// Adds OpenAI's token headers (`x-ratelimit-limit-tokens`,
    /// `x-ratelimit-remaining-tokens`, `x-ratelimit-reset-tokens`) to every answer.
    pub fn openai_headers(mut self, on: bool) -> Self {
        self.options.openai = on;
        self
    }

    /// Answers refusals with `reject` instead (e.g. [`super::GrpcReject`] for tonic).
    pub fn with_reject<R2>(self, reject: R2) -> ReserveLayer<K, S, R2> {
        ReserveLayer {
            limiter: self.limiter,
            key: self.key,
            reject,
            options: self.options,
        }
    }
}

impl<Svc, K: Clone, S: Store, R: Clone> Layer<Svc> for ReserveLayer<K, S, R> {
    type Service = ReserveService<Svc, K, S, R>;

    fn layer(&self, inner: Svc) -> Self::Service {
        ReserveService::new(
            inner,
            Arc::clone(&self.limiter),
            self.key.clone(),
            self.reject.clone(),
            self.options.clone(),
        )
    }
}
