//! The state shared by the HTTP and gRPC front ends: the limiter, the metrics, the rules' origin.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use flowgate::{Limiter, Request, RuleSet, StoreError, Verdict};
use flowgate_core::{Algorithm, DirectBucket, Limit, Quota, Rule};
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use crate::backend::{Backend, QueueBackend};
use crate::metrics::{ApiLabels, DecisionLabels, KindLabels, Metrics, RequestLabels, RuleLabels};

/// Which front end a request came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// Envoy's rate-limit service over gRPC.
    Grpc,
    /// The HTTP/JSON API.
    Http,
}

impl Api {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Api::Grpc => "grpc",
            Api::Http => "http",
        }
    }

    fn index(self) -> usize {
        match self {
            Api::Grpc => 0,
            Api::Http => 1,
        }
    }
}

/// `flowgate_requests_total`'s `code` labels, by index.
const CODES: [&str; 3] = ["ok", "over_limit", "invalid"];
/// `flowgate_decisions_total`'s `outcome` labels of a rule, by index.
const OUTCOMES: [&str; 3] = ["ok", "over_limit", "shadow_over_limit"];
const UNLIMITED: usize = 3;
/// At most this many rules' counters are cached (beyond, the labelled lookup is used).
const MAX_CACHED_RULES: usize = 65_536;

/// The metric series touched by every request, resolved once: the hot path neither builds label
/// sets (no allocation, no hashing of strings) nor takes the families' locks.
#[derive(Default)]
struct Hot {
    /// `flowgate_requests_total` by API and code.
    requests: [[OnceLock<Counter>; 3]; 2],
    /// `flowgate_decision_duration_seconds` by API.
    latency: [OnceLock<Histogram>; 2],
    /// `flowgate_decisions_total` of rules without `detailed_metric`, by the rule's address
    /// (cleared when the rules change).
    rules: RwLock<HashMap<usize, RuleCounters>>,
}

/// One rule's `flowgate_decisions_total` series, by outcome (`OUTCOMES`, then `unlimited`).
struct RuleCounters {
    /// Keeps the rule alive, so that its address (the key) is not reused while cached.
    _rule: Arc<Rule>,
    outcomes: [OnceLock<Counter>; 4],
}

/// Where the rules in force came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RulesOrigin {
    /// The configuration files (the node follows its files).
    Files,
    /// `PUT /v1/rules` on a node that follows its files (until the files change).
    Api,
    /// A version of the rules shared through Redis (the node follows Redis).
    Redis {
        /// The version (0: none could be read; the node serves its files).
        version: u64,
        /// Who stored it.
        author: String,
        /// When, by Redis's clock (ms since the Unix epoch).
        at_ms: u64,
        /// Why the node may not be on the version in force (Redis unreachable, a version
        /// invalid on this node), if it may not.
        problem: Option<String>,
    },
}

/// The rules in force: their version and origin.
#[derive(Clone, Debug)]
pub struct RulesInfo {
    /// Following files: incremented on every change. Following Redis: the shared version.
    pub version: u64,
    /// Where they came from.
    pub origin: RulesOrigin,
    /// The files read (empty when set through the API or Redis).
    pub files: Vec<PathBuf>,
}

impl RulesInfo {
    /// `file`, `api` or `redis`.
    pub fn source(&self) -> &'static str {
        match self.origin {
            RulesOrigin::Files => "file",
            RulesOrigin::Api => "api",
            RulesOrigin::Redis { .. } => "redis",
        }
    }

    /// What the node follows: `files` or `redis`.
    pub fn follows(&self) -> &'static str {
        match self.origin {
            RulesOrigin::Redis { .. } => "redis",
            _ => "files",
        }
    }

    /// Why the node may not be on the shared version in force.
    pub fn problem(&self) -> Option<&str> {
        match &self.origin {
            RulesOrigin::Redis { problem, .. } => problem.as_deref(),
            _ => None,
        }
    }
}

/// The most rejection log lines per second (burst 20); the rest are counted, not logged.
const REJECTION_LOGS_PER_SECOND: u64 = 10;

/// The server's shared state.
pub struct AppState {
    /// The limiter.
    pub limiter: Arc<Limiter<Backend>>,
    /// The shaped queues.
    pub queue: Arc<flowgate::Queue<QueueBackend>>,
    /// The metrics.
    pub metrics: Metrics,
    /// The admin API's tokens; the admin API is disabled without one.
    pub admin: crate::tokens::AdminTokens,
    /// The rules shared through Redis, when the node follows them.
    pub follower: Option<Arc<crate::rules::follow::Follower>>,
    /// The configuration file or directory.
    pub config_path: Option<PathBuf>,
    info: Mutex<RulesInfo>,
    log_bucket: Option<DirectBucket>,
    /// Serialises rule changes (file reloads and the admin API).
    pub(crate) change: tokio::sync::Mutex<()>,
    hot: Hot,
    /// The `descriptor` labels given so far, by rule (bounded).
    labels: Mutex<HashMap<String, std::collections::HashSet<String>>>,
    /// Whether gRPC answers carry `RateLimit-*` headers for Envoy to add.
    pub response_headers: bool,
}

