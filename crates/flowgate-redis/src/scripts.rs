//! The Lua scripts, assembled at startup from `scripts/*.lua`, and the encoding of their
//! arguments and replies.
//!
//! One file per algorithm, with a `KEYS[i]: … ARGV[j]: …` contract comment, holds two things:
//!
//! - its `load`/`check`/`apply`/`store`/`refund` functions, which `driver.lua` runs for calls in
//!   which some request names one key twice (its items must see each other's tentative state)
//!   and `refund.lua` for cluster compensation. Such a script defines only the functions of the
//!   algorithms its call uses: Redis creates every closure again on each call.
//! - after a `-- @@fast` line, a straight-line fragment (no function definitions at all) that
//!   `fast.lua` dispatches to by algorithm code, for every other call (the common case: any
//!   number of requests of any number of items, mixed algorithms, all-or-nothing per request
//!   with deferred writes). Each distinct limit sends its parameters once per call, and only the
//!   ones its algorithm reads.
//!
//! Replies are Lua numbers, which Redis turns into integers (no string formatting). Scripts are
//! sent with EVALSHA, and loaded on NOSCRIPT.

use std::sync::LazyLock;
use std::time::Duration;

use flowgate_core::{Algorithm, Decision, Limit, Micros, State, StoreError, algorithm};

use crate::keys::KeyBytes;
use crate::state;
use redis::{Cmd, Value};

const COMMON: &str = include_str!("../scripts/common.lua");
const ITEMS: &str = include_str!("../scripts/items.lua");
const DRIVER: &str = include_str!("../scripts/driver.lua");
const FAST: &str = include_str!("../scripts/fast.lua");
const REFUND: &str = include_str!("../scripts/refund.lua");
const RELEASE: &str = include_str!("../scripts/release.lua");

/// The algorithm files, by algorithm code - 1 (see [`code`]).
const ALGORITHMS: [&str; 5] = [
    include_str!("../scripts/gcra.lua"),
    include_str!("../scripts/fixed_window.lua"),
    include_str!("../scripts/sliding_window.lua"),
    include_str!("../scripts/sliding_log.lua"),
    include_str!("../scripts/concurrency.lua"),
];

const FAST_MARK: &str = "\n-- @@fast\n";

/// The function part of an algorithm file (before its `-- @@fast` line).
fn library(src: &str) -> &str {
    src.split_once(FAST_MARK).map_or(src, |(lib, _)| lib)
}

/// The straight-line part of an algorithm file (after its `-- @@fast` line).
fn fast_section(src: &str) -> &str {
    src.split_once(FAST_MARK).map_or("", |(_, fast)| fast)
}

/// The source of the general decide script with the functions of the algorithms in `mask`
/// (bit `code - 1` per algorithm).
fn general_source(mask: usize) -> String {
    let mut s = String::from(COMMON);
    for (i, src) in ALGORITHMS.iter().enumerate() {
        if mask & (1 << i) != 0 {
            s.push('\n');
            s.push_str(library(src));
        }
    }
    s.push('\n');
    s.push_str(ITEMS);
    s.push('\n');
    s.push_str(DRIVER);
    s
}

/// The source of the fast decide script: `fast.lua` with every algorithm's `-- @@fast` fragment
/// in its dispatch.
pub fn fast_lua() -> String {
    let dispatch = |codes: std::ops::RangeInclusive<usize>| {
        let mut d = String::new();
        for c in codes.clone() {
            let kw = if c == *codes.start() { "if" } else { "elseif" };
            // (`code < c + 1`, not `code == c`: see the comparisons in fast.lua)
            d.push_str(&format!("{kw} code < {} then\n", c + 1));
            d.push_str(fast_section(ALGORITHMS[c - 1]));
            d.push('\n');
        }
        d.push_str("end");
        d
    };
    FAST.replace("@ALGORITHMS@", &dispatch(1..=5))
}

/// The source of the general decide script for requests using `algorithms` (any number of
/// items, mixed algorithms).
pub fn decide_lua(algorithms: &[Algorithm]) -> String {
    general_source(
        algorithms
            .iter()
            .fold(0, |m, &a| m | (1 << (code(a) as usize - 1))),
    )
}

/// The source of the refund script (Redis Cluster compensation).
pub fn refund_lua() -> String {
    let mut s = String::from(COMMON);
    for src in ALGORITHMS {
        s.push('\n');
        s.push_str(library(src));
    }
    s.push('\n');
    s.push_str(ITEMS);
    s.push('\n');
    s.push_str(REFUND);
    s
}

