//! Reserve and commit (`POST /v1/reserve`, `/v1/commit`): an estimate taken at request time by
//! an ordinary all-or-nothing decision, and the actual cost applied when the work ends.
//!
//! - A reservation's units are in the counters (on Redis, the cluster's), so admission counts
//!   every outstanding reservation: counter + outstanding + estimate ≤ limit.
//! - Its record ([`flowgate::records`]) is claimed exactly once: by its commit, which
//!   gives the estimate back ([`Amount::release`]) and charges the actual cost in one
//!   [`Store::charge`] batch per rule (on a single Redis, in the claim's own script: [`atomic`]),
//!   or at its expiry by one node's sweeper ([`sweep`]), which gives the estimate back.
//! - Its record stays a tombstone until its expiry plus the maximum TTL: a commit after the
//!   expiry still charges its cost (and says it expired); a second commit is refused.
//! - A reservation is clamped: its estimate to a share of each matched rule's limit
//!   (`--reserve-max-share`), its TTL to `--reserve-max-ttl`.

mod atomic;
mod records;
pub(crate) mod sweep;

use std::time::Duration;

use flowgate::algorithm::{Amount, Charged, chargeable};
use flowgate::clock::Micros;
use flowgate::clock::micros;
use flowgate::records::{Claim, Reservation, ReservationId, Reservations, Reserved};
use flowgate::store::ChargeItem;
use flowgate::store::{Store, StoreError};
use flowgate::{Limit, PendingRecord, Request, RuleSet, Verdict};
use flowgate_observe::reservations::ReservationsView;

pub(crate) use self::records::Records;
use crate::state::{Api, AppState};

/// limitador's clamp: a reservation takes at most half of a rule's limit.
pub const DEFAULT_MAX_SHARE: f64 = 0.5;
/// limitador's clamp: a reservation lives at most a minute.
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(60);

/// The clamps of reservations.
#[derive(Clone, Copy, Debug)]
pub struct ReserveConfig {
    /// The largest estimate, as a share of each matched rule's limit (0 < share ≤ 1).
    pub max_share: f64,
    /// The longest TTL, and the TTL of a reservation that names none.
    pub max_ttl: Duration,
}

impl Default for ReserveConfig {
    fn default() -> Self {
        Self {
            max_share: DEFAULT_MAX_SHARE,
            max_ttl: DEFAULT_MAX_TTL,
        }
    }
}

/// The server's reservations: their records and clamps.
pub(crate) struct Reserve {
    pub(crate) records: Records,
    pub(crate) config: ReserveConfig,
    /// The outstanding reservations per rule as last read (by the sweeper, each second).
    outstanding: parking_lot::Mutex<Vec<ReservationsView>>,
    /// The reservations this node made on Redis, until committed here ([`atomic`]).
    recent: atomic::Recent,
}

/// Why a reservation or a commit is refused, each naming its field or id; nothing changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReserveError {
    /// Bad input (400): the text names the field.
    #[error("{0}")]
    Bad(String),
    /// No record of the id (404).
    #[error(
        "no reservation {0}: never made, or forgotten (a record is kept until its expiry plus the maximum TTL); to charge its cost anyway, commit with `domain` and `descriptors`"
    )]
    Unknown(ReservationId),
    /// Committed already (409).
    #[error("reservation {0} was committed already: nothing changed")]
    Committed(ReservationId),
    /// The store failed (503).
    #[error("{0}")]
    Store(StoreError),
}

/// A reservation admitted: its record, or `None` when the store failed and the failure
/// policies admitted the request (nothing was reserved).
pub(crate) struct Admitted {
    pub(crate) verdict: Verdict,
    pub(crate) reservation: Option<Reservation>,
}

/// What a commit applied under one rule.
#[derive(Debug)]
pub(crate) struct Applied {
    pub(crate) domain: String,
    pub(crate) rule: String,
    pub(crate) key: String,
    /// The estimate given back (0 when the reservation had been released at its expiry).
    pub(crate) released: u64,
    /// The charge's answer.
    pub(crate) charged: Charged,
}

/// A commit's outcome.
#[derive(Debug)]
pub(crate) struct Committed {
    /// Whether the reservation had expired (its cost still counts).
    pub(crate) expired: bool,
    /// Whether an id was committed (false: a plain charge to the rules matched).
    pub(crate) reserved: bool,
    pub(crate) applied: Vec<Applied>,
}

