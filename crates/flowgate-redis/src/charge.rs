//! Charges and refunds on Redis (`charge.lua`): the script applies them, the client replays them
//! on the states the script found with the Rust transition ([`algorithm::charge()`]) to report each
//! answer, and checks that both applied alike.

use std::collections::HashMap;

use flowgate_core::algorithm::{self, Amount, State};
use flowgate_core::{ChargeItem, Charges, Micros, StoreError};
use redis::Value;

use crate::batch::Lanes;
use crate::call::{Caller, block, calendar_bounds, header, push_item, script_window_end};
use crate::error::store_error;
use crate::keys::{KeyBytes, redis_key_bytes, slot};
use crate::reservations::EXPIRY_KEY;
use crate::scripts::{CHARGE, COMMIT};
use crate::state;

/// Keys one call carries at most (the script unpacks them into one `MGET`).
const MAX_KEYS: usize = 4000;

fn bad(what: &str) -> StoreError {
    StoreError::Internal(format!("unexpected reply from the charge script: {what}"))
}

/// Applies `items`, as [`flowgate_core::Store::charge`]: the batch is checked whole, then sent in
/// one call per run of consecutive items of one slot (on a single server, one call; up to
/// [`MAX_KEYS`] keys each), in order. A failed call ends the report: the calls before it stay
/// applied (a charge records work that happened; there is nothing to give back).
pub(crate) async fn charge(
    caller: &Caller,
    items: &[ChargeItem<'_>],
) -> Result<Charges, StoreError> {
    for (i, item) in items.iter().enumerate() {
        algorithm::chargeable(item.limit)
            .map_err(|e| StoreError::Internal(format!("charge item {i}: {e}")))?;
    }
    let keys: Vec<KeyBytes> = items
        .iter()
        .map(|i| redis_key_bytes(i.key, i.limit))
        .collect();
    // Items in calls: consecutive items of one slot, at most MAX_KEYS keys, go together.
    let mut out = Charges::new();
    let mut from = 0;
    while from < items.len() {
        let s = slot(&keys[from]);
        let mut to = from + 1;
        while to < items.len() && to - from < MAX_KEYS && slot(&keys[to]) == s {
            to += 1;
        }
        out.extend(call(caller, &items[from..to], &keys[from..to]).await?);
        from = to;
    }
    Ok(out)
}

/// One call of `charge.lua`: `items` and their Redis `keys`, of one slot.
async fn call(
    caller: &Caller,
    items: &[ChargeItem<'_>],
    keys: &[KeyBytes],
) -> Result<Charges, StoreError> {
    let (string, distinct, near) = encode(caller, items, keys)?;
    let mut inv = CHARGE.prepare_invoke();
    for k in &distinct {
        inv.key(*k);
    }
    inv.arg(string);
    let reply = caller
        .conn
        .invoke(&inv)
        .await
        .map_err(|e| store_error(&e))?;
    replay(reply, items, keys, &distinct, near)
}

/// A commit's answer from `commit.lua`.
pub(crate) enum Committed {
    /// Claimed and charged: the charges' answers.
    Done(Vec<algorithm::Charged>),
    /// The record was not as read: `[phase, expiry, items' text]`, or `None` when it is gone
    /// (`unknown`) or was committed (`committed`): the first element says which.
    Other(Vec<Value>),
}

/// One commit, encoded for `commit.lua`: its record's key and index member, the record's value
/// its caller read, its charge's distinct state keys and call string.
pub(crate) struct CommitRequest {
    record: String,
    member: String,
    value: String,
    keys: Vec<KeyBytes>,
    string: Vec<u8>,
}

/// Commits coalesced ([`crate::batch`]): each request one commit, its answer `commit.lua`'s for
/// it. A single Redis only: the keys are of several slots.
#[derive(Clone)]
pub(crate) struct CommitBatch(pub(crate) Caller);

impl crate::batch::Batch for CommitBatch {
    type Request = CommitRequest;
    type Answer = Value;

    async fn call(&self, requests: &[&CommitRequest]) -> Result<Vec<Value>, StoreError> {
        let mut inv = COMMIT.prepare_invoke();
        inv.key(EXPIRY_KEY);
        for r in requests {
            inv.key(r.record.as_str());
            for k in &r.keys {
                inv.key(&k[..]);
            }
        }
        for r in requests {
            inv.arg(r.keys.len())
                .arg(r.member.as_str())
                .arg(r.value.as_str())
                .arg(&r.string[..]);
        }
        let reply = self
            .0
            .conn
            .invoke(&inv)
            .await
            .map_err(|e| store_error(&e))?;
        match reply {
            Value::Array(answers) if answers.len() == requests.len() => Ok(answers),
            _ => Err(bad("not one answer per commit")),
        }
    }
}

/// Claims the record at `record` (indexed under `member`) if it still holds `value`, and
/// applies `items` with it, all or nothing, through `lanes` (with the commits in flight beside
/// it) or alone.
pub(crate) async fn commit(
    caller: &Caller,
    lanes: Option<&Lanes<CommitBatch>>,
    (record, member): (&str, &str),
    value: &str,
    items: &[ChargeItem<'_>],
) -> Result<Committed, StoreError> {
    if items.len() > MAX_KEYS {
        return Err(StoreError::Internal(format!(
            "a commit charges more than {MAX_KEYS} items"
        )));
    }
    for (i, item) in items.iter().enumerate() {
        algorithm::chargeable(item.limit)
            .map_err(|e| StoreError::Internal(format!("charge item {i}: {e}")))?;
    }
    let keys: Vec<KeyBytes> = items
        .iter()
        .map(|i| redis_key_bytes(i.key, i.limit))
        .collect();
    let (string, distinct, near) = encode(caller, items, &keys)?;
    let request = CommitRequest {
        record: record.to_owned(),
        member: member.to_owned(),
        value: value.to_owned(),
        keys: distinct.iter().map(|k| KeyBytes::from_slice(k)).collect(),
        string,
    };
    let reply = match lanes {
        Some(lanes) => lanes.submit(0, request).await?,
        None => crate::batch::alone(&CommitBatch(caller.clone()), request).await?,
    };
    let Value::Array(mut parts) = reply else {
        return Err(bad("not a list"));
    };
    match parts.first() {
        Some(Value::BulkString(t)) if t == b"done" => {}
        Some(Value::BulkString(t)) if t == b"error" => {
            let message = match parts.get(1) {
                Some(Value::BulkString(m)) => String::from_utf8_lossy(m).into_owned(),
                _ => "no message".to_owned(),
            };
            return Err(StoreError::Internal(format!(
                "the commit of {record} failed, nothing applied: {message}"
            )));
        }
        _ => return Ok(Committed::Other(parts)),
    }
    let Some(charged) = parts.pop() else {
        return Err(bad("a commit without its charges"));
    };
    Ok(Committed::Done(
        replay(charged, items, &keys, &distinct, near)?.into_vec(),
    ))
}

/// A call of `charge.lua`: its string, its distinct keys in order, and the instant the client
/// expects the script to run at.
type Call<'k> = (Vec<u8>, Vec<&'k [u8]>, Micros);

/// `charge.lua`'s call string for `items` and their Redis `keys`: the string, the distinct
/// keys in order, and the instant the client expects the script to run at.
fn encode<'k>(
    caller: &Caller,
    items: &[ChargeItem<'_>],
    keys: &'k [KeyBytes],
) -> Result<Call<'k>, StoreError> {
    let near = caller.time.estimate();
    let mut blocks: Vec<[u64; 7]> = Vec::new();
    let mut distinct: Vec<&[u8]> = Vec::new();
    let mut body = Vec::new();
    for (item, key) in items.iter().zip(keys) {
        let mut b = block(item.limit, near);
        b[5] = item.limit.max_debt();
        let bi = blocks.iter().position(|x| *x == b).unwrap_or_else(|| {
            blocks.push(b);
            blocks.len() - 1
        });
        let k = distinct
            .iter()
            .position(|k| *k == &key[..])
            .unwrap_or_else(|| {
                distinct.push(&key[..]);
                distinct.len() - 1
            });
        let (flags, taken) = match item.amount {
            Amount::Charge(_) => (0, None),
            Amount::Refund(_) => (1, None),
            Amount::Release { taken, .. } => (2, Some(release_mark(item.limit, taken))),
        };
        push_item(&mut body, item.amount.units(), bi, (k + 1) as u16, flags);
        if let Some(taken) = taken {
            body.extend_from_slice(&(taken as f64).to_le_bytes());
        }
    }
    if blocks.len() > 255 {
        return Err(StoreError::Internal(
            "a report charges more than 255 distinct limits".into(),
        ));
    }
    let (now, slack) = caller.time.now_and_slack();
    let mut string = header(now, slack, &blocks, items.len() as u32, body.len());
    string.extend_from_slice(&body);
    Ok((string, distinct, near))
}

/// What a release sends the script of the instant its reservation took its units (`charge.lua`'s
/// header): for a fixed window the end of the window holding it, which only the client can
/// compute for a calendar window; else the instant.
fn release_mark(limit: &flowgate_core::Limit, taken: Micros) -> Micros {
    match limit.algorithm() {
        flowgate_core::Algorithm::FixedWindow => algorithm::fixed_window::window_end(limit, taken),
        _ => taken,
    }
}

/// Reads the script's reply and replays `items` on the states it found.
fn replay(
    reply: Value,
    items: &[ChargeItem<'_>],
    keys: &[KeyBytes],
    distinct: &[&[u8]],
    near: Micros,
) -> Result<Charges, StoreError> {
    let Value::Array(vals) = reply else {
        return Err(bad("not an array"));
    };
    let [Value::Int(now), Value::Array(applied), before @ ..] = &vals[..] else {
        return Err(bad("not the time, the units applied and the states"));
    };
    let now = u64::try_from(*now).map_err(|_| bad("a negative time"))?;
    if applied.len() != items.len() || before.len() != distinct.len() {
        return Err(bad("of another size than the call"));
    }
    let mut states: HashMap<&[u8], State> = HashMap::with_capacity(distinct.len());
    let mut out = Charges::new();
    for ((item, key), got) in items.iter().zip(keys).zip(applied) {
        if let Some(c) = item.limit.quota().calendar() {
            let picked = script_window_end(calendar_bounds(&c, near), now);
            if picked != Some(algorithm::fixed_window::window_end(item.limit, now)) {
                return Err(StoreError::Internal(
                    "Redis's clock and this node's are a calendar period apart".into(),
                ));
            }
        }
        let key = &key[..];
        if !states.contains_key(key) {
            let k = distinct.iter().position(|d| *d == key).unwrap_or(0);
            let st = match &before[k] {
                Value::BulkString(b) => state::parse(item.limit, Some(b)),
                Value::Nil => state::parse(item.limit, None),
                _ => return Err(bad("not a state")),
            };
            states.insert(key, st);
        }
        let st = states.get_mut(key).ok_or_else(|| bad("no state"))?;
        let c = algorithm::charge(item.limit, st, now, item.amount)
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        if *got != Value::Int(c.applied as i64) {
            return Err(StoreError::Internal(format!(
                "the charge script and the Rust transition disagree: {got:?} applied, not {}",
                c.applied
            )));
        }
        out.push(c);
    }
    Ok(out)
}
