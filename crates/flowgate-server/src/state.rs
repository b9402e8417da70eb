//! The server's state, shared by the HTTP and gRPC front ends: its parts, each a type of its own
//! — the limiter and the queues, the rules in force ([`RulesInForce`]), the recording of
//! decisions ([`Recorder`]), the admin tokens — and the request path through them.

use std::sync::Arc;

use flowgate::queue::Queue;
use flowgate::{Limiter, Request, Verdict};

use crate::backend::{Backend, QueueBackend};
use crate::eviction::Eviction;
use flowgate_config::alert::AlertSet;
pub(crate) use flowgate_observe::Api;

use crate::auth::{Auth, Credentials};
use crate::rules::follow::Follower;
use crate::rules::{RulesInForce, RulesInfo};
use flowgate_observe::alerts::Alerts;
use flowgate_observe::metrics::Metrics;
use flowgate_observe::stats::Sources;
use flowgate_observe::view::RulesInfoView;
use flowgate_observe::{Recorder, Stats};

/// The server's shared state.
pub(crate) struct AppState {
    /// The limiter.
    pub(crate) limiter: Arc<Limiter<Backend>>,
    /// The shaped queues.
    pub(crate) queue: Arc<Queue<QueueBackend>>,
    /// The rules in force, and the one way to change them.
    pub(crate) rules: Arc<RulesInForce>,
    /// The alerts in force and their states.
    pub(crate) alerts: Arc<Alerts>,
    /// Records decisions into the metrics and the rejection log.
    pub(crate) recorder: Arc<Recorder>,
    /// The figures of the dashboard, the alerts and `/v1/stats` (which the recorder counts).
    pub(crate) stats: Arc<Stats>,
    /// The metrics (those the recorder records into).
    pub(crate) metrics: Arc<Metrics>,
    /// The credentials in force, and who may call which route.
    pub(crate) auth: Arc<Auth>,
    /// The rules shared through Redis, when the node follows them.
    pub(crate) follower: Option<Arc<Follower>>,
    /// Whether gRPC answers carry `RateLimit-*` headers for Envoy to add.
    pub(crate) response_headers: bool,
    /// Domains whose rules take a gRPC request's cost as a charge, as `charge = "report"` does
    /// (`--charge-domains`, for envoyproxy/ratelimit YAML rules).
    pub(crate) charge_domains: Vec<String>,
    /// What may go wrong with Redis's eviction policy, shown by `/readyz`.
    pub(crate) eviction: Arc<Eviction>,
    /// Starting, serving or draining: what `/readyz` answers.
    pub(crate) lifecycle: crate::probes::Lifecycle,
    /// The reservations: their records and clamps.
    pub(crate) reserve: crate::reserve::Reserve,
    /// Whether HTTP decision answers carry OpenAI's `x-ratelimit-*-tokens` headers.
    pub(crate) openai_headers: bool,
}

impl AppState {
    /// State over a limiter, queues and alerts whose rules came from `info`'s origin.
    pub(crate) fn new(
        limiter: Limiter<Backend>,
        queue: Queue<QueueBackend>,
        alerts: AlertSet,
        info: RulesInfo,
        credentials: Credentials,
        stats: Stats,
    ) -> Self {
        let queue = Arc::new(queue);
        let metrics = Arc::new(Metrics::new());
        let eviction = Arc::new(Eviction::new(metrics.redis_eviction_risk.clone()));
        let counted = Arc::clone(&metrics);
        limiter
            .breakers()
            .on_transition(move |e| counted.breakers.transition(e));
        let reserve = crate::reserve::Reserve::new(
            crate::reserve::Records::for_backend(limiter.store()),
            crate::reserve::ReserveConfig::default(),
        );
        let limiter = Arc::new(limiter);
        let stats = Arc::new(stats);
        let recorder = Arc::new(Recorder::new(Arc::clone(&metrics), Arc::clone(&stats)));
        let alerts = Arc::new(Alerts::new(
            alerts,
            flowgate_observe::alerts::delivery::Delivery::default(),
            Arc::clone(&metrics),
        ));
        let rules = Arc::new(RulesInForce::new(
            Arc::clone(&limiter),
            Arc::clone(&queue),
            Arc::clone(&alerts),
            Arc::clone(&recorder),
            info,
        ));
        Self {
            limiter,
            queue,
            rules,
            alerts,
            recorder,
            stats,
            auth: Arc::new(Auth::new(credentials, Arc::clone(&metrics))),
            metrics,
            follower: None,
            response_headers: false,
            charge_domains: Vec::new(),
            eviction,
            lifecycle: crate::probes::Lifecycle::default(),
            reserve,
            openai_headers: false,
        }
    }

    /// Counts a request refused as invalid.
    pub(crate) fn invalid(&self, api: Api) {
        self.recorder.invalid(api);
    }

    /// Decides a (validated) request, and records it.
    pub(crate) async fn decide(&self, api: Api, request: &Request) -> Verdict {
        let start = quanta::Instant::now();
        let verdict = self.limiter.check(request).await;
        let elapsed = start.elapsed();
        self.recorder
            .record(api, request, &verdict, elapsed, || self.limiter.rules());
        verdict
    }
}

impl AppState {
    /// [`AppState::decide`], writing `pending`'s record with the decision when the store can
    /// ([`flowgate::Limiter::check_recorded`]); answers the record written, if it was.
    pub(crate) async fn decide_recorded(
        &self,
        api: Api,
        request: &Request,
        pending: &flowgate::PendingRecord,
    ) -> (Verdict, Option<flowgate::records::Reservation>) {
        let start = quanta::Instant::now();
        let (verdict, recorded) = self.limiter.check_recorded(request, pending).await;
        let elapsed = start.elapsed();
        self.recorder
            .record(api, request, &verdict, elapsed, || self.limiter.rules());
        (verdict, recorded)
    }
}

impl Sources for AppState {
    fn rules(&self) -> Arc<flowgate::RuleSet> {
        self.limiter.rules()
    }

    fn now(&self) -> u64 {
        flowgate::store::Store::now(self.limiter.store())
    }

    fn adaptive_limits(&self, domain: &str, rule: &str) -> Vec<flowgate::adaptive::AdaptiveView> {
        self.limiter.adaptive().limits(domain, rule)
    }

    fn breakers(&self) -> Vec<flowgate::breakers::BreakerView> {
        self.limiter.breakers().views().0
    }

    fn rules_info(&self) -> RulesInfoView {
        let info = self.rules.info();
        RulesInfoView {
            version: info.version,
            source: info.source().to_owned(),
        }
    }

    fn store_degraded(&self) -> bool {
        self.metrics.store_degraded.get() != 0
    }

    fn refresh_store(&self) {
        crate::probes::refresh(self);
    }

    fn rule_debt(&self, domain: &str, rule: &str) -> u64 {
        self.metrics.charges.rule_debt(domain, rule, self.now())
    }

    fn key_debts(
        &self,
        domain: &str,
        rule: &str,
    ) -> Vec<(String, flowgate_observe::charges::KeyDebt)> {
        self.metrics.charges.key_debts(domain, rule, self.now())
    }

    fn store_topology(&self) -> Option<flowgate_observe::topology::StoreTopology> {
        match self.limiter.store() {
            crate::backend::Backend::Redis(r) => Some((&r.topology()).into()),
            crate::backend::Backend::Memory(_) => None,
        }
    }
}