/// The source of the lease release script.
pub fn release_lua() -> String {
    format!(
        "{COMMON}\n{}\n{RELEASE}",
        library(ALGORITHMS[code(Algorithm::Concurrency) as usize - 1])
    )
}

/// A script: its source and SHA1.
pub(crate) struct Lua {
    pub(crate) code: String,
    pub(crate) hash: String,
}

impl Lua {
    fn new(code: String) -> Self {
        let hash = redis::Script::new(&code).get_hash().to_owned();
        Self { code, hash }
    }

    /// An EVALSHA command of this script with `keys` keys (push them, then the arguments).
    pub(crate) fn cmd(&self, keys: usize, capacity: usize) -> Cmd {
        let mut c = Cmd::with_capacity(3 + capacity, 64 + capacity * 12);
        c.arg("EVALSHA").arg(self.hash.as_bytes()).arg(keys);
        c
    }
}

/// General decide scripts by algorithm mask (index = mask, 0 unused).
pub(crate) static GENERAL: LazyLock<Vec<Lua>> =
    LazyLock::new(|| (0..32).map(|m| Lua::new(general_source(m))).collect());
/// The fast decide script.
pub(crate) static FAST_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(fast_lua()));
pub(crate) static REFUND_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(refund_lua()));
pub(crate) static RELEASE_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(release_lua()));

/// Parameters per item of the general script (`ITEM_ARGS` in `items.lua`).
pub(crate) const ITEM_ARGS: usize = 11;
/// Values per item in the decide scripts' reply.
const REPLY_FIELDS: usize = 5;

pub(crate) fn code(a: Algorithm) -> u64 {
    match a {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => 1,
        Algorithm::FixedWindow => 2,
        Algorithm::SlidingWindow => 3,
        Algorithm::SlidingLog => 4,
        Algorithm::Concurrency => 5,
    }
}

/// A limit's parameters as the scripts read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    pub(crate) code: u64,
    pub(crate) limit: u64,
    pub(crate) window: u64,
    pub(crate) burst: u64,
    pub(crate) t: u64,
    pub(crate) width: u64,
    pub(crate) buckets: u64,
    pub(crate) max_wait: u64,
}

impl Params {
    pub(crate) fn of(l: &Limit) -> Self {
        Self {
            code: code(l.algorithm()),
            limit: l.limit(),
            window: l.window(),
            burst: l.burst(),
            t: l.emission_interval(),
            width: l.bucket_width(),
            buckets: u64::from(l.buckets()),
            max_wait: l.max_wait(),
        }
    }

    /// Appends this limit's block for the fast script to its call string (`'<Bdddd'`: code,
    /// limit and the three parameters its algorithm reads).
    pub(crate) fn push_fast(&self, call: &mut Vec<u8>) {
        let p = match self.code {
            1 => [self.t, self.burst * self.t, self.max_wait],
            3 => [self.window, self.width, self.buckets],
            _ => [self.window, 0, 0],
        };
        call.push(self.code as u8);
        for x in [self.limit, p[0], p[1], p[2]] {
            call.extend_from_slice(&(x as f64).to_le_bytes());
        }
    }
}

/// One item of a request, encoded.
#[derive(Clone, Debug)]
pub(crate) struct EncItem {
    pub(crate) key: KeyBytes,
    pub(crate) limit: Limit,
    pub(crate) params: Params,
    pub(crate) cost: u64,
    pub(crate) enforce: bool,
    /// The concurrency lease to grant (0 if none).
    pub(crate) lease: u64,
}

/// Distinct limits one fast call can carry (an item names its block in one byte, from 1).
pub(crate) const MAX_BLOCKS: usize = 255;

/// The largest cost sent to the fast script: above any limit (`MAX_LIMIT` = 2^32 - 1), so it
/// rejects the same, and exact as a double. The client decides with the real cost.
const MAX_SENT_COST: u64 = 1 << 32;

/// Whether an item's key is in other requests of its fast call (`shared` in `fast.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shared {
    /// The key is in this request only: the script writes it after the request.
    No,
    /// The call's first item on a key several requests have, with the costs (as sent) of all
    /// the call's items on it: its reply carries the key's state before the call, and the
    /// script writes the key after the last request.
    First(u64),
    /// A later item on such a key: its reply carries no state (the client replays the earlier
    /// items on that key).
    Later,
}

impl Shared {
    /// The item's `shared` byte.
    fn code(self) -> u8 {
        match self {
            Shared::No => 0,
            Shared::First(_) => 1,
            Shared::Later => 2,
        }
    }
}

