//! The states the scripts keep (all binary strings), read back into flowgate-core's [`State`] so
//! that the client derives each decision with the same Rust transition the memory store runs
//! (see `scripts/decide.lua`).
//!
//! The states are little-endian binary (Lua `struct`): a double for each instant or index
//! (exact below 2^53, as every quantity is) and a u32 for each count (every limit fits). A value
//! of the wrong length counts as no state, on both sides.

use flowgate_core::algorithm::{
    ConcurrencyState, GcraState, Lease, SlidingLogState, SlidingWindowState,
};
use flowgate_core::{Algorithm, Limit, State};

/// The state stored as `v` (none when the key is missing) under `limit`'s algorithm.
pub(crate) fn parse(limit: &Limit, v: Option<&[u8]>) -> State {
    let Some(v) = v else {
        return State::Empty;
    };
    match limit.algorithm() {
        Algorithm::TokenBucket if limit.warmup().is_some() => warmup(v),
        Algorithm::TokenBucket | Algorithm::LeakyBucket => gcra(v),
        Algorithm::FixedWindow => fixed_window(v),
        Algorithm::SlidingWindow => sliding_window(limit, v),
        Algorithm::SlidingLog => sliding_log(limit, v),
        Algorithm::Concurrency => concurrency(v),
    }
}

/// A little-endian double holding an integer in `[0, 2^52)`, as every value the scripts write
/// does (instants in microseconds, bucket indexes, lease ids); `None` for anything else, which
/// makes the whole state count as none (the scripts check the same bound where a value drives
/// a loop).
fn double(b: &[u8]) -> Option<u64> {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    let x = f64::from_le_bytes(a);
    // Exact: the bound is a power of two, and within it the conversion truncates exactly, so a
    // round trip keeps only integers (NaN fails the range; `fract` is a libm call, this is not).
    let n = x as u64;
    ((0.0..BOUND).contains(&x) && n as f64 == x).then_some(n)
}

/// 2^52: above any value written (microseconds since the epoch are about 2^51 until the year
/// 2112) and below 2^53, where doubles stop holding every integer.
const BOUND: f64 = 4_503_599_627_370_496.0;