/// The limit in force of rule `rule` in `domain` at `now`, if it still exists and takes charges.
fn limit_of(rules: &RuleSet, domain: &str, rule: &str, now: Micros) -> Option<Limit> {
    let r = rules.named(domain, rule)?;
    let limit = r.limit_at(now)?;
    chargeable(limit).ok()?;
    Some(limit.clone())
}

/// The limit in force of each of `r`'s rules (`None`: removed, or takes no charges now).
fn limits(state: &AppState, r: &Reservation) -> Vec<Option<Limit>> {
    let rules = state.limiter.rules();
    let now = state.limiter.store().now();
    r.items
        .iter()
        .map(|i| limit_of(&rules, &i.domain, &i.rule, now))
        .collect()
}

/// The charge batch giving back `r`'s estimate (when `release`) and charging `cost` (when
/// some) under each rule of `limits` (as [`limits`] answered for `r`).
fn batch<'a>(
    r: &'a Reservation,
    limits: &'a [Option<Limit>],
    cost: Option<u64>,
    release: bool,
) -> Vec<ChargeItem<'a>> {
    let mut batch = Vec::new();
    for (i, limit) in r.items.iter().zip(limits) {
        let Some(limit) = limit else { continue };
        if release {
            batch.push(ChargeItem {
                key: &i.key,
                limit,
                amount: Amount::release(i.estimate, i.taken),
            });
        }
        if let Some(cost) = cost {
            batch.push(ChargeItem {
                key: &i.key,
                limit,
                amount: Amount::Charge(cost),
            });
        }
    }
    batch
}

/// What [`batch`]'s `answers` applied, per rule charged.
fn applied(
    r: &Reservation,
    limits: &[Option<Limit>],
    answers: impl IntoIterator<Item = Charged>,
    cost: Option<u64>,
    release: bool,
) -> Vec<Applied> {
    let mut answers = answers.into_iter();
    let mut out = Vec::new();
    for (i, limit) in r.items.iter().zip(limits) {
        if limit.is_none() {
            continue;
        }
        let released = if release {
            answers.next().map_or(0, |a| a.applied)
        } else {
            0
        };
        let charged = if cost.is_some() { answers.next() } else { None };
        if let Some(charged) = charged {
            out.push(Applied {
                domain: i.domain.clone(),
                rule: i.rule.clone(),
                key: i.key.clone(),
                released,
                charged,
            });
        }
    }
    out
}

impl Reserve {
    /// The records that go with `backend`, under `config`.
    pub(crate) fn new(records: Records, config: ReserveConfig) -> Self {
        Self {
            records,
            config,
            outstanding: parking_lot::Mutex::default(),
            recent: atomic::Recent::default(),
        }
    }

    /// The outstanding reservations per rule, as last read.
    pub(crate) fn outstanding(&self) -> Vec<ReservationsView> {
        self.outstanding.lock().clone()
    }

    /// Reads the outstanding reservations again (kept as they were when they cannot be read).
    pub(crate) async fn read_outstanding(&self) {
        match self.records.outstanding().await {
            Ok(now) => {
                *self.outstanding.lock() = now
                    .into_iter()
                    .map(|o| ReservationsView {
                        domain: o.domain,
                        rule: o.rule,
                        count: o.count,
                        units: o.units,
                    })
                    .collect();
            }
            Err(e) => tracing::debug!(error = %e, "outstanding reservations cannot be read now"),
        }
    }

    /// Checks a reservation's request against the rules: each matched rule with a limit must
    /// take charges, and the estimate be within its share of it; some rule must match.
    fn check_clamps(
        &self,
        rules: &RuleSet,
        req: &Request,
        now: Micros,
    ) -> Result<(), ReserveError> {
        let matched = rules.resolve(req);
        let mut any = false;
        for (j, m) in matched.iter().enumerate() {
            let Some(limit) = m.rule.limit_at(now) else {
                continue;
            };
            // Each descriptor takes the estimate: twice on one key would hold twice the clamp.
            if let Some(first) = matched[..j].iter().find(|o| o.key == m.key) {
                return Err(ReserveError::Bad(format!(
                    "field `descriptors[{}]`: the same key of rule `{}` as descriptors[{}]: a reservation takes its estimate once per key",
                    m.descriptor, m.rule.name, first.descriptor
                )));
            }
            if let Err(e) = chargeable(limit) {
                return Err(ReserveError::Bad(format!(
                    "field `descriptors[{}]`: rule `{}`: {e}",
                    m.descriptor, m.rule.name
                )));
            }
            let max = (limit.limit() as f64 * self.config.max_share).floor() as u64;
            if req.cost > max {
                return Err(ReserveError::Bad(format!(
                    "field `estimate`: {} is over the maximum of {max} for rule `{}` ({} of its limit {}; --reserve-max-share)",
                    req.cost,
                    m.rule.name,
                    self.config.max_share,
                    limit.limit()
                )));
            }
            any = true;
        }
        if any {
            Ok(())
        } else {
            Err(ReserveError::Bad(
                "field `descriptors`: no rule with a limit matches them in this domain: nothing to reserve"
                    .into(),
            ))
        }
    }

