//! One decide script call: the requests it carries, encoded for `decide.lua`, and its answer,
//! replayed with the Rust transitions into decisions.
//!
//! The script admits and records; the client derives every decision (remaining, reset, retry,
//! wait) from the states the script decided on, with the same transitions the memory store runs,
//! and checks that it admits what the script admitted. This is the one place that counts script
//! calls.

use std::collections::HashMap;
use std::sync::Arc;

use flowgate_core::{
    Algorithm, Calendar, Clock, Decision, Limit, Micros, State, StoreError, algorithm,
};
use redis::Value;
use smallvec::SmallVec;

use flowgate_core::limit::MAX_WARMUP_LEVELS;

use crate::conn::RedisConnection;
use crate::error::store_error;
use crate::keys::KeyBytes;
use crate::recorded::{invocation, split_recorded};
use crate::reservations::PutRequest;
use crate::scripts::code;
use crate::state;
use crate::stats::Counters;
use crate::time_source::TimeSource;

/// One item of a request, encoded.
#[derive(Clone, Debug)]
pub(crate) struct EncItem {
    /// Its Redis key.
    pub(crate) key: KeyBytes,
    pub(crate) limit: Limit,
    pub(crate) cost: u64,
    pub(crate) enforce: bool,
    /// The concurrency lease to grant (0 if none).
    pub(crate) lease: u64,
}

/// One request: its items, in order.
pub(crate) type Encoded = Vec<EncItem>;

/// What a call decided, for every item of its requests in order: the decision and, for a
/// sliding window that admitted with a cost, the bucket it counted in (what a cluster refund
/// gives back to).
#[derive(Debug, Default)]
pub(crate) struct Decided {
    pub(crate) now: Micros,
    pub(crate) decisions: Vec<Decision>,
    pub(crate) charged: Vec<Option<u64>>,
    /// Per request, whether its reservation's record was written with it.
    pub(crate) recorded: Vec<bool>,
}

/// A calendar window's periods around `near`: the start of the period holding it, its end, and
/// the next period's end (see `fixed_window.lua`).
pub(crate) fn calendar_bounds(c: &Calendar, near: Micros) -> [u64; 3] {
    let (start, end) = c.period(near);
    [start, end, c.period(end).1]
}

/// How far before the periods sent Redis's clock may be: less than any period (the shortest
/// day is 22 hours, at Antarctica/Troll's change of time), so the period before `start` surely
/// ends at `start`. As `fixed_window.lua`'s `CALENDAR_REACH`.
const CALENDAR_REACH: Micros = 12 * 3_600_000_000;

/// The end of the window `fixed_window.lua` counts in at `now` given `bounds`: the period
/// before `start` ends at `start`; `None` (the script fails) when `now` is more than
/// [`CALENDAR_REACH`] before `start` or past the next period.
pub(crate) fn script_window_end([start, end, next]: [u64; 3], now: Micros) -> Option<Micros> {
    if now < start {
        (now >= start.saturating_sub(CALENDAR_REACH)).then_some(start)
    } else if now < end {
        Some(end)
    } else if now < next {
        Some(next)
    } else {
        None
    }
}

/// A limit as the script reads it: code, limit, and the parameters its algorithm's file names;
/// a calendar window's periods are those around `near`, the instant the script is expected to
/// decide at.
pub(crate) fn block(l: &Limit, near: Micros) -> [u64; 7] {
    let a = l.algorithm();
    let p = match (a, l.quota().calendar()) {
        (Algorithm::FixedWindow, Some(c)) => {
            let [x, y, z] = calendar_bounds(&c, near);
            [x, y, z, 0, 0]
        }
        (Algorithm::TokenBucket | Algorithm::LeakyBucket, _) => {
            let t = l.emission_interval();
            match l.warmup() {
                // (the levels packed as warmup.lua reads them: each below 2^26)
                Some(w) => [
                    t,
                    l.burst() * t,
                    l.max_wait(),
                    w.extra(),
                    w.warn() * MAX_WARMUP_LEVELS + w.ramp(),
                ],
                None => [t, l.burst() * t, l.max_wait(), 0, 0],
            }
        }
        (Algorithm::SlidingWindow, _) => {
            [l.window(), l.bucket_width(), u64::from(l.buckets()), 0, 0]
        }
        (Algorithm::FixedWindow | Algorithm::SlidingLog | Algorithm::Concurrency, _) => {
            [l.window(), 0, 0, 0, 0]
        }
    };
    [u64::from(code(l)), l.limit(), p[0], p[1], p[2], p[3], p[4]]
}

