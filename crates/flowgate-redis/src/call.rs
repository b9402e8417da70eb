//! One decide script call: the requests it carries and their decisions.

use std::collections::HashMap;
use std::sync::Arc;

use flowgate_core::{Clock, Micros, StoreError};
use smallvec::SmallVec;

use crate::conn::Conn;
use crate::scripts::{
    EncItem, FAST_BLOCK_BYTES, FAST_ITEM_BYTES, FAST_SCRIPT, GENERAL, ITEM_ARGS, Lua, MAX_BLOCKS,
    MAX_FAST_ITEMS, NO_PREV, Params, Raw, Shared, parse_decide, parse_fast,
};

/// One request (a batch of items), encoded for the decide scripts.
#[derive(Debug, Default)]
pub(crate) struct Encoded {
    /// The items, in order.
    pub(crate) items: Vec<EncItem>,
}

impl Encoded {
    pub(crate) fn items(&self) -> usize {
        self.items.len()
    }
}

/// Where the scripts read the time: Redis's `TIME`, or (test only) an overriding clock.
#[derive(Clone, Default)]
pub(crate) struct TimeSource(pub(crate) Option<Arc<dyn Clock>>);

/// Extra expiry with a clock override: the test's clock may run slower than Redis's.
const OVERRIDE_SLACK_MS: u64 = 600_000;

impl TimeSource {
    /// The fast script's call string starts with its clock: `now` and the extra expiry, or 0 and
    /// 0 for Redis's `TIME` (see `fast.lua`).
    fn push_fast(&self, call: &mut Vec<u8>) {
        let (now, slack) = match &self.0 {
            Some(c) => (c.now(), OVERRIDE_SLACK_MS),
            None => (0, 0),
        };
        call.extend_from_slice(&(now as f64).to_le_bytes());
        call.extend_from_slice(&(slack as f64).to_le_bytes());
    }

    fn push(&self, cmd: &mut redis::Cmd) {
        match &self.0 {
            Some(c) => cmd.arg(c.now()).arg(OVERRIDE_SLACK_MS),
            None => cmd.arg("").arg(0),
        };
    }
}

/// Whether the fast script can decide `requests`: no request repeats a key.
fn fast(requests: &[&Encoded]) -> bool {
    requests.iter().all(|r| {
        r.items
            .iter()
            .enumerate()
            .all(|(i, x)| r.items[..i].iter().all(|y| y.key != x.key))
    })
}

/// A decide script call, built: the script, its command, and how to read its reply.
pub(crate) struct Prepared {
    pub(crate) script: &'static Lua,
    pub(crate) cmd: redis::Cmd,
    pub(crate) reply: Reply,
}

/// Which reply a decide script gives.
pub(crate) enum Reply {
    /// The fast script's: admissions and the states decided on; for each item of the call, the
    /// item before it on its key, or `NO_PREV` when the reply carries its state (see
    /// `parse_fast`).
    Fast(Vec<u32>),
    /// The general script's: whole decisions.
    General,
}

impl Reply {
    /// Reads `reply`: the `now` the script used and the decisions of every item of `requests`
    /// (the requests the call was built from), in order.
    pub(crate) fn parse(
        self,
        reply: redis::Value,
        requests: &[&Encoded],
    ) -> Result<(Micros, Vec<Raw>), StoreError> {
        match self {
            Reply::Fast(prev) => parse_fast(reply, requests.iter().map(|r| &r.items[..]), &prev),
            Reply::General => parse_decide(
                reply,
                requests.iter().map(|r| r.items()).sum(),
                requests.iter().flat_map(|r| r.items.iter()),
            ),
        }
    }
}

