//! Reservation records on Redis (`reservations.lua`), shared by every node on it: a reservation
//! made on one node is committed on another, and exactly one node's sweeper releases it when it
//! expires. The records and their index live under the hash tag `{flowgate:res}`, one slot
//! apart from the limits' state keys. On a single Redis (or Sentinel) a commit claims the record
//! and applies its charges in one script ([`RedisReservations::commit`], `commit.lua`); on a
//! cluster it claims, then charges through [`crate::RedisStore`]'s `charge`. The records'
//! writes, and on a single Redis the commits, in flight at the same moment share script calls
//! ([`crate::batch`]): each written or committed independently, in order, as if alone.

use flowgate_core::Micros;
use flowgate_core::algorithm::Charged;
use flowgate_core::reservation::{Claim, Outstanding, Reservation, ReservationId, Reservations};
use flowgate_core::store::{ChargeItem, StoreError};
use redis::Value;

use crate::RedisStore;
use crate::charge::Committed;
use crate::conn::RedisConnection;
use crate::scripts::RESERVATIONS;

/// The open records' index: members `<id>\x1e<items' text>`, scored by expiry (`records.lua`).
pub(crate) const EXPIRY_KEY: &str = "{flowgate:res}:expiry";

fn record_key(id: &ReservationId) -> String {
    format!("{{flowgate:res}}:r:{id}")
}

/// Reservation `r`'s index member in the expiry index and its record's value in `phase` ("o"
/// open, "r" released): `<id>\x1e<items' text>` and `<phase><expiry>:<items' text>`, the items
/// encoded once for both.
fn record_forms(phase: &str, r: &Reservation) -> (String, String) {
    let items = r.encode_items();
    (
        format!("{}\u{1e}{items}", r.id),
        format!("{phase}{}:{items}", r.expires),
    )
}

fn bad(what: &str) -> StoreError {
    StoreError::Internal(format!(
        "unexpected reply from the reservations script: {what}"
    ))
}

fn text(v: &Value) -> Result<String, StoreError> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).map_err(|_| bad("not UTF-8")),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Int(n) => Ok(n.to_string()),
        _ => Err(bad("not text")),
    }
}

fn number(v: &Value) -> Result<u64, StoreError> {
    text(v)?.parse().map_err(|_| bad("not a number"))
}

/// A record from its id, expiry and items' text.
fn record(id: ReservationId, e: &Value, b: &Value) -> Result<Reservation, StoreError> {
    Ok(Reservation {
        id,
        expires: number(e)?,
        items: Reservation::decode_items(&text(b)?)
            .map_err(|e| StoreError::Internal(e.to_string()))?,
    })
}

/// One record to write, encoded for `records.lua`'s `put_record`.
pub(crate) struct PutRequest {
    pub(crate) record: String,
    pub(crate) id: String,
    member: String,
    value: String,
    expires: Micros,
    /// When it is forgotten, in milliseconds since the epoch (`PXAT`).
    forget_ms: u64,
}

impl PutRequest {
    /// Reservation `r`'s record, open, forgotten at `forget_at`.
    pub(crate) fn of(r: &Reservation, forget_at: Micros) -> Self {
        let (member, value) = record_forms("o", r);
        Self {
            record: record_key(&r.id),
            id: r.id.as_str().to_owned(),
            member,
            value,
            expires: r.expires,
            forget_ms: forget_at.div_ceil(1000),
        }
    }

    /// Its four arguments, as `records.lua`'s `put_record` takes them.
    pub(crate) fn push_args(&self, inv: &mut redis::ScriptInvocation<'_>) {
        inv.arg(self.member.as_str())
            .arg(self.value.as_str())
            .arg(self.expires)
            .arg(self.forget_ms);
    }
}

/// Records' writes coalesced ([`crate::batch`]): one `put` call writes every record waiting.
/// Their keys share the records' slot, so one lane serves a cluster too.
#[derive(Clone)]
pub(crate) struct PutBatch(pub(crate) RedisConnection);

impl crate::batch::Batch for PutBatch {
    type Request = PutRequest;
    /// Each record's own outcome: one that could not be written fails alone.
    type Answer = Result<(), StoreError>;