/// The largest cost sent to the script: above any limit (2^32 - 1), so it rejects the same, and
/// exact as a double. The client decides with the real cost.
const MAX_SENT_COST: u64 = 1 << 32;

/// Blocks one call can carry (an item names its block in a byte).
const MAX_BLOCKS: usize = 255;
/// Keys one call can carry (an item names its key in two bytes).
const MAX_KEYS: usize = u16::MAX as usize;

/// A call's arguments: its keys and its call string.
pub(crate) struct Call<'a> {
    pub(crate) keys: Vec<&'a [u8]>,
    pub(crate) string: Vec<u8>,
    /// Per key, the cost of the call's items on it if several requests share it (else 0), as
    /// `decide.lua`'s ARGV[2]; `None` when no key is shared.
    pub(crate) totals: Option<Vec<u8>>,
    /// The reservations' records written with their requests: each with its request's last
    /// item (from 1).
    pub(crate) records: Vec<(usize, &'a PutRequest)>,
}

/// Encodes the first requests of `requests` that fit in one call (all of them, but for a
/// request that gives a key another limit than an earlier one of the call, a rule changed
/// between them, or past the bounds on blocks and keys); answers the call and how many
/// requests it carries.
fn encode<'a>(
    time: &TimeSource,
    near: Micros,
    requests: &[&'a Encoded],
    records: &[Option<&'a PutRequest>],
) -> Result<(Call<'a>, usize), StoreError> {
    let mut blocks: SmallVec<[[u64; 7]; 4]> = SmallVec::new();
    // (foldhash: the default SipHash cost a few percent of the client's time on 3-rule calls)
    let mut keys: HashMap<&[u8], (u16, usize), foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(requests.len() * 2, Default::default());
    let mut key_list: Vec<&[u8]> = Vec::new();
    let mut items = Vec::with_capacity(requests.len() * 8);
    // Each item's key (from 1), to find the keys several requests share, and where its flags are.
    let mut item_keys: Vec<u16> = Vec::with_capacity(requests.len() * 2);
    let mut flags_at: Vec<usize> = Vec::with_capacity(requests.len() * 2);
    let mut taken = 0;
    let mut n = 0u32;
    'requests: for r in requests {
        let (blocks_before, keys_before, items_before) =
            (blocks.len(), key_list.len(), items.len());
        for (j, item) in r.iter().enumerate() {
            let b = block(&item.limit, near);
            let bi = match blocks.iter().position(|x| *x == b) {
                Some(i) => i,
                None => {
                    blocks.push(b);
                    blocks.len() - 1
                }
            };
            let (k, kb) = *keys.entry(&item.key[..]).or_insert_with(|| {
                key_list.push(&item.key[..]);
                (key_list.len() as u16, bi)
            });
            if kb != bi || blocks.len() > MAX_BLOCKS || key_list.len() > MAX_KEYS {
                // This request goes in the next call: undo what it added.
                blocks.truncate(blocks_before);
                for key in key_list.drain(keys_before..) {
                    keys.remove(key);
                }
                items.truncate(items_before);
                item_keys.truncate(n as usize);
                flags_at.truncate(n as usize);
                if taken == 0 {
                    // (a lone request's keys each have one limit: only the bounds can refuse it)
                    return Err(StoreError::Internal(format!(
                        "a request of more than {MAX_BLOCKS} distinct limits or {MAX_KEYS} keys"
                    )));
                }
                break 'requests;
            }
            let last = if j + 1 == r.len() { 2 } else { 0 };
            flags_at.push(items.len() + 4);
            push_item(&mut items, item.cost, bi, k, u8::from(item.enforce) | last);
            item_keys.push(k);
            if item.limit.algorithm() == Algorithm::Concurrency && item.cost > 0 {
                items.extend_from_slice(&(item.lease as f64).to_le_bytes());
            }
        }
        n += r.len() as u32;
        taken += 1;
    }
    // Flag 4: the call's only item on its key.
    let mut uses = vec![0u32; key_list.len()];
    for &k in &item_keys {
        uses[usize::from(k) - 1] += 1;
    }
    for (&k, &at) in item_keys.iter().zip(&flags_at) {
        if uses[usize::from(k) - 1] == 1 {
            items[at] |= 4;
        }
    }
    let (now, slack) = time.now_and_slack();
    let mut string = header(now, slack, &blocks, n, items.len());
    string.extend_from_slice(&items);
    let totals = shared_totals(&requests[..taken], &item_keys, key_list.len());
    let mut last_item = 0;
    let mut with_records = Vec::new();
    for (r, record) in requests[..taken]
        .iter()
        .zip(records.iter().chain(std::iter::repeat(&None)))
    {
        last_item += r.len();
        if let Some(record) = record {
            with_records.push((last_item, *record));
        }
    }
    Ok((
        Call {
            keys: key_list,
            string,
            totals,
            records: with_records,
        },
        taken,
    ))
}

