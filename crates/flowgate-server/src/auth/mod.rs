//! Who may do what: the server's credentials, each granting scopes ([`Scope`]), and the one
//! decision every route and gRPC method goes through (`Auth::authorize`).
//!
//! - **A scope is closed when a credential names it**: its routes then need a credential with
//!   it, a bearer token (`Authorization: Bearer`, HTTP and gRPC metadata alike) or a verified
//!   client certificate whose name a credential maps to (mutual TLS). A scope no credential
//!   names is open — its routes answer anyone who reaches the port, which must then be private
//!   (the server says which at start) — except `admin`, whose routes are off without one.
//!   `admin` also grants `reader`.
//! - **Failed credentials are seen and slowed**: each is counted
//!   (`flowgate_auth_failures_total`) and logged with the route, the source address and the
//!   reason, never the token (at most [`LOG_PER_SECOND`] lines a second; the metric counts
//!   every one); a source that presents too many wrong tokens is refused unread for a while
//!   ([`attempts`]).
//! - **Rotation without a restart**: the credentials file is read again on `SIGHUP` and every
//!   [`RELOAD_EVERY`]; a file that does not parse is logged and the credentials in force stay
//!   (`reload.rs`).

pub mod attempts;
pub mod credentials;
pub(crate) mod reload;
pub mod scope;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use flowgate::algorithm::DirectBucket;
use flowgate::{Algorithm, Limit, Quota};
use flowgate_observe::metrics::{AuthLabels, Metrics};

pub use self::credentials::{Credentials, MIN_TOKEN_LEN};
pub use self::scope::{Scope, Scopes};

/// The most refused credentials logged per second (a burst of twice as many); the rest are
/// counted only.
pub const LOG_PER_SECOND: u64 = 10;
/// How often the credentials file is read again (besides `SIGHUP`).
pub const RELOAD_EVERY: Duration = Duration::from_secs(5);

/// What a request presents.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Presented<'a> {
    /// `Authorization: Bearer <token>`'s token.
    pub(crate) bearer: Option<&'a str>,
    /// The names of the verified client certificate (mutual TLS); empty without one.
    pub(crate) cert_names: &'a [String],
    /// The source address.
    pub(crate) source: Option<IpAddr>,
    /// The route or gRPC method, for the log.
    pub(crate) route: &'a str,
}

/// Who was let in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Grant {
    /// The scope is open: no credential was asked for.
    Open,
    /// The credential of this name.
    Named(String),
}

impl Grant {
    /// The credential's name, or `anonymous` for an open scope.
    pub(crate) fn name(&self) -> &str {
        match self {
            Grant::Open => "anonymous",
            Grant::Named(n) => n,
        }
    }
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The admin routes are off: the server has no admin credential.
    AdminOff,
    /// No credential was presented.
    Missing,
    /// The token is none of the credentials'.
    Wrong,
    /// The credential of this name lacks the scope.
    Forbidden(String),
    /// The source used up its failed attempts; it may try again after this long.
    Slowed(Duration),
}

impl Refusal {
    /// The metric's reasons, one per refusal a credential can meet (an admin route with no admin
    /// credential is not the caller's failure, and is not counted).
    const COUNTED: [&'static str; 4] = ["missing", "wrong", "forbidden", "slowed"];

    /// The metric's and the log's word for it.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Refusal::AdminOff => "admin_off",
            Refusal::Missing => Self::COUNTED[0],
            Refusal::Wrong => Self::COUNTED[1],
            Refusal::Forbidden(_) => Self::COUNTED[2],
            Refusal::Slowed(_) => Self::COUNTED[3],
        }
    }
}

/// The credentials in force and the record of failed attempts.
pub(crate) struct Auth {
    credentials: ArcSwap<Credentials>,
    /// The scopes that need a credential ([`Credentials::requires`]), for the one atomic read
    /// that lets an open route through.
    closed: AtomicU8,
    /// Whether there is any credential: without, no route reads who the caller is, and the
    /// connections need not tell each request ([`crate::peer::Peer`]).
    any: Arc<AtomicBool>,
    attempts: attempts::Attempts,
    logs: DirectBucket,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("credentials", &self.credentials.load())
            .finish_non_exhaustive()
    }
}

/// The bits of the scopes `creds` closes.
fn closed(creds: &Credentials) -> u8 {
    Scope::ALL
        .into_iter()
        .filter(|s| creds.requires(*s))
        .fold(0, |bits, s| bits | Scopes::from(s).bits())
}

fn log_bucket() -> DirectBucket {
    let limit = Quota::per_second(LOG_PER_SECOND)
        .ok()
        .and_then(|q| {
            Limit::builder(Algorithm::TokenBucket, q)
                .burst(2 * LOG_PER_SECOND)
                .build()
                .ok()
        })
        .and_then(DirectBucket::new);
    limit.unwrap_or_else(|| unreachable!("a token bucket of LOG_PER_SECOND is valid"))
}

