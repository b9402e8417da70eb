//! The Lua scripts, assembled at compile time from `scripts/*.lua`, and the encoding of their
//! arguments and replies.
//!
//! One file per algorithm defines its `load`/`check`/`apply`/`store`/`refund` functions with a
//! `KEYS[i]: … ARGV[j]: …` contract comment; `driver.lua` loops over the requests and items of one
//! call. Each script is sent with EVALSHA and reloaded on NOSCRIPT by [`redis::Script`].

use std::sync::LazyLock;
use std::time::Duration;

use flowgate_core::{Algorithm, Decision, Limit, Micros};
use redis::{Script, Value};

use flowgate_core::StoreError;

macro_rules! lua {
    ($($file:literal),* $(,)?) => {
        concat!($(include_str!(concat!("../scripts/", $file)), "\n"),*)
    };
}

/// The source of the decide script (every algorithm and the driver).
pub const DECIDE_LUA: &str = lua!(
    "common.lua",
    "gcra.lua",
    "fixed_window.lua",
    "sliding_window.lua",
    "sliding_log.lua",
    "concurrency.lua",
    "items.lua",
    "driver.lua",
);

/// The decide script of one algorithm (common + that algorithm + the driver): requests whose
/// items all run one algorithm use it, which spares Redis defining the other algorithms'
/// functions on every call (about 2.5 us of its time).
macro_rules! decide_one {
    ($file:literal) => {
        lua!("common.lua", $file, "items.lua", "driver.lua")
    };
}

/// The sources of the per-algorithm decide scripts, by algorithm code - 1.
pub const DECIDE_BY_ALGORITHM_LUA: [&str; 5] = [
    decide_one!("gcra.lua"),
    decide_one!("fixed_window.lua"),
    decide_one!("sliding_window.lua"),
    decide_one!("sliding_log.lua"),
    decide_one!("concurrency.lua"),
];

/// The source of the refund script (Redis Cluster compensation).
pub const REFUND_LUA: &str = lua!(
    "common.lua",
    "gcra.lua",
    "fixed_window.lua",
    "sliding_window.lua",
    "sliding_log.lua",
    "concurrency.lua",
    "items.lua",
    "refund.lua",
);

/// The source of the lease release script.
pub const RELEASE_LUA: &str = lua!("common.lua", "concurrency.lua", "release.lua");

pub(crate) static DECIDE: LazyLock<Script> = LazyLock::new(|| Script::new(DECIDE_LUA));
pub(crate) static DECIDE_BY_ALGORITHM: LazyLock<[Script; 5]> =
    LazyLock::new(|| DECIDE_BY_ALGORITHM_LUA.map(Script::new));
pub(crate) static REFUND: LazyLock<Script> = LazyLock::new(|| Script::new(REFUND_LUA));
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_LUA));

/// Parameters per item (`ITEM_ARGS` in `items.lua`).
pub(crate) const ITEM_ARGS: usize = 11;
/// Values per item in the decide script's reply.
const REPLY_FIELDS: usize = 6;

pub(crate) fn code(a: Algorithm) -> u64 {
    match a {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => 1,
        Algorithm::FixedWindow => 2,
        Algorithm::SlidingWindow => 3,
        Algorithm::SlidingLog => 4,
        Algorithm::Concurrency => 5,
    }
}

/// Appends one item's parameters (see `read_item` in `items.lua`).
pub(crate) fn push_item(args: &mut Vec<u64>, limit: &Limit, cost: u64, enforce: bool, lease: u64) {
    args.extend_from_slice(&[
        code(limit.algorithm()),
        limit.limit(),
        limit.window(),
        limit.burst(),
        limit.emission_interval(),
        limit.bucket_width(),
        u64::from(limit.buckets()),
        limit.max_wait(),
        cost,
        u64::from(enforce),
        lease,
    ]);
}

/// The decide script for requests whose items' algorithm codes are `codes`.
pub(crate) fn decide_script(mut codes: impl Iterator<Item = u64>) -> &'static Script {
    let Some(first) = codes.next() else {
        return &DECIDE;
    };
    match usize::try_from(first) {
        Ok(c @ 1..=5) if codes.all(|x| x == first) => &DECIDE_BY_ALGORITHM[c - 1],
        _ => &DECIDE,
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
    match v {
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("not an unsigned integer")),
        other => u64::try_from(int(other)?).map_err(|_| bad("negative")),
    }
}

/// Parses the decide script's reply: the `now` it used and `items` decisions.
pub(crate) fn parse_decide(v: Value, items: usize) -> Result<(Micros, Vec<Raw>), StoreError> {
    let Value::Array(vals) = v else {
        return Err(bad("not an array"));
    };
    if vals.len() != 1 + items * REPLY_FIELDS {
        return Err(bad("wrong length"));
    }
    let now = uint(&vals[0])?;
    let mut out = Vec::with_capacity(items);
    for f in vals[1..].chunks_exact(REPLY_FIELDS) {
        let retry = int(&f[3])?;
        let lease = uint(&f[5])?;
        out.push(Raw {
            allowed: int(&f[0])? == 1,
            remaining: uint(&f[1])?,
            reset_after: uint(&f[2])?,
            retry_after: u64::try_from(retry).ok(),
            wait: uint(&f[4])?,
            lease: (lease != 0).then_some(lease),
        });
    }
    Ok((now, out))
}