fn u32le(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// `<d`: the TAT.
fn gcra(v: &[u8]) -> State {
    if v.len() != 8 {
        return State::Empty;
    }
    match double(v) {
        Some(tat) => State::Gcra(GcraState { tat }),
        None => State::Empty,
    }
}

/// `<dI4`: the TAT and how long after it the bucket is cold again.
fn warmup(v: &[u8]) -> State {
    if v.len() != 12 {
        return State::Empty;
    }
    match double(v) {
        Some(tat) => State::Warmup {
            tat,
            cool_in: u32le(&v[8..]),
        },
        None => State::Empty,
    }
}

/// `<dI4`: the window's end and its count.
fn fixed_window(v: &[u8]) -> State {
    if v.len() != 12 {
        return State::Empty;
    }
    match double(v) {
        Some(end) => State::FixedWindow {
            end,
            count: u32le(&v[8..]),
        },
        None => State::Empty,
    }
}

/// `buckets + 1` times `I4` then `<dd`: the counts of buckets head, head - 1, ... (newest
/// first), the head, and the total of the counts (which the scripts read instead of the live
/// counts; a decision here sums the ring itself, and a total no script writes makes the state
/// none, as in the scripts). Made into the Rust ring: bucket `j` at `j % (buckets + 1)`.
fn sliding_window(limit: &Limit, v: &[u8]) -> State {
    let ring = limit.buckets() as usize + 1;
    let bytes = 4 * ring;
    if v.len() != bytes + 16 {
        return State::Empty;
    }
    let (Some(head), Some(_total)) = (double(&v[bytes..]), double(&v[bytes + 8..])) else {
        return State::Empty;
    };
    // A head whose bucket starts at or past 2^52 µs is none, as in the script.
    if head.saturating_mul(limit.bucket_width()) as f64 >= BOUND {
        return State::Empty;
    }
    let mut counts = vec![0; ring];
    let at = (head % ring as u64) as usize; // the head's index in the ring
    for (q, c) in v[..bytes].chunks_exact(4).enumerate() {
        counts[(at + ring - q) % ring] = u64::from(u32le(c));
    }
    State::SlidingWindow(Box::new(SlidingWindowState {
        head,
        counts,
        idle_at: (head + 1) * limit.bucket_width() + limit.window() - 1,
    }))
}

/// `<dI4` per entry, oldest first, then `<I4I4`: how many entries at the front are dead (left the
/// window when the log was written; they count as absent), the total cost of the others.
fn sliding_log(limit: &Limit, v: &[u8]) -> State {
    if v.len() < 8 || !(v.len() - 8).is_multiple_of(12) {
        return State::Empty;
    }
    let (log, trailer) = v.split_at(v.len() - 8);
    let n = log.len() / 12;
    let dead = u32le(trailer) as usize;
    if dead > n {
        return State::Empty;
    }
    // (a Vec sized at once, which the deque then takes over as it is: a log of n entries is read
    // on every decision of its key)
    let mut entries = Vec::with_capacity(n - dead);
    for e in log[12 * dead..].chunks_exact(12) {
        let Some(ts) = double(e) else {
            return State::Empty;
        };
        entries.push((ts, u64::from(u32le(&e[8..]))));
    }
    // The scripts keep the log in time order, which the Rust transition relies on: a log out
    // of order is none.
    if entries.windows(2).any(|w| w[0].0 > w[1].0) {
        return State::Empty;
    }
    let entries = std::collections::VecDeque::from(entries);
    let idle_at = entries.back().map_or(0, |e| e.0 + limit.window());
    State::SlidingLog(Box::new(SlidingLogState { entries, idle_at }))
}

/// `<I4` (the total cost) then `<ddI4` per lease (expiry, id, cost), in order of expiry.
fn concurrency(v: &[u8]) -> State {
    if v.len() < 4 || !(v.len() - 4).is_multiple_of(20) {
        return State::Empty;
    }
    let Some(leases) = v[4..]
        .chunks_exact(20)
        .map(|e| {
            Some(Lease {
                expires: double(e)?,
                id: double(&e[8..])?,
                cost: u64::from(u32le(&e[16..])),
            })
        })
        .collect::<Option<Vec<Lease>>>()
    else {
        return State::Empty;
    };
    // In order of expiry, as the scripts keep them: leases out of order are none.
    if leases.windows(2).any(|w| w[0].expires > w[1].expires) {
        return State::Empty;
    }
    State::Concurrency(Box::new(ConcurrencyState { leases }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowgate_core::Quota;

    fn limit(a: Algorithm) -> Limit {
        Limit::new(a, "10/s".parse::<Quota>().unwrap()).unwrap()
    }

    fn le(x: f64, counts: &[u32]) -> Vec<u8> {
        let mut v = x.to_le_bytes().to_vec();
        for c in counts {
            v.extend(c.to_le_bytes());
        }
        v
    }

    /// A sliding window's state as stored, from `counts` in ring order (bucket `j` at
    /// `j % len`): the counts newest first, `head`, their total.
    fn sw(head: f64, counts: &[u32]) -> Vec<u8> {
        let n = counts.len();
        let mut v = Vec::new();
        for q in 0..n {
            v.extend(counts[(head as usize % n + n - q) % n].to_le_bytes());
        }
        v.extend(head.to_le_bytes());
        v.extend(f64::from(counts.iter().sum::<u32>()).to_le_bytes());
        v
    }

    #[test]
    fn parses_what_the_scripts_write() {
        let tat = 1_763_800_000_123_456u64;
        assert_eq!(
            parse(&limit(Algorithm::TokenBucket), Some(&le(tat as f64, &[]))),
            State::Gcra(GcraState { tat })
        );
        let warm = Limit::builder(Algorithm::TokenBucket, "10/s".parse::<Quota>().unwrap())
            .warmup(std::time::Duration::from_secs(3))
            .build()
            .unwrap();
        assert_eq!(
            parse(&warm, Some(&le(tat as f64, &[250_000]))),
            State::Warmup {
                tat,
                cool_in: 250_000
            }
        );
        // A plain bucket's TAT is no warm-up state (and the keys differ by their tags).
        assert_eq!(parse(&warm, Some(&le(tat as f64, &[]))), State::Empty);
        assert_eq!(
            parse(&limit(Algorithm::FixedWindow), Some(&le(2e6, &[7]))),
            State::FixedWindow {
                end: 2_000_000,
                count: 7
            }
        );
        let l = limit(Algorithm::SlidingWindow);
        let mut ring = vec![0u32; l.buckets() as usize + 1];
        ring[..3].copy_from_slice(&[1, 0, 3]);
        let State::SlidingWindow(s) = parse(&l, Some(&sw(12.0, &ring))) else {
            panic!("not a sliding window");
        };
        assert_eq!(s.head, 12);
        assert_eq!(
            s.counts,
            ring.iter().map(|&c| u64::from(c)).collect::<Vec<_>>()
        );
        let l = limit(Algorithm::SlidingLog);
        // One dead entry (skipped), then two.
        let mut v = le(1e6, &[7]);
        v.extend(le(3e6, &[2]));
        v.extend(le(4e6, &[3, 1, 5]));
        let State::SlidingLog(s) = parse(&l, Some(&v)) else {
            panic!("not a sliding log");
        };
        assert_eq!(
            Vec::from(s.entries.clone()),
            vec![(3_000_000, 2), (4_000_000, 3)]
        );
        assert_eq!(s.idle_at, 4_000_000 + l.window());
        // More dead entries than entries: no log a script writes.
        let mut v = le(1e6, &[7]);
        v.extend([2u32.to_le_bytes(), 7u32.to_le_bytes()].concat());
        assert_eq!(parse(&l, Some(&v)), State::Empty);
        let mut v = 2u32.to_le_bytes().to_vec();
        v.extend(le(9e6, &[]));
        v.extend(le(12345.0, &[2]));
        assert_eq!(
            parse(&limit(Algorithm::Concurrency), Some(&v)),
            State::Concurrency(Box::new(ConcurrencyState {
                leases: vec![Lease {
                    id: 12345,
                    cost: 2,
                    expires: 9_000_000
                }]
            }))
        );
    }

    #[test]
    fn a_value_of_another_length_is_no_state() {
        assert_eq!(parse(&limit(Algorithm::TokenBucket), None), State::Empty);
        assert_eq!(
            parse(&limit(Algorithm::TokenBucket), Some(b"1234")),
            State::Empty
        );
        assert_eq!(
            parse(&limit(Algorithm::FixedWindow), Some(&le(1.0, &[]))),
            State::Empty
        );
        // Values no script writes: above 2^52, negative, fractional, not a number.
        for x in [1e300, -1.0, 0.5, f64::NAN] {
            assert_eq!(
                parse(&limit(Algorithm::TokenBucket), Some(&le(x, &[]))),
                State::Empty
            );
            let l = limit(Algorithm::SlidingWindow);
            let ring = vec![1u32; l.buckets() as usize + 1];
            assert_eq!(parse(&l, Some(&sw(x, &ring))), State::Empty);
            // The same as its total.
            let mut v = le(3.0, &[]);
            v.extend(le(x, &ring));
            assert_eq!(parse(&l, Some(&v)), State::Empty);
        }
        // A ring of 3 under a limit of 10 buckets (the rule changed).
        assert_eq!(
            parse(&limit(Algorithm::SlidingWindow), Some(&sw(1.0, &[1, 2, 3]))),
            State::Empty
        );
    }
}