    /// Reserves `req.cost` units for `ttl` (None: the maximum).
    pub(crate) async fn reserve(
        &self,
        state: &AppState,
        req: &Request,
        ttl: Option<Duration>,
    ) -> Result<Admitted, ReserveError> {
        if req.cost == 0 {
            return Err(ReserveError::Bad(
                "field `estimate`: must be at least 1 (a reservation of nothing reserves nothing)"
                    .into(),
            ));
        }
        if let Some(i) = req.descriptors.iter().position(|d| d.cost.is_some()) {
            return Err(ReserveError::Bad(format!(
                "field `descriptors[{i}].hits_addend`: a reservation's descriptors all take its `estimate`"
            )));
        }
        let ttl = match ttl {
            Some(t) if t.is_zero() => {
                return Err(ReserveError::Bad("field `ttl`: must be above 0".into()));
            }
            Some(t) if t > self.config.max_ttl => {
                return Err(ReserveError::Bad(format!(
                    "field `ttl`: {} ms is over the maximum of {} ms (--reserve-max-ttl)",
                    t.as_millis(),
                    self.config.max_ttl.as_millis()
                )));
            }
            Some(t) => t,
            None => self.config.max_ttl,
        };
        let store = state.limiter.store();
        let now = store.now();
        self.check_clamps(&state.limiter.rules(), req, now)?;
        let expires = now + micros(ttl);
        let pending = PendingRecord {
            id: ReservationId::random()
                .map_err(|e| ReserveError::Store(StoreError::Internal(e.to_string())))?,
            expires,
            forget_at: expires + micros(self.config.max_ttl),
            taken: now,
        };
        // On a single Redis the record is written with the decision: one round trip.
        let atomic = matches!(&self.records, Records::Redis(x) if x.commits_atomically());
        let (verdict, recorded) = if atomic {
            state.decide_recorded(Api::Http, req, &pending).await
        } else {
            (state.decide(Api::Http, req).await, None)
        };
        let failed = verdict.statuses.iter().any(|s| s.error.is_some());
        if !verdict.allowed || failed || verdict.shadowed {
            return Ok(Admitted {
                verdict,
                reservation: None,
            });
        }
        let reservation = match recorded {
            Some(r) => r,
            None => self.record_apart(state, &verdict, req, &pending).await?,
        };
        if atomic {
            self.recent.keep(&reservation, now, pending.forget_at);
        }
        Ok(Admitted {
            verdict,
            reservation: Some(reservation),
        })
    }

    /// Writes the record of a reservation `verdict` admitted, when its decision could not
    /// (the embedded store, Redis Cluster, a request matching breakers, shadow or quota-mode
    /// rules): what it took is each admitted status's.
    async fn record_apart(
        &self,
        state: &AppState,
        verdict: &Verdict,
        req: &Request,
        pending: &PendingRecord,
    ) -> Result<Reservation, ReserveError> {
        let items: Vec<Reserved> = verdict
            .statuses
            .iter()
            .filter(|s| s.decision.allowed && s.limit.is_some())
            .filter_map(|s| {
                let rule = s.rule.as_ref()?;
                Some(Reserved {
                    key: s.key.clone(),
                    domain: rule.domain.clone(),
                    rule: rule.name.clone(),
                    estimate: req.cost,
                    taken: pending.taken,
                })
            })
            .collect();
        let reservation = Reservation {
            id: pending.id.clone(),
            items,
            expires: pending.expires,
        };
        if let Err(e) = self.records.put(&reservation, pending.forget_at).await {
            // Not recorded (or not known to be): give the units back rather than hold them
            // until time frees them, once the record is ended so that nothing else does.
            match self.records.cancel(&reservation, pending.forget_at).await {
                Ok(true) => {
                    let _ = self.apply(state, &reservation, None, true).await;
                }
                Ok(false) => {}
                Err(c) => {
                    tracing::warn!(error = %c, id = %reservation.id, "a reservation whose record could not be written could not be ended either: its units are left to time")
                }
            }
            return Err(ReserveError::Store(e));
        }
        Ok(reservation)
    }