impl Auth {
    /// `credentials` in force, failures counted into `metrics`.
    pub(crate) fn new(credentials: Credentials, metrics: Arc<Metrics>) -> Self {
        announce(&credentials);
        // Every series exists at 0 from the start, so that the first failure shows as an increase.
        for scope in Scope::ALL {
            for reason in Refusal::COUNTED {
                let _ = metrics.auth_failures.get_or_create(&AuthLabels {
                    scope: scope.name(),
                    reason,
                });
            }
        }
        Self {
            closed: AtomicU8::new(closed(&credentials)),
            any: Arc::new(AtomicBool::new(!credentials.is_empty())),
            credentials: ArcSwap::from_pointee(credentials),
            attempts: attempts::Attempts::default(),
            logs: log_bucket(),
            metrics,
        }
    }

    /// Puts `credentials` in force (a reload).
    pub(crate) fn replace(&self, credentials: Credentials) {
        announce(&credentials);
        let bits = closed(&credentials);
        // Peers first: a request let through by the new credentials already carries its own.
        self.any.store(!credentials.is_empty(), Ordering::Release);
        self.credentials.store(Arc::new(credentials));
        self.closed.store(bits, Ordering::Release);
    }

    /// Whether the server has any credential, shared with the connections, which tell each
    /// request who sent it only while it does.
    pub(crate) fn any(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.any)
    }

    /// The credentials in force, to tell later whether they were replaced since
    /// ([`Auth::replaced_since`]).
    pub(crate) fn in_force(&self) -> Arc<Credentials> {
        self.credentials.load_full()
    }

    /// Whether the credentials in force are no longer `seen` (a reload came since).
    pub(crate) fn replaced_since(&self, seen: &Arc<Credentials>) -> bool {
        !Arc::ptr_eq(seen, &self.credentials.load())
    }

    /// Whether the routes of `scope` answer anyone (no credential names the scope).
    #[inline]
    pub(crate) fn is_open(&self, scope: Scope) -> bool {
        self.closed.load(Ordering::Acquire) & Scopes::from(scope).bits() == 0
    }

    /// Lets a request that presents `p` call a route of `scope`, or says why not (counted and
    /// logged).
    pub(crate) fn authorize(&self, scope: Scope, p: &Presented<'_>) -> Result<Grant, Refusal> {
        let creds = self.credentials.load();
        if !creds.requires(scope) {
            return Ok(Grant::Open);
        }
        let outcome = decide(&creds, &self.attempts, scope, p);
        if let Err(refusal) = &outcome {
            self.refused(scope, p, refusal);
        }
        outcome
    }

    /// Whether `p` holds a credential with `scope`, for a route that shows more to it
    /// (`GET /v1/rules` shows its URLs' secrets to an admin). Presenting none, or one without the
    /// scope, is no failure; a wrong token is one (counted, logged, slowed).
    pub(crate) fn holds(&self, scope: Scope, p: &Presented<'_>) -> bool {
        if p.bearer.is_none_or(str::is_empty) && p.cert_names.is_empty() {
            return false;
        }
        match decide(&self.credentials.load(), &self.attempts, scope, p) {
            Ok(_) => true,
            Err(r @ (Refusal::Wrong | Refusal::Slowed(_))) => {
                self.refused(scope, p, &r);
                false
            }
            Err(_) => false,
        }
    }

    fn refused(&self, scope: Scope, p: &Presented<'_>, refusal: &Refusal) {
        if *refusal == Refusal::AdminOff {
            return;
        }
        self.metrics
            .auth_failures
            .get_or_create(&AuthLabels {
                scope: scope.name(),
                reason: refusal.reason(),
            })
            .inc();
        if !self.logs.check(1).allowed {
            return;
        }
        let source = p.source.map(|s| s.to_string());
        let source = source.as_deref().unwrap_or("unknown");
        match refusal {
            Refusal::Forbidden(name) => tracing::warn!(
                route = p.route, source, scope = scope.name(), credential = %name,
                "credential refused: it lacks the route's scope"
            ),
            Refusal::Slowed(wait) => tracing::warn!(
                route = p.route,
                source,
                scope = scope.name(),
                retry_after_ms = wait.as_millis() as u64,
                "credential refused unread: too many wrong tokens from this source"
            ),
            _ => tracing::warn!(
                route = p.route,
                source,
                scope = scope.name(),
                reason = refusal.reason(),
                "credential refused"
            ),
        }
    }
}

