//! Redis Cluster: a request whose limits live in several slots.
//!
//! One limit's keys share a slot (the hash tag, see [`crate::keys`]). A request whose items hash
//! to one slot is one atomic script call, as on a single server. Otherwise its items are grouped
//! by slot and the groups are decided **in parallel**, each atomically and all-or-nothing within
//! itself. When the request as a whole is rejected (some enforced item rejected in some slot), every
//! group that admitted and recorded its items gets them back with the refund script: GCRA moves
//! its TAT back by `cost * T`, a fixed or sliding window decrements the bucket counted, a sliding
//! log takes the cost off its entry, a concurrency lease is released.
//!
//! **The window this leaves.** Between a group's apply and its refund (one round trip), other
//! callers see those units taken and may be rejected when they would have passed: the error is
//! always towards rejecting, never towards over-admission. A refund that fails (Redis down
//! between the two calls) leaves the units taken until the keys expire (at most one window);
//! it is counted in `RedisStats::refund_failures`. GCRA refunds in delay mode shift the
//! reservation frontier back by the refunded slots; callers who reserved after the refunded one
//! keep their (now slightly pessimistic) wait. A refund also makes a blocked-keys cache entry
//! elsewhere possibly stale in the conservative direction (see [`crate::blocked`]).
//!
//! **A clock that steps back.** A refund restores a state that decides as the one the request
//! found at the request's instant and after it. A sliding window gives the cost back to the
//! bucket it counted in, which the client knows from the state the script decided on (the newest
//! bucket, when Redis's clock had stepped back). If Redis's clock
//! then steps back before that instant: a refunded GCRA keeps its TAT at the request's instant
//! when it was earlier (towards rejecting); a fixed window whose request opened a new window
//! keeps that window with the count given back, so the previous window's count is forgotten
//! (towards admitting, across that one boundary); a fixed window whose request counted in a later
//! window than its instant's is not given back (towards rejecting).

use std::collections::HashMap;
use std::time::Duration;

use flowgate_core::{Decision, Decisions, Item, Micros, StoreError, store::admitted};

use crate::call::{Caller, Decided, EncItem, Encoded, encode_refund};
use crate::keys::slot;
use crate::scripts::REFUND;
use crate::stats::Counters;

/// Decides one request whose `items` (encoded as `encoded`) live in several slots: each slot's
/// items in one call, the slots in parallel, and what the admitting slots took given back when
/// another slot rejects.
pub(crate) async fn decide(
    caller: &Caller,
    deadline: Duration,
    items: &[Item<'_>],
    encoded: Encoded,
) -> Result<Decisions, StoreError> {
    let groups = by_slot(encoded.iter().map(|i| slot(&i.key)));
    let parts: Vec<Encoded> = groups
        .iter()
        .map(|(_, idx)| idx.iter().map(|&i| encoded[i].clone()).collect())
        .collect();
    let results = futures::future::join_all(
        parts
            .iter()
            .map(|p| async move { caller.decide(&[p]).await }),
    )
    .await;
    let mut decisions: Vec<Option<Decision>> = vec![None; items.len()];
    let mut error = None;
    let mut applied: Vec<(usize, Decided)> = Vec::new(); // groups that recorded their items
    for (g, r) in results.into_iter().enumerate() {
        match r {
            Ok(decided) => {
                let idx = &groups[g].1;
                for (&i, d) in idx.iter().zip(&decided.decisions) {
                    decisions[i] = Some(*d);
                }
                if idx
                    .iter()
                    .zip(&decided.decisions)
                    .all(|(&i, d)| d.allowed || !items[i].enforce)
                {
                    applied.push((g, decided));
                }
            }
            Err(e) => error = Some(e),
        }
    }
    let decisions: Option<Decisions> = decisions.into_iter().collect();
    let admit = match &decisions {
        Some(d) if error.is_none() => admitted(items, d),
        _ => false,
    };
    if !admit && !applied.is_empty() {
        refund(caller, deadline, &parts, &applied).await;
    }
    match (error, decisions) {
        (Some(e), _) => Err(e),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(StoreError::Internal("a slot group was not decided".into())),
    }
}

/// Groups positions by slot: each slot met in `slots`, in order of first appearance, with the
/// positions (from 0) that have it, in order.
pub(crate) fn by_slot(slots: impl IntoIterator<Item = u16>) -> Vec<(u16, Vec<usize>)> {
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    let mut group_of: HashMap<u16, usize> = HashMap::new();
    for (i, s) in slots.into_iter().enumerate() {
        let g = *group_of.entry(s).or_insert_with(|| {
            groups.push((s, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    groups
}

/// Gives back what the `applied` groups recorded, on its own task (so that the caller's
/// deadline cannot cut it short), each call within `deadline`; the caller waits for it.
async fn refund(
    caller: &Caller,
    deadline: Duration,
    parts: &[Encoded],
    applied: &[(usize, Decided)],
) {
    let mut calls: Vec<(Micros, Vec<EncItem>, Vec<u64>)> = Vec::new();
    for (g, decided) in applied {
        let mut given = Vec::new();
        let mut extra = Vec::new();
        for (j, item) in parts[*g].iter().enumerate() {
            let d = &decided.decisions[j];
            if d.allowed && item.cost > 0 {
                given.push(item.clone());
                // (a sliding window's bucket + 1, a warm-up bucket's cooling position + 1,
                // else the lease granted, else nothing)
                extra.push(decided.charged[j].map_or(item.lease, |b| b + 1));
            }
        }
        if !given.is_empty() {
            calls.push((decided.now, given, extra));
        }
    }
    if calls.is_empty() {
        return;
    }
    let caller = caller.clone();
    let task = tokio::spawn(async move {
        let all = calls.iter().map(|(now, given, extra)| {
            let caller = &caller;
            async move {
                let (keys, string) = encode_refund(*now, given, extra);
                let mut inv = REFUND.prepare_invoke();
                for k in &keys {
                    inv.key(*k);
                }
                inv.arg(string);
                match tokio::time::timeout(deadline, caller.conn.invoke(&inv)).await {
                    Ok(r) => r.map(|_| ()).map_err(|e| crate::error::store_error(&e)),
                    Err(_) => Err(StoreError::Timeout),
                }
            }
        });
        for r in futures::future::join_all(all).await {
            Counters::add(&caller.counters.refunds, 1);
            if let Err(e) = r {
                Counters::add(&caller.counters.refund_failures, 1);
                tracing::warn!(target: "flowgate_redis", error = %e, "cross-slot refund failed");
            }
        }
    });
    let _ = task.await;
}
