//! Key layout: `flowgate:{<state key>}:<suffix>`, and Redis Cluster hash slots.
//!
//! The state key (built by `flowgate_core::ruleset::state_key`, percent-escaped so it holds no
//! `{` or `}`) is the hash tag, so every Redis key of one limit lives in one slot. The suffix
//! names the algorithm's state type, so a rule that changes its algorithm never reads a key of
//! another type: `g` (token and leaky bucket share GCRA state, as in the memory store), `f`
//! (fixed window), `W` (sliding window), `S` (sliding log), `c` (concurrency).

use flowgate_core::Algorithm;
use smallvec::SmallVec;

/// The suffix of an algorithm's Redis key.
pub(crate) fn suffix(a: Algorithm) -> &'static str {
    match a {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => "g",
        Algorithm::FixedWindow => "f",
        Algorithm::SlidingWindow => "W",
        Algorithm::SlidingLog => "S",
        Algorithm::Concurrency => "c",
    }
}

/// The pieces of the Redis key holding the state of `key` under `algorithm`, in order.
fn key_parts(key: &str, algorithm: Algorithm) -> [&str; 4] {
    ["flowgate:{", key, "}:", suffix(algorithm)]
}

/// The Redis key holding the state of `key` under `algorithm`.
pub fn redis_key(key: &str, algorithm: Algorithm) -> String {
    key_parts(key, algorithm).concat()
}

/// A Redis key held inline when it fits in 64 bytes, as most do: the store builds one per item
/// of every decision, and a heap allocation for each shows in the client's cost per request.
pub(crate) type KeyBytes = SmallVec<[u8; 64]>;

/// [`redis_key`] as [`KeyBytes`].
pub(crate) fn redis_key_bytes(key: &str, algorithm: Algorithm) -> KeyBytes {
    let parts = key_parts(key, algorithm);
    let len = parts.iter().map(|p| p.len()).sum();
    if len > 64 {
        return KeyBytes::from_vec(parts.concat().into_bytes());
    }
    // (copied into the buffer directly: SmallVec's extend_from_slice cost more than the
    // allocation it saves)
    let mut buf = [0u8; 64];
    let mut at = 0;
    for p in parts {
        buf[at..at + p.len()].copy_from_slice(p.as_bytes());
        at += p.len();
    }
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

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(slot(b"{}x"), crc16(b"{}x") % 16384);
    }

    #[test]
    fn one_limit_one_slot() {
        let a = redis_key("r=1|user=7", Algorithm::SlidingLog);
        assert_eq!(a, "flowgate:{r=1|user=7}:S");
        assert_eq!(
            &redis_key_bytes("r=1|user=7", Algorithm::SlidingLog)[..],
            a.as_bytes()
        );
        // Inline up to 64 bytes, on the heap beyond.
        for n in [50, 51, 52, 200] {
            let key = "k".repeat(n);
            let b = redis_key_bytes(&key, Algorithm::TokenBucket);
            assert_eq!(&b[..], redis_key(&key, Algorithm::TokenBucket).as_bytes());
            assert_eq!(b.spilled(), n + 13 > 64, "{n}");
        }
        assert_eq!(slot(a.as_bytes()), slot(b"r=1|user=7"));
    }
}
