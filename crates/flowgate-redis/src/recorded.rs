//! Decisions that write reservations' records with their admissions (`decide.lua` with
//! `records.lua`, on a single Redis): the requests coalesced with their records, the call's
//! invocation, and the records' outcomes in its reply.

use redis::Value;

use crate::call::{Call, Caller, Encoded, bad};
use crate::reservations::{EXPIRY_KEY, PutRequest};
use crate::scripts::DECIDE;
use flowgate_core::StoreError;

/// The script invocation of `call` (see `decide.lua`).
pub(crate) fn invocation(call: &Call<'_>) -> redis::ScriptInvocation<'static> {
    let mut inv = DECIDE.prepare_invoke();
    for k in &call.keys {
        inv.key(*k);
    }
    if call.records.is_empty() {
        inv.arg(&call.string[..]);
        if let Some(t) = &call.totals {
            inv.arg(&t[..]);
        }
        return inv;
    }
    inv.key(EXPIRY_KEY);
    for (_, r) in &call.records {
        inv.key(r.record.as_str());
    }
    inv.arg(&call.string[..]);
    inv.arg(call.totals.as_deref().unwrap_or_default());
    inv.arg(call.keys.len());
    for (item, r) in &call.records {
        inv.arg(*item);
        r.push_args(&mut inv);
    }
    inv
}

/// The reply without its last element when `call` wrote records: that element, one byte per
/// record, whether it was written (1), its request refused (0), or it could not be (2, logged).
pub(crate) fn split_recorded(
    reply: Value,
    call: &Call<'_>,
) -> Result<(Value, Vec<bool>), StoreError> {
    if call.records.is_empty() {
        return Ok((reply, Vec::new()));
    }
    let Value::Array(mut vals) = reply else {
        return Err(bad("not an array"));
    };
    let Some(Value::BulkString(outcomes)) = vals.pop() else {
        return Err(bad("no records' outcomes"));
    };
    if outcomes.len() != call.records.len() {
        return Err(bad("not one outcome per record"));
    }
    for (outcome, (_, r)) in outcomes.iter().zip(&call.records) {
        if *outcome == 2 {
            tracing::warn!(
                target: "flowgate::redis",
                id = %r.id,
                "a reservation's record could not be written with its decision"
            );
        }
    }
    Ok((
        Value::Array(vals),
        outcomes.iter().map(|&o| o == 1).collect(),
    ))
}

/// A request to decide, and the record of the reservation it makes, to write if it is
/// admitted.
pub(crate) struct ToDecide {
    pub(crate) items: Encoded,
    pub(crate) record: Option<PutRequest>,
}

/// Decisions coalesced ([`crate::batch`]): a request is one [`ToDecide`], its answer its items'
/// decisions and whether its record was written.
#[derive(Clone)]
pub(crate) struct DecideBatch(pub(crate) Caller);

impl crate::batch::Batch for DecideBatch {
    type Request = ToDecide;
    type Answer = (flowgate_core::Decisions, bool);

    async fn call(&self, requests: &[&ToDecide]) -> Result<Vec<Self::Answer>, StoreError> {
        let items: Vec<&Encoded> = requests.iter().map(|r| &r.items).collect();
        let records: Vec<Option<&PutRequest>> =
            requests.iter().map(|r| r.record.as_ref()).collect();
        let decided = self.0.decide_recording(&items, &records).await?;
        let mut rest = decided.decisions.into_iter();
        Ok(requests
            .iter()
            .zip(decided.recorded)
            .map(|(r, recorded)| (rest.by_ref().take(r.items.len()).collect(), recorded))
            .collect())
    }
}