/// Builds the script call that decides `requests`: the fast script unless a request repeats a
/// key, two requests give one key different limits, or the call has more distinct limits than
/// it can carry.
pub(crate) fn prepare(time: &TimeSource, requests: &[&Encoded]) -> Prepared {
    let items = || requests.iter().flat_map(|r| r.items.iter());
    let n = items().count();
    let mut blocks: SmallVec<[Params; 4]> = SmallVec::new();
    let index: SmallVec<[usize; 256]> = items()
        .map(|i| match blocks.iter().position(|b| *b == i.params) {
            Some(b) => b,
            None => {
                blocks.push(i.params);
                blocks.len() - 1
            }
        })
        .collect();
    if blocks.len() <= MAX_BLOCKS && n <= MAX_FAST_ITEMS && fast(requests) {
        let script = &*FAST_SCRIPT;
        // The distinct keys, each sent (read, written) once; items name theirs by index, from
        // 1 as Lua's KEYS, and say whether another request of the call has it too (`shared`:
        // the script then writes it once, after the last request, and only the first item on
        // it carries its state in the reply). The keys of one request are distinct, so only
        // calls of several requests can share one.
        let mut keys: SmallVec<[&[u8]; 64]> = SmallVec::new();
        let mut uses: SmallVec<[u32; 64]> = SmallVec::new();
        // (each key's items' costs in all, as sent: a shared key's first item carries it, for
        // the script's bulk decisions, see `fast.lua`)
        let mut tots: SmallVec<[u64; 64]> = SmallVec::new();
        let key_index: SmallVec<[u16; 256]> = if requests.len() == 1 {
            keys.extend(items().map(|i| &i.key[..]));
            uses.resize(n, 1);
            (1..=n as u16).collect()
        } else {
            // (foldhash, seeded per process: the default SipHash cost about 3% of the client's
            // instructions on 3-rule requests)
            let mut seen: HashMap<&[u8], u16, foldhash::fast::RandomState> =
                HashMap::with_capacity_and_hasher(n, foldhash::fast::RandomState::default());
            // Each key's block: a key whose requests carry different limits (a rule that
            // changed between them) goes to the general script, as the client replays a shared
            // key's requests under one limit (`parse_fast`).
            let mut key_block: SmallVec<[usize; 64]> = SmallVec::new();
            let mut conflict = false;
            let key_index = items()
                .zip(&index)
                .map(|(i, b)| {
                    let k = *seen.entry(&i.key[..]).or_insert_with(|| {
                        keys.push(&i.key);
                        uses.push(0);
                        tots.push(0);
                        key_block.push(*b);
                        keys.len() as u16
                    });
                    uses[usize::from(k) - 1] += 1;
                    tots[usize::from(k) - 1] += i.sent_cost();
                    conflict |= key_block[usize::from(k) - 1] != *b;
                    k
                })
                .collect();
            if conflict {
                return general(time, requests);
            }
            key_index
        };
        let mut call =
            Vec::with_capacity(23 + FAST_BLOCK_BYTES * blocks.len() + n * FAST_ITEM_BYTES);
        time.push_fast(&mut call);
        call.extend_from_slice(&(blocks.len() as u16).to_le_bytes());
        call.extend_from_slice(&(n as u32).to_le_bytes());
        call.push(u8::from(keys.len() < n));
        for b in &blocks {
            b.push_fast(&mut call);
        }
        // Each key's latest item so far (from 0; `NO_PREV` before its first).
        let mut latest: SmallVec<[u32; 64]> = SmallVec::from_elem(NO_PREV, keys.len());
        let mut prev = Vec::with_capacity(n);
        let mut index = index.iter().zip(&key_index);
        for r in requests {
            let last = r.items.len().saturating_sub(1);
            for ((k, i), (b, key)) in r.items.iter().enumerate().zip(index.by_ref()) {
                let at = usize::from(*key) - 1;
                let p = std::mem::replace(&mut latest[at], prev.len() as u32);
                let shared = match (uses[at] > 1, p == NO_PREV) {
                    (false, _) => Shared::No,
                    (true, true) => Shared::First(tots[at]),
                    (true, false) => Shared::Later,
                };
                prev.push(p);
                i.push_fast(*b, *key, shared, k == last, &mut call);
            }
        }
        let mut cmd = script.cmd(keys.len(), keys.len() + 1);
        for k in &keys {
            cmd.arg(*k);
        }
        cmd.arg(call);
        return Prepared {
            script,
            cmd,
            reply: Reply::Fast(prev),
        };
    }
    general(time, requests)
}

/// The general script's call for `requests` (any requests; see `driver.lua`).
fn general(time: &TimeSource, requests: &[&Encoded]) -> Prepared {
    let items = || requests.iter().flat_map(|r| r.items.iter());
    let n = items().count();
    let mask = items().fold(0usize, |m, i| m | (1 << (i.params.code - 1)));
    let script = &GENERAL[mask];
    let mut cmd = script.cmd(n, n + 3 + requests.len() + n * ITEM_ARGS);
    for i in items() {
        cmd.arg(&i.key[..]);
    }
    time.push(&mut cmd);
    cmd.arg(requests.len());
    for r in requests {
        cmd.arg(r.items());
        for i in &r.items {
            i.push_general(&mut cmd);
        }
    }
    Prepared {
        script,
        cmd,
        reply: Reply::General,
    }
}

/// Decides `requests` in one script call; answers the `now` the script used and the decisions of
/// every item of every request, in order.
pub(crate) async fn decide(
    conn: &Conn,
    time: &TimeSource,
    requests: &[&Encoded],
) -> Result<(Micros, Vec<Raw>), StoreError> {
    let call = prepare(time, requests);
    let reply = conn.eval(call.script, &call.cmd).await?;
    call.reply.parse(reply, requests)
}
