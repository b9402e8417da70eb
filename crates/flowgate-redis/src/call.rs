//! One decide script call: the requests it carries and their decisions.

use std::sync::Arc;

use flowgate_core::{Clock, Micros, StoreError};
use smallvec::SmallVec;

use crate::conn::Conn;
use crate::scripts::{
    EncItem, FAST_BLOCK_BYTES, FAST_ITEM_BYTES, FAST_SCRIPT, GENERAL, ITEM_ARGS, MAX_BLOCKS,
    Params, Raw, parse_decide, parse_fast,
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

/// Decides `requests` in one script call; answers the `now` the script used and the decisions of
/// every item of every request, in order.
pub(crate) async fn decide(
    conn: &Conn,
    time: &TimeSource,
    requests: &[&Encoded],
) -> Result<(Micros, Vec<Raw>), StoreError> {
    let items = || requests.iter().flat_map(|r| r.items.iter());
    let n = items().count();
    let mut blocks: SmallVec<[Params; 4]> = SmallVec::new();
    let index: SmallVec<[usize; 64]> = items()
        .map(|i| match blocks.iter().position(|b| *b == i.params) {
            Some(b) => b,
            None => {
                blocks.push(i.params);
                blocks.len() - 1
            }
        })
        .collect();
    if blocks.len() <= MAX_BLOCKS && fast(requests) {
        let script = &*FAST_SCRIPT;
        let mut call =
            Vec::with_capacity(18 + FAST_BLOCK_BYTES * blocks.len() + n * FAST_ITEM_BYTES);
        time.push_fast(&mut call);
        call.extend_from_slice(&(blocks.len() as u16).to_le_bytes());
        for b in &blocks {
            b.push_fast(&mut call);
        }
        let mut index = index.iter();
        for r in requests {
            let last = r.items.len().saturating_sub(1);
            for ((k, i), b) in r.items.iter().enumerate().zip(index.by_ref()) {
                i.push_fast(*b, k == last, &mut call);
            }
        }
        let mut cmd = script.cmd(n, n + 1);
        for i in items() {
            cmd.arg(i.key.as_bytes());
        }
        cmd.arg(call);
        let reply = conn.eval(script, &cmd).await?;
        return parse_fast(reply, items());
    }
    let (script, cmd) = {
        let mask = items().fold(0usize, |m, i| m | (1 << (i.params.code - 1)));
        let script = &GENERAL[mask];
        let mut cmd = script.cmd(n, n + 3 + requests.len() + n * ITEM_ARGS);
        for i in items() {
            cmd.arg(i.key.as_bytes());
        }
        time.push(&mut cmd);
        cmd.arg(requests.len());
        for r in requests {
            cmd.arg(r.items());
            for i in &r.items {
                i.push_general(&mut cmd);
            }
        }
        (script, cmd)
    };
    let reply = conn.eval(script, &cmd).await?;
    parse_decide(reply, n, items())
}