    /// Gives back `r`'s estimate (when `release`) and charges `cost` (when some) under each of
    /// its rules still in force, in one batch.
    pub(crate) async fn apply(
        &self,
        state: &AppState,
        r: &Reservation,
        cost: Option<u64>,
        release: bool,
    ) -> Result<Vec<Applied>, StoreError> {
        let limits = limits(state, r);
        let batch = batch(r, &limits, cost, release);
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let answers = state.limiter.store().charge(&batch).await?;
        Ok(applied(r, &limits, answers, cost, release))
    }

    /// Commits reservation `id` with its actual `cost`; with `charge_to` (a request naming the
    /// rules), an unknown id's cost is charged to them instead of refused.
    pub(crate) async fn commit(
        &self,
        state: &AppState,
        id: Option<&ReservationId>,
        cost: u64,
        charge_to: Option<&Request>,
    ) -> Result<Committed, ReserveError> {
        let now = state.limiter.store().now();
        if let (Records::Redis(x), Some(id)) = (&self.records, id)
            && x.commits_atomically()
        {
            match self.commit_atomic(state, x, id, cost, now).await? {
                Some(done) => return Ok(done),
                None => return self.commit_unknown(state, Some(id), cost, charge_to).await,
            }
        }
        let claim = match id {
            Some(id) => self
                .records
                .claim(id, now)
                .await
                .map_err(ReserveError::Store)?,
            None => Claim::Unknown,
        };
        let (r, release, expired) = match &claim {
            Claim::Open {
                reservation,
                expired,
            } => (reservation, true, *expired),
            Claim::Released(r) => (r, false, true),
            Claim::Committed => {
                return Err(ReserveError::Committed(
                    id.cloned()
                        .ok_or_else(|| ReserveError::Bad("field `id`: missing".into()))?,
                ));
            }
            Claim::Unknown => return self.commit_unknown(state, id, cost, charge_to).await,
        };
        match self.apply(state, r, Some(cost), release).await {
            Ok(applied) => Ok(Committed {
                expired,
                reserved: true,
                applied,
            }),
            Err(e) => {
                // Kept, so that a retry can commit it.
                if let Err(u) = self.records.unclaim(&claim).await {
                    tracing::warn!(error = %u, id = %r.id, "a reservation whose commit failed could not be kept for a retry");
                }
                Err(ReserveError::Store(e))
            }
        }
    }

    /// A commit of an unknown (or no) id: charged to `charge_to`'s rules, else refused.
    async fn commit_unknown(
        &self,
        state: &AppState,
        id: Option<&ReservationId>,
        cost: u64,
        charge_to: Option<&Request>,
    ) -> Result<Committed, ReserveError> {
        match (charge_to, id) {
            (Some(req), _) => self.charge(state, req, cost).await,
            (None, Some(id)) => Err(ReserveError::Unknown(id.clone())),
            (None, None) => Err(ReserveError::Bad(
                "field `id`: missing (or name `domain` and `descriptors` to charge the cost to their rules)"
                    .into(),
            )),
        }
    }

    /// Charges `cost` to the rules `req` matches (a commit of an unknown or unnamed
    /// reservation).
    async fn charge(
        &self,
        state: &AppState,
        req: &Request,
        cost: u64,
    ) -> Result<Committed, ReserveError> {
        let store = state.limiter.store();
        let rules = state.limiter.rules();
        let now = store.now();
        let mut items = Vec::new();
        for m in rules.resolve(req) {
            let Some(limit) = m.rule.limit_at(now) else {
                continue;
            };
            if let Err(e) = chargeable(limit) {
                return Err(ReserveError::Bad(format!(
                    "field `descriptors[{}]`: rule `{}`: {e}",
                    m.descriptor, m.rule.name
                )));
            }
            if !items.iter().any(|i: &Reserved| i.key == m.key) {
                items.push(Reserved {
                    key: m.key.clone(),
                    domain: m.rule.domain.clone(),
                    rule: m.rule.name.clone(),
                    estimate: 0,
                    taken: now,
                });
            }
        }
        if items.is_empty() {
            return Err(ReserveError::Bad(
                "field `descriptors`: no rule with a limit matches them in this domain: nothing to charge"
                    .into(),
            ));
        }
        let r = Reservation {
            id: ReservationId::random()
                .map_err(|e| ReserveError::Store(StoreError::Internal(e.to_string())))?,
            items,
            expires: now,
        };
        let applied = self
            .apply(state, &r, Some(cost), false)
            .await
            .map_err(ReserveError::Store)?;
        Ok(Committed {
            expired: false,
            reserved: false,
            applied,
        })
    }
}
