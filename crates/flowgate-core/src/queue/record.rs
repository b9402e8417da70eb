//! A job's record: the one encoding both queue stores keep a job's fields in.
//!
//! `<submitted>:<attempts>:<nonce>:<key length>:<key>`, the numbers in decimal (the key's length
//! in bytes; 0 for a job without a key), followed by what the store keeps next to them:
//! - the Redis store (`queue.lua`'s `record`) the payload, as its state is the set the job is in;
//! - the disk store its place (state, instant, where a staged payload is), as its payload has a
//!   table of its own so that a delivery does not write the payload again.
//!
//! Text, so that the Lua script reads and writes it with one pattern. `submitted` and
//! `attempts` stay at or below 2^53 ([`MAX_RECORDED`]), which Lua's doubles hold exactly; the
//! nonce may be any `u64`, as the script keeps it as text.

use crate::clock::Micros;

/// The largest instant, count or id a record holds: 2^53 (microseconds past the year 2255, and
/// more ids than any store gives). A record beyond it was not written by a store, and its
/// numbers would overflow the queue's arithmetic.
pub const MAX_RECORDED: u64 = 1 << 53;

/// A job's fields as a record holds them, and what the store keeps after them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// When the job was submitted (µs since the epoch; 0 in a batch's record on Redis: the
    /// batch's instant).
    pub submitted: Micros,
    /// Deliveries so far.
    pub attempts: u32,
    /// The nonce of its last delivery (0: never delivered; any `u64`: the script keeps it as
    /// text).
    pub nonce: u64,
    /// Its idempotency key (an empty key is none).
    pub key: Option<&'a str>,
    /// The store's part: the payload (Redis) or the job's place (disk).
    pub rest: &'a [u8],
}

impl<'a> Record<'a> {
    /// Appends the record's fields (not `rest`) to `out`.
    pub fn write_fields(&self, out: &mut Vec<u8>) {
        // (itoa rather than `write!`: `core::fmt` cost 4 % of a disk submit's instructions)
        let mut digits = itoa::Buffer::new();
        let key = self.key.unwrap_or("");
        for n in [
            self.submitted,
            u64::from(self.attempts),
            self.nonce,
            key.len() as u64,
        ] {
            out.extend_from_slice(digits.format(n).as_bytes());
            out.push(b':');
        }
        out.extend_from_slice(key.as_bytes());
    }

    /// The length in bytes of the record's fields (not `rest`).
    pub fn fields_len(&self) -> usize {
        let digits = |n: u64| n.checked_ilog10().map_or(1, |d| d as usize + 1);
        let key = self.key.map_or(0, str::len);
        digits(self.submitted)
            + digits(u64::from(self.attempts))
            + digits(self.nonce)
            + digits(key as u64)
            + 4
            + key
    }

    /// The whole record: its fields, then `rest`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.fields_len() + self.rest.len());
        self.write_fields(&mut out);
        out.extend_from_slice(self.rest);
        out
    }

    /// Reads a record; `None` for bytes no store writes (a field that is not digits, `submitted`
    /// past [`MAX_RECORDED`], `attempts` past `u32::MAX - 1`, `nonce` past `u64::MAX`, a key that
    /// is cut short or not UTF-8).
    pub fn decode(b: &'a [u8]) -> Option<Self> {
        let mut at = 0;
        let mut number = || -> Option<u64> {
            let end = at + b.get(at..)?.iter().position(|&c| c == b':')?;
            let digits = &b[at..end];
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            at = end + 1;
            digits.iter().try_fold(0u64, |v, &d| {
                v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })
        };
        let submitted = number().filter(|&s| s <= MAX_RECORDED)?;
        let attempts = u32::try_from(number()?).ok().filter(|&a| a < u32::MAX)?;
        let nonce = number()?;
        let key_len = usize::try_from(number()?).ok()?;
        let key = std::str::from_utf8(b.get(at..at.checked_add(key_len)?)?).ok()?;
        Some(Self {
            submitted,
            attempts,
            nonce,
            key: (!key.is_empty()).then_some(key),
            rest: &b[at + key_len..],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_record_reads_as_the_script_writes_it() {
        let r = Record::decode(b"1700000000000000:2:77:3:abc{\"a\":1}").unwrap();
        assert_eq!(
            r,
            Record {
                submitted: 1_700_000_000_000_000,
                attempts: 2,
                nonce: 77,
                key: Some("abc"),
                rest: b"{\"a\":1}",
            }
        );
        let none = Record::decode(b"0:0:0:0:payload").unwrap();
        assert_eq!((none.key, none.rest), (None, &b"payload"[..]));
    }

    #[test]
    fn bytes_no_store_writes_are_refused() {
        for bad in [
            &b""[..],
            b"1:2:3:4",
            b"1:2:3:4:ab",
            b"+1:2:3:0:",
            b"1:-2:3:0:",
            b"1::3:0:",
            b"9007199254740993:0:0:0:",
            b"1:4294967295:0:0:",
            b"1:0:18446744073709551616:0:",
            b"1:0:0:99999999999999999999:",
            b"1:0:0:2:\xff\xfe",
        ] {
            assert_eq!(
                Record::decode(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(Record::decode(b"9007199254740992:4294967294:18446744073709551615:0:").is_some());
    }

    proptest! {
        #[test]
        fn a_record_reads_back(
            submitted in 0..=MAX_RECORDED,
            attempts in 0..u32::MAX,
            nonce in any::<u64>(),
            key in proptest::option::of("[^\u{0}]{1,20}"),
            rest in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let r = Record { submitted, attempts, nonce, key: key.as_deref(), rest: &rest };
            let bytes = r.encode();
            prop_assert_eq!(bytes.len(), r.fields_len() + rest.len());
            prop_assert_eq!(Record::decode(&bytes), Some(r));
        }
    }
}
