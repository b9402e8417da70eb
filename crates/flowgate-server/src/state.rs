//! The state shared by the HTTP and gRPC front ends: the limiter, the metrics, the rules' origin.

use std::path::PathBuf;
use std::sync::Arc;

use flowgate::{Limiter, Request, RuleSet, StoreError, Verdict};
use flowgate_core::{Algorithm, DirectBucket, Limit, Quota};
use parking_lot::Mutex;

use crate::backend::Backend;
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
}

/// Where the rules in force came from.
#[derive(Clone, Debug)]
pub struct RulesInfo {
    /// Incremented on every change.
    pub version: u64,
    /// `file` or `api`.
    pub source: &'static str,
    /// The files read (empty when set through the API).
    pub files: Vec<PathBuf>,
}

/// The most rejection log lines per second (burst 20); the rest are counted, not logged.
const REJECTION_LOGS_PER_SECOND: u64 = 10;

/// The server's shared state.
pub struct AppState {
    /// The limiter.
    pub limiter: Arc<Limiter<Backend>>,
    /// The metrics.
    pub metrics: Metrics,
    /// The admin token for `PUT /v1/rules`; the admin API is disabled without one.
    pub admin_token: Option<String>,
    /// The configuration file or directory.
    pub config_path: Option<PathBuf>,
    info: Mutex<RulesInfo>,
    log_bucket: Option<DirectBucket>,
    /// Serialises rule changes (file reloads and the admin API).
    pub(crate) change: tokio::sync::Mutex<()>,
}

impl AppState {
    /// State over a limiter whose rules came from `files`.
    pub fn new(
        limiter: Limiter<Backend>,
        files: Vec<PathBuf>,
        config_path: Option<PathBuf>,
        admin_token: Option<String>,
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
        Self {
            limiter: Arc::new(limiter),
            metrics,
            admin_token: admin_token.filter(|t| !t.is_empty()),
            config_path,
            info: Mutex::new(RulesInfo {
                version: 1,
                source: "file",
                files,
            }),
            log_bucket,
            change: tokio::sync::Mutex::new(()),
        }
    }

    /// Where the rules in force came from.
    pub fn rules_info(&self) -> RulesInfo {
        self.info.lock().clone()
    }

    /// Puts `rules` in force, atomically; answers the new version.
    pub fn apply_rules(&self, rules: RuleSet, source: &'static str, files: Vec<PathBuf>) -> u64 {
        let count = rules.rules().len();
        self.limiter.set_rules(rules);
        self.metrics.rules.set(count as i64);
        self.metrics.reload(source, true);
        let mut info = self.info.lock();
        info.version += 1;
        info.source = source;
        info.files = files;
        info.version
    }

    /// Counts a request refused as invalid.
    pub fn invalid(&self, api: Api) {
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                api: api.label(),
                code: "invalid",
            })
            .inc();
    }

    /// Decides a (validated) request, and records metrics and rejection logs.
    pub async fn decide(&self, api: Api, request: &Request) -> Verdict {
        let start = quanta::Instant::now();
        let verdict = self.limiter.check(request).await;
        let elapsed = start.elapsed();
        self.metrics
            .latency
            .get_or_create(&ApiLabels { api: api.label() })
            .observe(elapsed.as_secs_f64());
        self.record(api, request, &verdict);
        verdict
    }

    fn record(&self, api: Api, request: &Request, verdict: &Verdict) {
        let m = &self.metrics;
        m.requests
            .get_or_create(&RequestLabels {
                api: api.label(),
                code: if verdict.allowed { "ok" } else { "over_limit" },
            })
            .inc();
        let known = verdict.statuses.iter().any(|s| s.rule.is_some())
            || self.limiter.rules().has_domain(&request.domain);
        let domain = if known {
            request.domain.clone()
        } else {
            "_unknown".to_owned()
        };
        let mut error: Option<&StoreError> = None;
        let mut stored = false;
        for (s, d) in verdict.statuses.iter().zip(&request.descriptors) {
            let (rule, outcome, detailed) = match &s.rule {
                None => (String::new(), "no_rule", false),
                Some(r) if r.limit.is_none() => (r.name.clone(), "unlimited", r.detailed_metric),
                Some(r) => {
                    stored = true;
                    let outcome = if s.decision.allowed {
                        "ok"
                    } else if r.shadow {
                        m.shadow_hits
                            .get_or_create(&RuleLabels {
                                domain: domain.clone(),
                                rule: r.name.clone(),
                            })
                            .inc();
                        "shadow_over_limit"
                    } else {
                        "over_limit"
                    };
                    (r.name.clone(), outcome, r.detailed_metric)
                }
            };
            if let Some(e) = &s.error {
                error = Some(e);
            }
            let descriptor = if detailed {
                let mut t = d.to_string();
                if t.len() > 128 {
                    let mut cut = 128;
                    while !t.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    t.truncate(cut);
                }
                t
            } else {
                String::new()
            };
            m.decisions
                .get_or_create(&DecisionLabels {
                    domain: domain.clone(),
                    rule,
                    outcome,
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