/// Bytes of one item in the fast script's call string (a cost above 254 adds 8, a concurrency
/// item's lease 8).
pub(crate) const FAST_ITEM_BYTES: usize = 7;

/// The cost byte of an item whose cost follows as a double.
const COST_FOLLOWS: u8 = 255;
/// Items one fast call can carry (their keys are named by 16-bit indexes).
pub(crate) const MAX_FAST_ITEMS: usize = u16::MAX as usize;
/// Bytes of one block in the fast script's call string.
pub(crate) const FAST_BLOCK_BYTES: usize = 33;

impl EncItem {
    /// Appends the item to the fast script's call string (7 bytes: the cost, or 255 when it
    /// follows as `'<d'`; its limit's `block` (from 0, sent from 1) in a byte; its `key` (index
    /// in the call's keys, from 1) in two bytes, low first; `enforce`; whether its key is
    /// [`Shared`] with another request of the call; whether it is the `last` of its request;
    /// then the cost when it did not fit in a byte and, for a concurrency item with a cost under
    /// a limit above 0, the lease, as `'<d'`). Doubles are exact: costs are capped at 2^32,
    /// lease ids below 2^52.
    pub(crate) fn push_fast(
        &self,
        block: usize,
        key: u16,
        shared: Shared,
        last: bool,
        items: &mut Vec<u8>,
    ) {
        let cost = u8::try_from(self.cost).ok().filter(|&c| c < COST_FOLLOWS);
        items.push(cost.unwrap_or(COST_FOLLOWS));
        items.push((block + 1) as u8);
        items.extend_from_slice(&key.to_le_bytes());
        items.push(u8::from(self.enforce));
        items.push(shared.code());
        items.push(u8::from(last));
        if cost.is_none() {
            items.extend_from_slice(&(self.sent_cost() as f64).to_le_bytes());
        }
        if let Shared::First(tot) = shared {
            items.extend_from_slice(&(tot as f64).to_le_bytes());
        }
        // (read by the concurrency fragment, which runs with a cost only under a limit above 0)
        if self.params.code == 5 && self.params.limit > 0 && self.cost > 0 {
            items.extend_from_slice(&(self.lease as f64).to_le_bytes());
        }
    }

    /// The cost the fast script is sent (see [`MAX_SENT_COST`]).
    pub(crate) fn sent_cost(&self) -> u64 {
        self.cost.min(MAX_SENT_COST)
    }

    /// Appends the item's parameters for the general script (see `read_item` in `items.lua`).
    pub(crate) fn push_general(&self, c: &mut Cmd) {
        let p = &self.params;
        c.arg(p.code)
            .arg(p.limit)
            .arg(p.window)
            .arg(p.burst)
            .arg(p.t)
            .arg(p.width)
            .arg(p.buckets)
            .arg(p.max_wait)
            .arg(self.cost)
            .arg(u64::from(self.enforce))
            .arg(self.lease);
    }
}

/// One decision as the script returns it, before the limit is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Raw {
    pub(crate) allowed: bool,
    pub(crate) remaining: u64,
    pub(crate) reset_after: Micros,
    pub(crate) retry_after: Option<Micros>,
    pub(crate) wait: Micros,
    pub(crate) lease: Option<u64>,
    /// For an admitted sliding window, the bucket it counted in (the newest, if the clock had
    /// stepped back), when known: what a cross-slot refund takes back.
    pub(crate) charged: Option<u64>,
}

impl Raw {
    pub(crate) fn decision(self, limit: &Limit) -> Decision {
        Decision {
            allowed: self.allowed,
            limit: limit.limit(),
            remaining: self.remaining,
            reset_after: Duration::from_micros(self.reset_after),
            retry_after: self.retry_after.map(Duration::from_micros),
            wait: Duration::from_micros(self.wait),
            lease: self.lease,
        }
    }
}

fn bad(what: &str) -> StoreError {
    StoreError::Internal(format!("unexpected reply from the decide script: {what}"))
}

fn int(v: &Value) -> Result<i64, StoreError> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("not an integer")),
        Value::SimpleString(s) => s.parse().map_err(|_| bad("not an integer")),
        _ => Err(bad("not an integer")),
    }
}

fn uint(v: &Value) -> Result<u64, StoreError> {
    u64::try_from(int(v)?).map_err(|_| bad("negative"))
}