impl AppState {
    /// State over a limiter whose rules came from `files`.
    pub fn new(
        limiter: Limiter<Backend>,
        queue: flowgate::Queue<QueueBackend>,
        files: Vec<PathBuf>,
        config_path: Option<PathBuf>,
        admin: crate::tokens::AdminTokens,
    ) -> Self {
        let metrics = Metrics::new();
        metrics.rules.set(limiter.rules().rules().len() as i64);
        let log_bucket = Quota::per_second(REJECTION_LOGS_PER_SECOND)
            .ok()
            .and_then(|q| {
                Limit::builder(Algorithm::TokenBucket, q)
                    .burst(20)
                    .build()
                    .ok()
            })
            .and_then(DirectBucket::new);
        metrics.queues.set(queue.specs().specs().len() as i64);
        Self {
            limiter: Arc::new(limiter),
            queue: Arc::new(queue),
            metrics,
            admin,
            follower: None,
            config_path,
            info: Mutex::new(RulesInfo {
                version: 1,
                origin: RulesOrigin::Files,
                files,
            }),
            log_bucket,
            change: tokio::sync::Mutex::new(()),
            hot: Hot::default(),
            labels: Mutex::new(HashMap::new()),
            response_headers: false,
        }
    }

    /// Where the rules in force came from.
    pub fn rules_info(&self) -> RulesInfo {
        self.info.lock().clone()
    }

    /// Puts `rules` in force, atomically; answers the new version.
    pub fn apply_rules(&self, rules: RuleSet, origin: RulesOrigin, files: Vec<PathBuf>) -> u64 {
        let count = rules.rules().len();
        self.limiter.set_rules(rules);
        self.hot.rules.write().clear();
        self.metrics.rules.set(count as i64);
        let mut info = self.info.lock();
        info.version = match &origin {
            RulesOrigin::Redis { version, .. } => *version,
            _ => info.version + 1,
        };
        info.origin = origin;
        self.metrics.reload(info.source(), true);
        info.files = files;
        info.version
    }

    /// Sets the rules' origin without changing them (a node starting from Redis, its cache or
    /// its files).
    pub fn set_rules_origin(&self, origin: RulesOrigin) {
        let mut info = self.info.lock();
        if let RulesOrigin::Redis { version, .. } = &origin {
            info.version = *version;
        }
        info.origin = origin;
    }

    /// Records why a node following Redis may not be on the version in force (`None`: it is).
    pub fn set_rules_problem(&self, why: Option<String>) {
        let mut info = self.info.lock();
        if let RulesOrigin::Redis { problem, .. } = &mut info.origin
            && *problem != why
        {
            match &why {
                Some(p) => {
                    tracing::warn!(problem = %p, "rules: this node may not be on the version in force")
                }
                None => tracing::info!("rules: in sync with Redis again"),
            }
            *problem = why;
        }
    }

    /// Puts `queues` in force (from the configuration files).
    pub fn apply_queues(&self, queues: flowgate::queue::QueueSet) {
        self.metrics.queues.set(queues.specs().len() as i64);
        self.queue.set_specs(queues);
    }

    /// Counts a request refused as invalid.
    pub fn invalid(&self, api: Api) {
        self.count_request(api, 2);
    }

    /// Counts a request with `CODES[code]`.
    fn count_request(&self, api: Api, code: usize) {
        self.hot.requests[api.index()][code]
            .get_or_init(|| {
                self.metrics
                    .requests
                    .get_or_create(&RequestLabels {
                        api: api.label(),
                        code: CODES[code],
                    })
                    .clone()
            })
            .inc();
    }

    /// Counts a decision of `rule` (without `detailed_metric`) with outcome `outcome` (an index
    /// into `OUTCOMES`, or `UNLIMITED`).
    fn count_rule(&self, domain: &str, rule: &Arc<Rule>, outcome: usize) {
        let key = Arc::as_ptr(rule) as usize;
        let resolve = || {
            self.metrics
                .decisions
                .get_or_create(&DecisionLabels {
                    domain: domain.to_owned(),
                    rule: rule.name.clone(),
                    outcome: OUTCOMES.get(outcome).copied().unwrap_or("unlimited"),
                    descriptor: String::new(),
                })
                .clone()
        };
        if let Some(c) = self.hot.rules.read().get(&key) {
            c.outcomes[outcome].get_or_init(resolve).inc();
            return;
        }
        let counter = resolve();
        counter.inc();
        let mut cache = self.hot.rules.write();
        if cache.len() < MAX_CACHED_RULES {
            let c = cache.entry(key).or_insert_with(|| RuleCounters {
                _rule: Arc::clone(rule),
                outcomes: Default::default(),
            });
            let _ = c.outcomes[outcome].set(counter);
        }
    }