/// Per key (`nkeys` of them, named from 1 by `item_keys`, each item's, in order), the cost of the
/// call's items on it if several of `requests` share it and it is no concurrency or warm-up key
/// (else 0),
/// as little-endian doubles; `None` when no key is shared. See `decide.lua`'s ARGV[2].
fn shared_totals(requests: &[&Encoded], item_keys: &[u16], nkeys: usize) -> Option<Vec<u8>> {
    if requests.len() < 2 {
        return None;
    }
    // Per key: the request it was first seen in, whether another one has it, the costs.
    let mut first = vec![usize::MAX; nkeys];
    let mut shared = vec![false; nkeys];
    let mut total = vec![0u64; nkeys];
    let mut keys = item_keys.iter();
    for (r, request) in requests.iter().enumerate() {
        for (item, &k) in request.iter().zip(keys.by_ref()) {
            let k = usize::from(k) - 1;
            if first[k] == usize::MAX {
                first[k] = r;
            }
            // (a warm-up bucket's surcharge moves its TAT past what its admission test reads,
            // so several requests' total admitted at once is not each admitted in turn)
            shared[k] |= first[k] != r
                && item.limit.algorithm() != Algorithm::Concurrency
                && item.limit.warmup().is_none();
            total[k] += item.cost.min(MAX_SENT_COST);
        }
    }
    if !shared.iter().any(|&s| s) {
        return None;
    }
    let mut out = Vec::with_capacity(8 * nkeys);
    for (t, s) in total.iter().zip(&shared) {
        out.extend_from_slice(&(if *s { *t as f64 } else { 0.0 }).to_le_bytes());
    }
    Some(out)
}

/// The call string's header and blocks (see `decide.lua`).
pub(crate) fn header(
    now: u64,
    slack: u64,
    blocks: &[[u64; 7]],
    items: u32,
    body: usize,
) -> Vec<u8> {
    let mut string = Vec::with_capacity(22 + blocks.len() * 49 + body);
    string.extend_from_slice(&(now as f64).to_le_bytes());
    string.extend_from_slice(&(slack as f64).to_le_bytes());
    string.extend_from_slice(&(blocks.len() as u16).to_le_bytes());
    string.extend_from_slice(&items.to_le_bytes());
    for b in blocks {
        string.push(b[0] as u8);
        for x in &b[1..] {
            string.extend_from_slice(&(*x as f64).to_le_bytes());
        }
    }
    string
}

/// An item's first bytes: its cost (255 when it follows), block and key (both from 1), flags;
/// then the cost when it did not fit in a byte.
pub(crate) fn push_item(out: &mut Vec<u8>, cost: u64, block: usize, key: u16, flags: u8) {
    let cost = cost.min(MAX_SENT_COST);
    let small = u8::try_from(cost).ok().filter(|&c| c < 255);
    out.push(small.unwrap_or(255));
    out.push((block + 1) as u8);
    out.extend_from_slice(&key.to_le_bytes());
    out.push(flags);
    if small.is_none() {
        out.extend_from_slice(&(cost as f64).to_le_bytes());
    }
}

/// The refund script's keys and call string (see `refund.lua`): `items` took their cost at
/// `now`; `extra` is each one's lease, or for a sliding window its bucket + 1.
pub(crate) fn encode_refund<'a>(
    now: Micros,
    items: &'a [EncItem],
    extra: &[u64],
) -> (Vec<&'a [u8]>, Vec<u8>) {
    let mut blocks: Vec<[u64; 7]> = Vec::new();
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut body = Vec::new();
    for (item, x) in items.iter().zip(extra) {
        let b = block(&item.limit, now);
        let bi = blocks.iter().position(|y| *y == b).unwrap_or_else(|| {
            blocks.push(b);
            blocks.len() - 1
        });
        let k = keys
            .iter()
            .position(|k| *k == &item.key[..])
            .unwrap_or_else(|| {
                keys.push(&item.key[..]);
                keys.len() - 1
            });
        push_item(&mut body, item.cost, bi, (k + 1) as u16, 0);
        body.extend_from_slice(&(*x as f64).to_le_bytes());
    }
    let mut string = header(now, 0, &blocks, items.len() as u32, body.len());
    string.extend_from_slice(&body);
    (keys, string)
}