/// Reads the fast script's reply to the requests `requests` (each its items, in order): the
/// `now` it used and a decision for every item, derived from the state the script decided the
/// item on with the Rust transition, and checked against the script's admission (one byte per
/// item, in one string).
///
/// A key that several requests of the call share is sent once, with its state before the call,
/// on its first item. `prev` says, for each item of the call in order, the item (from 0) before
/// it on its key, or [`NO_PREV`] when the reply carries its state: a later item on a key decides
/// on that item's state after that item's request, replayed here with the Rust transition
/// exactly as the script recorded it (the item admitted with a cost, in an admitted request).
/// The client so receives and parses a hot key's state once per call.
pub(crate) fn parse_fast<'a>(
    v: Value,
    requests: impl Iterator<Item = &'a [EncItem]>,
    prev: &[u32],
) -> Result<(Micros, Vec<Raw>), StoreError> {
    let Value::Array(vals) = v else {
        return Err(bad("not an array"));
    };
    let [now, admissions, states @ ..] = &vals[..] else {
        return Err(bad("too short"));
    };
    let now = uint(now)?;
    let Value::BulkString(admissions) = admissions else {
        return Err(bad("admissions are not a string"));
    };
    if admissions.len() != prev.len() {
        return Err(bad("admissions of another number of items"));
    }
    let mut admissions = admissions.iter();
    let mut rest = states;
    let mut out = Vec::with_capacity(prev.len());
    // Each item decided so far, but for the last request's (which no item follows): the state
    // it was decided on, and whether its request recorded it (taken by the next item on its
    // key, at most one). A call of one request (no coalescing) keeps nothing.
    let mut seen: Vec<(&EncItem, State, bool)> = Vec::new();
    let mut requests = requests.peekable();
    let mut prev = prev.iter();
    while let Some(items) = requests.next() {
        let keep = requests.peek().is_some();
        let first = seen.len();
        let mut admitted = true;
        for item in items {
            let (Some(&p), Some(&allowed)) = (prev.next(), admissions.next()) else {
                return Err(bad("more items than sent"));
            };
            let st = if p == NO_PREV {
                let [v, tail @ ..] = rest else {
                    return Err(bad("too short"));
                };
                rest = tail;
                match v {
                    Value::Nil => state::parse(&item.limit, None),
                    Value::BulkString(b) => state::parse(&item.limit, Some(b)),
                    _ => return Err(bad("not a state")),
                }
            } else {
                let Some((prev, st, recorded)) = usize::try_from(p)
                    .ok()
                    .filter(|&j| j < first)
                    .and_then(|j| seen.get_mut(j))
                    .filter(|(p, _, _)| p.key == item.key && p.params == item.params)
                else {
                    return Err(bad("a state of no earlier item on the key"));
                };
                let mut st = std::mem::take(st);
                // (recorded: that item admitted, so its check need not run again)
                if *recorded {
                    algorithm::apply(&prev.limit, &mut st, now, prev.cost, prev.lease);
                }
                st
            };
            let d = algorithm::check(&item.limit, &st, now, item.cost);
            // The script recorded (or not) by its own admission: a decision that disagreed
            // would report what Redis did not do.
            if allowed != u8::from(d.allowed) {
                return Err(StoreError::Internal(
                    "the decide script and the Rust transition disagree on an admission".into(),
                ));
            }
            admitted &= d.allowed || !item.enforce;
            out.push(Raw {
                allowed: d.allowed,
                remaining: d.remaining,
                reset_after: micros(d.reset_after),
                retry_after: d.retry_after.map(micros),
                wait: micros(d.wait),
                lease: (d.allowed && item.cost > 0 && item.lease != 0).then_some(item.lease),
                charged: (d.allowed && item.cost > 0)
                    .then(|| charged(&item.limit, &st, now))
                    .flatten(),
            });
            if keep {
                seen.push((item, st, d.allowed && item.cost > 0));
            }
        }
        if keep && !admitted {
            for s in &mut seen[first..] {
                s.2 = false;
            }
        }
    }
    if !rest.is_empty() {
        return Err(bad("too long"));
    }
    Ok((now, out))
}

/// In `prev` (see [`parse_fast`]): the item's reply carries its key's state.
pub(crate) const NO_PREV: u32 = u32::MAX;

/// The bucket a sliding window admitted into from `st` at `now` (the newest one when the clock
/// has stepped back behind it, as `algorithm::sliding_window::apply` counts); `None` for the
/// other algorithms.
fn charged(l: &Limit, st: &State, now: Micros) -> Option<u64> {
    if l.algorithm() != Algorithm::SlidingWindow {
        return None;
    }
    let target = now / l.bucket_width();
    match st {
        State::SlidingWindow(s) if !s.counts.is_empty() => Some(s.head.max(target)),
        _ => Some(target),
    }
}