    async fn call(&self, requests: &[&PutRequest]) -> Result<Vec<Self::Answer>, StoreError> {
        let mut inv = RESERVATIONS.prepare_invoke();
        inv.key(EXPIRY_KEY);
        for r in requests {
            inv.key(r.record.as_str());
        }
        inv.arg("put");
        for r in requests {
            r.push_args(&mut inv);
        }
        let Value::Array(answers) = self.0.query_script::<Value>(&inv).await? else {
            return Err(bad("not a list"));
        };
        if answers.len() != requests.len() {
            return Err(bad("not one answer per record"));
        }
        Ok(answers
            .into_iter()
            .map(|a| match a {
                Value::Int(1) => Ok(()),
                other => Err(StoreError::Internal(format!(
                    "the reservation's record could not be written: {}",
                    text(&other).unwrap_or_else(|_| format!("{other:?}"))
                ))),
            })
            .collect())
    }
}

/// Reservation records on Redis (see the module documentation).
#[derive(Clone)]
pub struct RedisReservations {
    store: RedisStore,
}

impl RedisStore {
    /// The reservation records on this Redis.
    pub fn reservations(&self) -> RedisReservations {
        RedisReservations {
            store: self.clone(),
        }
    }
}

impl RedisReservations {
    fn invoke(&self, op: &str, id: Option<&ReservationId>) -> redis::ScriptInvocation<'static> {
        let mut inv = RESERVATIONS.prepare_invoke();
        inv.key(EXPIRY_KEY);
        if let Some(id) = id {
            inv.key(record_key(id));
        }
        inv.arg(op);
        if let Some(id) = id {
            inv.arg(id.as_str());
        }
        inv
    }

    async fn run(&self, inv: &redis::ScriptInvocation<'_>) -> Result<Value, StoreError> {
        self.store.conn().query_script(inv).await
    }
}

/// What an atomic commit ([`RedisReservations::commit`]) did.
#[derive(Debug)]
pub enum AtomicCommit {
    /// Claimed and charged together: whether the reservation had expired, and the charges'
    /// answers (in the order of the items).
    Done {
        /// Whether its expiry had passed.
        expired: bool,
        /// The items' answers.
        charges: Vec<Charged>,
    },
    /// The record is not as the caller read it (a sweeper released it, or another node's
    /// commit came first): what it is now; nothing was done.
    Changed(Claim),
}

impl RedisReservations {
    /// Whether [`RedisReservations::commit`] can be used: on a single Redis (or Sentinel), where
    /// one script may use the records and the limits' state keys together. On a cluster they
    /// are in different slots: claim, then charge.
    pub fn commits_atomically(&self) -> bool {
        !self.store.is_cluster()
    }

    /// Reads reservation `id`'s record as [`Reservations::claim`] would answer at `now`,
    /// claiming nothing.
    ///
    /// # Errors
    /// [`StoreError`] when the records cannot be read.
    pub async fn peek(&self, id: &ReservationId, now: Micros) -> Result<Claim, StoreError> {
        let reply = self.run(&self.invoke("peek", Some(id))).await?;
        claim_of(id, reply, now)
    }

