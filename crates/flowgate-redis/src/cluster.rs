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
//! bucket, when Redis's clock had stepped back; a group decided by the general script, a request
//! naming one key twice, gives it back to the bucket of the request's instant). If Redis's clock
//! then steps back before that instant: a refunded GCRA keeps its TAT at the request's instant
//! when it was earlier (towards rejecting); a fixed window whose request opened a new window
//! keeps that window with the count given back, so the previous window's count is forgotten
//! (towards admitting, across that one boundary); a fixed window whose request counted in a later
//! window than its instant's is not given back (towards rejecting).

use std::collections::HashMap;
use std::sync::Arc;

use flowgate_core::{Decisions, Item, Micros, StoreError, store::admitted};

use crate::call::{self, Encoded};
use crate::keys::slot;
use crate::scripts::{REFUND_SCRIPT, Raw};
use crate::stats::Counters;
use crate::store::{Inner, attach};

/// Decides `items` (encoded as `encoded`) on a cluster.
pub(crate) async fn decide(
    inner: &Inner,
    items: &[Item<'_>],
    encoded: Encoded,
) -> Result<Decisions, StoreError> {
    let groups = by_slot(encoded.items.iter().map(|i| slot(&i.key)));
    if groups.len() == 1 {
        Counters::add(&inner.counters.script_calls, 1);
        let (_, raws) = call::decide(&inner.conn, &inner.time, &[&encoded]).await?;
        return Ok(attach(items, &raws));
    }
    let parts: Vec<Encoded> = groups
        .iter()
        .map(|(_, idx)| {
            let mut e = Encoded::default();
            for &i in idx {
                e.items.push(encoded.items[i].clone());
            }
            e
        })
        .collect();
    Counters::add(&inner.counters.script_calls, parts.len() as u64);
    let results = futures::future::join_all(
        parts
            .iter()
            .map(|p| async move { call::decide(&inner.conn, &inner.time, &[p]).await }),
    )
    .await;

    let mut raws: Vec<Option<Raw>> = vec![None; items.len()];
    let mut error = None;
    let mut applied: Vec<(usize, Micros)> = Vec::new(); // groups that recorded their items
    for (g, r) in results.into_iter().enumerate() {
        match r {
            Ok((now, rs)) => {
                let idx = &groups[g].1;
                let group_admitted = idx
                    .iter()
                    .zip(&rs)
                    .all(|(&i, r)| r.allowed || !items[i].enforce);
                if group_admitted {
                    applied.push((g, now));
                }
                for (&i, r) in idx.iter().zip(rs) {
                    raws[i] = Some(r);
                }
            }
            Err(e) => error = Some(e),
        }
    }
    let decided: Option<Vec<Raw>> = raws.into_iter().collect();
    let decisions = decided.as_ref().map(|r| attach(items, r));
    let admit = match &decisions {
        Some(d) if error.is_none() => admitted(items, d),
        _ => false,
    };
    if !admit && !applied.is_empty() {
        refund(inner, &groups, &parts, &applied, decided.as_deref(), items).await;
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

/// Gives back what the `applied` groups recorded. Runs on its own task, so that the caller's
/// deadline cannot cut it short; the caller waits for it within its deadline.
async fn refund(
    inner: &Inner,
    groups: &[(u16, Vec<usize>)],
    parts: &[Encoded],
    applied: &[(usize, Micros)],
    decided: Option<&[Raw]>,
    items: &[Item<'_>],
) {
    let mut calls = Vec::new();
    for &(g, now) in applied {
        let mut given = Vec::new();
        for (j, &i) in groups[g].1.iter().enumerate() {
            let raw = decided.map(|d| d[i]);
            if raw.is_some_and(|r| r.allowed) && items[i].cost > 0 {
                let mut item = parts[g].items[j].clone();
                // A sliding window takes the cost back from the bucket it counted in (refund.lua).
                if let Some(b) = raw.and_then(|r| r.charged) {
                    item.lease = b + 1;
                }
                given.push(item);
            }
        }
        if !given.is_empty() {
            calls.push((now, given));
        }
    }
    if calls.is_empty() {
        return;
    }
    let conn = inner.conn.clone();
    let counters: Arc<Counters> = inner.counters.clone();
    let deadline = inner.deadline;
    let task = tokio::spawn(async move {
        let all = calls.iter().map(|(now, given)| {
            let conn = &conn;
            async move {
                let script = &*REFUND_SCRIPT;
                let mut cmd = script.cmd(given.len(), given.len() * 12 + 2);
                for i in given {
                    cmd.arg(&i.key[..]);
                }
                cmd.arg(*now).arg(given.len());
                for i in given {
                    i.push_general(&mut cmd);
                }
                tokio::time::timeout(deadline, conn.eval(script, &cmd))
                    .await
                    .unwrap_or(Err(StoreError::Timeout))
            }
        });
        for r in futures::future::join_all(all).await {
            Counters::add(&counters.refunds, 1);
            if let Err(e) = r {
                Counters::add(&counters.refund_failures, 1);
                tracing::warn!(target: "flowgate_redis", error = %e, "cross-slot refund failed");
            }
        }
    });
    let _ = task.await;
}
