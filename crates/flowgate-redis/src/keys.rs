//! Key layout: `flowgate:{<state key>}:<state tag>`, and Redis Cluster hash slots.
//!
//! The state key (built by `flowgate_core::ruleset::state_key`, percent-escaped so it holds no
//! `{` or `}`) is the hash tag, so every Redis key of one limit lives in one slot. The suffix is
//! the limit's [`StateTag`]: what its state means, so that a rule whose limit changes reads its
//! old key exactly when the old state means the same under the new limit, and starts on a key
//! of its own otherwise:
//!
//! | suffix | state |
//! |---|---|
//! | `g` | token and leaky bucket (one GCRA state, shared as in the memory store) |
//! | `f<window>` | fixed window: `f1s`, `f30s` |
//! | `W<window>/<buckets>` | sliding window: `W1s/10` |
//! | `S<window>` | sliding log: `S1m` |
//! | `c` | concurrency |
//!
//! A new limit or burst keeps the key (`flowgate:{api:per-user:user=7}:f1s` counts on when
//! `5/s` becomes `10/s`); a new window or algorithm moves to another (`...:f2s`), and the old key
//! expires by itself when its state is empty.

use std::io::Write as _;

use flowgate_core::{Limit, StateTag};
use smallvec::SmallVec;

/// The Redis key holding the state of `key` under `limit`.
pub fn redis_key(key: &str, limit: &Limit) -> String {
    tagged_key(key, limit.state_tag())
}

/// The Redis key holding the state of `key` under a limit of state tag `tag`.
pub fn tagged_key(key: &str, tag: StateTag) -> String {
    format!("flowgate:{{{key}}}:{tag}")
}

/// A Redis key held inline when it fits in 64 bytes, as most do: the store builds one per item
/// of every decision, and a heap allocation for each shows in the client's cost per request.
pub(crate) type KeyBytes = SmallVec<[u8; 64]>;

/// [`redis_key`] as [`KeyBytes`].
pub(crate) fn redis_key_bytes(key: &str, limit: &Limit) -> KeyBytes {
    let tag = limit.state_tag();
    let mut buf = [0u8; 64];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    if write!(cursor, "flowgate:{{{key}}}:{tag}").is_err() {
        return KeyBytes::from_vec(tagged_key(key, tag).into_bytes());
    }
    let len = cursor.position() as usize;
    KeyBytes::from_buf_and_len(buf, len)
}

/// The number of hash slots of a Redis Cluster.
pub const SLOTS: usize = 16384;

/// The Redis Cluster hash slot of a key (CRC16/XMODEM of its hash tag, modulo [`SLOTS`]).
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&close| close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(key);
    crc16(tagged) % SLOTS as u16
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowgate_core::{Algorithm, Quota};

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(slot(b"{}x"), crc16(b"{}x") % 16384);
    }

    fn limit(a: Algorithm, q: &str) -> Limit {
        Limit::new(a, q.parse::<Quota>().unwrap()).unwrap()
    }

    #[test]
    fn one_limit_one_slot() {
        let log = limit(Algorithm::SlidingLog, "5/s");
        let a = redis_key("r=1|user=7", &log);
        assert_eq!(a, "flowgate:{r=1|user=7}:S1s");
        assert_eq!(&redis_key_bytes("r=1|user=7", &log)[..], a.as_bytes());
        // Inline up to 64 bytes, on the heap beyond.
        let tb = limit(Algorithm::TokenBucket, "5/s");
        for n in [50, 51, 52, 200] {
            let key = "k".repeat(n);
            let b = redis_key_bytes(&key, &tb);
            assert_eq!(&b[..], redis_key(&key, &tb).as_bytes());
            assert_eq!(b.spilled(), n + 13 > 64, "{n}");
        }
        assert_eq!(slot(a.as_bytes()), slot(b"r=1|user=7"));
    }

    #[test]
    fn a_new_limit_keeps_the_key_a_new_window_does_not() {
        let fw = |q| redis_key("k", &limit(Algorithm::FixedWindow, q));
        assert_eq!(fw("5/s"), "flowgate:{k}:f1s");
        assert_eq!(fw("5/s"), fw("10/s"));
        assert_eq!(fw("5/2s"), "flowgate:{k}:f2s");
        assert_eq!(
            redis_key("k", &limit(Algorithm::SlidingWindow, "5/s")),
            "flowgate:{k}:W1s/10"
        );
    }
}