fn micros(d: Duration) -> Micros {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// One decision of 5 fields (allowed, remaining, reset, retry or -1, wait).
fn fields(f: &[Value], item: &EncItem) -> Result<Raw, StoreError> {
    let allowed = int(&f[0])? == 1;
    Ok(Raw {
        allowed,
        remaining: uint(&f[1])?,
        reset_after: uint(&f[2])?,
        retry_after: u64::try_from(int(&f[3])?).ok(),
        wait: uint(&f[4])?,
        lease: (allowed && item.cost > 0 && item.lease != 0).then_some(item.lease),
        charged: None,
    })
}

/// Parses a decide script's reply: the `now` it used and the decisions of `items` (whose
/// concurrency leases are known here: a granted lease is the id that was sent).
pub(crate) fn parse_decide<'a>(
    v: Value,
    n: usize,
    items: impl Iterator<Item = &'a EncItem>,
) -> Result<(Micros, Vec<Raw>), StoreError> {
    let Value::Array(vals) = v else {
        return Err(bad("not an array"));
    };
    if vals.len() != 1 + n * REPLY_FIELDS {
        return Err(bad("wrong length"));
    }
    let now = uint(&vals[0])?;
    let mut out = Vec::with_capacity(n);
    for (f, item) in vals[1..].chunks_exact(REPLY_FIELDS).zip(items) {
        out.push(fields(f, item)?);
    }
    Ok((now, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::redis_key_bytes;
    use flowgate_core::Quota;

    const NOW: i64 = 1_700_000_000_000_000;

    /// Two 1-item requests on distinct token buckets (10/s).
    fn items() -> Vec<EncItem> {
        let limit = Limit::new(
            Algorithm::TokenBucket,
            "10/s".parse::<Quota>().unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (0..2)
            .map(|i| EncItem {
                key: redis_key_bytes(&format!("k{i}"), Algorithm::TokenBucket),
                limit: limit.clone(),
                params: Params::of(&limit),
                cost: 1,
                enforce: true,
                lease: 0,
            })
            .collect()
    }

    /// A fast reply: now, the admissions, then `states`.
    fn reply(admissions: &[u8], states: Vec<Value>) -> Value {
        let mut v = vec![Value::Int(NOW), Value::BulkString(admissions.to_vec())];
        v.extend(states);
        Value::Array(v)
    }

    #[test]
    fn each_item_decides_on_its_own_state() {
        let items = items();
        let requests = [&items[..1], &items[1..]];
        // The first key's TAT is 50 ms ahead: one token of 10 is taken (1 per 100 ms, burst 10);
        // the second key has none.
        let tat = ((NOW + 50_000) as f64).to_le_bytes();
        let states = vec![Value::BulkString(tat.to_vec()), Value::Nil];
        let (now, raws) = parse_fast(
            reply(&[1, 1], states),
            requests.iter().copied(),
            &[NO_PREV; 2],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(now, NOW as u64);
        assert_eq!(raws.iter().map(|r| r.remaining).collect::<Vec<_>>(), [8, 9]);
    }

    #[test]
    fn a_reply_cut_short_or_too_long_is_an_error_not_a_panic() {
        let items = items();
        let requests = [&items[..1], &items[1..]];
        let b = |v: &[u8]| Value::BulkString(v.to_vec());
        for (what, admissions, states) in [
            ("one state for two items", &[1u8, 1][..], vec![b(&[7])]),
            (
                "a state too many",
                &[1, 1],
                vec![b(&[7]), Value::Nil, b(&[7])],
            ),
            ("a state not a string", &[1, 1], vec![b(&[7]), Value::Okay]),
            (
                "one admission for two items",
                &[1],
                vec![b(&[7]), Value::Nil],
            ),
            (
                "an admission Rust disagrees with",
                &[1, 0],
                vec![b(&[7]), Value::Nil],
            ),
        ] {
            let got = parse_fast(
                reply(admissions, states),
                requests.iter().copied(),
                &[NO_PREV; 2],
            );
            assert!(
                matches!(got, Err(StoreError::Internal(_))),
                "{what}: {got:?}"
            );
        }
        let got = parse_fast(Value::Okay, requests.iter().copied(), &[NO_PREV; 2]);
        assert!(matches!(got, Err(StoreError::Internal(_))), "{got:?}");
    }
}