    /// Decides a (validated) request, and records metrics and rejection logs.
    pub async fn decide(&self, api: Api, request: &Request) -> Verdict {
        let start = quanta::Instant::now();
        let verdict = self.limiter.check(request).await;
        let elapsed = start.elapsed();
        self.hot.latency[api.index()]
            .get_or_init(|| {
                self.metrics
                    .latency
                    .get_or_create(&ApiLabels { api: api.label() })
                    .clone()
            })
            .observe(elapsed.as_secs_f64());
        self.record(api, request, &verdict);
        verdict
    }

    fn record(&self, api: Api, request: &Request, verdict: &Verdict) {
        let m = &self.metrics;
        self.count_request(api, if verdict.allowed { 0 } else { 1 });
        let known = verdict.statuses.iter().any(|s| s.rule.is_some())
            || self.limiter.rules().has_domain(&request.domain);
        let domain = if known {
            request.domain.as_str()
        } else {
            "_unknown"
        };
        let mut error: Option<&StoreError> = None;
        let mut stored = false;
        for (s, d) in verdict.statuses.iter().zip(&request.descriptors) {
            if let Some(e) = &s.error {
                error = Some(e);
            }
            let (rule, outcome) = match &s.rule {
                None => {
                    m.decisions
                        .get_or_create(&DecisionLabels {
                            domain: domain.to_owned(),
                            rule: String::new(),
                            outcome: "no_rule",
                            descriptor: String::new(),
                        })
                        .inc();
                    continue;
                }
                Some(r) if !s.is_limited() => (r, UNLIMITED),
                Some(r) => {
                    stored = true;
                    let outcome = if s.decision.allowed {
                        0
                    } else if r.shadow || verdict.shadowed {
                        m.shadow_hits
                            .get_or_create(&RuleLabels {
                                domain: domain.to_owned(),
                                rule: r.name.clone(),
                            })
                            .inc();
                        2
                    } else {
                        1
                    };
                    (r, outcome)
                }
            };
            let Some(label) = crate::metrics::descriptor_label(rule, d) else {
                self.count_rule(domain, rule, outcome);
                continue;
            };
            let descriptor = self.bounded_label(domain, rule, label);
            m.decisions
                .get_or_create(&DecisionLabels {
                    domain: domain.to_owned(),
                    rule: rule.name.clone(),
                    outcome: OUTCOMES.get(outcome).copied().unwrap_or("unlimited"),
                    descriptor,
                })
                .inc();
        }
        match error {
            Some(e) => {
                let kind = match e {
                    StoreError::Timeout => "timeout",
                    StoreError::Unavailable(_) => "unavailable",
                    StoreError::KeyCapacity => "capacity",
                    _ => "internal",
                };
                m.store_errors.get_or_create(&KindLabels { kind }).inc();
                m.store_degraded.set(1);
            }
            None if stored => {
                m.store_degraded.set(0);
            }
            None => {}
        }
        if !verdict.allowed {
            self.log_rejection(request, verdict);
        }
    }

    /// `label`, or `_other` once the rule has [`crate::metrics::MAX_DESCRIPTOR_LABELS`] others.
    fn bounded_label(&self, domain: &str, rule: &Rule, label: String) -> String {
        let mut seen = self.labels.lock();
        let set = seen.entry(format!("{domain}:{}", rule.name)).or_default();
        if set.contains(&label) {
            return label;
        }
        if set.len() >= crate::metrics::MAX_DESCRIPTOR_LABELS {
            return "_other".into();
        }
        set.insert(label.clone());
        label
    }

    fn log_rejection(&self, request: &Request, verdict: &Verdict) {
        let allowed = self.log_bucket.as_ref().is_none_or(|b| b.check(1).allowed);
        if !allowed {
            self.metrics.logs_suppressed.inc();
            return;
        }
        let Some((i, s)) = verdict
            .statuses
            .iter()
            .enumerate()
            .find(|(_, s)| s.blocks())
            .or_else(|| {
                verdict
                    .statuses
                    .iter()
                    .enumerate()
                    .find(|(_, s)| s.over_limit())
            })
        else {
            return;
        };
        let rule = s.rule.as_ref().map(|r| r.name.as_str()).unwrap_or("");
        let descriptor = request
            .descriptors
            .get(i)
            .map(ToString::to_string)
            .unwrap_or_default();
        tracing::info!(
            target: "flowgate::rejections",
            domain = %request.domain,
            rule,
            %descriptor,
            limit = s.decision.limit,
            retry_after_ms = verdict.retry_after().map(|d| d.as_millis() as u64),
            "request over limit"
        );
    }
}
