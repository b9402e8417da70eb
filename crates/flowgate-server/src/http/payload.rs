//! A job's payload, stored byte-exact and answered as it was submitted.
//!
//! - `payload` (any JSON) is stored as its JSON text exactly as received: serde's raw text of
//!   the value, which has no surrounding whitespace, so its first byte is never `0x00`.
//! - `payload_base64` is stored as the marker byte `0x00` followed by the decoded bytes. No JSON
//!   text begins with `0x00`, so the two never mix; the marker counts in `max_payload`.
//!
//! An answer (lease, dead letters) reads the stored bytes back: a leading `0x00` gives
//! `payload_base64` of the rest; otherwise bytes that are one JSON text, with no surrounding
//! whitespace, give `payload` written as that text, unchanged (key order, duplicate keys, number
//! digits, escapes and nesting all as submitted); any other bytes (submitted as
//! `payload_base64` by a version without the marker, or through the Rust library) give
//! `payload_base64` of all of them.
//!
//! Nesting depth is not limited: serde_json reads a raw value (on submit and to validate on
//! answer) with its own stack of brackets rather than by recursion, and writes it verbatim, so
//! a payload nested 10,000 deep within the body limit is stored and answered unchanged.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;
use serde_json::value::RawValue;

/// The first stored byte of a payload submitted as `payload_base64`.
pub(super) const BYTES_MARKER: u8 = 0x00;

/// How a payload was submitted, to name it truthfully in an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Form {
    /// `payload`: stored as its JSON text.
    Json,
    /// `payload_base64`: stored as the marker and the decoded bytes.
    Base64,
}

impl Form {
    /// The field that carried the payload.
    pub(super) fn field(self) -> &'static str {
        match self {
            Form::Json => "payload",
            Form::Base64 => "payload_base64",
        }
    }

    /// What `stored` stored bytes are, as the user sent them: `72 bytes of JSON text`, or
    /// `71 bytes (72 stored, with the 1-byte marker of a payload_base64)`.
    pub(super) fn describe(self, stored: usize) -> String {
        match self {
            Form::Json => format!("{stored} bytes of JSON text"),
            Form::Base64 => format!(
                "{} bytes ({stored} stored, with the 1-byte marker of a payload_base64)",
                stored.saturating_sub(1)
            ),
        }
    }
}

/// The stored bytes of a `payload` (JSON).
pub(super) fn from_json(raw: &RawValue) -> Vec<u8> {
    raw.get().as_bytes().to_vec()
}

/// The stored bytes of a `payload_base64`, given its decoded bytes.
pub(super) fn from_bytes(decoded: &[u8]) -> Vec<u8> {
    let mut stored = Vec::with_capacity(decoded.len() + 1);
    stored.push(BYTES_MARKER);
    stored.extend_from_slice(decoded);
    stored
}

/// A payload as an answer carries it: exactly one of its two fields.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct Payload<'a> {
    /// The payload submitted as `payload`: its JSON text, as submitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<serde_json::Value>)]
    payload: Option<&'a RawValue>,
    /// The payload submitted as `payload_base64` (or bytes that are no one JSON text).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(content_encoding = "base64")]
    payload_base64: Option<String>,
}

/// The answer's form of stored payload bytes.
pub(super) fn answer(stored: &[u8]) -> Payload<'_> {
    if let Some((&BYTES_MARKER, bytes)) = stored.split_first() {
        return Payload {
            payload: None,
            payload_base64: Some(BASE64.encode(bytes)),
        };
    }
    match serde_json::from_slice::<&RawValue>(stored) {
        // (`from_slice` allows whitespace around the value, which `get` leaves out: such bytes
        // are answered as bytes, so that `payload` is always the stored text itself)
        Ok(raw) if raw.get().len() == stored.len() => Payload {
            payload: Some(raw),
            payload_base64: None,
        },
        _ => Payload {
            payload: None,
            payload_base64: Some(BASE64.encode(stored)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer with a field beside the payload, as the routes write them.
    #[derive(Serialize)]
    struct WithId<'a> {
        id: u32,
        #[serde(flatten)]
        payload: Payload<'a>,
    }

    fn answered(stored: &[u8]) -> String {
        serde_json::to_string(&WithId {
            id: 1,
            payload: answer(stored),
        })
        .unwrap()
    }

    #[test]
    fn json_text_comes_back_as_written() {
        for text in [
            r#"12345678901234567890.123456789"#,
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#""\u00e9""#,
            r#"[1.0,-0,1e400]"#,
        ] {
            let raw: Box<RawValue> = serde_json::from_str(text).unwrap();
            let stored = from_json(&raw);
            assert_eq!(answered(&stored), format!(r#"{{"id":1,"payload":{text}}}"#));
        }
    }

    #[test]
    fn deep_nesting_is_read_and_written_without_recursion() {
        let depth = 100_000;
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let raw: Box<RawValue> = serde_json::from_str(&text).unwrap();
        assert_eq!(
            answered(&from_json(&raw)),
            format!(r#"{{"id":1,"payload":{text}}}"#)
        );
    }

    #[test]
    fn bytes_come_back_as_bytes_whatever_they_hold() {
        for bytes in [&b"{\"a\":1}"[..], b"\x00\x01", b"", b"\xff\xfe", b"12"] {
            let stored = from_bytes(bytes);
            assert_eq!(stored[0], BYTES_MARKER);
            assert_eq!(
                answered(&stored),
                format!(r#"{{"id":1,"payload_base64":"{}"}}"#, BASE64.encode(bytes))
            );
        }
    }

    #[test]
    fn unmarked_bytes_that_are_not_exactly_one_json_text_come_back_as_bytes() {
        for stored in [&b" 1"[..], b"1 ", b"{", b"\xff", b"1 2", b""] {
            assert_eq!(
                answered(stored),
                format!(r#"{{"id":1,"payload_base64":"{}"}}"#, BASE64.encode(stored))
            );
        }
    }
}