    /// Claims `read` (an open or released record, as [`RedisReservations::peek`] answered it)
    /// and applies `items` (its commit's release and charges) in one script call: both happen
    /// or neither. When the record is no longer as read, nothing happens and the answer says
    /// what it is now.
    ///
    /// # Errors
    /// [`StoreError`] when the call fails (nothing was applied if Redis answered; on a timeout,
    /// all or nothing was) or `read` is neither open nor released.
    pub async fn commit(
        &self,
        read: &Claim,
        now: Micros,
        items: &[ChargeItem<'_>],
    ) -> Result<AtomicCommit, StoreError> {
        let (r, phase) = match read {
            Claim::Open { reservation, .. } => (reservation, "o"),
            Claim::Released(r) => (r, "r"),
            Claim::Committed | Claim::Unknown => {
                return Err(StoreError::Internal(
                    "only an open or released reservation is committed".into(),
                ));
            }
        };
        let record = record_key(&r.id);
        let (member, value) = record_forms(phase, r);
        let answer = self
            .store
            .commit_call((record.as_str(), &member), &value, items)
            .await?;
        match answer {
            Committed::Done(charges) => Ok(AtomicCommit::Done {
                expired: r.expires <= now,
                charges,
            }),
            Committed::Other(parts) => {
                claim_of(&r.id, Value::Array(parts), now).map(AtomicCommit::Changed)
            }
        }
    }
}

/// A claim from `reservations.lua`'s (or `commit.lua`'s) answer.
fn claim_of(id: &ReservationId, reply: Value, now: Micros) -> Result<Claim, StoreError> {
    let Value::Array(parts) = reply else {
        return Err(bad("not a list"));
    };
    // A changed record's answer names its phase: as a claim's of that phase.
    let first = parts.first().map(text).transpose()?;
    let tag = match (first.as_deref(), &parts[..]) {
        (Some("changed"), [_, Value::BulkString(s), _, _]) if s == b"r" => "released",
        (Some("changed"), _) => "open",
        (Some(t), _) => t,
        (None, _) => return Err(bad("an empty answer")),
    };
    match (tag, &parts[..]) {
        ("unknown", _) => Ok(Claim::Unknown),
        ("committed", _) => Ok(Claim::Committed),
        ("released", [_, .., e, b]) => Ok(Claim::Released(record(id.clone(), e, b)?)),
        ("open", [_, .., e, b]) => {
            let reservation = record(id.clone(), e, b)?;
            let expired = reservation.expires <= now;
            Ok(Claim::Open {
                reservation,
                expired,
            })
        }
        _ => Err(bad("unknown claim")),
    }
}

impl Reservations for RedisReservations {
    async fn put(&self, r: &Reservation, forget_at: Micros) -> Result<(), StoreError> {
        self.store.put_call(PutRequest::of(r, forget_at)).await
    }

    async fn claim(&self, id: &ReservationId, now: Micros) -> Result<Claim, StoreError> {
        let reply = self.run(&self.invoke("claim", Some(id))).await?;
        claim_of(id, reply, now)
    }

    async fn unclaim(&self, claimed: &Claim) -> Result<(), StoreError> {
        let (r, phase) = match claimed {
            Claim::Open { reservation, .. } => (reservation, "o"),
            Claim::Released(r) => (r, "r"),
            Claim::Committed | Claim::Unknown => return Ok(()),
        };
        let mut inv = self.invoke("unclaim", Some(&r.id));
        inv.arg(record_forms(phase, r).1);
        self.run(&inv).await.map(drop)
    }

    async fn cancel(&self, r: &Reservation, forget_at: Micros) -> Result<bool, StoreError> {
        let mut inv = self.invoke("cancel", Some(&r.id));
        inv.arg(record_forms("o", r).0)
            .arg(forget_at.div_ceil(1000));
        match self.run(&inv).await? {
            Value::Int(n) => Ok(n == 1),
            _ => Err(bad("not a number")),
        }
    }

    async fn expire(&self, now: Micros, max: usize) -> Result<Vec<Reservation>, StoreError> {
        let mut inv = self.invoke("expire", None);
        inv.arg(now).arg(max);
        let Value::Array(parts) = self.run(&inv).await? else {
            return Err(bad("not a list"));
        };
        parts
            .chunks(3)
            .map(|c| match c {
                [id, e, b] => {
                    let id = text(id)?.parse().map_err(|_| bad("not an id"))?;
                    record(id, e, b)
                }
                _ => Err(bad("a partial record")),
            })
            .collect()
    }

    async fn outstanding(&self) -> Result<Vec<Outstanding>, StoreError> {
        // (the open records' index holds each one's items: one read, no record's)
        let members: Vec<Vec<u8>> = self
            .store
            .conn()
            .query(redis::cmd("ZRANGE").arg(EXPIRY_KEY).arg(0).arg(-1))
            .await?;
        let mut out: Vec<Outstanding> = Vec::new();
        for m in &members {
            let Some(items) = std::str::from_utf8(m)
                .ok()
                .and_then(|m| m.split_once('\u{1e}'))
                .and_then(|(_, text)| Reservation::decode_items(text).ok())
            else {
                continue;
            };
            for i in items {
                let at = match out
                    .iter()
                    .position(|o| o.domain == i.domain && o.rule == i.rule)
                {
                    Some(at) => at,
                    None => {
                        out.push(Outstanding {
                            domain: i.domain,
                            rule: i.rule,
                            ..Outstanding::default()
                        });
                        out.len() - 1
                    }
                };
                out[at].count += 1;
                out[at].units += i.estimate;
            }
        }
        out.sort_by(|a, b| (&a.domain, &a.rule).cmp(&(&b.domain, &b.rule)));
        Ok(out)
    }
}