pub(crate) fn bad(what: &str) -> StoreError {
    StoreError::Internal(format!("unexpected reply from the decide script: {what}"))
}

/// What sends script calls: the connection, the clock, the counters.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) conn: RedisConnection,
    pub(crate) time: TimeSource,
    pub(crate) counters: Arc<Counters>,
}

impl Caller {
    /// Decides `requests`, in order, in as few script calls as they fit in (one, unless a rule
    /// changed between two of them); one error fails them all.
    pub(crate) async fn decide(&self, requests: &[&Encoded]) -> Result<Decided, StoreError> {
        self.decide_recording(requests, &[]).await
    }

    /// [`Caller::decide`], writing each of `records` (the requests', in order; missing at the
    /// end: none) with its request's admission (single Redis only: the records' keys are in
    /// a slot of their own).
    pub(crate) async fn decide_recording(
        &self,
        requests: &[&Encoded],
        records: &[Option<&PutRequest>],
    ) -> Result<Decided, StoreError> {
        let mut out = Decided::default();
        let mut rest = requests;
        let mut rest_records = records;
        while !rest.is_empty() {
            let near = self.time.estimate();
            let (call, taken) = encode(&self.time, near, rest, rest_records)?;
            Counters::add(&self.counters.script_calls, 1);
            let inv = invocation(&call);
            let sent = self.time.local.now();
            let reply = self.conn.invoke(&inv).await.map_err(|e| store_error(&e))?;
            let received = self.time.local.now();
            let (reply, recorded) = split_recorded(reply, &call)?;
            let mut recorded = recorded.into_iter();
            for i in 0..taken {
                let has = rest_records.get(i).copied().flatten().is_some();
                out.recorded.push(has && recorded.next() == Some(true));
            }
            rest_records = rest_records.get(taken..).unwrap_or(&[]);
            let mut disagreed = None;
            let part = match replay(reply, &rest[..taken], call.keys.len(), near, &mut disagreed) {
                Ok(part) => part,
                Err(e) => {
                    if let Some(key) = disagreed {
                        self.forget(key).await;
                    }
                    return Err(e);
                }
            };
            self.time.observe(sent, received, part.now);
            out.now = part.now;
            out.decisions.extend(part.decisions);
            out.charged.extend(part.charged);
            rest = &rest[taken..];
        }
        Ok(out)
    }
}

impl Caller {
    /// Deletes a state the script and the replay read differently: not one Flowgate writes
    /// (another program's, or damaged), so that the key's next decision starts afresh instead
    /// of failing until the state expires.
    async fn forget(&self, key: &[u8]) {
        let shown = String::from_utf8_lossy(key);
        match self.conn.query::<i64>(redis::cmd("DEL").arg(key)).await {
            Ok(_) => tracing::error!(
                target: "flowgate::redis",
                key = %shown,
                "a limit's state is not one Flowgate writes (the script and the replay read it differently): deleted; the key starts afresh"
            ),
            Err(e) => tracing::error!(
                target: "flowgate::redis",
                key = %shown,
                error = %e,
                "a limit's state is not one Flowgate writes, and could not be deleted"
            ),
        }
    }
}

