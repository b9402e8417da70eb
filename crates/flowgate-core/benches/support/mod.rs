//! Inputs shared by the core benchmark and the interleaved `versus_governor` example.

/// `n` distinct 16-byte keys (hex of a xorshift sequence).
pub(crate) fn keys(n: usize) -> Vec<String> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("{x:016x}")
        })
        .collect()
}

/// `len` indices into `0..n`, in a random-looking order.
pub(crate) fn random_indices(n: usize, len: usize) -> Vec<u32> {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as u32
        })
        .collect()
}
