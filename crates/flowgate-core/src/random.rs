//! Random seeds from the operating system: the one source of the identifiers and secrets that
//! must be unpredictable and must not repeat across processes (the Redis store's concurrency
//! lease ids, which every app server writes into the same keys; the queues' delivery nonces;
//! the memory store's hashing secret).
//!
//! When the operating system's source fails, [`seed`] says so ([`RandomError`]); it never
//! answers a fixed value: two processes on one fixed seed would hand out the same lease ids and
//! release each other's leases.

/// The operating system's random source failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct RandomError(String);

/// 64 random bits from the operating system.
///
/// # Errors
/// [`RandomError`] when the operating system's source fails.
pub fn seed() -> Result<u64, RandomError> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| RandomError(e.to_string()))?;
    Ok(u64::from_le_bytes(b))
}

/// 128 random bits from the operating system, in one read of its source.
///
/// # Errors
/// [`RandomError`] when the operating system's source fails.
pub fn seed128() -> Result<u128, RandomError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| RandomError(e.to_string()))?;
    Ok(u128::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ() {
        let a: Vec<u64> = (0..4).map(|_| seed().unwrap()).collect();
        let mut b = a.clone();
        b.sort_unstable();
        b.dedup();
        assert_eq!(b.len(), 4, "{a:?}");
    }
}