/// Reads the script's reply (`now`, the admissions, each key's state before the call) and
/// replays `requests` on those states, as the script decided them (a calendar window's periods
/// were sent around `near`). When the replay and the script disagree on an admission,
/// `disagreed` names the key.
fn replay<'r>(
    reply: Value,
    requests: &[&'r Encoded],
    nkeys: usize,
    near: Micros,
    disagreed: &mut Option<&'r [u8]>,
) -> Result<Decided, StoreError> {
    let Value::Array(vals) = reply else {
        return Err(bad("not an array"));
    };
    let [now, admissions, before @ ..] = &vals[..] else {
        return Err(bad("too short"));
    };
    let now = match now {
        Value::Int(i) => u64::try_from(*i).map_err(|_| bad("a negative time"))?,
        _ => return Err(bad("no time")),
    };
    let Value::BulkString(admissions) = admissions else {
        return Err(bad("admissions are not a string"));
    };
    let n: usize = requests.iter().map(|r| r.len()).sum();
    if admissions.len() != n || before.len() != nkeys {
        return Err(bad("of another size than the call"));
    }
    // The script counted a calendar window in the period it picked among those sent; the
    // replay counts in the period holding `now`. They are one unless Redis's clock and this
    // node's are about a period apart: refuse to report decisions the script did not make.
    for item in requests.iter().flat_map(|r| r.iter()) {
        if let Some(c) = item.limit.quota().calendar() {
            let picked = script_window_end(calendar_bounds(&c, near), now);
            if picked != Some(algorithm::fixed_window::window_end(&item.limit, now)) {
                return Err(StoreError::Internal(
                    "Redis's clock and this node's are a calendar period apart".into(),
                ));
            }
        }
    }
    // Each key's state as the admitted requests so far left it, parsed on first use.
    let mut states: HashMap<&[u8], State, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(nkeys, Default::default());
    let mut next_key = 0;
    let mut out = Decided {
        now,
        decisions: Vec::with_capacity(n),
        charged: Vec::with_capacity(n),
        recorded: Vec::new(),
    };
    let mut admissions = admissions.iter();
    for (ri, r) in requests.iter().enumerate() {
        let last_request = ri + 1 == requests.len();
        let mut tentative: SmallVec<[(&[u8], State); 4]> = SmallVec::new();
        let mut admitted = true;
        for item in r.iter() {
            let key = &item.key[..];
            if !states.contains_key(key) {
                let st = match before.get(next_key) {
                    Some(Value::BulkString(b)) => state::parse(&item.limit, Some(b)),
                    Some(Value::Nil) => state::parse(&item.limit, None),
                    _ => return Err(bad("not a state")),
                };
                next_key += 1;
                states.insert(key, st);
            }
            let st = match tentative.iter().find(|(k, _)| *k == key) {
                Some((_, s)) => s,
                None => &states[key],
            };
            let mut d = algorithm::check(&item.limit, st, now, item.cost);
            if admissions.next() != Some(&u8::from(d.allowed)) {
                *disagreed = Some(key);
                return Err(StoreError::Internal(
                    "the decide script and the Rust transition disagree on an admission".into(),
                ));
            }
            let took = d.allowed && item.cost > 0;
            out.charged
                .push(took.then(|| charged(&item.limit, st, now)).flatten());
            if took {
                if item.limit.algorithm() == Algorithm::Concurrency {
                    d.lease = Some(item.lease);
                }
                if r.len() == 1 {
                    // A request of one item is admitted with it: recorded in place (the last
                    // request's new states are read by no one: not made).
                    if let Some(s) = states.get_mut(key).filter(|_| !last_request) {
                        algorithm::apply(&item.limit, s, now, item.cost, item.lease);
                    }
                } else {
                    let mut new = st.clone();
                    algorithm::apply(&item.limit, &mut new, now, item.cost, item.lease);
                    match tentative.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, s)) => *s = new,
                        None => tentative.push((key, new)),
                    }
                }
            } else if !d.allowed && item.enforce {
                admitted = false;
            }
            out.decisions.push(d);
        }
        if admitted {
            for (k, s) in tentative {
                states.insert(k, s);
            }
        }
    }
    Ok(out)
}

/// The bucket a sliding window admits into from `st` at `now` (the newest one when the clock
/// stepped back behind it, as `algorithm::sliding_window::apply` counts); a warm-up bucket's
/// cooling position at `now` (`algorithm::warmup::position`). What a refund needs to restore
/// the state the request found.
fn charged(l: &Limit, st: &State, now: Micros) -> Option<u64> {
    if let Some(w) = l.warmup() {
        let s = match *st {
            State::Warmup { tat, cool_in } => algorithm::WarmupState { tat, cool_in },
            _ => algorithm::WarmupState::default(),
        };
        return Some(algorithm::warmup::position(
            w,
            l.emission_interval(),
            &s,
            now,
        ));
    }
    if l.algorithm() != Algorithm::SlidingWindow {
        return None;
    }
    let target = now / l.bucket_width();
    match st {
        State::SlidingWindow(s) if !s.counts.is_empty() => Some(s.head.max(target)),
        _ => Some(target),
    }
}
