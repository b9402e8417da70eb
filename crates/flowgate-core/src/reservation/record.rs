//! A reservation's record and its one wire form (the memory store keeps the value, Redis the
//! text of [`Reservation::encode_items`]).

use std::fmt;
use std::str::FromStr;

use crate::clock::Micros;
use crate::random::{RandomError, seed128};

/// A reservation's id: 128 random bits from the operating system, as 32 lowercase hex digits,
/// so that no caller can guess another's. Held as its digits, inline: cloned and hashed without
/// an allocation (a record is indexed under its id three times).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReservationId([u8; ID_DIGITS]);

/// Digits of an id.
const ID_DIGITS: usize = 32;

impl ReservationId {
    /// A new random id.
    ///
    /// # Errors
    /// [`RandomError`] when the operating system's random source fails.
    pub fn random() -> Result<Self, RandomError> {
        let text = format!("{:032x}", seed128()?);
        let mut digits = [0; ID_DIGITS];
        digits.copy_from_slice(text.as_bytes());
        Ok(Self(digits))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        // (only ASCII hex digits are ever held: `random` and `from_str` check them)
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for ReservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ReservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReservationId({})", self.as_str())
    }
}

/// Text that is not a reservation id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a reservation id: expected {ID_DIGITS} lowercase hexadecimal digits")]
pub struct BadId;

impl FromStr for ReservationId {
    type Err = BadId;

    fn from_str(s: &str) -> Result<Self, BadId> {
        let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if s.len() == ID_DIGITS && s.bytes().all(hex) {
            let mut digits = [0; ID_DIGITS];
            digits.copy_from_slice(s.as_bytes());
            Ok(Self(digits))
        } else {
            Err(BadId)
        }
    }
}

/// The units a reservation took under one rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserved {
    /// The state key the units were taken from.
    pub key: String,
    /// The rule's domain.
    pub domain: String,
    /// The rule's name (its limit is the one in force when the commit or the expiry gives the
    /// units back: a limit has no wire form, and a charge counts under the limit checks see).
    pub rule: String,
    /// The units taken (the estimate).
    pub estimate: u64,
    /// The instant they were taken at (the store's clock).
    pub taken: Micros,
}

/// A reservation: its id, what it took, and when it expires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// Its id.
    pub id: ReservationId,
    /// What it took, one entry per rule.
    pub items: Vec<Reserved>,
    /// When it stops counting, if not committed before (the store's clock).
    pub expires: Micros,
}

/// A record's items that cannot be read back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a reservation record cannot be read: {0}")]
pub struct DecodeError(&'static str);

fn put_text(out: &mut String, s: &str) {
    out.push_str(itoa::Buffer::new().format(s.len()));
    out.push(':');
    out.push_str(s);
}

fn take_number<'a>(rest: &mut &'a str, end: char) -> Result<&'a str, DecodeError> {
    let (n, tail) = rest.split_once(end).ok_or(DecodeError("truncated"))?;
    *rest = tail;
    Ok(n)
}

fn take_u64(rest: &mut &str) -> Result<u64, DecodeError> {
    take_number(rest, ',')?
        .parse()
        .map_err(|_| DecodeError("bad number"))
}

fn take_text(rest: &mut &str) -> Result<String, DecodeError> {
    let len: usize = take_number(rest, ':')?
        .parse()
        .map_err(|_| DecodeError("bad length"))?;
    let text = rest.get(..len).ok_or(DecodeError("truncated text"))?;
    *rest = &rest[len..];
    Ok(text.to_owned())
}

impl Reservation {
    /// The items as text: per item `<estimate>,<taken>,` then the key, the domain and the rule,
    /// each `<length>:<bytes>`.
    pub fn encode_items(&self) -> String {
        let mut out = String::new();
        for i in &self.items {
            out.push_str(itoa::Buffer::new().format(i.estimate));
            out.push(',');
            out.push_str(itoa::Buffer::new().format(i.taken));
            out.push(',');
            put_text(&mut out, &i.key);
            put_text(&mut out, &i.domain);
            put_text(&mut out, &i.rule);
        }
        out
    }

    /// The items of [`Reservation::encode_items`]'s text.
    ///
    /// # Errors
    /// [`DecodeError`] for text it did not write.
    pub fn decode_items(mut text: &str) -> Result<Vec<Reserved>, DecodeError> {
        let rest = &mut text;
        let mut items = Vec::new();
        while !rest.is_empty() {
            let estimate = take_u64(rest)?;
            let taken = take_u64(rest)?;
            items.push(Reserved {
                key: take_text(rest)?,
                domain: take_text(rest)?,
                rule: take_text(rest)?,
                estimate,
                taken,
            });
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip() {
        let r = Reservation {
            id: ReservationId::random().unwrap(),
            items: vec![
                Reserved {
                    key: "llm:tokens:key=a,b:c".into(),
                    domain: "llm".into(),
                    rule: "tokens".into(),
                    estimate: 1000,
                    taken: 17,
                },
                Reserved {
                    key: "x:y:z=1".into(),
                    domain: "d:é".into(),
                    rule: "r,1".into(),
                    estimate: 1,
                    taken: u64::MAX,
                },
            ],
            expires: 5,
        };
        let text = r.encode_items();
        assert_eq!(Reservation::decode_items(&text).unwrap(), r.items);
        assert!(Reservation::decode_items(&text[..text.len() - 1]).is_err());
        assert!(Reservation::decode_items("x").is_err());
    }

    #[test]
    fn ids_are_random_and_parsed_strictly() {
        let a = ReservationId::random().unwrap();
        assert_ne!(a, ReservationId::random().unwrap());
        assert_eq!(a.as_str().parse::<ReservationId>().unwrap(), a);
        assert!("ABC".parse::<ReservationId>().is_err());
        assert!(
            "0123456789abcdef0123456789abcdeg"
                .parse::<ReservationId>()
                .is_err()
        );
    }
}