/// The decision of [`Auth::authorize`] on a closed scope: a client certificate first (it cannot
/// be guessed), then, unless the source is being slowed, the bearer token.
fn decide(
    creds: &Credentials,
    attempts: &attempts::Attempts,
    scope: Scope,
    p: &Presented<'_>,
) -> Result<Grant, Refusal> {
    if scope == Scope::Admin && !creds.has(Scope::Admin) {
        return Err(Refusal::AdminOff);
    }
    let by_cert = creds.certificate(p.cert_names);
    if let Some((name, scopes)) = by_cert
        && scopes.contains(scope)
    {
        return Ok(Grant::Named(name.to_owned()));
    }
    let Some(token) = p.bearer.filter(|t| !t.is_empty()) else {
        return Err(match by_cert {
            Some((name, _)) => Refusal::Forbidden(name.to_owned()),
            None => Refusal::Missing,
        });
    };
    if let Some(source) = p.source
        && let Err(wait) = attempts.check(source)
    {
        return Err(Refusal::Slowed(wait));
    }
    match creds.token(token) {
        Some((name, scopes)) if scopes.contains(scope) => Ok(Grant::Named(name.to_owned())),
        Some((name, _)) => Err(Refusal::Forbidden(name.to_owned())),
        None => {
            if let Some(source) = p.source {
                attempts.failed(source);
            }
            Err(Refusal::Wrong)
        }
    }
}

/// Logs the credentials put in force (their names and scopes), and in one warning the scopes
/// they leave open.
fn announce(creds: &Credentials) {
    tracing::info!(
        credentials = ?creds.summary(),
        admin_routes = if creds.has(Scope::Admin) { "on" } else { "off: no admin credential" },
        "credentials in force"
    );
    let open: Vec<String> = Scope::ALL
        .into_iter()
        .filter(|s| !creds.requires(*s))
        .map(|s| format!("{s} ({})", s.routes()))
        .collect();
    if !open.is_empty() {
        tracing::warn!(
            open = %open.join("; "),
            "no credential names these scopes: their routes answer anyone who reaches the port, which must then be private"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "admin-token-admin-token-admin-token";
    const WORKER: &str = "worker-token-worker-token-worker-token";

    fn auth() -> Auth {
        let mut c = Credentials::new();
        c.add_token("ops", Scope::Admin, ADMIN).unwrap();
        c.add_token("refunds", Scope::Worker, WORKER).unwrap();
        c.add_subject("envoy", Scope::Decide, "spiffe://t/envoy")
            .unwrap();
        Auth::new(c, Arc::new(Metrics::new()))
    }

    fn with(bearer: &str) -> Presented<'_> {
        Presented {
            bearer: Some(bearer),
            source: Some("192.0.2.1".parse().unwrap()),
            route: "/test",
            ..Presented::default()
        }
    }

    #[test]
    fn each_scope_by_its_credentials() {
        let a = auth();
        assert_eq!(
            a.authorize(Scope::Admin, &with(ADMIN)),
            Ok(Grant::Named("ops".into()))
        );
        assert_eq!(
            a.authorize(Scope::Reader, &with(ADMIN)),
            Ok(Grant::Open),
            "reader is open: no credential names it"
        );
        assert_eq!(
            a.authorize(Scope::Worker, &with(ADMIN)),
            Err(Refusal::Forbidden("ops".into()))
        );
        assert_eq!(
            a.authorize(Scope::Admin, &with(WORKER)),
            Err(Refusal::Forbidden("refunds".into()))
        );
        assert_eq!(
            a.authorize(Scope::Worker, &Presented::default()),
            Err(Refusal::Missing)
        );
        assert_eq!(
            a.authorize(Scope::Reporter, &Presented::default()),
            Ok(Grant::Open)
        );
        let names = ["spiffe://t/envoy".to_owned()];
        let cert = Presented {
            cert_names: &names,
            ..Presented::default()
        };
        assert_eq!(
            a.authorize(Scope::Decide, &cert),
            Ok(Grant::Named("envoy".into()))
        );
        assert_eq!(
            a.authorize(Scope::Worker, &cert),
            Err(Refusal::Forbidden("envoy".into()))
        );
        assert_eq!(a.authorize(Scope::Decide, &with("x")), Err(Refusal::Wrong));
    }

    #[test]
    fn admin_is_off_without_an_admin_credential() {
        let a = Auth::new(Credentials::new(), Arc::new(Metrics::new()));
        assert_eq!(
            a.authorize(Scope::Admin, &with(ADMIN)),
            Err(Refusal::AdminOff)
        );
        assert_eq!(a.authorize(Scope::Worker, &with("")), Ok(Grant::Open));
    }

    #[test]
    fn a_guessing_source_is_refused_unread_even_with_the_right_token() {
        let a = auth();
        for _ in 0..attempts::BUDGET {
            assert_eq!(
                a.authorize(Scope::Worker, &with("guess")),
                Err(Refusal::Wrong)
            );
        }
        assert!(matches!(
            a.authorize(Scope::Worker, &with(WORKER)),
            Err(Refusal::Slowed(_))
        ));
        let elsewhere = Presented {
            source: Some("192.0.2.2".parse().unwrap()),
            ..with(WORKER)
        };
        assert!(a.authorize(Scope::Worker, &elsewhere).is_ok());
        let counted = a
            .metrics
            .auth_failures
            .get_or_create(&AuthLabels {
                scope: "worker",
                reason: "wrong",
            })
            .get();
        assert_eq!(counted, attempts::BUDGET);
    }
}
